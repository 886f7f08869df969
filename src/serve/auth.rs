//! Who may call the server: every gRPC call carries the token, as a bearer
//! (`authorization: Bearer TOKEN`) or, for tools that only do basic auth,
//! as the password (`authorization: Basic base64(USER:TOKEN)`, any user).
//! The check runs before any Flight SQL handler, so no call is answered
//! without it.

use base64::Engine;
use subtle::ConstantTimeEq;
use tonic::{Request, Status};

/// The token clients must present; never printed (`Debug` hides it).
#[derive(Clone)]
pub struct Token(Vec<u8>);

impl Token {
    /// `text` without surrounding whitespace (a file's final newline); an
    /// empty token is refused.
    pub fn new(text: &str) -> crate::Result<Self> {
        let token = text.trim();
        if token.is_empty() {
            return Err(config_err!("the serve token is empty"));
        }
        if token.chars().any(|c| !c.is_ascii_graphic()) {
            return Err(config_err!("the serve token must be printable ASCII without spaces (it travels in a header)"));
        }
        Ok(Token(token.as_bytes().to_vec()))
    }

    /// Whether `presented` is the token, in time that does not depend on
    /// where they first differ.
    fn matches(&self, presented: &[u8]) -> bool {
        bool::from(self.0.as_slice().ct_eq(presented))
    }

    /// The header value that authorizes later calls (the handshake's answer).
    pub(super) fn bearer(&self) -> String {
        format!("Bearer {}", String::from_utf8_lossy(&self.0))
    }
}

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(..)")
    }
}

/// Who may call: holders of the token, or anyone (`--no-auth`, loopback only).
#[derive(Clone, Debug)]
pub enum Access {
    /// Every call must present this token.
    Token(Token),
    /// No check (the CLI allows it only on a loopback address).
    Open,
}

impl Access {
    /// The check every call goes through (a tonic interceptor).
    #[allow(clippy::result_large_err)] // tonic's interceptor signature
    pub fn check(&self, request: Request<()>) -> Result<Request<()>, Status> {
        let Access::Token(token) = self else { return Ok(request) };
        let Some(header) = request.metadata().get("authorization") else {
            return Err(Status::unauthenticated(
                "authentication required: send `authorization: Bearer TOKEN` (or basic auth with the token as password)",
            ));
        };
        let presented = header.as_bytes();
        let accepted = if let Some(bearer) = strip_prefix_ignore_case(presented, b"bearer ") {
            token.matches(bearer)
        } else if let Some(basic) = strip_prefix_ignore_case(presented, b"basic ") {
            basic_password(basic).is_some_and(|password| token.matches(&password))
        } else {
            false
        };
        if accepted {
            Ok(request)
        } else {
            Err(Status::unauthenticated("invalid credentials"))
        }
    }
}

/// Standard base64, with or without padding: Arrow's Go Flight client (under
/// ADBC's driver) sends basic auth unpadded.
const BASIC: base64::engine::GeneralPurpose = base64::engine::GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    base64::engine::GeneralPurposeConfig::new()
        .with_decode_padding_mode(base64::engine::DecodePaddingMode::Indifferent),
);

/// The password of a basic-auth value (`base64(user:password)`).
fn basic_password(encoded: &[u8]) -> Option<Vec<u8>> {
    let decoded = BASIC.decode(encoded.trim_ascii()).ok()?;
    let colon = decoded.iter().position(|&b| b == b':')?;
    Some(decoded[colon + 1..].to_vec())
}

fn strip_prefix_ignore_case<'a>(value: &'a [u8], prefix: &[u8]) -> Option<&'a [u8]> {
    (value.len() >= prefix.len() && value[..prefix.len()].eq_ignore_ascii_case(prefix)).then(|| &value[prefix.len()..])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_header(value: &str) -> Request<()> {
        let mut request = Request::new(());
        request.metadata_mut().insert("authorization", value.parse().expect("ascii header"));
        request
    }

    fn access() -> Access {
        Access::Token(Token::new("s3cret-token\n").expect("valid token"))
    }

    #[test]
    fn bearer_and_basic_with_the_token_pass() {
        assert!(access().check(with_header("Bearer s3cret-token")).is_ok());
        // base64("dbeaver:s3cret-token"), computed by `printf dbeaver:s3cret-token | base64`
        assert!(access().check(with_header("Basic ZGJlYXZlcjpzM2NyZXQtdG9rZW4=")).is_ok());
        assert!(access().check(with_header("Basic ZGJlYXZlcjpzM2NyZXQtdG9rZW4")).is_ok(), "unpadded");
    }

    #[test]
    fn anything_else_is_unauthenticated() {
        let refused = |r: Request<()>| access().check(r).expect_err("refused").code();
        assert_eq!(refused(Request::new(())), tonic::Code::Unauthenticated);
        assert_eq!(refused(with_header("Bearer s3cret-toke")), tonic::Code::Unauthenticated);
        assert_eq!(refused(with_header("Bearer s3cret-token2")), tonic::Code::Unauthenticated);
        // base64("dbeaver:wrong")
        assert_eq!(refused(with_header("Basic ZGJlYXZlcjp3cm9uZw==")), tonic::Code::Unauthenticated);
        assert_eq!(refused(with_header("s3cret-token")), tonic::Code::Unauthenticated);
    }

    #[test]
    fn empty_token_is_refused() {
        assert!(Token::new(" \n").is_err());
    }
}
