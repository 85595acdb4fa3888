//! What chat turns leave behind, as their owner reads it: paged conversations and messages
//! (docs/api.md § Conventions), deletion, and daily usage (docs/api.md § Usage).

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use chrono::{DateTime, Datelike, Duration, NaiveDate, Utc};

use super::{ChatError, ChatService};
use crate::{
    domain::Role,
    ids::{AgentId, ApiKeyId, MessageId, ThreadId, UserId},
    store::{
        tools::ApprovalRecord, Cursor, FeedbackRecord, InboxFilter, InboxThread, MessageRecord,
        ThreadRecord, UsageDay,
    },
};

/// Longest inbox search text (`q`), in characters.
pub const MAX_SEARCH_CHARS: usize = 200;

/// The words of an inbox search text: its runs of letters and digits, lower-cased; at most
/// [`MAX_SEARCH_CHARS`] characters are read. Both stores split stored text the same way
/// (SQLite's `unicode61` tokenizer, PostgreSQL's `simple` configuration).
pub fn search_words(text: &str) -> Result<Vec<String>, ChatError> {
    if text.chars().count() > MAX_SEARCH_CHARS {
        return Err(ChatError::Invalid(format!(
            "q must be at most {MAX_SEARCH_CHARS} characters"
        )));
    }
    Ok(text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect())
}

/// The UTC day `text` names (`YYYY-MM-DD`), `name` being its parameter.
/// Errors: [`ChatError::Invalid`] naming the parameter.
pub fn parse_day(name: &str, text: &str) -> Result<NaiveDate, ChatError> {
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .map_err(|_| ChatError::Invalid(format!("{name} must be a date, YYYY-MM-DD (UTC)")))
}

/// The times from the start of day `from` to the end of day `to` (UTC, both inclusive), as
/// a half-open range; either end may be open.
/// Errors: [`ChatError::Invalid`] for a malformed date or `from` after `to`.
pub fn day_range(
    from: Option<&str>,
    to: Option<&str>,
) -> Result<crate::store::chat::TimeRange, ChatError> {
    let from = from.map(|t| parse_day("from", t)).transpose()?;
    let to = to.map(|t| parse_day("to", t)).transpose()?;
    if let (Some(f), Some(t)) = (from, to) {
        if f > t {
            return Err(ChatError::Invalid("from must not be after to".into()));
        }
    }
    let start = |d: NaiveDate| d.and_time(chrono::NaiveTime::MIN).and_utc();
    Ok((from.map(start), to.and_then(|d| d.succ_opt()).map(start)))
}

/// Default page size of lists (docs/api.md § Conventions).
pub const DEFAULT_PAGE: u32 = 50;
/// Largest page size.
pub const MAX_PAGE: u32 = 200;

/// Days the usage's per-day list covers by default.
pub const DEFAULT_DAYS: u32 = 30;
/// Most days the usage's per-day list may cover.
pub const MAX_DAYS: u32 = 366;

/// A page the caller asks for: size (1..=[`MAX_PAGE`], default [`DEFAULT_PAGE`]) and cursor.
#[derive(Debug, Clone, Default)]
pub struct PageRequest {
    pub limit: Option<u32>,
    /// [`Page::next_cursor`] of the previous page; `None` for the first page.
    pub cursor: Option<String>,
}

impl PageRequest {
    /// The page size. Errors: [`ChatError::Invalid`] outside 1..=[`MAX_PAGE`].
    fn limit(&self) -> Result<u32, ChatError> {
        match self.limit {
            None => Ok(DEFAULT_PAGE),
            Some(n) if (1..=MAX_PAGE).contains(&n) => Ok(n),
            Some(_) => Err(ChatError::Invalid(format!(
                "limit must be between 1 and {MAX_PAGE}"
            ))),
        }
    }

    /// Where the page starts: base64url of `{millis}:{id}`.
    /// Errors: [`ChatError::Invalid`] if not one this service gave out.
    fn cursor(&self) -> Result<Option<Cursor>, ChatError> {
        let Some(raw) = &self.cursor else {
            return Ok(None);
        };
        let invalid = || {
            ChatError::Invalid("cursor is not valid; pass nextCursor from the previous page".into())
        };
        let text = String::from_utf8(URL_SAFE_NO_PAD.decode(raw).map_err(|_| invalid())?)
            .map_err(|_| invalid())?;
        let (at, id) = text.split_once(':').ok_or_else(invalid)?;
        Ok(Some(Cursor {
            at: at.parse().map_err(|_| invalid())?,
            id: id.to_string(),
        }))
    }
}

/// The first `limit` of `rows` (read with one extra), and the cursor after them if more follow.
fn paged<T>(mut rows: Vec<T>, limit: u32, key: impl Fn(&T) -> (DateTime<Utc>, &str)) -> Page<T> {
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    let next_cursor = more
        .then(|| rows.last().map(&key))
        .flatten()
        .map(|(at, id)| URL_SAFE_NO_PAD.encode(format!("{}:{id}", at.timestamp_millis())));
    Page {
        items: rows,
        next_cursor,
    }
}

/// One page of a list.
#[derive(Debug, Clone)]
pub struct Page<T> {
    pub items: Vec<T>,
    /// Where the next page starts; `None` on the last page.
    pub next_cursor: Option<String>,
}

/// A page of a conversation's messages, oldest first.
#[derive(Debug, Clone)]
pub struct MessagePage {
    pub page: Page<MessageRecord>,
    /// On the last page, the latest reply's calls still awaiting approval, with its id.
    pub pending: Option<(MessageId, Vec<ApprovalRecord>)>,
    /// The feedback on the page's replies.
    pub feedback: Vec<FeedbackRecord>,
}

