//! CSRF tokens bound to a session (OWASP "Signed Double-Submit Cookie"): the token is
//! `base64url(HMAC-SHA256(csrf key, session id))`, 43 characters, so only the key makes a
//! session's token; the key is derived from `JWT_SECRET` under [`KEY_LABEL`]
//! (docs/security.md § Third-party sign-in).

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use hmac::{Hmac, Mac};
use secrecy::{ExposeSecret, SecretString};
use sha2::Sha256;

use super::keys;
use crate::ids::SessionId;

type HmacSha256 = Hmac<Sha256>;

/// What the CSRF key is derived for (the message MACed under `JWT_SECRET`).
pub const KEY_LABEL: &[u8] = b"agentchat/csrf-token-key/v1";

/// The key that makes and checks sessions' CSRF tokens.
#[derive(Clone)]
pub struct CsrfKey {
    /// HMAC-SHA256 already keyed with the derived key; each token MACs a clone of it.
    mac: HmacSha256,
}

impl CsrfKey {
    /// The key derived from the JWT signing secret (see the module's documentation).
    pub fn derive(jwt_secret: &SecretString) -> Self {
        let mut kdf = <HmacSha256 as Mac>::new_from_slice(jwt_secret.expose_secret().as_bytes())
            .expect("HMAC takes any key length");
        kdf.update(KEY_LABEL);
        let key = kdf.finalize().into_bytes();
        Self {
            mac: <HmacSha256 as Mac>::new_from_slice(&key).expect("HMAC takes any key length"),
        }
    }

    /// The CSRF token of the session `session_id`.
    pub fn token(&self, session_id: &SessionId) -> String {
        let mut mac = self.mac.clone();
        mac.update(session_id.as_str().as_bytes());
        URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes())
    }

    /// Whether `presented` is the token of `session_id`, compared in constant time.
    pub fn verify(&self, session_id: &SessionId, presented: &str) -> bool {
        keys::constant_time_eq(&self.token(session_id), presented)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(secret: &str) -> CsrfKey {
        CsrfKey::derive(&SecretString::from(secret.to_string()))
    }

    #[test]
    fn a_token_is_bound_to_its_session_and_to_the_secret() {
        let k = key(&"s".repeat(64));
        let (one, two) = (SessionId::from("session-1"), SessionId::from("session-2"));
        let token = k.token(&one);
        assert_eq!(token.len(), 43, "base64url of 32 bytes");
        assert_eq!(token, k.token(&one), "stable for the session");
        assert!(k.verify(&one, &token));
        assert!(!k.verify(&two, &token), "another session's token");
        assert!(!k.verify(&one, &token[..42]));
        assert!(!k.verify(&one, ""));
        assert!(!key(&"x".repeat(64)).verify(&one, &token), "another secret");
    }

    #[test]
    fn the_key_is_derived_not_the_secret_itself() {
        // Not a plain HMAC of the session id under the JWT secret.
        let secret = "s".repeat(64);
        let mut plain = <HmacSha256 as Mac>::new_from_slice(secret.as_bytes()).unwrap();
        plain.update(b"session-1");
        let plain = URL_SAFE_NO_PAD.encode(plain.finalize().into_bytes());
        assert_ne!(key(&secret).token(&SessionId::from("session-1")), plain);
    }
}
