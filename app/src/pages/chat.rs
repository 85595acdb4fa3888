//! `/dashboard/agents/{id}/chat`: threads and the conversation with the agent
//! (`GET .../conversations`, `GET .../conversations/{threadId}/messages`, `POST .../chat`
//! streamed).
//!
//! The reply is read from a `fetch` response body as it arrives and grows in place; "Stop"
//! aborts the request (the server stores the reply as `cancelled`). Messages are rendered
//! from Markdown with every piece of HTML in them escaped ([`crate::markdown`]).

use super::{agent::use_agent, agents::Loaded, dashboard::short_time};
use crate::{
    api::{
        ChatMessage, ChatRequest, Conversation, ConversationsResponse, MessagesResponse, Source,
        StreamOptions, TokensUsed,
    },
    client::{self, Abort, StreamEnd},
    components::{use_hydrated, Notice, Tone},
    markdown,
    sse::StreamFrame,
};
use leptos::{prelude::*, task::spawn_local};
use leptos_meta::Title;

/// Longest message the server accepts by default (`MAX_MESSAGE_CHARS`).
pub const MESSAGE_MAX: usize = 32_000;

/// A message on screen. Its parts are signals, so a streamed reply updates in place.
#[derive(Debug, Clone, Copy)]
struct Bubble {
    key: u64,
    /// `user` or `assistant`.
    role: &'static str,
    content: RwSignal<String>,
    /// `streaming`, `complete`, `failed`, `cancelled` (or the server's word).
    status: RwSignal<String>,
    error: RwSignal<Option<String>>,
    model: RwSignal<Option<String>>,
    usage: RwSignal<Option<TokensUsed>>,
    sources: RwSignal<Vec<Source>>,
}

impl Bubble {
    fn new(key: u64, role: &'static str, content: String, status: &str) -> Self {
        Self {
            key,
            role,
            content: RwSignal::new(content),
            status: RwSignal::new(status.to_owned()),
            error: RwSignal::new(None),
            model: RwSignal::new(None),
            usage: RwSignal::new(None),
            sources: RwSignal::new(Vec::new()),
        }
    }

    fn from_stored(key: u64, message: ChatMessage) -> Self {
        let role = if message.role == "user" {
            "user"
        } else {
            "assistant"
        };
        let bubble = Self::new(key, role, message.content, &message.status);
        bubble.model.set(message.model);
        bubble.usage.set(message.tokens_used);
        bubble.sources.set(message.sources.unwrap_or_default());
        bubble
    }
}

