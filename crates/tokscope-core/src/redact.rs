//! Redaction of prompts, outputs and token texts at ingest.

use std::borrow::Cow;

use sha2::{Digest, Sha256};

named_enum! {
    /// How prompts, outputs and token texts are stored.
    #[derive(Default)]
    pub enum Redaction as "redaction" {
        /// Keep them as logged.
        #[default]
        None = "none",
        /// Replace them with the hex SHA-256 of their text (equal texts stay joinable).
        Hash = "hash",
        /// Drop them (null).
        Drop = "drop",
    }
}

impl Redaction {
    /// `text` as it is stored under this mode.
    pub fn apply<'t>(self, text: Option<&'t str>) -> Option<Cow<'t, str>> {
        match (text, self) {
            (None, _) | (_, Redaction::Drop) => None,
            (Some(t), Redaction::None) => Some(Cow::Borrowed(t)),
            (Some(t), Redaction::Hash) => Some(Cow::Owned(format!("{:x}", Sha256::digest(t.as_bytes())))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_store_text_hash_or_nothing() {
        assert_eq!(Redaction::None.apply(Some("hi")).as_deref(), Some("hi"));
        assert_eq!(
            Redaction::Hash.apply(Some("hi")).as_deref(),
            Some("8f434346648f6b96df89dda901c5176b10a6d83961dd3c1ac88b59b2dc327aa4")
        );
        assert_eq!(Redaction::Drop.apply(Some("hi")), None);
        assert_eq!("hash".parse::<Redaction>().ok(), Some(Redaction::Hash));
        assert!("sha".parse::<Redaction>().is_err());
    }
}
