//! The public API of the website widget under `/api/widget/{publicId}`: no account, one
//! conversation per visitor.

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use utoipa::ToSchema;

/// `GET /api/widget/{publicId}` answer: what the website widget shows before a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WidgetInfo {
    /// The integration's name (the widget's title).
    pub name: String,
    /// The config's welcome message, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub welcome_message: Option<String>,
    /// Whether an agent is linked (the widget can answer).
    pub available: bool,
}

/// `POST /api/widget/{publicId}/chat` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WidgetChatRequest {
    /// The visitor's id, 16 to 64 characters of `A-Z a-z 0-9 _ -`, kept by the widget in the
    /// page's localStorage; one conversation per visitor.
    pub visitor_id: String,
    pub message: String,
}

/// One message of a visitor's conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WidgetMessage {
    /// The message's id; a reply's is what `PUT .../messages/{messageId}/feedback` rates.
    pub id: String,
    /// `user` or `assistant`.
    pub role: String,
    pub content: String,
    /// The visitor's rating of this reply; absent when none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub feedback: Option<super::Feedback>,
    pub created_at: String,
}

/// `PUT /api/widget/{publicId}/messages/{messageId}/feedback` body: a visitor's rating of a
/// reply of its own conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WidgetFeedbackRequest {
    /// The visitor's id, as in `POST /api/widget/{publicId}/chat`.
    pub visitor_id: String,
    /// `up` or `down`.
    pub rating: String,
    /// At most 2,000 characters; trimmed, and an empty one is none.
    #[serde(default)]
    pub comment: Option<String>,
}

/// `GET /api/widget/{publicId}/messages` answer: the visitor's conversation, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct WidgetMessagesResponse {
    pub messages: Vec<WidgetMessage>,
}
