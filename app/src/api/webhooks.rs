//! Webhook subscriptions, their event catalogue and their deliveries (docs/api.md
//! § Integrations and webhooks); deliveries follow Standard Webhooks v1.

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use utoipa::ToSchema;

/// A webhook subscription (docs/api.md § Integrations and webhooks). The signing secret is in
/// the creation answer only, never here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    pub id: String,
    /// The http(s) URL deliveries are POSTed to.
    pub url: String,
    /// Event types from `GET /api/integrations/webhooks/events`.
    pub events: Vec<String>,
    /// Up to 500 characters; empty when none was given.
    pub description: String,
    /// False once the receiver answered 410 Gone: nothing more is delivered.
    pub active: bool,
    pub created_at: String,
}

/// `GET /api/integrations/webhooks` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct WebhooksResponse {
    pub webhooks: Vec<Webhook>,
}

/// `POST /api/integrations/webhooks` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateWebhookRequest {
    /// An http or https URL on a public address (at most 2,048 bytes).
    pub url: String,
    /// A non-empty list of event types from the catalogue.
    pub events: Vec<String>,
    /// At most 500 characters.
    #[serde(default)]
    pub description: Option<String>,
}

/// `POST /api/integrations/webhooks` answer: the webhook and its signing secret
/// (`whsec_` + base64 of 32 random bytes, Standard Webhooks v1), shown this once.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct CreatedWebhook {
    pub webhook: Webhook,
    pub secret: String,
}

/// One entry of the event catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct WebhookEventType {
    /// E.g. `agent.created`.
    #[serde(rename = "type")]
    pub kind: String,
    pub description: String,
}

/// `GET /api/integrations/webhooks/events` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct WebhookEventsResponse {
    pub events: Vec<WebhookEventType>,
}

/// One event sent (or to be sent) to one webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WebhookDelivery {
    /// Also the `webhook-id` header of every attempt (Standard Webhooks message id).
    pub id: String,
    /// The event type.
    pub event: String,
    /// `pending` (waiting for its next attempt), `sending`, `succeeded` or `failed`
    /// (given up, or the webhook was disabled).
    pub status: String,
    /// Attempts made so far.
    pub attempts: u32,
    /// HTTP status of the last answer; absent when none came (timeout, connection error).
    pub response_status: Option<u16>,
    /// Why the last attempt failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub created_at: String,
    /// When the next attempt is due; absent once the delivery has ended.
    pub next_attempt_at: Option<String>,
}

/// `GET /api/integrations/webhooks/{id}/deliveries` answer, newest first (at most 100).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct WebhookDeliveriesResponse {
    pub deliveries: Vec<WebhookDelivery>,
}
