//! Third-party sign-in with GitHub (OAuth 2.0) and Google and Microsoft (OpenID Connect):
//! the authorization request (RFC 6749 § 4.1 with PKCE S256, RFC 7636) and the identity
//! behind a code, with ID tokens validated per OpenID Connect Core 1.0 § 3.1.3.7 and only
//! verified emails accepted. Rules and sources: docs/security.md § Third-party sign-in.

use std::{sync::Arc, time::Duration};

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use jsonwebtoken::{jwk::JwkSet, Algorithm, DecodingKey, Validation};
use moka::sync::Cache;
use oauth2::{
    basic::{
        BasicErrorResponse, BasicRevocationErrorResponse, BasicTokenIntrospectionResponse,
        BasicTokenType,
    },
    AuthType, AuthUrl, AuthorizationCode, ClientId, ClientSecret, CsrfToken, EndpointNotSet,
    EndpointSet, ExtraTokenFields, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl,
    RequestTokenError, Scope, StandardRevocableToken, StandardTokenResponse, TokenResponse,
    TokenUrl,
};
use secrecy::ExposeSecret;
use serde::{Deserialize, Serialize};

use crate::{
    config::{GithubConfig, OAuthClientConfig, OAuthConfig, OidcConfig},
    outbound,
};

/// How long the discovery document and JWKS of an issuer are reused.
pub const DISCOVERY_TTL: Duration = Duration::from_secs(3600);
/// Time allowed for each request to a provider.
pub const PROVIDER_TIMEOUT: Duration = Duration::from_secs(10);
/// Clock skew tolerated on ID token times, in seconds.
pub const ID_TOKEN_LEEWAY_SECS: u64 = 60;
/// Largest provider answer read (discovery, JWKS, user API), in bytes.
const MAX_ANSWER_BYTES: usize = 256 * 1024;
/// The tenant (`tid`) of personal Microsoft accounts (Microsoft identity platform).
pub const MICROSOFT_CONSUMER_TENANT: &str = "9188040d-6c67-4c5b-b112-36a304b66dad";

pub use crate::domain::OAuthProvider;

/// Why a sign-in through a provider failed; the text is shown and carries no secret.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum OAuthError {
    /// The provider did not answer, or answered something unusable.
    #[error("{0} could not be reached or gave an unexpected answer; try again in a moment")]
    Unreachable(&'static str),
    /// The provider refused the code exchange or the API call.
    #[error("{provider} refused the sign-in ({reason}); start again")]
    Refused {
        provider: &'static str,
        reason: String,
    },
    /// The ID token failed validation.
    #[error("{provider} sent an identity that could not be verified ({reason}); start again")]
    InvalidIdToken {
        provider: &'static str,
        reason: String,
    },
    /// The provider gave no email address.
    #[error("{0} did not share an email address; allow access to your email and try again")]
    NoEmail(&'static str),
}

/// The person behind an authorization code.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProviderIdentity {
    /// The provider's stable id: GitHub's numeric user id, the OpenID Connect `sub`.
    pub subject: String,
    /// Lower-cased.
    pub email: String,
    /// Whether the provider vouches for the address (docs/security.md § Third-party sign-in).
    pub email_verified: bool,
    /// Display name (falls back to the GitHub login or the email's local part).
    pub name: String,
}

/// An authorization request to send the browser to.
pub struct AuthorizationRequest {
    pub url: String,
    /// The `state` parameter (the caller stores only its hash).
    pub state: String,
    pub pkce_verifier: String,
    pub nonce: Option<String>,
}

/// ID token fields beyond RFC 6749's token response (OpenID Connect Core 1.0 § 3.1.3.3).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct IdTokenFields {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    id_token: Option<String>,
}

impl ExtraTokenFields for IdTokenFields {}

type CodeTokenResponse = StandardTokenResponse<IdTokenFields, BasicTokenType>;

