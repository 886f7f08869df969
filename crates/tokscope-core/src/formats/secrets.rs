//! Secrets some logs carry next to the request (LiteLLM's hashed API keys,
//! Helicone's pre-signed body URLs): the parsers never read them, and
//! [`scrub_json`] takes them out of the raw text that `rejects.raw_line`
//! keeps, so they are stored nowhere.
//!
//! The scrubber walks JSON text without parsing it into values, so it also
//! cleans lines that are cut short or otherwise invalid: every string inside
//! the value of a secret key (a string, or all strings of an object or array)
//! becomes [`REDACTED`]; everything else is copied byte for byte.

use std::borrow::Cow;

/// Whether a logged key names credentials, or what carries them: the
/// formats that keep unread keys in `extra` never keep these
/// ([`crate::formats::fields::unread_members`]), at any depth. Matched
/// without regard to ASCII case:
/// - a name that is a credential: `authorization`, `cookie`, `set-cookie`,
///   `password`, `secret`, `token`, `bearer`;
/// - a name ending in `api_key`, `api-key` or `api_key_hash` (`api_key`,
///   `x-api-key`, LiteLLM's hashed keys `user_api_key`, `user_api_key_hash`
///   and `changed_by_api_key`; not `user_api_key_alias` or `_team_id`,
///   which name the key's owner and hold no secret), or in `_secret`,
///   `_password`, `_token` after `access`, `refresh`, `id`, `oauth`,
///   `session`, `auth` or `bearer` (`client_secret`, `oauth_token`);
/// - headers, which carry credentials: `headers` and any name ending in
///   `_headers` (LiteLLM's `additional_headers`, `requester_custom_headers`);
/// - pre-signed URLs, whose query string is a credential: Helicone's
///   `signed_body_url` and `asset_urls`, any name ending in `signed_url`.
pub fn is_credential_key(key: &str) -> bool {
    const NAMES: [&str; 9] =
        ["authorization", "cookie", "set-cookie", "password", "secret", "token", "bearer", "headers", "asset_urls"];
    const ENDINGS: [&str; 16] = [
        "api_key",
        "api-key",
        "api_key_hash",
        "_secret",
        "_password",
        "access_token",
        "refresh_token",
        "id_token",
        "oauth_token",
        "session_token",
        "auth_token",
        "bearer_token",
        "_headers",
        "signed_url",
        "signed_body_url",
        "private_key",
    ];
    let ends_with = |suffix: &str| {
        key.len() >= suffix.len()
            && key.is_char_boundary(key.len() - suffix.len())
            && key[key.len() - suffix.len()..].eq_ignore_ascii_case(suffix)
    };
    NAMES.iter().any(|n| key.eq_ignore_ascii_case(n)) || ENDINGS.iter().any(|e| ends_with(e))
}

/// What a secret string becomes.
pub const REDACTED: &str = "REDACTED";

/// `text` with the string values of keys for which `is_secret` holds
/// replaced by `"REDACTED"`, also inside strings that hold JSON text (a
/// column exported as JSON in a string); borrowed unchanged when there is none.
pub fn scrub_json<'a>(text: &'a [u8], is_secret: impl Fn(&str) -> bool) -> Cow<'a, [u8]> {
    scrub(text, &is_secret)
}

/// The JSON string literal `literal` (quotes included) scrubbed, when its
/// text is a JSON object or array holding secrets.
fn scrub_json_in_string(literal: &[u8], is_secret: &dyn Fn(&str) -> bool) -> Option<Vec<u8>> {
    if !matches!(literal.get(1), Some(b'{' | b'[')) {
        return None;
    }
    let inner: String = serde_json::from_slice(literal).ok()?;
    match scrub(inner.as_bytes(), is_secret) {
        Cow::Borrowed(_) => None,
        Cow::Owned(scrubbed) => serde_json::to_vec(&String::from_utf8_lossy(&scrubbed)).ok(),
    }
}

fn scrub<'a>(text: &'a [u8], is_secret: &dyn Fn(&str) -> bool) -> Cow<'a, [u8]> {
    let mut out: Option<Vec<u8>> = None;
    // Depth of the secret value being scrubbed (0: not in one), and whether
    // the next token is the value of a secret key.
    let (mut secret_depth, mut depth, mut value_is_secret) = (0usize, 0usize, false);
    let mut i = 0;
    while i < text.len() {
        match text[i] {
            b'"' => {
                let end = string_end(text, i);
                let in_secret = secret_depth > 0 || value_is_secret;
                // A key is a string followed by a colon.
                let after = text[end..].iter().position(|b| !b.is_ascii_whitespace()).map(|k| text[end + k]);
                let is_key = after == Some(b':') && !in_secret;
                if in_secret && after != Some(b':') {
                    let buf = out.get_or_insert_with(|| text[..i].to_vec());
                    buf.extend_from_slice(b"\"");
                    buf.extend_from_slice(REDACTED.as_bytes());
                    buf.extend_from_slice(b"\"");
                    value_is_secret = false;
                } else {
                    match (is_key, scrub_json_in_string(&text[i..end], is_secret)) {
                        (false, Some(scrubbed)) => out.get_or_insert_with(|| text[..i].to_vec()).extend(scrubbed),
                        _ => {
                            if let Some(buf) = out.as_mut() {
                                buf.extend_from_slice(&text[i..end]);
                            }
                        }
                    }
                    if is_key {
                        let key = String::from_utf8_lossy(&text[i + 1..end.saturating_sub(1).max(i + 1)]);
                        value_is_secret = is_secret(&key);
                    }
                }
                i = end;
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                if value_is_secret {
                    secret_depth = depth;
                    value_is_secret = false;
                }
            }
            b'}' | b']' => {
                if secret_depth == depth {
                    secret_depth = 0;
                }
                depth = depth.saturating_sub(1);
            }
            b',' => value_is_secret = false,
            _ => {}
        }
        if let Some(buf) = out.as_mut() {
            buf.push(text[i]);
        }
        i += 1;
    }
    match out {
        Some(buf) => Cow::Owned(buf),
        None => Cow::Borrowed(text),
    }
}

