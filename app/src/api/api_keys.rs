//! API keys and the scopes they grant (docs/api.md § API keys, § API key scopes). The
//! secret is shown once, in the answer that creates or rotates a key.

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use utoipa::ToSchema;

/// The ten API key scopes (docs/api.md § API key scopes), in the contract's order.
pub const SCOPES: [&str; 10] = [
    "agents:read",
    "agents:write",
    "chat:read",
    "chat:write",
    "knowledge:read",
    "knowledge:write",
    "integrations:read",
    "integrations:write",
    "webhooks:read",
    "webhooks:write",
];

/// `POST /api/api-keys` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateApiKeyRequest {
    /// 1..=100 characters.
    pub name: String,
    /// A non-empty set of scope names such as `agents:read` (docs/api.md § API key scopes).
    pub scopes: Vec<String>,
    /// Optional ISO 8601 expiry in the future, e.g. `2027-01-01T00:00:00Z`.
    #[serde(default)]
    pub expires_at: Option<String>,
    /// The agents the key works for (at least one, each of the account's); absent: every
    /// agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_ids: Option<Vec<String>>,
    /// Tokens (prompt + completion) the key may use per calendar month (UTC), at least 1;
    /// absent: no budget of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub monthly_token_budget: Option<u64>,
}

/// An API key as listed: never the secret or its hash.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyInfo {
    pub id: String,
    pub name: String,
    /// The first 12 characters of the key, e.g. `key_AbCdEfGh`.
    pub prefix: String,
    pub scopes: Vec<String>,
    /// The agents the key works for; `null`: every agent.
    pub agent_ids: Option<Vec<String>>,
    /// Tokens the key may use per calendar month; `null`: no budget of its own.
    pub monthly_token_budget: Option<u64>,
    /// Tokens of the replies sent with the key this calendar month (UTC).
    #[serde(default)]
    pub tokens_this_month: u64,
    pub expires_at: Option<String>,
    pub created_at: String,
    pub last_used_at: Option<String>,
}

/// `201` answer of key creation and rotation: `key` is shown only here.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CreatedApiKey {
    pub api_key: ApiKeyInfo,
    /// `key_` followed by base64url of 32 random bytes.
    pub key: String,
}

/// `GET /api/api-keys` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApiKeysResponse {
    pub api_keys: Vec<ApiKeyInfo>,
}
