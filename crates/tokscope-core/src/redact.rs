//! Redaction of logged text at ingest: prompts, outputs, unknown keys
//! (`extra`), token texts, and the raw bytes and error messages of rejected
//! lines. Derived columns that need the text (`has_eos_marker`) are computed
//! before it is redacted.
//!
//! `hash` stores HMAC-SHA-256 under a secret key ([`REDACT_KEY_ENV`]), so
//! equal texts stay joinable while a short prompt cannot be found by hashing
//! guesses; the text's length is stored beside it (`prompt_bytes`,
//! `raw_line_bytes`).

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use sha2::{Digest, Sha256};

use crate::error::Result;

named_enum! {
    /// How prompts, outputs and token texts are stored.
    #[derive(Default)]
    pub enum Redaction as "redaction" {
        /// Keep them as logged.
        #[default]
        None = "none",
        /// Replace them with their keyed hash (HMAC-SHA-256, hex; equal texts stay joinable).
        Hash = "hash",
        /// Drop them (null).
        Drop = "drop",
    }
}

/// The environment variable holding the key of `--redact hash`.
pub const REDACT_KEY_ENV: &str = "TOKSCOPE_REDACT_KEY";

/// Shortest accepted key, in bytes: a short key could be guessed along with the text.
pub const MIN_KEY_BYTES: usize = 16;

/// A redaction mode with its key: what [`crate::derive::DeriveSettings`]
/// applies to every text of an ingest run.
#[derive(Clone, Default, PartialEq)]
pub struct Redactor {
    mode: Redaction,
    key: Option<Arc<[u8]>>,
}

/// `drop` without a key: for rows whose texts are never kept (engine profiles' tokens).
pub static DROP_TEXT: Redactor = Redactor { mode: Redaction::Drop, key: None };

impl fmt::Debug for Redactor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the key.
        write!(f, "Redactor({})", self.mode)
    }
}

impl Redactor {
    /// `mode`, with `key` for [`Redaction::Hash`] (at least [`MIN_KEY_BYTES`]).
    pub fn new(mode: Redaction, key: Option<&[u8]>) -> Result<Self> {
        match (mode, key) {
            (Redaction::Hash, Some(k)) if k.len() >= MIN_KEY_BYTES => Ok(Redactor { mode, key: Some(Arc::from(k)) }),
            (Redaction::Hash, Some(_)) => Err(config_err!(
                "--redact hash: the key in {REDACT_KEY_ENV} is shorter than {MIN_KEY_BYTES} bytes; \
                 use a long random secret, e.g. `openssl rand -hex 32`"
            )),
            (Redaction::Hash, None) => Err(config_err!(
                "--redact hash needs a secret key in the environment variable {REDACT_KEY_ENV} \
                 (e.g. `export {REDACT_KEY_ENV}=$(openssl rand -hex 32)`, kept as long as the dataset \
                 so that equal texts keep equal hashes)"
            )),
            (mode, _) => Ok(Redactor { mode, key: None }),
        }
    }

    /// `mode`, its key read from [`REDACT_KEY_ENV`] when it needs one.
    pub fn from_env(mode: Redaction) -> Result<Self> {
        let key = match mode {
            Redaction::Hash => std::env::var_os(REDACT_KEY_ENV).map(|k| k.into_encoded_bytes()),
            _ => None,
        };
        Self::new(mode, key.as_deref())
    }

    /// The mode.
    pub fn mode(&self) -> Redaction {
        self.mode
    }

    /// Whether texts are stored as logged.
    pub fn keeps_text(&self) -> bool {
        self.mode == Redaction::None
    }

    /// `text` as stored: as is, its keyed hash, or nothing.
    pub fn text<'t>(&self, text: Option<&'t str>) -> Option<Cow<'t, str>> {
        let text = text?;
        match (&self.key, self.mode) {
            (_, Redaction::None) => Some(Cow::Borrowed(text)),
            (Some(key), Redaction::Hash) => Some(Cow::Owned(hex(&hmac_sha256(key, text.as_bytes())))),
            _ => None,
        }
    }

    /// Raw bytes as stored: as is, the hex keyed hash (as bytes), or nothing.
    pub fn bytes<'b>(&self, bytes: &'b [u8]) -> Option<Cow<'b, [u8]>> {
        match (&self.key, self.mode) {
            (_, Redaction::None) => Some(Cow::Borrowed(bytes)),
            (Some(key), Redaction::Hash) => Some(Cow::Owned(hex(&hmac_sha256(key, bytes)).into_bytes())),
            _ => None,
        }
    }

    /// An error message about a line as stored: under `hash` and `drop`,
    /// the contents of every quoted part (`"..."`, `` `...` ``), where
    /// parsers and serde put values copied from the line, become `…`.
    pub fn message<'m>(&self, message: &'m str) -> Cow<'m, str> {
        if self.keeps_text() {
            Cow::Borrowed(message)
        } else {
            Cow::Owned(scrub_quoted(message))
        }
    }
}

/// `message` with the contents of its quoted parts replaced by `…`; a
/// backslash escapes the next character inside quotes, and an unclosed
/// quote runs to the end.
fn scrub_quoted(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut chars = message.chars();
    while let Some(c) = chars.next() {
        out.push(c);
        if c != '"' && c != '`' {
            continue;
        }
        let mut closed = false;
        while let Some(inner) = chars.next() {
            if inner == '\\' {
                chars.next();
            } else if inner == c {
                closed = true;
                break;
            }
        }
        out.push('…');
        if closed {
            out.push(c);
        }
    }
    out
}

