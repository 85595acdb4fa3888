//! `/dashboard/conversations`: the account's conversation inbox — every conversation of
//! every agent and channel, filtered and paged, and the transcript of the one chosen
//! (`GET /api/conversations`, `GET /api/agents` for the agent filter,
//! `GET /api/agents/{agentId}/conversations/{threadId}/messages`), and with an agent chosen
//! the download of its conversations (`GET /api/agents/{agentId}/conversations/export`).
//!
//! Everything the page shows is in its URL, so a reload or a shared link shows the same:
//! the filters use the API's own parameter names (`?agentId=&channel=&feedback=&from=&to=&q=`,
//! empty ones left out), and the open conversation adds `thread=<threadId>&agent=<agentId>`.
//! The transcript is shown on this page rather than on a child route: the list stays
//! mounted (hidden) beside it, so "Back to the list" returns to the same filters and the
//! pages already loaded with "Load more" without asking the server again.
//!
//! Selects and dates apply when they change, the search when it is submitted; each change
//! is a navigation (a history entry), so the browser's back button undoes it.

use super::{
    chat::{call_status, THUMB_PATH},
    dashboard::short_time,
};
use crate::{
    api::{
        Agent, AgentsResponse, ChatMessage, ErrorBody, FeedbackCounts, InboxConversation,
        InboxResponse, MessagesResponse, Source, TokensUsed, ToolCallView,
    },
    client::{self, ApiError},
    components::{
        agent_options, agents_load_error, fetch_signed_in, input_value, load_error_view,
        loading_view, non_empty, use_hydrated, Fetched,
    },
    markdown,
};
use leptos::{html, prelude::*, task::spawn_local};
use leptos_meta::Title;
use leptos_router::{
    hooks::{use_navigate, use_query_map},
    NavigateOptions,
};
use wasm_bindgen::JsCast;

/// The page's path, without a query.
pub const INBOX_PATH: &str = "/dashboard/conversations";

/// Conversations asked for per page (the API allows 1–200).
pub const PAGE_SIZE: u32 = 50;

/// Longest search the API accepts (`q`), in characters.
pub const SEARCH_MAX: usize = 200;

/// Messages asked for per request of a transcript (the API's largest page).
const TRANSCRIPT_PAGE: u32 = 200;

/// The channels a conversation can start in: the API's name and the words shown.
pub const CHANNELS: [(&str, &str); 7] = [
    ("api", "API"),
    ("dashboard", "Dashboard"),
    ("widget", "Website widget"),
    ("telegram", "Telegram"),
    ("slack", "Slack"),
    ("openai", "OpenAI-compatible API"),
    ("mcp", "MCP"),
];

/// The choices of the feedback filter: the API's `feedback` value (empty: no filter) and
/// the words shown.
pub const FEEDBACK_CHOICES: [(&str, &str); 4] = [
    ("", "Any or none"),
    ("up", "Rated helpful"),
    ("down", "Rated not helpful"),
    ("any", "Any rating"),
];

/// The words for channel `name`; an unknown name is shown as it is.
pub fn channel_label(name: &str) -> &str {
    CHANNELS
        .iter()
        .find(|(value, _)| *value == name)
        .map_or(name, |(_, label)| label)
}

/// Who wrote a message of role `role` (`user` or `assistant`).
pub fn role_label(role: &str) -> &str {
    match role {
        "user" => "User",
        "assistant" => "Agent",
        other => other,
    }
}

/// Whether `text` looks like a day `YYYY-MM-DD` (the server checks the calendar).
fn is_day(text: &str) -> bool {
    text.len() == 10
        && text.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        })
}

/// The inbox's filters, as the page's URL and the API's query hold them. Empty fields are
/// no filter; [`InboxFilters::check`] says whether the API would accept the others.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InboxFilters {
    /// `agentId`: one agent's conversations.
    pub agent_id: String,
    /// `channel`: one of [`CHANNELS`].
    pub channel: String,
    /// `feedback`: `up`, `down` or `any`.
    pub feedback: String,
    /// `from`: first day of last activity, `YYYY-MM-DD` (UTC).
    pub from: String,
    /// `to`: last day of last activity, `YYYY-MM-DD` (UTC).
    pub to: String,
    /// `q`: words one message holds.
    pub q: String,
}

impl InboxFilters {
    /// The filters named by a query, read with `get` (e.g. from `use_query_map`); values
    /// are trimmed.
    pub fn from_query(get: impl Fn(&str) -> Option<String>) -> Self {
        let read = |name: &str| get(name).map(|v| v.trim().to_owned()).unwrap_or_default();
        Self {
            agent_id: read("agentId"),
            channel: read("channel"),
            feedback: read("feedback"),
            from: read("from"),
            to: read("to"),
            q: read("q"),
        }
    }

