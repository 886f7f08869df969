//! How a failed command reports: one line `error: <what went wrong>`, then,
//! when tokscope knows what to do about it, one line `hint: <what to do>`,
//! both on stderr; the exit status is 1 (clap's own usage errors exit 2).
//!
//! The cause chain is printed once: a link whose text the message already
//! holds is skipped, and a `tokscope::Error` ends the chain (its message
//! already includes its source's). URLs in the text lose their user
//! information and query strings (credentials, pre-signed signatures).

use std::error::Error as StdError;

/// The text printed for `err`: `error: ...` and maybe `hint: ...`, each
/// line ending in a newline.
pub fn render(err: &(dyn StdError + 'static)) -> String {
    let mut message = String::new();
    let mut hint = None;
    let mut cause = Some(err);
    while let Some(e) = cause {
        let text = e.to_string();
        let text = text.trim();
        if !text.is_empty() && !message.contains(text) {
            if !message.is_empty() {
                message.push_str(": ");
            }
            message.push_str(text);
        }
        if let Some(e) = e.downcast_ref::<tokscope::Error>() {
            hint = e.hint();
            break;
        }
        cause = e.source();
    }
    // DataFusion puts details on later lines ("Valid fields are ..."): the
    // first line is the error, the rest reads as a hint.
    let mut lines = message.lines().map(str::trim).filter(|l| !l.is_empty());
    let first = lines.next().unwrap_or("failed").to_string();
    let details: Vec<&str> = lines.collect();
    let hint = match (hint, details.is_empty()) {
        (Some(h), true) => Some(h),
        (Some(h), false) => Some(format!("{} ({h})", details.join(" "))),
        (None, false) => Some(details.join(" ")),
        (None, true) => None,
    };
    let mut out = format!("error: {first}\n");
    if let Some(h) = hint {
        out.push_str(&format!("hint: {h}\n"));
    }
    // Errors naming a URL (an object store's, a pre-signed input's) never
    // print its password, signature or session token.
    tokscope::redact::redact_urls(&out).into_owned()
}

/// Whether `err` is a write to a closed pipe (`tokscope ... | head`): not a
/// failure worth a message.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|e| {
        e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            || matches!(e.downcast_ref::<tokscope::Error>(),
                Some(tokscope::Error::Io { source, .. }) if source.kind() == std::io::ErrorKind::BrokenPipe)
    })
}

#[cfg(test)]
mod tests {
    use anyhow::Context;

    use super::*;

    #[test]
    fn a_wrapped_error_is_printed_once() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "No such file or directory (os error 2)");
        let err = anyhow::Error::from(tokscope::Error::io("logs/a.jsonl", io));
        assert_eq!(render(&*err), "error: logs/a.jsonl: No such file or directory (os error 2)\n");
        let df = datafusion::error::DataFusionError::Plan("table 'x' not found".into()).context("planning");
        let err = anyhow::Error::from(tokscope::Error::from(df));
        assert_eq!(render(&*err), "error: sql: table 'x' not found\n");
    }

    #[test]
    fn context_and_hints_are_kept() {
        let err =
            Err::<(), _>(tokscope::Error::NotFound { what: "no dataset at x".into(), hint: "ingest first".into() })
                .context("tokscope job report")
                .unwrap_err();
        assert_eq!(render(&*err), "error: tokscope job report: no dataset at x\nhint: ingest first\n");
        let err = anyhow::anyhow!("No field named nope.\nValid fields are a, b.");
        assert_eq!(render(&*err), "error: No field named nope.\nhint: Valid fields are a, b.\n");
    }
}