/// The thread list, the messages of the chosen thread and the composer.
#[component]
pub fn ChatPage() -> impl IntoView {
    let hydrated = use_hydrated();
    let agent = use_agent();
    let threads = RwSignal::new(Loaded::<Vec<Conversation>>::Loading);
    let thread = RwSignal::new(None::<String>);
    let bubbles = RwSignal::new(Vec::<Bubble>::new());
    let messages_state = RwSignal::new(Loaded::Ready(()));
    let next_key = StoredValue::new(0_u64);
    let draft = RwSignal::new(String::new());
    let send_error = RwSignal::new(None::<String>);
    let streaming = RwSignal::new(false);
    let abort = StoredValue::new_local(None::<Abort>);

    let key = move || {
        next_key.update_value(|k| *k += 1);
        next_key.get_value()
    };

    let load_threads = move || {
        let id = agent.id.get_untracked();
        spawn_local(async move {
            let answer = client::get_json_signed_in::<ConversationsResponse>(&format!(
                "/api/agents/{id}/conversations?limit=50"
            ))
            .await;
            threads.set(match answer {
                Ok(answer) => Loaded::Ready(answer.conversations),
                Err(err) => Loaded::Failed(err.message().to_owned()),
            });
        });
    };

    Effect::new(move || {
        agent.id.track();
        thread.set(None);
        bubbles.set(Vec::new());
        load_threads();
    });

    let open_thread = move |thread_id: String| {
        if streaming.get_untracked() {
            return;
        }
        let id = agent.id.get_untracked();
        thread.set(Some(thread_id.clone()));
        bubbles.set(Vec::new());
        send_error.set(None);
        messages_state.set(Loaded::Loading);
        spawn_local(async move {
            let answer = client::get_json_signed_in::<MessagesResponse>(&format!(
                "/api/agents/{id}/conversations/{thread_id}/messages?limit=200"
            ))
            .await;
            match answer {
                Ok(answer) => {
                    let list = answer
                        .messages
                        .into_iter()
                        .map(|m| Bubble::from_stored(key(), m))
                        .collect();
                    bubbles.set(list);
                    messages_state.set(Loaded::Ready(()));
                }
                Err(err) => messages_state.set(Loaded::Failed(err.message().to_owned())),
            }
        });
    };

    let new_thread = move |_| {
        if streaming.get_untracked() {
            return;
        }
        thread.set(None);
        bubbles.set(Vec::new());
        send_error.set(None);
        messages_state.set(Loaded::Ready(()));
    };

    let send = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if streaming.get_untracked() {
            return;
        }
        let message = draft.get_untracked();
        if message.trim().is_empty() {
            send_error.set(Some("Write a message first.".into()));
            return;
        }
        if message.chars().count() > MESSAGE_MAX {
            send_error.set(Some(format!(
                "A message can have at most {MESSAGE_MAX} characters."
            )));
            return;
        }
        let controller = match Abort::new() {
            Ok(controller) => controller,
            Err(err) => {
                send_error.set(Some(err.message().to_owned()));
                return;
            }
        };
        abort.set_value(Some(controller.clone()));
        send_error.set(None);
        draft.set(String::new());
        let asked = Bubble::new(key(), "user", message.clone(), "complete");
        let reply = Bubble::new(key(), "assistant", String::new(), "streaming");
        bubbles.update(|list| list.extend([asked, reply]));
        streaming.set(true);
        let agent_id = agent.id.get_untracked();
        let body = ChatRequest {
            message,
            thread_id: thread.get_untracked(),
            stream: true,
            stream_options: Some(StreamOptions {
                include_usage: true,
                ..StreamOptions::default()
            }),
            ..ChatRequest::default()
        };
        let was_new = body.thread_id.is_none();
        spawn_local(async move {
            let outcome = client::stream_chat(
                &agent_id,
                &body,
                &controller,
                |thread_id| {
                    if let Some(thread_id) = thread_id {
                        thread.set(Some(thread_id));
                    }
                },
                |frame| match frame {
                    StreamFrame::Chunk(text) => reply.content.update(|c| c.push_str(&text)),
                    StreamFrame::Usage(usage) => {
                        reply.usage.set(Some(usage.usage));
                        reply.model.set(Some(usage.model));
                        reply.sources.set(usage.sources);
                    }
                    StreamFrame::Error(body) => {
                        reply.status.set("failed".into());
                        reply.error.set(Some(body.message));
                    }
                    StreamFrame::Done => {}
                },
            )
            .await;
            match outcome {
                Ok(StreamEnd::Done) => {
                    if reply.status.get_untracked() == "streaming" {
                        reply.status.set("complete".into());
                    }
                }
                Ok(StreamEnd::Stopped) => reply.status.set("cancelled".into()),
                Ok(StreamEnd::Cut) => {
                    reply.status.set("failed".into());
                    reply.error.set(Some(
                        "The connection closed before the reply was complete.".into(),
                    ));
                }
                Err(err) => {
                    // Refused before the stream started: nothing was stored, so the
                    // message goes back into the composer.
                    bubbles
                        .update(|list| list.retain(|b| b.key != asked.key && b.key != reply.key));
                    draft.set(asked.content.get_untracked());
                    send_error.set(Some(err.message().to_owned()));
                }
            }
            abort.set_value(None);
            streaming.set(false);
            if was_new {
                load_threads();
            }
        });
    };

    let stop = move |_| {
        if let Some(controller) = abort.get_value() {
            controller.abort();
        }
    };

    view! {
        <Title text="Chat"/>
        <div class="chat">
            <aside class="card threads" aria-label="Threads">
                <button
                    type="button"
                    class="button button-block"
                    on:click=new_thread
                    disabled=move || !hydrated.get() || streaming.get()
                >
                    "New thread"
                </button>
                {move || match threads.get() {
                    state @ (Loaded::Loading | Loaded::Failed(_)) => state.status_view("threads", "threads"),
                    Loaded::Ready(list) if list.is_empty() => {
                        view! { <p class="empty">"No threads yet."</p> }.into_any()
                    }
                    Loaded::Ready(list) => {
                        view! {
                            <ul class="thread-list" data-testid="thread-list">
                                {list
                                    .into_iter()
                                    .map(|c| {
                                        let id = c.thread_id.clone();
                                        let current = {
                                            let id = id.clone();
                                            move || {
                                                (thread.read().as_deref() == Some(id.as_str()))
                                                    .then_some("true")
                                            }
                                        };
                                        view! {
                                            <li>
                                                <button
                                                    type="button"
                                                    class="thread"
                                                    aria-current=current
                                                    on:click=move |_| open_thread(id.clone())
                                                >
                                                    <span class="thread-title">{c.title.clone()}</span>
                                                    <span class="muted small">
                                                        {format!(
                                                            "{} {} · {}",
                                                            c.message_count,
                                                            if c.message_count == 1 { "message" } else { "messages" },
                                                            short_time(&c.updated_at),
                                                        )}
                                                    </span>
                                                </button>
                                            </li>
                                        }
                                    })
                                    .collect_view()}
                            </ul>
                        }
                            .into_any()
                    }
                }}
            </aside>
            <section class="card conversation" aria-label="Conversation">
                <div class="messages" aria-live="polite" data-testid="messages">
                    {move || match messages_state.get() {
                        state @ (Loaded::Loading | Loaded::Failed(_)) => state.status_view("messages", "messages"),
                        Loaded::Ready(()) => ().into_any(),
                    }}
                    <Show when=move || {
                        bubbles.read().is_empty()
                            && matches!(messages_state.get(), Loaded::Ready(()))
                    }>
                        <p class="empty" data-testid="chat-empty">
                            "Ask the agent something. Its reply appears here as it is written."
                        </p>
                    </Show>
                    <For each=move || bubbles.get() key=|bubble| bubble.key let(bubble)>
                        <MessageView bubble/>
                    </For>
                </div>
                <form class="composer" on:submit=send>
                    <label for="chat-message" class="visually-hidden">"Message"</label>
                    <textarea
                        id="chat-message"
                        rows="3"
                        placeholder="Message the agent (Enter sends, Shift+Enter adds a line)"
                        prop:value=move || draft.get()
                        on:input=move |ev| draft.set(event_target_value(&ev))
                        on:keydown=move |ev: leptos::ev::KeyboardEvent| {
                            if ev.key() == "Enter" && !ev.shift_key() && !ev.is_composing() {
                                ev.prevent_default();
                                if let Some(form) = event_target::<web_sys::HtmlTextAreaElement>(&ev).form() {
                                    let _ = form.request_submit();
                                }
                            }
                        }
                    ></textarea>
                    {move || {
                        send_error
                            .get()
                            .map(|message| {
                                view! { <Notice tone=Tone::Error testid="chat-error">{message}</Notice> }
                            })
                    }}
                    <div class="composer-actions">
                        <Show
                            when=move || streaming.get()
                            fallback=move || {
                                view! {
                                    <button type="submit" class="button" disabled=move || !hydrated.get()>
                                        "Send"
                                    </button>
                                }
                            }
                        >
                            <button type="button" class="button button-danger" on:click=stop>
                                "Stop"
                            </button>
                        </Show>
                    </div>
                </form>
            </section>
        </div>
    }
    .into_any()
}