type CodeClient = oauth2::Client<
    BasicErrorResponse,
    CodeTokenResponse,
    BasicTokenIntrospectionResponse,
    StandardRevocableToken,
    BasicRevocationErrorResponse,
    EndpointSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointNotSet,
    EndpointSet,
>;

/// An issuer's discovery document (the fields used).
#[derive(Debug, Clone, Deserialize)]
struct DiscoveryDocument {
    issuer: String,
    authorization_endpoint: String,
    token_endpoint: String,
    jwks_uri: String,
}

/// What is kept of an issuer: its endpoints and signing keys.
#[derive(Debug, Clone)]
struct Issuer {
    discovery: DiscoveryDocument,
    keys: JwkSet,
}

/// Claims read from an ID token.
#[derive(Debug, Clone, Deserialize)]
pub struct IdTokenClaims {
    pub iss: String,
    pub sub: String,
    #[serde(default)]
    pub nonce: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub email_verified: Option<serde_json::Value>,
    #[serde(default)]
    pub name: Option<String>,
    /// Microsoft: the tenant.
    #[serde(default)]
    pub tid: Option<String>,
    /// Microsoft: the email's domain owner verified it (optional claim).
    #[serde(default)]
    pub xms_edov: Option<serde_json::Value>,
    /// Microsoft: the sign-in name, an email for most accounts.
    #[serde(default)]
    pub preferred_username: Option<String>,
}

/// Third-party sign-in: the configured providers and a client for talking to them.
#[derive(Clone)]
pub struct OAuth {
    config: OAuthConfig,
    public_url: String,
    http: reqwest::Client,
    issuers: Cache<String, Arc<Issuer>>,
}

impl OAuth {
    /// Sign-in through `config`'s providers; redirect URI
    /// `{public_url}/api/auth/oauth/{provider}/callback`.
    pub fn new(config: OAuthConfig, public_url: &str) -> anyhow::Result<Self> {
        // No redirects: following one would let a provider answer point anywhere (SSRF).
        let http = outbound::client_builder(outbound::Purpose::SignIn)
            .timeout(PROVIDER_TIMEOUT)
            .build()?;
        Ok(Self {
            config,
            public_url: public_url.trim_end_matches('/').to_string(),
            http,
            issuers: Cache::builder()
                .max_capacity(16)
                .time_to_live(DISCOVERY_TTL)
                .build(),
        })
    }

    /// The providers whose client id and secret are configured.
    pub fn configured(&self) -> Vec<OAuthProvider> {
        OAuthProvider::ALL
            .into_iter()
            .filter(|p| self.is_configured(*p))
            .collect()
    }

    pub fn is_configured(&self, provider: OAuthProvider) -> bool {
        match provider {
            OAuthProvider::Github => self.config.github.is_some(),
            OAuthProvider::Google => self.config.google.is_some(),
            OAuthProvider::Microsoft => self.config.microsoft.is_some(),
        }
    }

    /// The redirect URI registered with every provider.
    pub fn redirect_uri(&self, provider: OAuthProvider) -> String {
        format!(
            "{}/api/auth/oauth/{}/callback",
            self.public_url,
            provider.code()
        )
    }

    fn oidc(&self, provider: OAuthProvider) -> Option<&OidcConfig> {
        match provider {
            OAuthProvider::Google => self.config.google.as_ref(),
            OAuthProvider::Microsoft => self.config.microsoft.as_ref(),
            OAuthProvider::Github => None,
        }
    }

    fn github(&self) -> Option<&GithubConfig> {
        self.config.github.as_ref()
    }

