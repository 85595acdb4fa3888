//! Live channels of integrations: a Telegram bot ([`telegram`]), a Slack app ([`slack`]) and
//! the website widget ([`widget`]). Each external conversation is one thread of the linked
//! agent, owned by the integration's owner, counted in their usage like any other.

pub mod slack;
pub mod telegram;
pub mod widget;

use std::{sync::Arc, time::Duration};

use crate::{
    agents::AgentService,
    chat::{ChatError, ChatService, PreparedChat, ThreadChoice, TurnOptions},
    clock::Clock,
    config::ChannelsConfig,
    crypto::SecretBox,
    domain::{Channel, ProviderCode, Role},
    ids::{IntegrationId, MessageId, PublicId},
    outbound,
    store::{
        chat::ReplyStatus,
        integrations::{IntegrationRecord, IntegrationStatus},
        ChannelLink, ChatStore, FeedbackRecord, IntegrationStore, MessageRecord, Rating,
        StoreError,
    },
};

/// Time allowed for one call to a provider's API (Telegram Bot API, Slack Web API).
pub const PROVIDER_API_TIMEOUT: Duration = Duration::from_secs(10);

/// What a channel answers when the agent could not (provider failure, storage error).
pub const APOLOGY: &str = "Sorry, I could not answer just now. Please try again in a moment.";
/// What a channel answers while the integration is linked to no agent.
pub const NOT_LINKED: &str =
    "This channel is not connected to an agent yet. Its owner can link one in AgentChat.";

/// What a channel answers while its owner's monthly token quota is spent.
pub const OVER_QUOTA: &str =
    "This assistant has reached its usage limit for this month. Please try again later.";

/// Why a channel message got no answer from the agent.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// No linked agent (or it was deleted).
    #[error("{NOT_LINKED}")]
    NotLinked,
    /// The message is longer than `MAX_MESSAGE_CHARS` (the field).
    #[error("message must be at most {0} characters")]
    TooLong(usize),
    /// The owner's monthly token quota is spent (docs/api.md § Token quotas); the person
    /// on the channel is told without the owner's figures.
    #[error("{OVER_QUOTA}")]
    OverQuota(Box<crate::chat::quota::QuotaState>),
    /// The provider or store failed (logged; a provider failure is stored as a failed reply).
    #[error(transparent)]
    Failed(ChatError),
}

impl From<ChatError> for ChannelError {
    fn from(e: ChatError) -> Self {
        match e {
            ChatError::TooLong { max, .. } => Self::TooLong(max),
            ChatError::QuotaExceeded(state) => Self::OverQuota(state),
            e => Self::Failed(e),
        }
    }
}

impl From<StoreError> for ChannelError {
    fn from(e: StoreError) -> Self {
        Self::Failed(e.into())
    }
}

impl ChannelError {
    /// The text to send back to the person on the channel.
    pub fn reply_text(&self) -> String {
        match self {
            Self::NotLinked => NOT_LINKED.into(),
            Self::TooLong(max) => {
                format!("That message is too long: I can read at most {max} characters.")
            }
            Self::OverQuota(_) => OVER_QUOTA.into(),
            Self::Failed(_) => APOLOGY.into(),
        }
    }
}

/// The live channels: one HTTP client, the provider API bases, and turns answered through chat.
#[derive(Clone)]
pub struct Channels {
    /// Client for provider API calls ([`PROVIDER_API_TIMEOUT`], no redirects).
    pub http: reqwest::Client,
    pub telegram_api_url: String,
    pub slack_api_url: String,
    /// `PUBLIC_URL`, where providers reach the inbound endpoints.
    public_url: String,
    integrations: Arc<dyn IntegrationStore>,
    threads: Arc<dyn ChatStore>,
    chat: Arc<ChatService>,
    agents: AgentService,
    secrets: SecretBox,
    clock: Clock,
}