/// The account's usage over a window of UTC days ([`ChatService::usage`]).
#[derive(Debug, Clone)]
pub struct UsageWindow {
    /// Today (UTC), the last day.
    pub today: NaiveDate,
    /// The per-day list's first day.
    pub first_day: NaiveDate,
    /// The first day of this calendar month.
    pub month_start: NaiveDate,
    /// Days with any use from the earlier of `first_day` and `month_start`, oldest first.
    pub used: Vec<UsageDay>,
}

impl ChatService {
    /// The thread of `user_id`'s agent. Errors: [`ChatError::ThreadNotFound`], the store's.
    pub async fn thread(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        thread_id: &ThreadId,
    ) -> Result<ThreadRecord, ChatError> {
        self.store
            .thread(user_id, agent_id, thread_id)
            .await?
            .ok_or(ChatError::ThreadNotFound)
    }

    /// A page of the agent's threads, latest activity first (ownership checked by the caller).
    /// Errors: [`ChatError::Invalid`] (limit, then cursor), the store's.
    pub async fn threads(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        page: &PageRequest,
    ) -> Result<Page<ThreadRecord>, ChatError> {
        let limit = page.limit()?;
        let threads = self
            .store
            .list_threads(user_id, agent_id, limit + 1, page.cursor()?.as_ref())
            .await?;
        Ok(paged(threads, limit, |t| (t.updated_at, t.id.as_str())))
    }

    /// A page of the user's conversations of all agents that pass `filter`, latest activity
    /// first. Errors: [`ChatError::Invalid`] (limit, then cursor), the store's.
    pub async fn inbox(
        &self,
        user_id: &UserId,
        filter: &InboxFilter,
        page: &PageRequest,
    ) -> Result<Page<InboxThread>, ChatError> {
        let limit = page.limit()?;
        let threads = self
            .store
            .inbox(user_id, filter, limit + 1, page.cursor()?.as_ref())
            .await?;
        Ok(paged(threads, limit, |t| {
            (t.thread.updated_at, t.thread.id.as_str())
        }))
    }

    /// A page of a thread's messages, oldest first, with their replies' feedback; the last
    /// carries pending approvals.
    /// Errors: [`ChatError::ThreadNotFound`], then [`ChatError::Invalid`], the store's.
    pub async fn messages(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        thread_id: &ThreadId,
        page: &PageRequest,
    ) -> Result<MessagePage, ChatError> {
        let thread = self.thread(user_id, agent_id, thread_id).await?;
        let limit = page.limit()?;
        let rows = self
            .store
            .list_messages(&thread.id, limit + 1, page.cursor()?.as_ref())
            .await?;
        let page = paged(rows, limit, |m| (m.created_at, m.id.as_str()));
        let mut pending = None;
        if page.next_cursor.is_none() {
            if let Some(row) = page.items.iter().rev().find(|m| m.role == Role::Assistant) {
                let now = self.clock.now();
                let waiting: Vec<ApprovalRecord> = self
                    .approvals
                    .pending_approvals(&row.id)
                    .await?
                    .into_iter()
                    .filter(|a| a.expires_at > now)
                    .collect();
                if !waiting.is_empty() {
                    pending = Some((row.id.clone(), waiting));
                }
            }
        }
        let mut feedback = Vec::new();
        if page.items.iter().any(|m| m.role == Role::Assistant) {
            let ids: std::collections::HashSet<&MessageId> =
                page.items.iter().map(|m| &m.id).collect();
            feedback = self.store.thread_feedback(&thread.id).await?;
            feedback.retain(|f| ids.contains(&f.message_id));
        }
        Ok(MessagePage {
            page,
            pending,
            feedback,
        })
    }

    /// Deletes the user's thread with its messages (counted usage stays).
    /// Errors: [`ChatError::ThreadNotFound`], the store's.
    pub async fn delete_thread(
        &self,
        user_id: &UserId,
        agent_id: &AgentId,
        thread_id: &ThreadId,
    ) -> Result<(), ChatError> {
        if !self
            .store
            .delete_thread(user_id, agent_id, thread_id)
            .await?
        {
            return Err(ChatError::ThreadNotFound);
        }
        Ok(())
    }

    /// Tokens of the replies sent with API key `key_id` in `month` (`YYYY-MM`).
    /// Errors: the store's.
    pub async fn key_usage(&self, key_id: &ApiKeyId, month: &str) -> Result<u64, ChatError> {
        Ok(self.store.key_usage(key_id, month).await?)
    }

    /// The tokens of each of the user's API keys with any in `month` (`YYYY-MM`).
    /// Errors: the store's.
    pub async fn key_usages(
        &self,
        user_id: &UserId,
        month: &str,
    ) -> Result<Vec<(ApiKeyId, u64)>, ChatError> {
        Ok(self.store.key_usages(user_id, month).await?)
    }

    /// The user's chat use this UTC month and on each of the last `days` (1..=[`MAX_DAYS`], default
    /// [`DEFAULT_DAYS`]); deletions do not lower it. Errors: [`ChatError::Invalid`], the store's.
    pub async fn usage(
        &self,
        user_id: &UserId,
        days: Option<u32>,
    ) -> Result<UsageWindow, ChatError> {
        let days = days.unwrap_or(DEFAULT_DAYS);
        if !(1..=MAX_DAYS).contains(&days) {
            return Err(ChatError::Invalid(format!(
                "days must be between 1 and {MAX_DAYS}"
            )));
        }
        let today = self.clock.now().date_naive();
        let first_day = today - Duration::days(i64::from(days) - 1);
        let month_start = today.with_day(1).unwrap_or(today);
        let used = self
            .store
            .usage(user_id, first_day.min(month_start))
            .await?;
        Ok(UsageWindow {
            today,
            first_day,
            month_start,
            used,
        })
    }
}
