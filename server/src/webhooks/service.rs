//! The webhook use cases of an account: subscribe a URL to events, list and delete
//! subscriptions, read a webhook's delivery history and send a delivery again (docs/api.md
//! § Integrations and webhooks).

use super::{new_secret, EventType, Webhooks};
use crate::{
    ids::{DeliveryId, UserId, WebhookId},
    public_url::{self, UrlError},
    store::{
        webhooks::{DeliveryRecord, WebhookRecord},
        StoreError,
    },
};

/// Webhooks one account may hold.
pub const MAX_WEBHOOKS_PER_USER: u32 = 20;
/// Longest description in characters.
pub const DESCRIPTION_MAX: usize = app::api::limits::WEBHOOK_DESCRIPTION_MAX;
/// Deliveries listed per webhook (the newest).
pub const DELIVERIES_LISTED: u32 = 100;

/// A new subscription as the caller gives it, checked by [`Webhooks::create`].
#[derive(Debug, Clone)]
pub struct NewWebhook {
    /// An http(s) URL on a public address.
    pub url: String,
    /// Event type names of the catalogue.
    pub events: Vec<String>,
    pub description: Option<String>,
}

/// Why a webhook operation failed. The texts are the messages clients are shown.
#[derive(Debug, thiserror::Error)]
pub enum WebhookError {
    /// A field (events or description) breaks its rule; the text says which.
    #[error("{0}")]
    Invalid(String),
    /// The receiver's URL cannot receive webhooks.
    #[error(transparent)]
    Url(#[from] UrlError),
    /// The account holds [`MAX_WEBHOOKS_PER_USER`] webhooks.
    #[error("An account may hold at most {MAX_WEBHOOKS_PER_USER} webhooks; delete one first")]
    Limit,
    #[error("Webhook not found")]
    NotFound,
    #[error("Delivery not found")]
    DeliveryNotFound,
    /// The webhook was disabled (its receiver answered 410 Gone).
    #[error(
        "This webhook was disabled because its receiver answered 410 Gone; create a new webhook"
    )]
    Disabled,
    /// The delivery is being sent right now.
    #[error("This delivery is being sent right now; try again shortly")]
    InFlight,
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Anything else (the secret could not be sealed); not shown to clients.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// Checks the events: non-empty, each in the catalogue, deduplicated.
/// Errors: [`WebhookError::Invalid`] naming the unknown types.
pub fn checked_events(names: &[String]) -> Result<Vec<EventType>, WebhookError> {
    if names.is_empty() {
        return Err(WebhookError::Invalid(
            "events must name at least one event type; see GET /api/integrations/webhooks/events"
                .into(),
        ));
    }
    let unknown: Vec<&str> = names
        .iter()
        .map(String::as_str)
        .filter(|n| EventType::parse(n).is_none())
        .collect();
    if !unknown.is_empty() {
        return Err(WebhookError::Invalid(format!(
            "Unknown event types: {}; see GET /api/integrations/webhooks/events",
            unknown.join(", ")
        )));
    }
    let mut events: Vec<EventType> = Vec::with_capacity(names.len());
    for event in names.iter().filter_map(|n| EventType::parse(n)) {
        if !events.contains(&event) {
            events.push(event);
        }
    }
    Ok(events)
}

impl Webhooks {
    /// The webhooks of `user_id`, oldest first. Errors: the store's.
    pub async fn list(&self, user_id: &UserId) -> Result<Vec<WebhookRecord>, WebhookError> {
        Ok(self.store.list_webhooks(user_id).await?)
    }

    /// Subscribes `request.url` to `request.events`; answers the webhook and its `whsec_` secret,
    /// shown this once. Errors: [`WebhookError::Invalid`], [`WebhookError::Url`] (not http(s) or
    /// private), [`WebhookError::Limit`], the store's.
    pub async fn create(
        &self,
        user_id: &UserId,
        request: NewWebhook,
    ) -> Result<(WebhookRecord, String), WebhookError> {
        let events = checked_events(&request.events)?;
        let description = request.description.unwrap_or_default().trim().to_string();
        if description.chars().count() > DESCRIPTION_MAX {
            return Err(WebhookError::Invalid(format!(
                "description must be at most {DESCRIPTION_MAX} characters"
            )));
        }
        // The same SSRF rule as crawls; it is applied again at every send, through the
        // resolver the connection uses.
        let url = public_url::check(&request.url, &self.policy, "receive webhooks")
            .await?
            .to_string();
        let id = WebhookId::new();
        tracing::Span::current().record("webhook.id", id.as_str());
        let (secret, key) = new_secret();
        let secret_sealed = self.secrets.seal(user_id, &id, &key)?;
        let record = WebhookRecord {
            id,
            user_id: user_id.clone(),
            url,
            events,
            description,
            secret_sealed,
            active: true,
            disabled_reason: None,
            created_at: self.clock.now(),
        };
        if !self
            .store
            .create_webhook(&record, MAX_WEBHOOKS_PER_USER)
            .await?
        {
            return Err(WebhookError::Limit);
        }
        self.events.forget(user_id);
        Ok((record, secret))
    }

    /// Deletes the webhook and its deliveries. Errors: [`WebhookError::NotFound`], the store's.
    pub async fn delete(&self, user_id: &UserId, id: &WebhookId) -> Result<(), WebhookError> {
        if !self.store.delete_webhook(user_id, id).await? {
            return Err(WebhookError::NotFound);
        }
        self.events.forget(user_id);
        Ok(())
    }

    /// The webhook `id` of `user_id`. Errors: [`WebhookError::NotFound`]; the store's.
    pub async fn owned(
        &self,
        user_id: &UserId,
        id: &WebhookId,
    ) -> Result<WebhookRecord, WebhookError> {
        self.store
            .webhook(user_id, id)
            .await?
            .ok_or(WebhookError::NotFound)
    }

    /// The newest [`DELIVERIES_LISTED`] deliveries of the webhook, newest first.
    /// Errors: [`WebhookError::NotFound`]; the store's.
    pub async fn deliveries(
        &self,
        user_id: &UserId,
        id: &WebhookId,
    ) -> Result<Vec<DeliveryRecord>, WebhookError> {
        self.owned(user_id, id).await?;
        Ok(self
            .store
            .list_deliveries(user_id, id, DELIVERIES_LISTED)
            .await?)
    }

    /// Queues a delivery again now (same `webhook-id` and body, fresh retry window). Errors:
    /// [`WebhookError::NotFound`], `Disabled`, `DeliveryNotFound`, `InFlight`; the store's.
    pub async fn redeliver(
        &self,
        user_id: &UserId,
        id: &WebhookId,
        delivery_id: &DeliveryId,
    ) -> Result<(), WebhookError> {
        let webhook = self.owned(user_id, id).await?;
        if !webhook.active {
            return Err(WebhookError::Disabled);
        }
        match self
            .store
            .redeliver(user_id, id, delivery_id, self.clock.now())
            .await?
        {
            Some(true) => {
                self.events.deliveries_queued();
                Ok(())
            }
            Some(false) => Err(WebhookError::InFlight),
            None => Err(WebhookError::DeliveryNotFound),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_must_be_known_and_present() {
        assert!(checked_events(&[]).is_err());
        let err = checked_events(&["agent.created".into(), "agent.exploded".into(), "*".into()])
            .unwrap_err();
        assert!(err.to_string().contains("agent.exploded, *"), "{err}");
        assert_eq!(
            checked_events(&["agent.created".into(), "agent.created".into()]).unwrap(),
            vec![EventType::AgentCreated]
        );
    }
}