impl Channels {
    /// Channels from `config`, reached under `public_url`, answering through `chat`.
    /// Errors: the HTTP client cannot be built.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: &ChannelsConfig,
        public_url: &str,
        integrations: Arc<dyn IntegrationStore>,
        threads: Arc<dyn ChatStore>,
        chat: Arc<ChatService>,
        agents: AgentService,
        secrets: SecretBox,
        clock: Clock,
    ) -> anyhow::Result<Self> {
        Ok(Self {
            http: outbound::client_builder(outbound::Purpose::Channels)
                .timeout(PROVIDER_API_TIMEOUT)
                .build()?,
            telegram_api_url: config.telegram_api_url.clone(),
            slack_api_url: config.slack_api_url.clone(),
            public_url: public_url.to_string(),
            integrations,
            threads,
            chat,
            agents,
            secrets,
            clock,
        })
    }

    /// The Bot API of the Telegram bot with `token`.
    pub fn telegram_bot<'a>(&'a self, token: &'a str) -> telegram::BotApi<'a> {
        telegram::BotApi::new(&self.http, &self.telegram_api_url, token)
    }

    /// The credential field `name` of `integration`, in clear. Errors: in words.
    pub fn credential(
        &self,
        integration: &IntegrationRecord,
        name: &str,
    ) -> Result<String, String> {
        let credentials = self
            .secrets
            .open_credentials(
                &integration.user_id,
                &integration.id,
                &integration.credentials_sealed,
            )
            .map_err(|e| format!("the stored credentials do not open ({e})"))?;
        credentials
            .get(name)
            .and_then(|v| v.as_str())
            .map(str::to_string)
            .ok_or_else(|| format!("the credential {name} is missing"))
    }

    /// Prepares a turn of `conversation_key` with the linked agent ([`ChatService::prepare`]) in
    /// its thread, or a new one if it has none, it is gone or another agent's.
    /// Errors: [`ChannelError`].
    pub async fn prepare_turn(
        &self,
        integration: &IntegrationRecord,
        conversation_key: &str,
        message: &str,
    ) -> Result<PreparedChat, ChannelError> {
        self.chat.check_message(message)?;
        let owner = &integration.user_id;
        let Some(agent_id) = integration.agent_id.as_ref() else {
            return Err(ChannelError::NotLinked);
        };
        let Some(agent) = self.agents.find(owner, agent_id).await? else {
            return Err(ChannelError::NotLinked);
        };
        let known = self
            .integrations
            .channel_thread(&integration.id, conversation_key)
            .await?;
        let thread = match known {
            Some(id) => self.threads.thread(owner, &agent.id, &id).await?,
            None => None,
        };
        let continued = thread.is_some();
        let choice = thread.map_or(ThreadChoice::New, ThreadChoice::Known);
        let mut prepared = self
            .chat
            .prepare_with(
                &agent,
                owner,
                choice,
                message,
                &[],
                &TurnOptions {
                    channel: Channel::of_provider(integration.provider_code).unwrap_or_default(),
                    // A visitor's message sent while the last reply streams waits for it.
                    queue: true,
                    ..TurnOptions::default()
                },
            )
            .await?;
        if !continued {
            // Linked with the turn, in its transaction: the new thread exists only then.
            prepared.channel = Some(ChannelLink {
                integration_id: integration.id.clone(),
                conversation_key: conversation_key.to_string(),
                at: self.clock.now(),
            });
        }
        Ok(prepared)
    }

    /// Answers `message` of `conversation_key` through the linked agent, stored like a chat reply.
    /// Errors: [`ChannelError`].
    pub async fn answer(
        &self,
        integration: &IntegrationRecord,
        conversation_key: &str,
        message: &str,
    ) -> Result<String, ChannelError> {
        let mut prepared = self
            .prepare_turn(integration, conversation_key, message)
            .await?;
        let text = self.chat.complete(&mut prepared).await?.text;
        Ok(text)
    }

    /// The integration `id` if of `provider`; `None` if unknown or another provider's.
    /// Errors: the store's.
    pub async fn integration(
        &self,
        provider: ProviderCode,
        id: &IntegrationId,
    ) -> Result<Option<IntegrationRecord>, StoreError> {
        Ok(self
            .integrations
            .integration_by_id(id)
            .await?
            .filter(|record| record.provider_code == provider))
    }

    /// The website integration with `public_id`; `None` if unknown or another provider's.
    /// Errors: the store's.
    pub async fn widget(
        &self,
        public_id: &PublicId,
    ) -> Result<Option<IntegrationRecord>, StoreError> {
        Ok(self
            .integrations
            .integration_by_public_id(public_id)
            .await?
            .filter(|record| record.provider_code == ProviderCode::Website))
    }

    /// Ends `conversation_key` of `integration_id`: its next message starts a new thread (the old
    /// stays). Errors: the store's.
    pub async fn end_conversation(
        &self,
        integration_id: &IntegrationId,
        conversation_key: &str,
    ) -> Result<(), StoreError> {
        self.integrations
            .end_channel_thread(integration_id, conversation_key)
            .await?;
        Ok(())
    }

    /// The conversation `conversation_key` as its visitor sees it: the last
    /// [`crate::chat::HISTORY_LIMIT`] messages, oldest first, without failed or cancelled replies,
    /// and the feedback on them; empty without a thread. Errors: the store's.
    pub async fn conversation(
        &self,
        integration_id: &IntegrationId,
        conversation_key: &str,
    ) -> Result<(Vec<MessageRecord>, Vec<FeedbackRecord>), StoreError> {
        let Some(thread) = self
            .integrations
            .channel_thread(integration_id, conversation_key)
            .await?
        else {
            return Ok(Default::default());
        };
        let mut messages = self
            .threads
            .recent_messages(&thread, crate::chat::HISTORY_LIMIT)
            .await?;
        messages.retain(|m| m.role == Role::User || m.status == ReplyStatus::Complete);
        let feedback = self.threads.thread_feedback(&thread).await?;
        Ok((messages, feedback))
    }

    /// Rates reply `message_id` of the visitor's conversation `conversation_key` (`rating`
    /// `None` clears it), as [`ChatService::rate`] and [`ChatService::clear_rating`] do for
    /// the owner. Errors: [`ChatError::MessageNotFound`] when the reply is not in that
    /// conversation (or it has none), the others of those two.
    pub async fn rate(
        &self,
        integration: &IntegrationRecord,
        conversation_key: &str,
        message_id: &MessageId,
        rating: Option<(Rating, Option<&str>)>,
    ) -> Result<Option<FeedbackRecord>, ChatError> {
        let thread = self
            .integrations
            .channel_thread(&integration.id, conversation_key)
            .await?;
        let (Some(thread), Some(agent)) = (thread, integration.agent_id.as_ref()) else {
            return Err(ChatError::MessageNotFound);
        };
        let owner = &integration.user_id;
        match rating {
            Some((rating, comment)) => self
                .chat
                .rate(owner, agent, &thread, message_id, rating, comment)
                .await
                .map(Some),
            None => self
                .chat
                .clear_rating(owner, agent, &thread, message_id)
                .await
                .map(|()| None),
        }
    }

    /// Records an inbound event id; `false` if seen before (a retry: do not answer again). A store
    /// failure counts as first seen.
    pub async fn first_delivery(&self, integration_id: &IntegrationId, event_id: &str) -> bool {
        match self
            .integrations
            .first_channel_event(integration_id, event_id, self.clock.now())
            .await
        {
            Ok(first) => first,
            Err(e) => {
                tracing::warn!(error = %e, "recording an inbound channel event failed");
                true
            }
        }
    }

    /// Sets up a stored integration's live channel and records `status`, `status_detail` and
    /// `inbound_secret_hash` for the caller to store (Telegram: `setWebhook`; failure is `error`).
    pub async fn connect(&self, integration: &mut IntegrationRecord) {
        if integration.provider_code != ProviderCode::Telegram {
            return;
        }
        let outcome = async {
            let token = self.credential(integration, "botToken")?;
            let url = crate::views::inbound_url(&self.public_url, integration).unwrap_or_default();
            let secret = telegram::new_secret_token();
            self.telegram_bot(&token)
                .set_webhook(&url, &secret)
                .await
                .map_err(|e| format!("Telegram did not accept the webhook: {e}"))?;
            Ok::<_, String>(telegram::secret_hash(&secret))
        }
        .await;
        match outcome {
            Ok(hash) => {
                integration.status = IntegrationStatus::Active;
                integration.status_detail = None;
                integration.inbound_secret_hash = Some(hash);
            }
            Err(detail) => {
                tracing::warn!(integration.id = %integration.id, detail = %detail, "live channel not connected");
                integration.status = IntegrationStatus::Error;
                integration.status_detail = Some(detail);
                integration.inbound_secret_hash = None;
            }
        }
    }

    /// Tears down a deleted integration's channel (Telegram's `deleteWebhook`); failures logged.
    pub async fn disconnect(&self, integration: &IntegrationRecord) {
        if integration.provider_code != ProviderCode::Telegram
            || integration.inbound_secret_hash.is_none()
        {
            return;
        }
        let Ok(token) = self.credential(integration, "botToken") else {
            return;
        };
        if let Err(e) = self.telegram_bot(&token).delete_webhook().await {
            tracing::warn!(integration.id = %integration.id, error = %e, "deleteWebhook failed");
        }
    }
}

/// How long inbound event ids are remembered (Slack retries for about an hour, Telegram a day).
pub const EVENT_MEMORY: Duration = Duration::from_secs(24 * 60 * 60);
