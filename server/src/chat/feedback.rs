//! Feedback on replies: a thumbs-up or thumbs-down with an optional comment, one per reply,
//! the latest winning (docs/api.md § Feedback), and the `feedback.created` webhook event.

use serde_json::json;

use super::{ChatError, ChatService};
use crate::{
    domain::EventType,
    ids::{AgentId, MessageId, ThreadId, UserId},
    store::{FeedbackRecord, FeedbackWrite, Rating},
    views::iso,
};

/// Longest feedback comment, in characters.
pub const MAX_COMMENT_CHARS: usize = 2_000;

impl ChatService {
    /// Rates reply `message_id` of the user's thread with `rating` and `comment` (then
    /// trimmed; an empty one is none), replacing its earlier feedback; a change (not a repeat) sends
    /// `feedback.created`. Errors: [`ChatError::Invalid`] for a comment over
    /// [`MAX_COMMENT_CHARS`] or a message of the user's, [`ChatError::MessageNotFound`] (also
    /// for an unknown thread: the store reads the message through its thread), the store's.
    pub async fn rate(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        thread_id: &ThreadId,
        message_id: &MessageId,
        rating: Rating,
        comment: Option<&str>,
    ) -> Result<FeedbackRecord, ChatError> {
        if comment.is_some_and(|c| c.chars().count() > MAX_COMMENT_CHARS) {
            return Err(ChatError::Invalid(format!(
                "comment must be at most {MAX_COMMENT_CHARS} characters"
            )));
        }
        let comment = comment.map(str::trim).filter(|c| !c.is_empty());
        let feedback = FeedbackRecord {
            message_id: message_id.clone(),
            rating,
            comment: comment.map(str::to_string),
            created_at: self.clock.now(),
        };
        match self
            .store
            .set_feedback(user_id, agent_id, thread_id, &feedback)
            .await?
        {
            FeedbackWrite::NoMessage => Err(ChatError::MessageNotFound),
            FeedbackWrite::NotAReply => Err(ChatError::Invalid(
                "only the agent's replies can be rated, not the user's messages".into(),
            )),
            FeedbackWrite::Unchanged => Ok(self
                .store
                .thread_feedback(thread_id)
                .await?
                .into_iter()
                .find(|f| f.message_id == *message_id)
                .unwrap_or(feedback)),
            FeedbackWrite::Stored => {
                if !self.events.is_quiet(user_id, EventType::FeedbackCreated) {
                    let data = json!({
                        "agentId": agent_id,
                        "conversationId": thread_id,
                        "messageId": message_id,
                        "rating": feedback.rating.as_str(),
                        "comment": feedback.comment,
                        "createdAt": iso(feedback.created_at),
                    });
                    let (events, user_id) = (self.events.clone(), user_id.clone());
                    tokio::spawn(async move {
                        events
                            .emit(&user_id, EventType::FeedbackCreated, data)
                            .await
                    });
                }
                Ok(feedback)
            }
        }
    }

    /// Removes the feedback on message `message_id` of the user's thread (none is no error).
    /// Errors: [`ChatError::MessageNotFound`] (also for an unknown thread), the store's.
    pub async fn clear_rating(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        thread_id: &ThreadId,
        message_id: &MessageId,
    ) -> Result<(), ChatError> {
        if self
            .store
            .clear_feedback(user_id, agent_id, thread_id, message_id)
            .await?
        {
            Ok(())
        } else {
            Err(ChatError::MessageNotFound)
        }
    }
}