/// `text` with every run of 64 or more hexadecimal digits (a SHA-256 hash,
/// which is how LiteLLM stores API keys) replaced by `REDACTED`: for text
/// that cannot be read by key, such as a CSV line whose quoting is broken.
pub fn scrub_hex_hashes(text: &[u8]) -> Cow<'_, [u8]> {
    let mut out: Option<Vec<u8>> = None;
    let mut i = 0;
    while i < text.len() {
        let run = text[i..].iter().take_while(|b| b.is_ascii_hexdigit()).count();
        if run >= 64 {
            let buf = out.get_or_insert_with(|| text[..i].to_vec());
            buf.extend_from_slice(REDACTED.as_bytes());
            i += run;
        } else {
            let step = run.max(1);
            if let Some(buf) = out.as_mut() {
                buf.extend_from_slice(&text[i..i + step]);
            }
            i += step;
        }
    }
    match out {
        Some(buf) => Cow::Owned(buf),
        None => Cow::Borrowed(text),
    }
}

/// Index just past the string starting with the quote at `start` (the end
/// of the text for a string cut short).
fn string_end(text: &[u8], start: usize) -> usize {
    let mut j = start + 1;
    while j < text.len() {
        match text[j] {
            b'\\' => j += 2,
            b'"' => return j + 1,
            _ => j += 1,
        }
    }
    text.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrub(s: &str) -> String {
        String::from_utf8(scrub_json(s.as_bytes(), |k| k.contains("api_key") || k == "urls").into_owned()).unwrap()
    }

    #[test]
    fn secret_strings_are_replaced_and_the_rest_kept() {
        assert_eq!(
            scrub(r#"{"a":"x","user_api_key_hash":"88dc","meta":{"api_key": "k\"q", "n":1},"z":"y"}"#),
            r#"{"a":"x","user_api_key_hash":"REDACTED","meta":{"api_key": "REDACTED", "n":1},"z":"y"}"#
        );
        assert_eq!(scrub(r#"{"api_key":null,"b":"api_key"}"#), r#"{"api_key":null,"b":"api_key"}"#);
        assert_eq!(
            scrub(r#"{"urls":{"i1":"https://s3/x?Sig=1","i2":["u"]},"after":"kept"}"#),
            r#"{"urls":{"i1":"REDACTED","i2":["REDACTED"]},"after":"kept"}"#
        );
        assert!(matches!(scrub_json(br#"{"a":"b"}"#, |_| true), Cow::Owned(_)));
        assert!(matches!(scrub_json(br#"{"a":1}"#, |_| false), Cow::Borrowed(_)));
    }

    #[test]
    fn credential_keys_are_named_by_what_they_hold() {
        for key in [
            "api_key",
            "X-Api-Key",
            "user_api_key",
            "user_api_key_hash",
            "changed_by_api_key",
            "Authorization",
            "headers",
            "additional_headers",
            "requester_custom_headers",
            "signed_body_url",
            "asset_urls",
            "client_secret",
            "oauth_token",
            "token",
        ] {
            assert!(is_credential_key(key), "{key}");
        }
        for key in [
            "user_api_key_alias",
            "user_api_key_team_id",
            "prompt_tokens",
            "cached_token_count",
            "time_to_first_token",
            "max_tokens",
            "api_base",
            "cache_key",
            "request_user_id",
            "é_api_k",
        ] {
            assert!(!is_credential_key(key), "{key}");
        }
    }

    #[test]
    fn hex_hashes_are_replaced() {
        let hash = "88dc28d0f030c55ed4ab77ed8faf098196cb1c05df778539800c9f1243fe6b4b";
        let line = format!("id-1,{hash},0.5,deadbeef");
        assert_eq!(&*scrub_hex_hashes(line.as_bytes()), b"id-1,REDACTED,0.5,deadbeef");
        assert!(matches!(scrub_hex_hashes(b"a0e1b2c3-0000-4000-8000-000000000001"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_in_strings_is_scrubbed_too() {
        assert_eq!(
            scrub(r#"{"metadata":"{\"user_api_key\": \"88dc\", \"n\": [\"a\"]}","note":"{not json"}"#),
            r#"{"metadata":"{\"user_api_key\": \"REDACTED\", \"n\": [\"a\"]}","note":"{not json"}"#
        );
        assert!(matches!(scrub_json(br#"{"m":"{\"a\": 1}"}"#, |k| k == "api_key"), Cow::Borrowed(_)));
    }

    #[test]
    fn lines_cut_short_are_scrubbed_too() {
        assert_eq!(scrub(r#"{"x":1,"api_key":"88dc28d0f0"#), r#"{"x":1,"api_key":"REDACTED""#);
        assert_eq!(scrub(r#"{"x":[1,{"api_key":"a"}"#), r#"{"x":[1,{"api_key":"REDACTED"}"#);
    }
}