    /// The parameters of the filters, in the order of the URL.
    fn pairs(&self) -> [(&'static str, &str); 6] {
        [
            ("agentId", &self.agent_id),
            ("channel", &self.channel),
            ("feedback", &self.feedback),
            ("from", &self.from),
            ("to", &self.to),
            ("q", &self.q),
        ]
    }

    /// Whether any filter is set.
    pub fn is_filtered(&self) -> bool {
        self.pairs().iter().any(|(_, value)| !value.is_empty())
    }

    /// The API request of a page: the first without `cursor`, then the previous page's
    /// `nextCursor` (the same filters go with it).
    pub fn api_path(&self, cursor: Option<&str>) -> String {
        let limit = PAGE_SIZE.to_string();
        let mut pairs = vec![("limit", limit.as_str())];
        pairs.extend(self.pairs());
        pairs.push(("cursor", cursor.unwrap_or_default()));
        format!("/api/conversations{}", crate::query::query_string(&pairs))
    }

    /// The page's URL showing the list with these filters.
    pub fn list_href(&self) -> String {
        format!("{INBOX_PATH}{}", crate::query::query_string(&self.pairs()))
    }

    /// The page's URL showing conversation `thread_id` of agent `agent_id`, keeping these
    /// filters for the way back.
    pub fn conversation_href(&self, agent_id: &str, thread_id: &str) -> String {
        let mut pairs = self.pairs().to_vec();
        pairs.extend([("thread", thread_id), ("agent", agent_id)]);
        format!("{INBOX_PATH}{}", crate::query::query_string(&pairs))
    }

    /// The download of the chosen agent's conversations as `format` (`jsonl` or `csv`) over
    /// the chosen days; `None` without an agent, as exports are per agent. The channel,
    /// feedback and search filters do not apply to exports (docs/api.md § Export).
    pub fn export_href(&self, format: &str) -> Option<String> {
        if self.agent_id.is_empty() {
            return None;
        }
        Some(format!(
            "/api/agents/{}/conversations/export{}",
            crate::query::encode_component(&self.agent_id),
            crate::query::query_string(&[
                ("format", format),
                ("from", &self.from),
                ("to", &self.to)
            ]),
        ))
    }

    /// Checks the filters as the server would (docs/api.md § Conversation inbox).
    ///
    /// # Errors
    /// The first rule broken, in words.
    pub fn check(&self) -> Result<(), String> {
        if !self.channel.is_empty() && !CHANNELS.iter().any(|(v, _)| *v == self.channel) {
            return Err(format!("There is no channel “{}”.", self.channel));
        }
        if !matches!(self.feedback.as_str(), "" | "up" | "down" | "any") {
            return Err(format!("There is no feedback filter “{}”.", self.feedback));
        }
        for (day, what) in [(&self.from, "The first day"), (&self.to, "The last day")] {
            if !day.is_empty() && !is_day(day) {
                return Err(format!("{what} must be a date (YYYY-MM-DD)."));
            }
        }
        // Days of one format compare as text.
        if !self.from.is_empty() && !self.to.is_empty() && self.from > self.to {
            return Err("The first day must not be after the last day.".into());
        }
        if self.q.chars().count() > SEARCH_MAX {
            return Err(format!(
                "The search can have at most {SEARCH_MAX} characters."
            ));
        }
        Ok(())
    }
}

/// Adds a page of conversations to `rows`, leaving out those already there (a conversation
/// that moved while paging).
pub fn append_page(rows: &mut Vec<InboxConversation>, page: Vec<InboxConversation>) {
    for conversation in page {
        let known = rows
            .iter()
            .any(|c| c.thread_id == conversation.thread_id && c.agent_id == conversation.agent_id);
        if !known {
            rows.push(conversation);
        }
    }
}

/// A reply's token usage and model in words: "120 tokens (100 prompt, 20 reply) · gpt-4o".
pub fn usage_text(usage: Option<TokensUsed>, model: Option<&str>) -> Option<String> {
    let model = model.filter(|m| !m.is_empty());
    match (usage, model) {
        (Some(u), model) => Some(format!(
            "{} tokens ({} prompt, {} reply){}",
            u.total,
            u.prompt,
            u.completion,
            model.map(|m| format!(" · {m}")).unwrap_or_default(),
        )),
        (None, Some(model)) => Some(model.to_owned()),
        (None, None) => None,
    }
}

/// A conversation's title as the server makes it: the first 80 characters of its first
/// message.
pub fn title_of(messages: &[ChatMessage]) -> Option<String> {
    messages
        .first()
        .map(|m| m.content.trim().chars().take(80).collect::<String>())
        .filter(|title| !title.is_empty())
}

/// A refusal of the filters before any request, shaped as the server's 400.
fn refused(message: String) -> ApiError {
    ApiError {
        status: 400,
        body: ErrorBody {
            error: "Bad Request".to_owned(),
            message,
        },
    }
}

/// Every message of a conversation, oldest first, following `nextCursor` to the end.
async fn whole_transcript(agent_id: &str, thread_id: &str) -> Result<Vec<ChatMessage>, ApiError> {
    let base = format!(
        "/api/agents/{}/conversations/{}/messages?limit={TRANSCRIPT_PAGE}",
        crate::query::encode_component(agent_id),
        crate::query::encode_component(thread_id),
    );
    let mut page = client::get_json_signed_in::<MessagesResponse>(&base).await?;
    let mut messages = std::mem::take(&mut page.messages);
    while let Some(cursor) = page.next_cursor.take() {
        page = client::get_json_signed_in(&format!(
            "{base}&cursor={}",
            crate::query::encode_component(&cursor)
        ))
        .await?;
        messages.append(&mut page.messages);
    }
    Ok(messages)
}

/// The inbox: the filter bar, the list of conversations with "Load more", and the
/// transcript of the conversation the URL names (see the module documentation).
#[component]
pub fn ConversationsPage() -> impl IntoView {
    let navigate = use_navigate();
    let query = use_query_map();
    let filters = Memo::new(move |_| {
        let query = query.read();
        InboxFilters::from_query(|name| query.get(name))
    });
    // The conversation shown: (agent id, thread id).
    let open = Memo::new(move |_| {
        let query = query.read();
        match (query.get("agent"), query.get("thread")) {
            (Some(agent), Some(thread)) if !agent.is_empty() && !thread.is_empty() => {
                Some((agent, thread))
            }
            _ => None,
        }
    });
    let agents = fetch_signed_in(|| "/api/agents".to_owned(), |a: AgentsResponse| a.agents);

    // The first page of the filters; filters the server would refuse are explained
    // without asking it.
    let list: Fetched<InboxResponse> = LocalResource::new(move || {
        let current = filters.get();
        async move {
            current.check().map_err(refused)?;
            client::get_json_signed_in::<InboxResponse>(&current.api_path(None)).await
        }
    });
    // The pages after the first that "Load more" added, and the cursor after the last of
    // them; `None` until it was used for the current filters.
    let more = RwSignal::new(None::<(Vec<InboxConversation>, Option<String>)>);
    let load_more = Action::new_local(move |(asked, cursor): &(InboxFilters, String)| {
        let asked = asked.clone();
        let path = asked.api_path(Some(cursor));
        async move {
            let page = client::get_json_signed_in::<InboxResponse>(&path).await?;
            // A page of filters no longer shown is dropped.
            if filters.get_untracked() == asked {
                more.update(|loaded| {
                    let (rows, next) = loaded.get_or_insert_with(Default::default);
                    append_page(rows, page.conversations);
                    *next = page.next_cursor;
                });
            }
            Ok::<(), ApiError>(())
        }
    });
    Effect::new(move || {
        filters.track();
        more.set(None);
        load_more.clear();
    });

    let go = {
        let navigate = navigate.clone();
        Callback::new(move |href: String| navigate(&href, NavigateOptions::default()))
    };
    let apply = Callback::new(move |next: InboxFilters| {
        if next != filters.get_untracked() {
            navigate(
                &next.list_href(),
                NavigateOptions {
                    scroll: false,
                    ..NavigateOptions::default()
                },
            );
        }
    });

    // The chosen conversation's row, when it is among those loaded.
    let known = Signal::derive(move || {
        let (agent_id, thread_id) = open.get()?;
        let find = |rows: &[InboxConversation]| {
            rows.iter()
                .find(|c| c.thread_id == thread_id && c.agent_id == agent_id)
                .cloned()
        };
        list.map(|loaded| loaded.as_ref().ok().and_then(|a| find(&a.conversations)))
            .flatten()
            .or_else(|| more.with(|m| m.as_ref().and_then(|(rows, _)| find(rows))))
    });
    let back = Signal::derive(move || filters.read().list_href());

    view! {
        <Title text="Conversations"/>
        <div class="stack">
            <section class="card" hidden=move || open.read().is_some() aria-labelledby="inbox-title">
                <div class="section-head">
                    <h1 id="inbox-title">"Conversations"</h1>
                </div>
                <p class="muted">
                    "The conversations of all your agents on every channel, most recent activity first. Times are UTC."
                </p>
                <FilterBar filters agents apply/>
                <ExportLinks filters/>
                <Transition fallback=|| loading_view("conversations")>
                {move || Suspend::new(async move { match list.await {
                    Err(err) => load_error_view(&err, "inbox"),
                    Ok(answer) if answer.conversations.is_empty() => {
                        let words = if filters.read_untracked().is_filtered() {
                            "No conversations match these filters."
                        } else {
                            "No conversations yet. They appear here as soon as someone chats with one of your agents."
                        };
                        view! { <p class="empty" data-testid="inbox-empty">{words}</p> }.into_any()
                    }
                    Ok(answer) => {
                        let first_next = answer.next_cursor.clone();
                        let next_cursor = move || {
                            more.with(|m| match m {
                                Some((_, next)) => next.clone(),
                                None => first_next.clone(),
                            })
                        };
                        let row = move |c: InboxConversation| {
                            let href = filters.read_untracked().conversation_href(&c.agent_id, &c.thread_id);
                            view! { <InboxRow conversation=c href go/> }
                        };
                        let first_rows = answer.conversations.into_iter().map(row).collect_view();
                        let pending = load_more.pending();
                        view! {
                            <div class="table-wrap">
                                <table class="table inbox-table">
                                    <caption class="visually-hidden">"Conversations, most recent activity first"</caption>
                                    <thead>
                                        <tr>
                                            <th scope="col">"Conversation"</th>
                                            <th scope="col">"Agent"</th>
                                            <th scope="col">"Channel"</th>
                                            <th scope="col" class="num">"Messages"</th>
                                            <th scope="col">"Feedback"</th>
                                            <th scope="col">"Last activity"</th>
                                        </tr>
                                    </thead>
                                    <tbody>
                                        {first_rows}
                                        {move || {
                                            more.with(|m| m.as_ref().map(|(rows, _)| rows.clone()))
                                                .unwrap_or_default()
                                                .into_iter()
                                                .map(row)
                                                .collect_view()
                                        }}
                                    </tbody>
                                </table>
                            </div>
                            {move || {
                                load_more
                                    .value()
                                    .with(|outcome| outcome.as_ref().and_then(|o| o.as_ref().err().cloned()))
                                    .map(|err| load_error_view(&err, "inbox-more"))
                            }}
                            {move || {
                                next_cursor()
                                    .map(|cursor| {
                                        view! {
                                            <div class="inbox-more">
                                                <button
                                                    type="button"
                                                    class="button button-secondary"
                                                    data-testid="inbox-more"
                                                    disabled=move || pending.get()
                                                    aria-busy=move || pending.get().to_string()
                                                    on:click=move |_| {
                                                        load_more.dispatch((filters.get_untracked(), cursor.clone()));
                                                    }
                                                >
                                                    {move || if pending.get() { "Loading…" } else { "Load more" }}
                                                </button>
                                            </div>
                                        }
                                    })
                            }}
                        }
                            .into_any()
                    }
                }})}
                </Transition>
            </section>
            {move || {
                open.get()
                    .map(|(agent_id, thread_id)| {
                        view! { <TranscriptView agent_id thread_id known agents back/> }
                    })
            }}
        </div>
    }
    .into_any()
}

/// The filter bar: agent, channel, feedback and days apply on change, the search on
/// submit. Each control shows the URL's value; `apply` receives the filters chosen.
#[component]
fn FilterBar(
    /// The filters of the URL.
    filters: Memo<InboxFilters>,
    /// The account's agents, for the agent select.
    agents: Fetched<Vec<Agent>>,
    /// Shows the list with other filters.
    apply: Callback<InboxFilters>,
) -> impl IntoView {
    let hydrated = use_hydrated();
    let search = NodeRef::<html::Input>::new();
    // A handler that applies the URL's filters with one field changed to the control's value.
    let set = move |field: fn(&mut InboxFilters, String)| {
        move |ev: leptos::ev::Event| {
            let mut next = filters.get_untracked();
            field(&mut next, event_target_value(&ev));
            apply.run(next);
        }
    };
    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        let mut next = filters.get_untracked();
        next.q = input_value(&search);
        apply.run(next);
    };
    view! {
        <form class="inbox-filters" data-testid="inbox-filters" role="search" aria-label="Filter conversations" on:submit=on_submit>
            <div class="field">
                <label for="inbox-agent">"Agent"</label>
                <select
                    id="inbox-agent"
                    prop:value=move || filters.read().agent_id.clone()
                    on:change=set(|f, v| f.agent_id = v)
                >
                    {move || agent_options(agents, filters.read().agent_id.clone())}
                </select>
                {move || agents_load_error(agents)}
            </div>
            <div class="field">
                <label for="inbox-channel">"Channel"</label>
                <select
                    id="inbox-channel"
                    prop:value=move || filters.read().channel.clone()
                    on:change=set(|f, v| f.channel = v)
                >
                    <option value="" selected=move || filters.read().channel.is_empty()>"All channels"</option>
                    {CHANNELS
                        .iter()
                        .map(|&(value, label)| {
                            view! {
                                <option value=value selected=move || filters.read().channel == value>
                                    {label}
                                </option>
                            }
                        })
                        .collect_view()}
                </select>
            </div>
            <div class="field">
                <label for="inbox-feedback">"Feedback"</label>
                <select
                    id="inbox-feedback"
                    prop:value=move || filters.read().feedback.clone()
                    on:change=set(|f, v| f.feedback = v)
                >
                    {FEEDBACK_CHOICES
                        .iter()
                        .map(|&(value, label)| {
                            view! {
                                <option value=value selected=move || filters.read().feedback == value>
                                    {label}
                                </option>
                            }
                        })
                        .collect_view()}
                </select>
            </div>
            <div class="field">
                <label for="inbox-from">"Active from"</label>
                <input
                    id="inbox-from"
                    type="date"
                    max=move || non_empty(filters.read().to.clone())
                    value=move || filters.read().from.clone()
                    prop:value=move || filters.read().from.clone()
                    on:change=set(|f, v| f.from = v)
                />
            </div>
            <div class="field">
                <label for="inbox-to">"Active until"</label>
                <input
                    id="inbox-to"
                    type="date"
                    min=move || non_empty(filters.read().from.clone())
                    value=move || filters.read().to.clone()
                    prop:value=move || filters.read().to.clone()
                    on:change=set(|f, v| f.to = v)
                />
            </div>
            <div class="field inbox-search">
                <label for="inbox-q">"Search messages"</label>
                <div class="inbox-search-row">
                    <input
                        id="inbox-q"
                        type="search"
                        maxlength=SEARCH_MAX.to_string()
                        placeholder="Words a message holds, e.g. refund"
                        aria-describedby="inbox-q-hint"
                        node_ref=search
                        value=move || filters.read().q.clone()
                        prop:value=move || filters.read().q.clone()
                    />
                    <button type="submit" class="button" disabled=move || !hydrated.get()>
                        "Search"
                    </button>
                    <Show when=move || filters.read().is_filtered()>
                        <a class="button button-secondary" href=INBOX_PATH>"Clear filters"</a>
                    </Show>
                </div>
                <p id="inbox-q-hint" class="hint">
                    "Finds conversations with a message holding every word, or words starting so; case does not matter."
                </p>
            </div>
        </form>
    }
    .into_any()
}

