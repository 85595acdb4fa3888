//! Stored records as clients see them (the `app::api` wire types) and the API's one timestamp
//! format ([`iso`]). Answers and webhook events both use these views, so they cannot disagree
//! on a field.

use app::api::{
    Agent, ChatMessage, Conversation, Feedback, FeedbackCounts, InboxConversation, Integration,
    IntegrationConnection, Job, JobProgress, KnowledgeDocument, Refresh, RefreshCounts, Source,
    TokensUsed, Webhook, WebhookDelivery,
};
use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::{
    domain::ProviderCode,
    ids::PublicId,
    store::{
        documents::{DocumentRecord, DocumentSource},
        integrations::IntegrationRecord,
        jobs::JobRecord,
        webhooks::{DeliveryRecord, WebhookRecord},
        AgentRecord, FeedbackRecord, InboxThread, MessageRecord, ThreadRecord,
    },
};

/// An ISO 8601 UTC timestamp with second precision, e.g. `2026-11-20T10:00:00Z`
/// (docs/api.md § Conventions).
pub fn iso(t: DateTime<Utc>) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A stored agent as `GET /api/agents/{agentId}` shows it.
pub fn agent_view(a: &AgentRecord) -> Agent {
    Agent {
        id: a.id.clone().into(),
        name: a.name.clone(),
        description: a.description.clone(),
        system_prompt: a.system_prompt.clone(),
        model: a.model.clone(),
        status: a.status.as_str().into(),
        created_at: iso(a.created_at),
        updated_at: iso(a.updated_at),
    }
}

/// A stored knowledge document as `GET /api/agents/{agentId}/knowledge/{documentId}`
/// shows it.
pub fn document_view(d: &DocumentRecord) -> KnowledgeDocument {
    KnowledgeDocument {
        document_id: d.id.clone().into(),
        kind: d.kind.as_str().into(),
        name: d.name.clone(),
        url: d.url.clone(),
        status: d.status.as_str().into(),
        error: d.error.clone(),
        pages: d.pages,
        chunks: d.chunks,
        bytes: d.bytes,
        created_at: iso(d.created_at),
        updated_at: iso(d.updated_at),
        indexed_at: d.indexed_at.map(iso),
        refresh: (d.kind == DocumentSource::Url).then(|| Refresh::from_hours(d.refresh_hours)),
        next_refresh_at: d.next_refresh_at.map(iso),
        last_refreshed_at: d.last_refreshed_at.map(iso),
        refresh_counts: d.refresh_counts.map(|c| RefreshCounts {
            added: c.added,
            changed: c.changed,
            removed: c.removed,
            unchanged: c.unchanged,
        }),
    }
}

/// A stored knowledge job as `GET /api/jobs/{jobId}` shows it.
pub fn job_view(j: &JobRecord) -> Job {
    Job {
        id: j.id.clone().into(),
        kind: j.kind.as_str().into(),
        status: j.status.as_str().into(),
        progress: JobProgress {
            done: j.progress_done,
            total: j.progress_total,
        },
        document_id: j.document_id.clone().into(),
        error: j.error.clone(),
        created_at: iso(j.created_at),
        started_at: j.started_at.map(iso),
        finished_at: j.finished_at.map(iso),
    }
}

/// A stored thread as the conversation list shows it.
pub fn conversation_view(t: &ThreadRecord) -> Conversation {
    Conversation {
        thread_id: t.id.clone().into(),
        title: t.title.clone(),
        message_count: t.message_count as u32,
        created_at: iso(t.created_at),
        updated_at: iso(t.updated_at),
    }
}

/// A thread as the account's inbox lists it.
pub fn inbox_view(t: &InboxThread) -> InboxConversation {
    let thread = &t.thread;
    InboxConversation {
        thread_id: thread.id.clone().into(),
        agent_id: thread.agent_id.clone().into(),
        agent_name: t.agent_name.clone(),
        channel: thread.channel.as_str().to_string(),
        title: thread.title.clone(),
        message_count: thread.message_count.max(0) as u32,
        feedback: FeedbackCounts {
            up: thread.feedback_up.max(0) as u32,
            down: thread.feedback_down.max(0) as u32,
        },
        created_at: iso(thread.created_at),
        updated_at: iso(thread.updated_at),
    }
}

