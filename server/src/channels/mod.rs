//! Live channels of integrations: a Telegram bot ([`telegram`]), a Slack app ([`slack`]) and
//! the website widget ([`widget`]). Each external conversation (a Telegram chat, a Slack
//! thread, a widget visitor) is one thread of the integration's linked agent, owned by the
//! integration's owner, so it shows in the dashboard and the API like any other
//! conversation, and its messages count towards the owner's usage.

pub mod slack;
pub mod telegram;
pub mod widget;

use std::time::Duration;

use crate::{
    chat,
    config::Config,
    error::ApiError,
    http::AppState,
    store::{integrations::IntegrationRecord, StoreError},
};

/// Time allowed for one call to a provider's API (Telegram Bot API, Slack Web API).
pub const PROVIDER_API_TIMEOUT: Duration = Duration::from_secs(10);

/// What a channel answers when the agent could not (provider failure, storage error).
pub const APOLOGY: &str = "Sorry, I could not answer just now. Please try again in a moment.";
/// What a channel answers while the integration is linked to no agent.
pub const NOT_LINKED: &str =
    "This channel is not connected to an agent yet. Its owner can link one in AgentChat.";

/// The outbound side of live channels: one HTTP client and the provider API bases.
pub struct Channels {
    /// Client for provider API calls ([`PROVIDER_API_TIMEOUT`], no redirects).
    pub http: reqwest::Client,
    /// `TELEGRAM_API_URL`.
    pub telegram_api_url: String,
    /// `SLACK_API_URL`.
    pub slack_api_url: String,
}

impl Channels {
    /// Channels configured from `config`.
    ///
    /// Errors: the HTTP client cannot be built (no TLS roots).
    pub fn new(config: &Config) -> anyhow::Result<Self> {
        Ok(Self {
            http: reqwest::Client::builder()
                .timeout(PROVIDER_API_TIMEOUT)
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("AgentChat/", env!("CARGO_PKG_VERSION")))
                .build()?,
            telegram_api_url: config.telegram_api_url.clone(),
            slack_api_url: config.slack_api_url.clone(),
        })
    }
}

impl Channels {
    /// The Bot API of the Telegram bot with `token`.
    pub fn telegram_bot<'a>(&'a self, token: &'a str) -> telegram::BotApi<'a> {
        telegram::BotApi::new(&self.http, &self.telegram_api_url, token)
    }
}

/// The credential field `name` of `integration`, in clear.
///
/// Errors: in words — the stored credentials do not open, or the field is missing.
pub fn credential(
    state: &AppState,
    integration: &IntegrationRecord,
    name: &str,
) -> Result<String, String> {
    let credentials = crate::integrations::open_credentials(&state.secrets, integration)
        .map_err(|e| format!("the stored credentials do not open ({e})"))?;
    credentials
        .get(name)
        .and_then(|v| v.as_str())
        .map(str::to_string)
        .ok_or_else(|| format!("the credential {name} is missing"))
}

/// Why a channel message got no answer from the agent.
#[derive(Debug)]
pub enum AnswerError {
    /// The integration has no linked agent (or the agent was deleted).
    NotLinked,
    /// The message is longer than `MAX_MESSAGE_CHARS`.
    TooLong(usize),
    /// The model provider or the store failed (already logged and, for the provider,
    /// persisted as a failed reply).
    Failed(ApiError),
}

impl From<ApiError> for AnswerError {
    fn from(e: ApiError) -> Self {
        Self::Failed(e)
    }
}

impl From<StoreError> for AnswerError {
    fn from(e: StoreError) -> Self {
        Self::Failed(e.into())
    }
}

impl From<AnswerError> for ApiError {
    /// For callers that answer over HTTP (the widget): 409 while no agent is linked, 400
    /// for a message that is too long.
    fn from(e: AnswerError) -> Self {
        match e {
            AnswerError::NotLinked => ApiError::Conflict(NOT_LINKED.into()),
            AnswerError::TooLong(max) => {
                ApiError::bad_request(format!("message must be at most {max} characters"))
            }
            AnswerError::Failed(e) => e,
        }
    }
}

impl AnswerError {
    /// The text to send back to the person on the channel.
    pub fn reply_text(&self) -> String {
        match self {
            Self::NotLinked => NOT_LINKED.into(),
            Self::TooLong(max) => {
                format!("That message is too long: I can read at most {max} characters.")
            }
            Self::Failed(_) => APOLOGY.into(),
        }
    }
}