/// "Download JSONL" and "Download CSV" of the agent chosen in the filters, over their days;
/// without an agent, a hint that exports are per agent.
#[component]
fn ExportLinks(
    /// The filters of the URL.
    filters: Memo<InboxFilters>,
) -> impl IntoView {
    let link = move |format: &'static str, words: &'static str| {
        let href = move || filters.read().export_href(format).unwrap_or_default();
        // The export is a plain GET carrying the session cookie. After a quarter of an hour
        // on the page that cookie has expired and the file would be the 401 answer, so an
        // ordinary click first renews the session (any signed-in request does), then
        // follows the link; the server's `Content-Disposition: attachment` keeps the page.
        let on_click = move |ev: leptos::ev::MouseEvent| {
            if ev.button() != 0 || ev.ctrl_key() || ev.meta_key() || ev.shift_key() || ev.alt_key()
            {
                return;
            }
            ev.prevent_default();
            let target = href();
            spawn_local(async move {
                if client::get_json_signed_in::<serde_json::Value>("/api/auth/me")
                    .await
                    .is_ok()
                {
                    client::go_to(&target);
                }
            });
        };
        view! {
            <a
                class="button button-secondary button-small"
                href=href
                download=""
                data-testid=format!("inbox-export-{format}")
                on:click=on_click
            >
                {words}
            </a>
        }
    };
    view! {
        <div class="inbox-export" data-testid="inbox-export">
            {move || {
                if filters.read().agent_id.is_empty() {
                    view! {
                        <p class="hint" data-testid="inbox-export-hint">
                            "Exports are per agent: choose an agent above to download its conversations as JSON Lines or CSV."
                        </p>
                    }
                        .into_any()
                } else {
                    let days = {
                        let f = filters.read();
                        match (f.from.as_str(), f.to.as_str()) {
                            ("", "") => "every day".to_owned(),
                            (from, "") => format!("from {from}"),
                            ("", to) => format!("until {to}"),
                            (from, to) => format!("{from} to {to}"),
                        }
                    };
                    view! {
                        <span class="inbox-export-links">
                            {link("jsonl", "Download JSONL")}
                            {link("csv", "Download CSV")}
                        </span>
                        <p class="hint">
                            {format!("Every message of this agent's conversations stored {days} (UTC); channel, feedback and search do not apply.")}
                        </p>
                    }
                        .into_any()
                }
            }}
        </div>
    }
}