    fn client(
        &self,
        provider: OAuthProvider,
        client: &OAuthClientConfig,
        auth_url: &str,
        token_url: &str,
    ) -> Result<CodeClient, OAuthError> {
        let bad = |_| OAuthError::Unreachable(provider.name());
        Ok(oauth2::Client::new(ClientId::new(client.client_id.clone()))
            .set_client_secret(ClientSecret::new(
                client.client_secret.expose_secret().to_string(),
            ))
            // client_secret_post: accepted by all three (GitHub documents only this form).
            .set_auth_type(AuthType::RequestBody)
            .set_auth_uri(AuthUrl::new(auth_url.to_string()).map_err(bad)?)
            .set_token_uri(TokenUrl::new(token_url.to_string()).map_err(bad)?)
            .set_redirect_uri(RedirectUrl::new(self.redirect_uri(provider)).map_err(bad)?))
    }

    /// The authorization request for `provider`. Errors: [`OAuthError::Unreachable`].
    pub async fn authorization_request(
        &self,
        provider: OAuthProvider,
    ) -> Result<AuthorizationRequest, OAuthError> {
        let (pkce_challenge, pkce_verifier) = PkceCodeChallenge::new_random_sha256();
        let (client, scopes, nonce) =
            if let Some(github) = self.github().filter(|_| provider == OAuthProvider::Github) {
                let client = self.client(
                    provider,
                    &github.client,
                    &github.auth_url,
                    &github.token_url,
                )?;
                // `read:user` and `user:email` give the profile and the verified emails
                // (GitHub Docs, "Scopes for OAuth apps").
                (client, vec!["read:user", "user:email"], None)
            } else {
                let oidc = self
                    .oidc(provider)
                    .ok_or(OAuthError::Unreachable(provider.name()))?;
                let issuer = self.issuer(provider, oidc, false).await?;
                let client = self.client(
                    provider,
                    &oidc.client,
                    &issuer.discovery.authorization_endpoint,
                    &issuer.discovery.token_endpoint,
                )?;
                (
                    client,
                    vec!["openid", "email", "profile"],
                    Some(CsrfToken::new_random().secret().clone()),
                )
            };
        let mut request = client
            .authorize_url(CsrfToken::new_random)
            .set_pkce_challenge(pkce_challenge);
        for scope in scopes {
            request = request.add_scope(Scope::new(scope.into()));
        }
        if let Some(nonce) = &nonce {
            request = request.add_extra_param("nonce", nonce.clone());
        }
        if provider == OAuthProvider::Google {
            // Let a person with several Google accounts choose one.
            request = request.add_extra_param("prompt", "select_account");
        }
        let (url, state) = request.url();
        Ok(AuthorizationRequest {
            url: url.to_string(),
            state: state.secret().clone(),
            pkce_verifier: pkce_verifier.secret().clone(),
            nonce,
        })
    }

    /// Exchanges `code` (PKCE) and reads who signed in, checking `nonce` for OpenID Connect.
    /// Errors: [`OAuthError`].
    pub async fn identity(
        &self,
        provider: OAuthProvider,
        code: &str,
        pkce_verifier: &str,
        nonce: Option<&str>,
    ) -> Result<ProviderIdentity, OAuthError> {
        if provider == OAuthProvider::Github {
            let github = self
                .github()
                .ok_or(OAuthError::Unreachable(provider.name()))?;
            let client = self.client(
                provider,
                &github.client,
                &github.auth_url,
                &github.token_url,
            )?;
            let token = self
                .exchange(provider, &client, code, pkce_verifier)
                .await?;
            return self
                .github_identity(&github.api_url, token.access_token().secret())
                .await;
        }
        let oidc = self
            .oidc(provider)
            .ok_or(OAuthError::Unreachable(provider.name()))?;
        let issuer = self.issuer(provider, oidc, false).await?;
        let client = self.client(
            provider,
            &oidc.client,
            &issuer.discovery.authorization_endpoint,
            &issuer.discovery.token_endpoint,
        )?;
        let token = self
            .exchange(provider, &client, code, pkce_verifier)
            .await?;
        let id_token =
            token
                .extra_fields()
                .id_token
                .clone()
                .ok_or_else(|| OAuthError::InvalidIdToken {
                    provider: provider.name(),
                    reason: "no ID token in the answer".into(),
                })?;
        let nonce = nonce.ok_or_else(|| OAuthError::InvalidIdToken {
            provider: provider.name(),
            reason: "no nonce was sent".into(),
        })?;
        let claims = match validate_id_token(&id_token, &issuer, &oidc.client.client_id, nonce) {
            // A key not in the cached set may be a rotated one: read the JWKS again once.
            Err(IdTokenError::UnknownKey) => {
                let fresh = self.issuer(provider, oidc, true).await?;
                validate_id_token(&id_token, &fresh, &oidc.client.client_id, nonce)
            }
            other => other,
        }
        .map_err(|e| OAuthError::InvalidIdToken {
            provider: provider.name(),
            reason: e.to_string(),
        })?;
        oidc_identity(provider, claims)
    }

