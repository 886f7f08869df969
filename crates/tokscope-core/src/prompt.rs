//! The stored prompt read back: `requests.prompt` holds plain text, or chat
//! messages as JSON (OpenAI `messages`, Anthropic-style content blocks).
//! Used by the `last_user_words` SQL function (the `drift` job's query
//! length); definition in docs/metrics.md.

use std::borrow::Cow;

use serde_json::Value;

/// The text of a message's `content`: a string, or the `text` of its parts
/// (`[{"type": "text", "text": ...}, ...]`) joined by spaces.
fn content_text(content: &Value) -> Option<Cow<'_, str>> {
    match content {
        Value::String(s) => Some(Cow::Borrowed(s)),
        Value::Array(parts) => {
            let texts: Vec<&str> = parts
                .iter()
                .filter_map(|p| match p {
                    Value::String(s) => Some(s.as_str()),
                    Value::Object(o) => o.get("text").and_then(Value::as_str),
                    _ => None,
                })
                .collect();
            (!texts.is_empty()).then(|| Cow::Owned(texts.join(" ")))
        }
        _ => None,
    }
}

/// The last user message of a prompt: for a JSON array of messages, the
/// content of the last one with `role: "user"` (`None` when there is none);
/// for anything else, the prompt itself.
pub fn last_user_message(prompt: &str) -> Option<Cow<'_, str>> {
    let trimmed = prompt.trim_start();
    if !trimmed.starts_with('[') {
        return Some(Cow::Borrowed(prompt));
    }
    let Ok(Value::Array(messages)) = serde_json::from_str::<Value>(trimmed) else {
        return Some(Cow::Borrowed(prompt));
    };
    if !messages.iter().all(|m| m.get("role").is_some()) {
        return Some(Cow::Borrowed(prompt));
    }
    let last = messages.iter().rev().find(|m| m.get("role").and_then(Value::as_str) == Some("user"))?;
    content_text(last.get("content")?).map(|c| Cow::Owned(c.into_owned()))
}

/// Words (runs of non-whitespace) of the prompt's last user message; `None`
/// when the prompt has no user message.
pub fn last_user_words(prompt: &str) -> Option<usize> {
    last_user_message(prompt).map(|m| m.split_whitespace().count())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plain_text_is_the_message() {
        assert_eq!(last_user_words("What is the capital of France?"), Some(6));
        assert_eq!(last_user_words("  "), Some(0));
        assert_eq!(last_user_words("[not json"), Some(2));
    }

    #[test]
    fn chat_messages_give_the_last_user_turn() {
        let openai = r#"[{"role":"system","content":"Be brief."},{"role":"user","content":"hi there"},{"role":"assistant","content":"Hello!"},{"role":"user","content":"what  is\nKV cache?"}]"#;
        assert_eq!(last_user_message(openai).as_deref(), Some("what  is\nKV cache?"));
        assert_eq!(last_user_words(openai), Some(4));
        let blocks = r#"[{"role":"user","content":[{"type":"text","text":"Summarise"},{"type":"image","source":{}},{"type":"text","text":"this page"}]}]"#;
        assert_eq!(last_user_words(blocks), Some(3));
        assert_eq!(last_user_words(r#"[{"role":"system","content":"x"}]"#), None);
    }
}