/// A thumb for a count of ratings or a rating: up, or turned over for down.
fn thumb_icon() -> impl IntoView {
    view! {
        <svg viewBox="0 0 24 24" width="14" height="14" aria-hidden="true">
            <path fill="currentColor" d=THUMB_PATH></path>
        </svg>
    }
}

/// The 👍 and 👎 counts of a conversation, each only when it is not zero.
fn feedback_counts(counts: FeedbackCounts) -> impl IntoView {
    let count = move |n: u32, class: &'static str, title: &'static str, words: &'static str| {
        (n > 0).then(|| {
            view! {
                <span class=format!("feedback-count {class}") title=title>
                    {thumb_icon()}
                    {n}
                    <span class="visually-hidden">{format!(" {words}")}</span>
                </span>
            }
        })
    };
    view! {
        <span class="feedback-counts">
            {count(counts.up, "feedback-up", "Replies rated helpful", "rated helpful")}
            {count(counts.down, "feedback-down", "Replies rated not helpful", "rated not helpful")}
        </span>
    }
}

/// One conversation of the list; a click anywhere on the row (or its link) opens it.
#[component]
fn InboxRow(
    /// The conversation.
    conversation: InboxConversation,
    /// The page's URL showing it.
    href: String,
    /// Navigates to a URL.
    go: Callback<String>,
) -> impl IntoView {
    let c = conversation;
    let row_href = href.clone();
    let on_click = move |ev: leptos::ev::MouseEvent| {
        // A click on the link is the link's.
        let on_link = ev
            .target()
            .and_then(|target| target.dyn_into::<web_sys::Element>().ok())
            .and_then(|el| el.closest("a").ok().flatten())
            .is_some();
        if !on_link {
            go.run(row_href.clone());
        }
    };
    let messages = c.message_count;
    view! {
        <tr class="inbox-row" data-testid="inbox-row" data-thread-id=c.thread_id.clone() on:click=on_click>
            <td class="inbox-title">
                <a href=href>{c.title.clone()}</a>
            </td>
            <td>{c.agent_name.clone()}</td>
            <td>
                <span class="tag" data-channel=c.channel.clone()>
                    {channel_label(&c.channel).to_owned()}
                </span>
            </td>
            <td class="num">{messages}</td>
            <td>{feedback_counts(c.feedback)}</td>
            <td>
                <time datetime=c.updated_at.clone()>{short_time(&c.updated_at)}</time>
            </td>
        </tr>
    }
    .into_any()
}