/// HMAC-SHA-256 (RFC 2104) of `message` under `key`.
pub fn hmac_sha256(key: &[u8], message: &[u8]) -> [u8; 32] {
    const BLOCK: usize = 64;
    let mut block = [0u8; BLOCK];
    if key.len() > BLOCK {
        block[..32].copy_from_slice(&Sha256::digest(key));
    } else {
        block[..key.len()].copy_from_slice(key);
    }
    let pad = |byte: u8| block.map(|b| b ^ byte);
    let inner = Sha256::new().chain_update(pad(0x36)).chain_update(message).finalize();
    Sha256::new().chain_update(pad(0x5c)).chain_update(inner).finalize().into()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 4231, test cases 2 and 6 (a short key; a key longer than the block).
    #[test]
    fn hmac_matches_rfc_4231() {
        assert_eq!(
            hex(&hmac_sha256(b"Jefe", b"what do ya want for nothing?")),
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
        assert_eq!(
            hex(&hmac_sha256(&[0xaa; 131], b"Test Using Larger Than Block-Size Key - Hash Key First")),
            "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54"
        );
    }

    #[test]
    fn modes_store_text_keyed_hash_or_nothing() {
        let key = b"0123456789abcdef";
        let hash = Redactor::new(Redaction::Hash, Some(key)).unwrap();
        // python3 -c "import hmac,hashlib;print(hmac.new(b'0123456789abcdef',b'hi',hashlib.sha256).hexdigest())"
        let got = hash.text(Some("hi")).unwrap();
        assert_eq!(got, "8092e04d4cfcd550cb5d68adf23b99d874b591e27f33f3e262f9d8f122cdb281");
        assert_eq!(Redactor::default().text(Some("hi")).as_deref(), Some("hi"));
        assert_eq!(Redactor::new(Redaction::Drop, None).unwrap().text(Some("hi")), None);
        assert_eq!(hash.bytes(b"hi").unwrap().as_ref(), got.as_bytes());
    }

    #[test]
    fn hash_needs_a_long_enough_key() {
        let missing = Redactor::new(Redaction::Hash, None).unwrap_err().to_string();
        assert!(missing.contains(REDACT_KEY_ENV), "{missing}");
        assert!(Redactor::new(Redaction::Hash, Some(b"short")).is_err());
        assert!(!format!("{:?}", Redactor::new(Redaction::Hash, Some(b"0123456789abcdefSECRET")).unwrap())
            .contains("SECRET"));
    }

    #[test]
    fn messages_lose_their_quoted_values() {
        let drop = Redactor::new(Redaction::Drop, None).unwrap();
        assert_eq!(
            drop.message(r#"invalid type: string "my secret \" prompt", expected i64 at line 1 column 9"#),
            r#"invalid type: string "…", expected i64 at line 1 column 9"#
        );
        assert_eq!(drop.message("unknown variant `secret`, unclosed \"tail"), "unknown variant `…`, unclosed \"…");
        assert_eq!(Redactor::default().message("x \"y\""), "x \"y\"");
    }
}

/// `text` with the credentials of every URL in it taken out: the user
/// information (`scheme://user:password@host`) and the query string (where
/// pre-signed URLs carry their signature, credential and session token)
/// become `REDACTED`. For messages: an error naming an object must not hand
/// its signature to a log.
pub fn redact_urls(text: &str) -> Cow<'_, str> {
    if !text.contains("://") {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (before, from) = rest.split_at(at + 3);
        out.push_str(before);
        let end = from.find(|c: char| c.is_whitespace() || "\"'<>`".contains(c)).unwrap_or(from.len());
        // Punctuation ending a sentence or a message part is not the URL's.
        let end = from[..end].trim_end_matches([':', ',', '.', ';', ')']).len();
        let (url, after) = from.split_at(end);
        let authority_end = url.find(['/', '?', '#']).unwrap_or(url.len());
        let (authority, path) = url.split_at(authority_end);
        match authority.rfind('@') {
            Some(i) => {
                out.push_str("REDACTED");
                out.push_str(&authority[i..]);
            }
            None => out.push_str(authority),
        }
        match path.find('?') {
            Some(q) => {
                out.push_str(&path[..q]);
                out.push_str("?REDACTED");
                if let Some(h) = path[q..].find('#') {
                    out.push_str(&path[q + h..]);
                }
            }
            None => out.push_str(path),
        }
        rest = after;
    }
    out.push_str(rest);
    Cow::Owned(out)
}

#[cfg(test)]
mod url_tests {
    use super::redact_urls;

    #[test]
    fn urls_lose_user_information_and_query_strings() {
        assert_eq!(
            redact_urls(
                "listing https://b.s3.amazonaws.com/x.jsonl?X-Amz-Signature=abc&X-Amz-Security-Token=t: failed"
            ),
            "listing https://b.s3.amazonaws.com/x.jsonl?REDACTED: failed"
        );
        assert_eq!(redact_urls("GET http://user:pw@host:9/a#frag done"), "GET http://REDACTED@host:9/a#frag done");
        assert_eq!(redact_urls("s3://bucket/key and \"gs://b/k?sig=1\""), "s3://bucket/key and \"gs://b/k?REDACTED\"");
        assert_eq!(redact_urls("no url here"), "no url here");
    }
}
