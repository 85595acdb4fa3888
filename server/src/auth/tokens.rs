//! Session JWTs (docs/api.md § Auth): HS256 pinned, claims `sub`, `sid`, `jti`, `iat`,
//! `nbf`, `exp`, `iss`, `aud`, `typ`; access tokens live 15 minutes, refresh tokens 7 days.

use chrono::{DateTime, Duration, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use secrecy::{ExposeSecret, SecretString};
use serde::{Deserialize, Serialize};

use crate::ids::{SessionId, UserId};

/// Access token lifetime (docs/api.md § Session and token lifetimes).
pub const ACCESS_TTL: Duration = Duration::minutes(15);
/// Refresh token lifetime (docs/api.md § Session and token lifetimes).
pub const REFRESH_TTL: Duration = Duration::days(7);
/// Clock skew tolerated on `exp` and `nbf`, in seconds.
pub const LEEWAY_SECS: u64 = 5;

/// `typ` claim: what a token may be used for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TokenType {
    /// A bearer token for API calls.
    Access,
    /// Only for `POST /api/auth/refresh`.
    Refresh,
}

/// The claims of both token types.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    /// The user id.
    pub sub: UserId,
    /// The session id.
    pub sid: SessionId,
    /// A unique token id; for refresh tokens the value the session must still hold.
    pub jti: String,
    pub iat: i64,
    pub nbf: i64,
    pub exp: i64,
    pub iss: String,
    pub aud: String,
    pub typ: TokenType,
}

impl Claims {
    /// Whether `now` lies between `nbf` and `exp`, with [`LEEWAY_SECS`] either side.
    pub fn in_time(&self, now: DateTime<Utc>) -> bool {
        let now = now.timestamp();
        let leeway = LEEWAY_SECS as i64;
        self.exp + leeway > now && self.nbf - leeway <= now
    }
}

/// Signs and checks tokens with one secret.
#[derive(Clone)]
pub struct JwtKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
    issuer: String,
    /// The checks of [`JwtKeys::verify`], built once.
    validation: Validation,
    /// The sessions' CSRF key, derived from the same secret.
    csrf: super::csrf::CsrfKey,
}

/// The audience of every token this service issues.
pub const AUDIENCE: &str = "agentchat-api";

impl JwtKeys {
    /// Keys from the signing secret; `issuer` is the service's public URL.
    pub fn new(secret: &SecretString, issuer: &str) -> Self {
        let bytes = secret.expose_secret().as_bytes();
        let mut validation = Validation::new(Algorithm::HS256);
        validation.algorithms = vec![Algorithm::HS256];
        // Times are checked in `verify` against the service clock, not the library's.
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.set_issuer(&[issuer]);
        validation.set_audience(&[AUDIENCE]);
        validation.set_required_spec_claims(&["exp", "nbf", "iss", "aud", "sub"]);
        Self {
            encoding: EncodingKey::from_secret(bytes),
            decoding: DecodingKey::from_secret(bytes),
            issuer: issuer.to_string(),
            validation,
            csrf: super::csrf::CsrfKey::derive(secret),
        }
    }

    /// The key of the sessions' CSRF tokens, derived from the signing secret
    /// ([`super::csrf`]).
    pub fn csrf(&self) -> &super::csrf::CsrfKey {
        &self.csrf
    }

    /// Signs a token of `typ` for the user's session; returns it and its expiry.
    pub fn issue(
        &self,
        typ: TokenType,
        user_id: &UserId,
        session_id: &SessionId,
        jti: &str,
        now: DateTime<Utc>,
    ) -> anyhow::Result<(String, DateTime<Utc>)> {
        let exp = now
            + if typ == TokenType::Access {
                ACCESS_TTL
            } else {
                REFRESH_TTL
            };
        let claims = Claims {
            sub: user_id.clone(),
            sid: session_id.clone(),
            jti: jti.into(),
            iat: now.timestamp(),
            nbf: now.timestamp(),
            exp: exp.timestamp(),
            iss: self.issuer.clone(),
            aud: AUDIENCE.into(),
            typ,
        };
        let token = jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)?;
        Ok((token, exp))
    }

    /// Verifies signature, algorithm, `iss`, `aud`, `exp` and `nbf` against `now` (with
    /// [`LEEWAY_SECS`]) and that `typ` is `expected`; `None` for any failure.
    pub fn verify(&self, token: &str, expected: TokenType, now: DateTime<Utc>) -> Option<Claims> {
        let claims = jsonwebtoken::decode::<Claims>(token, &self.decoding, &self.validation)
            .ok()?
            .claims;
        (claims.typ == expected && claims.in_time(now)).then_some(claims)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn keys() -> JwtKeys {
        JwtKeys::new(&SecretString::from("s".repeat(64)), "http://test")
    }

    #[test]
    fn round_trip_and_type_is_checked() {
        let k = keys();
        let now = Utc::now();
        let (t, exp) = k
            .issue(TokenType::Access, &"u1".into(), &"s1".into(), "j1", now)
            .unwrap();
        assert_eq!((exp - now).num_minutes(), 15);
        let c = k.verify(&t, TokenType::Access, Utc::now()).unwrap();
        assert_eq!((c.sub.as_str(), c.sid.as_str()), ("u1", "s1"));
        assert!(
            k.verify(&t, TokenType::Refresh, Utc::now()).is_none(),
            "an access token is not a refresh token"
        );
        let (r, exp) = k
            .issue(TokenType::Refresh, &"u1".into(), &"s1".into(), "j2", now)
            .unwrap();
        assert_eq!((exp - now).num_days(), 7);
        assert!(
            k.verify(&r, TokenType::Access, Utc::now()).is_none(),
            "a refresh token is not a bearer token"
        );
    }

    #[test]
    fn expiry_not_before_issuer_and_signature_are_enforced() {
        let k = keys();
        let old = Utc::now() - Duration::minutes(16);
        let (t, _) = k
            .issue(TokenType::Access, &"u".into(), &"s".into(), "j", old)
            .unwrap();
        assert!(
            k.verify(&t, TokenType::Access, Utc::now()).is_none(),
            "expired"
        );
        let future = Utc::now() + Duration::minutes(1);
        let (t, _) = k
            .issue(TokenType::Access, &"u".into(), &"s".into(), "j", future)
            .unwrap();
        assert!(
            k.verify(&t, TokenType::Access, Utc::now()).is_none(),
            "not yet valid"
        );
        let other = JwtKeys::new(&SecretString::from("x".repeat(64)), "http://test");
        let (t, _) = other
            .issue(TokenType::Access, &"u".into(), &"s".into(), "j", Utc::now())
            .unwrap();
        assert!(
            k.verify(&t, TokenType::Access, Utc::now()).is_none(),
            "wrong key"
        );
        let elsewhere = JwtKeys::new(&SecretString::from("s".repeat(64)), "http://other");
        let (t, _) = elsewhere
            .issue(TokenType::Access, &"u".into(), &"s".into(), "j", Utc::now())
            .unwrap();
        assert!(
            k.verify(&t, TokenType::Access, Utc::now()).is_none(),
            "wrong issuer"
        );
    }

    #[test]
    fn unsigned_tokens_are_refused() {
        use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
        let k = keys();
        let (t, _) = k
            .issue(TokenType::Access, &"u".into(), &"s".into(), "j", Utc::now())
            .unwrap();
        let payload = t.split('.').nth(1).unwrap();
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
        assert!(k
            .verify(
                &format!("{header}.{payload}."),
                TokenType::Access,
                Utc::now()
            )
            .is_none());
    }
}