/// The transcript of one conversation: its title, agent and channel, every message oldest
/// first, "Back to the list" and "Open in chat".
#[component]
fn TranscriptView(
    /// The conversation's agent.
    agent_id: String,
    /// The conversation.
    thread_id: String,
    /// Its row in the list, when loaded (title, agent name, channel).
    known: Signal<Option<InboxConversation>>,
    /// The account's agents (the agent's name when the row is not loaded).
    agents: Fetched<Vec<Agent>>,
    /// The list's URL with the current filters.
    back: Signal<String>,
) -> impl IntoView {
    let transcript = {
        let (agent_id, thread_id) = (agent_id.clone(), thread_id.clone());
        LocalResource::new(move || {
            let (agent_id, thread_id) = (agent_id.clone(), thread_id.clone());
            async move { whole_transcript(&agent_id, &thread_id).await }
        })
    };
    let title = move || {
        known
            .read()
            .as_ref()
            .map(|c| c.title.clone())
            .or_else(|| {
                transcript
                    .map(|loaded| loaded.as_ref().ok().and_then(|m| title_of(m)))
                    .flatten()
            })
            .unwrap_or_else(|| "Conversation".to_owned())
    };
    let agent_name = {
        let agent_id = agent_id.clone();
        move || {
            known
                .read()
                .as_ref()
                .map(|c| c.agent_name.clone())
                .or_else(|| {
                    agents
                        .map(|loaded| {
                            loaded
                                .as_ref()
                                .ok()
                                .and_then(|list| list.iter().find(|a| a.id == agent_id))
                                .map(|a| a.name.clone())
                        })
                        .flatten()
                })
        }
    };
    let chat_href = format!(
        "/dashboard/agents/{}/chat",
        crate::query::encode_component(&agent_id)
    );
    view! {
        <section class="card" data-testid="transcript" aria-labelledby="transcript-title">
            <p class="crumbs">
                <a href=move || back.get() data-testid="transcript-back">"← Back to the list"</a>
            </p>
            <div class="section-head">
                <h1 id="transcript-title" class="transcript-title">{title}</h1>
                <a class="button button-secondary button-small" href=chat_href>"Open in chat"</a>
            </div>
            <p class="transcript-meta muted small">
                {move || agent_name().map(|name| view! { <span>{format!("Agent: {name}")}</span> })}
                {move || {
                    known
                        .get()
                        .map(|c| {
                            view! {
                                <span class="tag" data-channel=c.channel.clone()>
                                    {channel_label(&c.channel).to_owned()}
                                </span>
                                <span>
                                    {format!("Started {} · last activity {} (UTC)", short_time(&c.created_at), short_time(&c.updated_at))}
                                </span>
                            }
                        })
                }}
            </p>
            <Suspense fallback=|| loading_view("the conversation")>
            {move || Suspend::new(async move { match transcript.await {
                Err(err) => load_error_view(&err, "transcript"),
                Ok(messages) if messages.is_empty() => {
                    view! { <p class="empty">"This conversation has no messages."</p> }.into_any()
                }
                Ok(messages) => {
                    view! {
                        <ol class="transcript-messages" aria-label="Messages, oldest first">
                            {messages
                                .into_iter()
                                .map(|message| view! { <TranscriptMessage message/> })
                                .collect_view()}
                        </ol>
                    }
                        .into_any()
                }
            }})}
            </Suspense>
        </section>
    }
    .into_any()
}

