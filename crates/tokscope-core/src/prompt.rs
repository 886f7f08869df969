//! The stored prompt read back: `requests.prompt` holds plain text, or chat
//! messages as JSON (OpenAI `messages`, Anthropic-style content blocks).
//! Used by the `last_user_words` SQL function (the `drift` job's query
//! length); definition in docs/metrics.md.

use std::borrow::Cow;

use serde_json::Value;
use unicode_segmentation::UnicodeSegmentation;

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

/// Words of the prompt's last user message by Unicode's default word
/// boundaries (UAX #29): the segments between boundaries that hold a letter or
/// digit (`unicode_words`). Spaces separate English words; each Chinese
/// character and each Japanese kana outside a katakana run is a word of its
/// own (no dictionary); `don't`, `3.14` and `カタカナ` are one word each.
/// `None` when the prompt has no user message.
pub fn last_user_words(prompt: &str) -> Option<usize> {
    last_user_message(prompt).map(|m| m.unicode_words().count())
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
    fn words_follow_unicode_word_boundaries() {
        // Counted by hand from UAX #29's rules, and the same as Python's `regex`
        // module splitting at `\b` with its WORD flag (Unicode's default word boundaries).
        for (text, words) in [
            ("今天天气很好", 6),           // one word per Han character
            ("東京に行きます", 7),         // Han and hiragana, one each
            ("東京タワーはどこですか", 9), // a katakana run is one word
            ("KV缓存是什么？", 6),         // KV, then five characters; ？ is no word
            ("안녕하세요 세계", 2),        // Hangul words split by the space
            ("don't stop", 2),             // an apostrophe inside a word
            ("3.14 is pi", 3),             // a decimal point inside a number
            ("e-mail", 2),                 // a hyphen splits
            ("GPT-4 是什么", 5),
            ("what  is\nKV cache?", 4),
        ] {
            assert_eq!(last_user_words(text), Some(words), "{text}");
        }
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