    async fn exchange(
        &self,
        provider: OAuthProvider,
        client: &CodeClient,
        code: &str,
        pkce_verifier: &str,
    ) -> Result<CodeTokenResponse, OAuthError> {
        client
            .exchange_code(AuthorizationCode::new(code.to_string()))
            .set_pkce_verifier(PkceCodeVerifier::new(pkce_verifier.to_string()))
            .request_async(&self.http)
            .await
            .map_err(|e| match e {
                RequestTokenError::ServerResponse(answer) => OAuthError::Refused {
                    provider: provider.name(),
                    reason: safe_text(answer.error().as_ref()),
                },
                RequestTokenError::Parse(_, body) => {
                    // GitHub answers errors with 200 and `{"error": ...}`.
                    match serde_json::from_slice::<BasicErrorResponse>(&body) {
                        Ok(answer) => OAuthError::Refused {
                            provider: provider.name(),
                            reason: safe_text(answer.error().as_ref()),
                        },
                        Err(_) => OAuthError::Unreachable(provider.name()),
                    }
                }
                _ => OAuthError::Unreachable(provider.name()),
            })
    }

    /// GitHub: `GET /user` and the primary email from `GET /user/emails`.
    async fn github_identity(
        &self,
        api_url: &str,
        access_token: &str,
    ) -> Result<ProviderIdentity, OAuthError> {
        #[derive(Deserialize)]
        struct User {
            id: u64,
            login: String,
            #[serde(default)]
            name: Option<String>,
        }
        #[derive(Deserialize)]
        struct EmailEntry {
            email: String,
            #[serde(default)]
            primary: bool,
            #[serde(default)]
            verified: bool,
        }
        let user: User = self
            .github_get(&format!("{api_url}/user"), access_token)
            .await?;
        let emails: Vec<EmailEntry> = self
            .github_get(&format!("{api_url}/user/emails"), access_token)
            .await?;
        let primary = emails
            .into_iter()
            .find(|e| e.primary)
            .ok_or(OAuthError::NoEmail(OAuthProvider::Github.name()))?;
        let name = user
            .name
            .filter(|n| !n.trim().is_empty())
            .unwrap_or(user.login);
        Ok(ProviderIdentity {
            subject: user.id.to_string(),
            email: primary.email.trim().to_lowercase(),
            email_verified: primary.verified,
            name,
        })
    }