/// One stored message: who wrote it and when, its state when cut short, and its text
/// (Markdown); for replies the tool calls, sources, token usage, model and rating.
#[component]
fn TranscriptMessage(
    /// The message.
    message: ChatMessage,
) -> impl IntoView {
    let is_reply = message.role == "assistant";
    let html = markdown::render(&message.content);
    let pill = match message.status.as_str() {
        "failed" => Some(view! { <span class="pill pill-error">"failed"</span> }.into_any()),
        "cancelled" => Some(view! { <span class="pill">"stopped"</span> }.into_any()),
        "interrupted" => Some(view! { <span class="pill">"interrupted"</span> }.into_any()),
        _ => None,
    };
    // The calls come first, as in the chat: the model calls tools before it answers.
    let calls: Vec<ToolCallView> = message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .chain(
            message
                .pending_approvals
                .unwrap_or_default()
                .into_iter()
                .map(|p| ToolCallView {
                    id: p.tool_call_id,
                    name: p.name,
                    tool_type: String::new(),
                    arguments: p.arguments,
                    status: "pending".to_owned(),
                    output: String::new(),
                    error: None,
                    duration_ms: 0,
                }),
        )
        .collect();
    let sources = message.sources.unwrap_or_default();
    let usage = usage_text(message.tokens_used, message.model.as_deref());
    let feedback = message.feedback.map(|f| {
        let (class, words) = if f.rating == "down" {
            ("feedback-down", "Rated not helpful")
        } else {
            ("feedback-up", "Rated helpful")
        };
        view! {
            <p class="transcript-feedback" data-testid="transcript-feedback" data-rating=f.rating.clone()>
                <span class=format!("feedback-count {class}")>{thumb_icon()}</span>
                <strong>{words}</strong>
                {f.comment.map(|comment| view! { <q class="feedback-comment">{comment}</q> })}
                <time class="muted small" datetime=f.created_at.clone()>{short_time(&f.created_at)}</time>
            </p>
        }
    });
    let role_class = if is_reply { "assistant" } else { "user" };
    view! {
        <li
            class=format!("message message-{role_class}")
            data-testid="transcript-message"
            data-role=message.role.clone()
            data-status=message.status.clone()
        >
            <header class="message-head">
                <span class="message-role">{role_label(&message.role).to_owned()}</span>
                <time datetime=message.created_at.clone()>{short_time(&message.created_at)}</time>
                {pill}
            </header>
            <div class="message-body">
                {calls.into_iter().map(stored_call).collect_view()}
                <div class="markdown" inner_html=html></div>
            </div>
            {(!sources.is_empty()).then(|| sources_view(sources))}
            {(usage.is_some() || feedback.is_some()).then(|| {
                view! {
                    <footer class="message-foot">
                        {usage.map(|words| view! { <span class="muted small" data-testid="transcript-usage">{words}</span> })}
                        {feedback}
                    </footer>
                }
            })}
        </li>
    }
    .into_any()
}