/// Prepares a turn of the external conversation `conversation_key` of `integration` with
/// its linked agent ([`chat::prepare`]: the user's message is persisted), continuing the
/// conversation's thread — a new thread when it has none, or when its thread was deleted or
/// belongs to another agent since the integration was relinked.
///
/// Errors: [`AnswerError`] (not linked, too long, or the store failed).
pub async fn prepare_turn(
    state: &AppState,
    integration: &IntegrationRecord,
    conversation_key: &str,
    message: &str,
) -> Result<chat::PreparedChat, AnswerError> {
    let max = state.config.max_message_chars;
    if message.chars().count() > max {
        return Err(AnswerError::TooLong(max));
    }
    let owner = &integration.user_id;
    let Some(agent_id) = integration.agent_id.as_deref() else {
        return Err(AnswerError::NotLinked);
    };
    let agent = match state.agents.owned(owner, agent_id).await {
        Ok(agent) => agent,
        Err(crate::agents::AgentError::NotFound) => return Err(AnswerError::NotLinked),
        Err(e) => return Err(AnswerError::Failed(e.into())),
    };
    let known = state
        .store
        .channel_thread(&integration.id, conversation_key)
        .await?;
    let thread = match known {
        Some(id) => state.store.thread(owner, &agent.id, &id).await?,
        None => None,
    };
    let continued = thread.is_some();
    let choice = thread.map_or(chat::ThreadChoice::New, chat::ThreadChoice::Known);
    let prepared = chat::prepare(state, &agent, owner, choice, message, &[]).await?;
    if !continued {
        state
            .store
            .set_channel_thread(
                &integration.id,
                conversation_key,
                &prepared.thread.id,
                state.auth.clock.now(),
            )
            .await?;
    }
    Ok(prepared)
}

/// Answers `message` from the external conversation `conversation_key` of `integration`
/// through its linked agent ([`prepare_turn`], then [`chat::complete`]); the reply is
/// persisted like an API chat reply.
///
/// Errors: [`AnswerError`].
pub async fn answer(
    state: &AppState,
    integration: &IntegrationRecord,
    conversation_key: &str,
    message: &str,
) -> Result<String, AnswerError> {
    let prepared = prepare_turn(state, integration, conversation_key, message).await?;
    let (text, _) = chat::complete(state, &prepared).await?;
    Ok(text)
}

/// Records an inbound event id; false when it was seen before (the provider retried), in
/// which case the event must not be answered again. A store failure counts as first seen:
/// answering twice beats not answering.
pub async fn first_delivery(state: &AppState, integration_id: &str, event_id: &str) -> bool {
    match state
        .store
        .first_channel_event(integration_id, event_id, state.auth.clock.now())
        .await
    {
        Ok(first) => first,
        Err(e) => {
            tracing::warn!(error = %e, "recording an inbound channel event failed");
            true
        }
    }
}

/// How long inbound event ids are remembered for de-duplication (providers retry for
/// minutes to hours: Slack three times within about an hour, Telegram for up to a day).
pub const EVENT_MEMORY: Duration = Duration::from_secs(24 * 60 * 60);

/// The URL a provider sends a live channel's inbound requests to (Telegram updates, Slack
/// events), under `PUBLIC_URL`; `None` for providers without one.
pub fn inbound_url(public_url: &str, integration: &IntegrationRecord) -> Option<String> {
    let base = public_url.trim_end_matches('/');
    match integration.provider_code.as_str() {
        "telegram" => Some(format!("{base}/api/channels/telegram/{}", integration.id)),
        "slack" => Some(format!("{base}/api/channels/slack/{}", integration.id)),
        _ => None,
    }
}

/// Sets up the live channel of a stored integration and records the outcome in `status`,
/// `status_detail` and `inbound_secret_hash` (the caller stores the record). For Telegram:
/// a new secret token and `setWebhook` with the [`inbound_url`]; a refusal or an unreachable
/// Bot API leaves status `error` with what went wrong. Other providers need nothing.
pub async fn connect(state: &AppState, integration: &mut IntegrationRecord) {
    if integration.provider_code != "telegram" {
        return;
    }
    let outcome = async {
        let token = credential(state, integration, "botToken")?;
        let url = inbound_url(&state.config.public_url, integration).unwrap_or_default();
        let secret = telegram::new_secret_token();
        state
            .channels
            .telegram_bot(&token)
            .set_webhook(&url, &secret)
            .await
            .map_err(|e| format!("Telegram did not accept the webhook: {e}"))?;
        Ok::<_, String>(telegram::secret_hash(&secret))
    }
    .await;
    match outcome {
        Ok(hash) => {
            integration.status = "active".into();
            integration.status_detail = None;
            integration.inbound_secret_hash = Some(hash);
        }
        Err(detail) => {
            tracing::warn!(integration.id = %integration.id, detail = %detail, "live channel not connected");
            integration.status = "error".into();
            integration.status_detail = Some(detail);
            integration.inbound_secret_hash = None;
        }
    }
}

/// Tears down the live channel of a deleted integration, as far as the provider allows:
/// Telegram's `deleteWebhook`. Failures are logged; the integration is gone either way, and
/// requests that still arrive for it are answered 404.
pub async fn disconnect(state: &AppState, integration: &IntegrationRecord) {
    if integration.provider_code != "telegram" || integration.inbound_secret_hash.is_none() {
        return;
    }
    let Ok(token) = credential(state, integration, "botToken") else {
        return;
    };
    if let Err(e) = state.channels.telegram_bot(&token).delete_webhook().await {
        tracing::warn!(integration.id = %integration.id, error = %e, "deleteWebhook failed");
    }
}