    async fn github_get<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        access_token: &str,
    ) -> Result<T, OAuthError> {
        let provider = OAuthProvider::Github.name();
        let response = self
            .http
            .get(url)
            .bearer_auth(access_token)
            .header("Accept", "application/vnd.github+json")
            .header("X-GitHub-Api-Version", "2022-11-28")
            .send()
            .await
            .map_err(|_| OAuthError::Unreachable(provider))?;
        let status = response.status();
        if status == reqwest::StatusCode::UNAUTHORIZED || status == reqwest::StatusCode::FORBIDDEN {
            return Err(OAuthError::Refused {
                provider,
                reason: format!("the API answered {}", status.as_u16()),
            });
        }
        if !status.is_success() {
            return Err(OAuthError::Unreachable(provider));
        }
        read_json(response)
            .await
            .ok_or(OAuthError::Unreachable(provider))
    }

    /// The issuer's discovery document and keys, from the cache unless `refresh`.
    async fn issuer(
        &self,
        provider: OAuthProvider,
        oidc: &OidcConfig,
        refresh: bool,
    ) -> Result<Arc<Issuer>, OAuthError> {
        if !refresh {
            if let Some(issuer) = self.issuers.get(&oidc.issuer_url) {
                return Ok(issuer);
            }
        }
        let unreachable = || OAuthError::Unreachable(provider.name());
        let discovery: DiscoveryDocument = self
            .get_json(&format!(
                "{}/.well-known/openid-configuration",
                oidc.issuer_url
            ))
            .await
            .ok_or_else(unreachable)?;
        if !issuer_matches_configuration(&discovery.issuer, &oidc.issuer_url) {
            return Err(OAuthError::InvalidIdToken {
                provider: provider.name(),
                reason: "the discovery document names another issuer".into(),
            });
        }
        let keys: JwkSet = self
            .get_json(&discovery.jwks_uri)
            .await
            .ok_or_else(unreachable)?;
        let issuer = Arc::new(Issuer { discovery, keys });
        self.issuers.insert(oidc.issuer_url.clone(), issuer.clone());
        Ok(issuer)
    }

    async fn get_json<T: serde::de::DeserializeOwned>(&self, url: &str) -> Option<T> {
        let response = self.http.get(url).send().await.ok()?;
        if !response.status().is_success() {
            return None;
        }
        read_json(response).await
    }
}

/// Reads a JSON answer of at most [`MAX_ANSWER_BYTES`].
async fn read_json<T: serde::de::DeserializeOwned>(mut response: reqwest::Response) -> Option<T> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.ok()? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return None;
        }
        body.extend_from_slice(&chunk);
    }
    serde_json::from_slice(&body).ok()
}

/// What a provider's error code may show: `[A-Za-z0-9_.-]` and spaces, at most 80 characters.
pub fn safe_text(raw: &str) -> String {
    let text: String = raw
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.' | ' '))
        .take(80)
        .collect();
    if text.trim().is_empty() {
        "no reason given".into()
    } else {
        text
    }
}

/// The discovered issuer must be the configured one (OpenID Connect Discovery 1.0 § 4.3).
fn issuer_matches_configuration(discovered: &str, configured: &str) -> bool {
    discovered.trim_end_matches('/') == configured.trim_end_matches('/')
        || discovered.contains("{tenantid}")
}

/// Why an ID token was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum IdTokenError {
    #[error("its signing key is unknown")]
    UnknownKey,
    #[error("it is not signed with RS256")]
    Algorithm,
    #[error("it is malformed")]
    Malformed,
    #[error("its signature is invalid")]
    Signature,
    #[error("it has expired")]
    Expired,
    #[error("it was issued for another application")]
    Audience,
    #[error("it was issued by another issuer")]
    Issuer,
    #[error("its nonce does not match this sign-in")]
    Nonce,
}

