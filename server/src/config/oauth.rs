//! The sign-in part: the third-party providers (`GITHUB_*`, `GOOGLE_*`, `MICROSOFT_*`).

use secrecy::SecretString;

use super::Settings;

/// Default authorization endpoint of GitHub OAuth apps (GitHub Docs, "Authorizing OAuth apps").
pub const GITHUB_AUTH_URL: &str = "https://github.com/login/oauth/authorize";
/// Default token endpoint of GitHub OAuth apps.
pub const GITHUB_TOKEN_URL: &str = "https://github.com/login/oauth/access_token";
/// Default GitHub REST API base (`/user`, `/user/emails` are appended).
pub const GITHUB_API_URL: &str = "https://api.github.com";
/// Default Google OpenID Connect issuer (discovery at `/.well-known/openid-configuration`).
pub const GOOGLE_ISSUER_URL: &str = "https://accounts.google.com";
/// Default Microsoft identity platform issuer for work, school and personal accounts.
pub const MICROSOFT_ISSUER_URL: &str = "https://login.microsoftonline.com/common/v2.0";

/// An OAuth client registered with one provider.
#[derive(Clone)]
pub struct OAuthClientConfig {
    /// `*_CLIENT_ID`.
    pub client_id: String,
    /// `*_CLIENT_SECRET`; never logged.
    pub client_secret: SecretString,
}

/// GitHub sign-in (plain OAuth 2.0 plus the REST API for the identity).
#[derive(Clone)]
pub struct GithubConfig {
    pub client: OAuthClientConfig,
    /// `GITHUB_AUTH_URL`, default [`GITHUB_AUTH_URL`].
    pub auth_url: String,
    /// `GITHUB_TOKEN_URL`, default [`GITHUB_TOKEN_URL`].
    pub token_url: String,
    /// `GITHUB_API_URL`, default [`GITHUB_API_URL`], without a trailing slash.
    pub api_url: String,
}

/// An OpenID Connect provider (Google, Microsoft); endpoints come from discovery at first sign-in.
#[derive(Clone)]
pub struct OidcConfig {
    pub client: OAuthClientConfig,
    /// `GOOGLE_ISSUER_URL` / `MICROSOFT_ISSUER_URL`, without a trailing slash.
    pub issuer_url: String,
}

/// The configured sign-in providers; `None` unless both client id and secret are set.
#[derive(Clone, Default)]
pub struct OAuthConfig {
    /// `GITHUB_CLIENT_ID`, `GITHUB_CLIENT_SECRET`, `GITHUB_*_URL`.
    pub github: Option<GithubConfig>,
    /// `GOOGLE_CLIENT_ID`, `GOOGLE_CLIENT_SECRET`, `GOOGLE_ISSUER_URL`.
    pub google: Option<OidcConfig>,
    /// `MICROSOFT_CLIENT_ID`, `MICROSOFT_CLIENT_SECRET`, `MICROSOFT_ISSUER_URL`.
    pub microsoft: Option<OidcConfig>,
}

impl OAuthConfig {
    /// The providers whose client id and secret are both set, with endpoints (no trailing slash).
    pub(super) fn from_settings(settings: &Settings) -> Self {
        let client = |id: &Option<String>, secret: &Option<String>| {
            Some(OAuthClientConfig {
                client_id: id.clone()?,
                client_secret: SecretString::from(secret.clone()?),
            })
        };
        let url = |url: &str| url.trim_end_matches('/').to_string();
        let s = settings;
        Self {
            github: client(&s.github_client_id, &s.github_client_secret).map(|client| {
                GithubConfig {
                    client,
                    auth_url: url(&s.github_auth_url),
                    token_url: url(&s.github_token_url),
                    api_url: url(&s.github_api_url),
                }
            }),
            google: client(&s.google_client_id, &s.google_client_secret).map(|client| OidcConfig {
                client,
                issuer_url: url(&s.google_issuer_url),
            }),
            microsoft: client(&s.microsoft_client_id, &s.microsoft_client_secret).map(|client| {
                OidcConfig {
                    client,
                    issuer_url: url(&s.microsoft_issuer_url),
                }
            }),
        }
    }
}