/// The knowledge passages a reply used, folded: each title (a link when it has a web
/// address) with its snippet.
fn sources_view(sources: Vec<Source>) -> impl IntoView {
    let count = sources.len();
    view! {
        <details class="sources" data-testid="transcript-sources">
            <summary>{format!("Sources ({count})")}</summary>
            <ol>
                {sources
                    .into_iter()
                    .map(|source| {
                        let title = source.title;
                        view! {
                            <li>
                                {match source.url {
                                    Some(url) if url.starts_with("http") => {
                                        view! {
                                            <a href=url rel="noopener noreferrer" target="_blank">
                                                {title}
                                            </a>
                                        }
                                            .into_any()
                                    }
                                    _ => view! { <strong>{title}</strong> }.into_any(),
                                }}
                                <blockquote>{source.snippet}</blockquote>
                            </li>
                        }
                    })
                    .collect_view()}
            </ol>
        </details>
    }
}

/// A stored tool call of a reply: name, type, state, duration, arguments, and its result
/// or error when it has one.
fn stored_call(call: ToolCallView) -> impl IntoView {
    let (words, class) = call_status(&call.status);
    let ended = matches!(call.status.as_str(), "succeeded" | "failed");
    let arguments = serde_json::to_string(&call.arguments).unwrap_or_else(|_| "{}".into());
    let label = format!("Tool call {}", call.name);
    view! {
        <section class="tool-call" data-testid="transcript-tool-call" data-status=call.status.clone() aria-label=label>
            <header class="tool-call-head">
                <span class="tool-call-kind">"Tool"</span>
                <code class="tool-call-name">{call.name}</code>
                {(!call.tool_type.is_empty()).then(|| view! { <span class="muted small">{call.tool_type}</span> })}
                {(!words.is_empty()).then(|| view! { <span class=class>{words}</span> })}
                {ended.then(|| view! { <span class="muted small">{format!("{} ms", call.duration_ms)}</span> })}
            </header>
            <p class="tool-call-args">
                <span class="muted small">"Arguments "</span>
                <code>{arguments}</code>
            </p>
            {(!call.output.is_empty()).then(|| {
                view! {
                    <details class="tool-call-output" open>
                        <summary>"Result"</summary>
                        <pre>{call.output}</pre>
                    </details>
                }
            })}
            {call.error.map(|error| view! { <p class="error-text small">{error}</p> })}
        </section>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn filters(pairs: &[(&str, &str)]) -> InboxFilters {
        InboxFilters::from_query(|name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    fn conversation(thread_id: &str) -> InboxConversation {
        InboxConversation {
            thread_id: thread_id.to_owned(),
            agent_id: "a1".to_owned(),
            agent_name: "Support".to_owned(),
            channel: "widget".to_owned(),
            title: "Hello".to_owned(),
            message_count: 2,
            feedback: FeedbackCounts::default(),
            created_at: "2026-11-20T10:00:00Z".to_owned(),
            updated_at: "2026-11-20T10:02:13Z".to_owned(),
        }
    }

    #[test]
    fn filters_come_from_the_query_trimmed() {
        let f = filters(&[("agentId", " a1 "), ("q", "  refund "), ("other", "x")]);
        assert_eq!(f.agent_id, "a1");
        assert_eq!(f.q, "refund");
        assert_eq!(f.channel, "");
        assert!(f.is_filtered());
        assert!(!InboxFilters::default().is_filtered());
    }

    #[test]
    fn api_paths_carry_the_filters_and_the_cursor() {
        assert_eq!(
            InboxFilters::default().api_path(None),
            "/api/conversations?limit=50"
        );
        let f = filters(&[
            ("agentId", "a1"),
            ("channel", "widget"),
            ("feedback", "down"),
            ("from", "2026-11-01"),
            ("to", "2026-11-30"),
            ("q", "ship nor"),
        ]);
        assert_eq!(
            f.api_path(Some("c/1=")),
            "/api/conversations?limit=50&agentId=a1&channel=widget&feedback=down\
             &from=2026-11-01&to=2026-11-30&q=ship%20nor&cursor=c%2F1%3D"
        );
    }

    #[test]
    fn page_urls_keep_the_filters() {
        let f = filters(&[("channel", "slack"), ("q", "refund")]);
        assert_eq!(
            f.list_href(),
            "/dashboard/conversations?channel=slack&q=refund"
        );
        assert_eq!(
            f.conversation_href("a1", "t1"),
            "/dashboard/conversations?channel=slack&q=refund&thread=t1&agent=a1"
        );
        assert_eq!(
            InboxFilters::default().list_href(),
            "/dashboard/conversations"
        );
        assert_eq!(
            InboxFilters::default().conversation_href("a1", "t1"),
            "/dashboard/conversations?thread=t1&agent=a1"
        );
    }

    #[test]
    fn exports_are_per_agent_over_the_chosen_days() {
        assert_eq!(InboxFilters::default().export_href("csv"), None);
        assert_eq!(
            filters(&[("agentId", "a 1")])
                .export_href("jsonl")
                .as_deref(),
            Some("/api/agents/a%201/conversations/export?format=jsonl")
        );
        let f = filters(&[
            ("agentId", "a1"),
            ("channel", "widget"),
            ("from", "2026-11-01"),
            ("to", "2026-11-30"),
            ("q", "refund"),
        ]);
        assert_eq!(
            f.export_href("csv").as_deref(),
            Some("/api/agents/a1/conversations/export?format=csv&from=2026-11-01&to=2026-11-30")
        );
    }

    #[test]
    fn filters_are_checked_as_the_server_does() {
        assert!(InboxFilters::default().check().is_ok());
        assert!(filters(&[("channel", "fax")]).check().is_err());
        assert!(filters(&[("feedback", "meh")]).check().is_err());
        assert!(filters(&[("from", "2026-1-1")]).check().is_err());
        assert!(filters(&[("from", "2026-11-02"), ("to", "2026-11-01")])
            .check()
            .is_err());
        assert!(filters(&[("from", "2026-11-01"), ("to", "2026-11-01")])
            .check()
            .is_ok());
        let long = "é".repeat(SEARCH_MAX + 1);
        assert!(filters(&[("q", &long)]).check().is_err());
        assert!(filters(&[("q", &long[..SEARCH_MAX * 2])]).check().is_ok());
        for (channel, _) in CHANNELS {
            assert!(filters(&[("channel", channel)]).check().is_ok());
        }
        for (feedback, _) in FEEDBACK_CHOICES {
            assert!(filters(&[("feedback", feedback)]).check().is_ok());
        }
    }

    #[test]
    fn channels_and_roles_have_words() {
        assert_eq!(channel_label("widget"), "Website widget");
        assert_eq!(channel_label("openai"), "OpenAI-compatible API");
        assert_eq!(channel_label("pager"), "pager");
        assert_eq!(CHANNELS.len(), 7);
        assert_eq!(role_label("user"), "User");
        assert_eq!(role_label("assistant"), "Agent");
    }

    #[test]
    fn later_pages_add_only_new_conversations() {
        let mut rows = vec![conversation("t1"), conversation("t2")];
        append_page(&mut rows, vec![conversation("t2"), conversation("t3")]);
        let ids: Vec<&str> = rows.iter().map(|c| c.thread_id.as_str()).collect();
        assert_eq!(ids, ["t1", "t2", "t3"]);
    }

    #[test]
    fn usage_is_told_in_words() {
        let usage = TokensUsed {
            prompt: 100,
            completion: 20,
            total: 120,
        };
        assert_eq!(
            usage_text(Some(usage), Some("gpt-4o")).as_deref(),
            Some("120 tokens (100 prompt, 20 reply) · gpt-4o")
        );
        assert_eq!(
            usage_text(Some(usage), None).as_deref(),
            Some("120 tokens (100 prompt, 20 reply)")
        );
        assert_eq!(usage_text(None, Some("m")).as_deref(), Some("m"));
        assert_eq!(usage_text(None, Some("")), None);
    }

    #[test]
    fn titles_are_the_first_message_cut_to_80_characters() {
        let message = |content: &str| ChatMessage {
            id: "m1".to_owned(),
            role: "user".to_owned(),
            content: content.to_owned(),
            model: None,
            tokens_used: None,
            sources: None,
            status: "complete".to_owned(),
            tool_calls: None,
            pending_approvals: None,
            feedback: None,
            created_at: "2026-11-20T10:00:00Z".to_owned(),
        };
        assert_eq!(title_of(&[]), None);
        assert_eq!(title_of(&[message("  Hi  ")]).as_deref(), Some("Hi"));
        assert_eq!(
            title_of(&[message(&"x".repeat(100))]).map(|t| t.chars().count()),
            Some(80)
        );
    }
}