/// Validates an ID token against the issuer's keys, client id and nonce (OpenID Connect
/// Core 1.0 § 3.1.3.7); RS256 only, never chosen by the header's `alg`.
fn validate_id_token(
    token: &str,
    issuer: &Issuer,
    client_id: &str,
    nonce: &str,
) -> Result<IdTokenClaims, IdTokenError> {
    // The header's `alg` first, read by hand: jsonwebtoken cannot even parse `none`.
    #[derive(Deserialize)]
    struct Alg {
        alg: String,
    }
    let alg = token
        .split('.')
        .next()
        .and_then(|h| URL_SAFE_NO_PAD.decode(h).ok())
        .and_then(|h| serde_json::from_slice::<Alg>(&h).ok())
        .ok_or(IdTokenError::Malformed)?;
    if alg.alg != "RS256" {
        return Err(IdTokenError::Algorithm);
    }
    let header = jsonwebtoken::decode_header(token).map_err(|_| IdTokenError::Malformed)?;
    if header.alg != Algorithm::RS256 {
        return Err(IdTokenError::Algorithm);
    }
    let jwk = match &header.kid {
        Some(kid) => issuer.keys.find(kid),
        // Without a kid, a set of one key is unambiguous.
        None if issuer.keys.keys.len() == 1 => issuer.keys.keys.first(),
        None => None,
    }
    .ok_or(IdTokenError::UnknownKey)?;
    let key = DecodingKey::from_jwk(jwk).map_err(|_| IdTokenError::UnknownKey)?;
    let mut validation = Validation::new(Algorithm::RS256);
    validation.leeway = ID_TOKEN_LEEWAY_SECS;
    validation.set_audience(&[client_id]);
    validation.set_required_spec_claims(&["exp", "iat", "iss", "aud", "sub"]);
    // The issuer is compared below: Microsoft's depends on the token's tenant.
    let data = jsonwebtoken::decode::<IdTokenClaims>(token, &key, &validation).map_err(|e| {
        use jsonwebtoken::errors::ErrorKind;
        match e.kind() {
            ErrorKind::ExpiredSignature | ErrorKind::ImmatureSignature => IdTokenError::Expired,
            ErrorKind::InvalidAudience => IdTokenError::Audience,
            ErrorKind::InvalidSignature => IdTokenError::Signature,
            ErrorKind::InvalidAlgorithm => IdTokenError::Algorithm,
            _ => IdTokenError::Malformed,
        }
    })?;
    let claims = data.claims;
    let expected_issuer = if issuer.discovery.issuer.contains("{tenantid}") {
        let tid = claims.tid.as_deref().ok_or(IdTokenError::Issuer)?;
        if tid.is_empty() || !tid.chars().all(|c| c.is_ascii_hexdigit() || c == '-') {
            return Err(IdTokenError::Issuer);
        }
        issuer.discovery.issuer.replace("{tenantid}", tid)
    } else {
        issuer.discovery.issuer.clone()
    };
    if claims.iss != expected_issuer {
        return Err(IdTokenError::Issuer);
    }
    match claims.nonce.as_deref() {
        Some(n) if crate::auth::keys::constant_time_eq(n, nonce) => Ok(claims),
        _ => Err(IdTokenError::Nonce),
    }
}

fn truthy(value: Option<&serde_json::Value>) -> Option<bool> {
    match value? {
        serde_json::Value::Bool(b) => Some(*b),
        // Some providers send booleans as strings.
        serde_json::Value::String(s) => Some(s.eq_ignore_ascii_case("true")),
        _ => None,
    }
}