/// A stored message as a thread's message list shows it: token usage only when both
/// counts are known, sources and tool calls parsed from their stored JSON (none when it
/// does not parse).
pub fn message_view(m: &MessageRecord) -> ChatMessage {
    let tokens_used = match (m.prompt_tokens, m.completion_tokens) {
        (Some(p), Some(c)) => Some(TokensUsed {
            prompt: p as u32,
            completion: c as u32,
            total: (p + c) as u32,
        }),
        _ => None,
    };
    ChatMessage {
        id: m.id.clone().into(),
        role: m.role.as_str().into(),
        content: m.content.clone(),
        model: m.model.clone(),
        tokens_used,
        sources: m
            .sources
            .as_deref()
            .and_then(|s| serde_json::from_str::<Vec<Source>>(s).ok()),
        status: m.status.as_str().into(),
        tool_calls: m
            .tool_calls
            .as_deref()
            .and_then(|s| serde_json::from_str::<Vec<app::api::ToolCallView>>(s).ok()),
        pending_approvals: None,
        feedback: None,
        created_at: iso(m.created_at),
    }
}

/// Feedback on a reply as the API shows it.
pub fn feedback_view(f: &FeedbackRecord) -> Feedback {
    Feedback {
        rating: f.rating.as_str().into(),
        comment: f.comment.clone(),
        created_at: iso(f.created_at),
    }
}

/// A stored webhook as `GET /api/integrations/webhooks` lists it (never its secret).
pub fn webhook_view(w: &WebhookRecord) -> Webhook {
    Webhook {
        id: w.id.clone().into(),
        url: w.url.clone(),
        events: w.events.iter().map(|e| e.as_str().to_string()).collect(),
        description: w.description.clone(),
        active: w.active,
        created_at: iso(w.created_at),
    }
}

/// A stored delivery as a webhook's delivery history lists it.
pub fn delivery_view(d: &DeliveryRecord) -> WebhookDelivery {
    WebhookDelivery {
        id: d.id.clone().into(),
        event: d.event.as_str().into(),
        status: d.status.as_str().into(),
        attempts: d.attempts,
        response_status: d.response_status,
        last_error: d.last_error.clone(),
        created_at: iso(d.created_at),
        next_attempt_at: d.next_attempt_at.map(iso),
    }
}

/// A stored integration as `GET /api/integrations/{id}` shows it: masked credential hints, and
/// the inbound URL, public id or embed code made from `public_url` (`PUBLIC_URL`).
pub fn integration_view(r: &IntegrationRecord, public_url: &str) -> Integration {
    let connection = match (inbound_url(public_url, r), &r.public_id) {
        (Some(url), _) => Some(IntegrationConnection {
            webhook_url: Some(url),
            public_id: None,
            embed_code: None,
        }),
        (None, Some(public_id)) => Some(IntegrationConnection {
            webhook_url: None,
            public_id: Some(public_id.clone().into()),
            embed_code: Some(embed_code(public_url, public_id)),
        }),
        (None, None) => None,
    };
    Integration {
        id: r.id.clone().into(),
        provider_code: r.provider_code.as_str().into(),
        name: r.name.clone(),
        agent_id: r.agent_id.clone().map(Into::into),
        config: serde_json::from_str(&r.config)
            .unwrap_or_else(|_| Value::Object(Default::default())),
        credentials: serde_json::from_str(&r.credential_hints)
            .unwrap_or_else(|_| Value::Object(Default::default())),
        status: r.status.as_str().into(),
        status_detail: r.status_detail.clone(),
        connection,
        created_at: iso(r.created_at),
        updated_at: iso(r.updated_at),
    }
}

/// The URL a provider sends inbound requests to, under `PUBLIC_URL`; `None` when it has none.
pub fn inbound_url(public_url: &str, integration: &IntegrationRecord) -> Option<String> {
    let base = public_url.trim_end_matches('/');
    match integration.provider_code {
        ProviderCode::Telegram => Some(format!("{base}/api/channels/telegram/{}", integration.id)),
        ProviderCode::Slack => Some(format!("{base}/api/channels/slack/{}", integration.id)),
        ProviderCode::Discord
        | ProviderCode::Whatsapp
        | ProviderCode::Zapier
        | ProviderCode::Website
        | ProviderCode::Http
        | ProviderCode::Mcp => None,
    }
}

/// The HTML that embeds the widget of `public_id` served from `public_url`.
pub fn embed_code(public_url: &str, public_id: &PublicId) -> String {
    format!(
        "<script src=\"{}/widget.js\" data-agentchat-id=\"{public_id}\" async></script>",
        public_url.trim_end_matches('/')
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_utc_with_second_precision() {
        let t = DateTime::parse_from_rfc3339("2026-11-20T12:00:00.750+02:00")
            .unwrap()
            .with_timezone(&Utc);
        assert_eq!(iso(t), "2026-11-20T10:00:00Z");
    }
}