/// One message: its Markdown, and for replies the state, sources, token usage and "Copy".
#[component]
fn MessageView(bubble: Bubble) -> impl IntoView {
    let copied = RwSignal::new(None::<Result<(), String>>);
    let copy = move |_| {
        let text = bubble.content.get_untracked();
        spawn_local(async move {
            copied.set(Some(
                client::copy_text(&text)
                    .await
                    .map_err(|err| err.message().to_owned()),
            ));
        });
    };
    let html = move || markdown::render(&bubble.content.read());
    let is_reply = bubble.role == "assistant";
    view! {
        <article
            class=format!("message message-{}", bubble.role)
            data-testid=if is_reply { "reply" } else { "question" }
            data-status=move || bubble.status.get()
            aria-busy=move || (bubble.status.get() == "streaming").to_string()
        >
            <header class="message-head">
                <span class="message-role">{if is_reply { "Agent" } else { "You" }}</span>
                {move || match bubble.status.get().as_str() {
                    "streaming" => Some(view! { <span class="pill">"writing…"</span> }.into_any()),
                    "cancelled" => {
                        Some(view! { <span class="pill" data-testid="reply-stopped">"stopped"</span> }.into_any())
                    }
                    "failed" => Some(view! { <span class="pill pill-error">"failed"</span> }.into_any()),
                    _ => None,
                }}
            </header>
            <div class="markdown" data-testid="message-body" inner_html=html></div>
            {move || {
                bubble
                    .error
                    .get()
                    .map(|message| {
                        view! { <Notice tone=Tone::Error testid="reply-error">{message}</Notice> }
                    })
            }}
            <Show when=move || is_reply && !bubble.sources.read().is_empty()>
                <details class="sources" data-testid="sources">
                    <summary>{move || format!("Sources ({})", bubble.sources.read().len())}</summary>
                    <ol>
                        {move || {
                            bubble
                                .sources
                                .get()
                                .into_iter()
                                .map(|source| {
                                    let title = source.title.clone();
                                    view! {
                                        <li>
                                            {match source.url.clone() {
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
                                            <blockquote>{source.snippet.clone()}</blockquote>
                                        </li>
                                    }
                                })
                                .collect_view()
                        }}
                    </ol>
                </details>
            </Show>
            <Show when=move || is_reply && bubble.status.get() != "streaming">
                <footer class="message-foot">
                    {move || {
                        bubble
                            .usage
                            .get()
                            .map(|usage| {
                                view! {
                                    <span class="muted small" data-testid="usage">
                                        {format!(
                                            "{} tokens ({} prompt, {} reply){}",
                                            usage.total,
                                            usage.prompt,
                                            usage.completion,
                                            bubble.model.get().map(|m| format!(" · {m}")).unwrap_or_default(),
                                        )}
                                    </span>
                                }
                            })
                    }}
                    <button type="button" class="button button-secondary button-small" on:click=copy>
                        "Copy"
                    </button>
                    {move || match copied.get() {
                        Some(Ok(())) => Some(view! { <span class="muted small" role="status">"Copied"</span> }.into_any()),
                        Some(Err(message)) => {
                            Some(view! { <span class="error-text small" role="alert">{message}</span> }.into_any())
                        }
                        None => None,
                    }}
                </footer>
            </Show>
        </article>
    }
    .into_any()
}