/// The identity in validated ID token claims (email rules: docs/security.md).
fn oidc_identity(
    provider: OAuthProvider,
    claims: IdTokenClaims,
) -> Result<ProviderIdentity, OAuthError> {
    let email = claims
        .email
        .as_deref()
        .map(str::trim)
        .filter(|e| e.contains('@'))
        .map(str::to_lowercase)
        .ok_or(OAuthError::NoEmail(provider.name()))?;
    let stated = truthy(claims.email_verified.as_ref());
    let email_verified = match provider {
        OAuthProvider::Microsoft => {
            stated == Some(true)
                || truthy(claims.xms_edov.as_ref()) == Some(true)
                || (stated.is_none() && claims.tid.as_deref() == Some(MICROSOFT_CONSUMER_TENANT))
        }
        _ => stated == Some(true),
    };
    let name = claims
        .name
        .filter(|n| !n.trim().is_empty())
        .unwrap_or_else(|| email.split('@').next().unwrap_or_default().to_string());
    Ok(ProviderIdentity {
        subject: claims.sub,
        email,
        email_verified,
        name,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn provider_codes_round_trip() {
        for p in OAuthProvider::ALL {
            assert_eq!(OAuthProvider::parse(p.code()), Some(p));
        }
        assert_eq!(OAuthProvider::parse("facebook"), None);
    }

    #[test]
    fn provider_codes_are_the_stored_and_wire_text() {
        // The CHECK list of `user_identities.provider` (migrations/sqlite/0005_identities.sql).
        let mut codes = OAuthProvider::ALL.map(OAuthProvider::code);
        codes.sort_unstable();
        assert_eq!(codes, ["github", "google", "microsoft"]);
        for p in OAuthProvider::ALL {
            let json = serde_json::to_value(p).unwrap();
            assert_eq!(json, p.code());
            assert_eq!(serde_json::from_value::<OAuthProvider>(json).unwrap(), p);
        }
    }

    #[test]
    fn provider_error_text_is_sanitised() {
        assert_eq!(safe_text("access_denied"), "access_denied");
        assert_eq!(safe_text("<script>x</script>"), "scriptxscript");
        assert_eq!(safe_text(""), "no reason given");
        assert_eq!(safe_text(&"a".repeat(500)).len(), 80);
    }

    #[test]
    fn issuer_must_match_unless_it_is_a_tenant_template() {
        assert!(issuer_matches_configuration(
            "https://accounts.google.com",
            "https://accounts.google.com/"
        ));
        assert!(!issuer_matches_configuration(
            "https://evil.example",
            "https://accounts.google.com"
        ));
        assert!(issuer_matches_configuration(
            "https://login.microsoftonline.com/{tenantid}/v2.0",
            "https://login.microsoftonline.com/common/v2.0"
        ));
    }

    fn claims(verified: Option<serde_json::Value>, tid: Option<&str>) -> IdTokenClaims {
        IdTokenClaims {
            iss: "i".into(),
            sub: "s".into(),
            nonce: None,
            email: Some(" Person@Example.COM ".into()),
            email_verified: verified,
            name: None,
            tid: tid.map(str::to_string),
            xms_edov: None,
            preferred_username: None,
        }
    }

    #[test]
    fn google_needs_email_verified_true() {
        let ok = oidc_identity(OAuthProvider::Google, claims(Some(true.into()), None)).unwrap();
        assert!(ok.email_verified);
        assert_eq!(ok.email, "person@example.com");
        assert_eq!(ok.name, "person");
        assert!(
            !oidc_identity(OAuthProvider::Google, claims(None, None))
                .unwrap()
                .email_verified
        );
        assert!(
            !oidc_identity(OAuthProvider::Google, claims(Some(false.into()), None))
                .unwrap()
                .email_verified
        );
    }

    #[test]
    fn microsoft_trusts_personal_accounts_and_verified_domains_only() {
        let personal = claims(None, Some(MICROSOFT_CONSUMER_TENANT));
        assert!(
            oidc_identity(OAuthProvider::Microsoft, personal)
                .unwrap()
                .email_verified
        );
        let work = claims(None, Some("72f988bf-86f1-41af-91ab-2d7cd011db47"));
        assert!(
            !oidc_identity(OAuthProvider::Microsoft, work.clone())
                .unwrap()
                .email_verified
        );
        let mut edov = work;
        edov.xms_edov = Some(true.into());
        assert!(
            oidc_identity(OAuthProvider::Microsoft, edov)
                .unwrap()
                .email_verified
        );
        let denied = claims(Some(false.into()), Some(MICROSOFT_CONSUMER_TENANT));
        assert!(
            !oidc_identity(OAuthProvider::Microsoft, denied)
                .unwrap()
                .email_verified
        );
    }

    #[test]
    fn a_token_without_email_is_refused() {
        let mut c = claims(Some(true.into()), None);
        c.email = None;
        assert_eq!(
            oidc_identity(OAuthProvider::Google, c),
            Err(OAuthError::NoEmail("Google"))
        );
    }
}
