//! Integrations: the provider catalogue and the account's integrations, credentials
//! masked (docs/api.md § Integrations and webhooks, § Create integration).

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use utoipa::ToSchema;

/// A credential or config field of an integration provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct IntegrationField {
    /// The JSON key inside `credentials` or `config`.
    pub name: String,
    pub label: String,
    /// Never shown again after creation.
    pub secret: bool,
    pub required: bool,
}

/// An integration provider of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct IntegrationProvider {
    pub code: String,
    pub name: String,
    pub description: String,
    pub credential_fields: Vec<IntegrationField>,
    pub config_fields: Vec<IntegrationField>,
    /// Whether this server runs the provider's live channel; otherwise its settings are
    /// stored and checked only.
    pub live: bool,
}

/// `GET /api/integrations/providers` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct IntegrationProvidersResponse {
    pub providers: Vec<IntegrationProvider>,
}

/// `POST /api/integrations` body (docs/api.md § Create integration).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateIntegrationRequest {
    pub provider_code: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The provider's credential fields.
    #[cfg_attr(feature = "ssr", schema(value_type = Object))]
    pub credentials: serde_json::Value,
    /// The provider's config fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ssr", schema(value_type = Option<Object>))]
    pub config: Option<serde_json::Value>,
}

/// `PUT /api/integrations/{id}` body: omitted fields stay as they are.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateIntegrationRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// An agent id links; `null` unlinks.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "ssr", schema(value_type = Option<String>))]
    pub agent_id: Option<Option<String>>,
    /// Credential fields to replace; the others are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ssr", schema(value_type = Option<Object>))]
    pub credentials: Option<serde_json::Value>,
    /// The whole new config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ssr", schema(value_type = Option<Object>))]
    pub config: Option<serde_json::Value>,
}

/// A field that is present (even as `null`) becomes `Some`; absent stays `None` (default).
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// An integration as answers show it: credentials masked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Integration {
    pub id: String,
    pub provider_code: String,
    pub name: String,
    pub agent_id: Option<String>,
    #[cfg_attr(feature = "ssr", schema(value_type = Object))]
    pub config: serde_json::Value,
    /// Each credential field with a masked hint (`••••abcd`), never the value.
    #[cfg_attr(feature = "ssr", schema(value_type = Object))]
    pub credentials: serde_json::Value,
    /// `active`, or `error` when a live channel could not be set up (`statusDetail` says
    /// why; updating the credentials tries again).
    pub status: String,
    /// Why the status is `error`, e.g. what Telegram answered when the webhook was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_detail: Option<String>,
    /// How the provider or a web page reaches a live channel (Telegram, Slack, website).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<IntegrationConnection>,
    pub created_at: String,
    pub updated_at: String,
}

/// Where a live channel receives its messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct IntegrationConnection {
    /// Telegram: the webhook URL registered with the Bot API. Slack: the Events API request
    /// URL to enter under the app's Event Subscriptions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    /// Website: the public id the widget is embedded with (`pub_...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_id: Option<String>,
    /// Website: the HTML that embeds the widget on a page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embed_code: Option<String>,
}

/// `GET /api/integrations` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct IntegrationsResponse {
    pub integrations: Vec<Integration>,
}

/// `GET`/`PUT /api/integrations/{id}` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct IntegrationResponse {
    pub integration: Integration,
}

/// `POST /api/integrations` answer (docs/api.md § Create integration).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct CreatedResponse {
    pub id: String,
    pub message: String,
}

/// One tool of an MCP server integration, as the server lists it (MCP `tools/list`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct McpServerTool {
    /// The tool's name on the MCP server (what `allowedTools` of an `mcp` tool lists).
    pub name: String,
    /// What the server says the tool does (empty when it says nothing).
    #[serde(default)]
    pub description: String,
    /// The JSON Schema of the tool's arguments.
    #[cfg_attr(feature = "ssr", schema(value_type = Object))]
    pub input_schema: serde_json::Value,
}

/// `GET /api/integrations/{integrationId}/tools` answer: the MCP server's tools, live.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct McpServerToolsResponse {
    pub tools: Vec<McpServerTool>,
}
