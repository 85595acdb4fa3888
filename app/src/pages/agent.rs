//! `/dashboard/agents/{id}/*`: one agent — its settings and tools, chat, knowledge base
//! and the getting-started examples, under tabs (`GET /api/agents/{agentId}`).

use super::{
    agents::{AgentForm, DeleteAgent, Loaded},
    tools::ToolsSection,
};
use crate::{
    api::{Agent, AgentResponse},
    client,
    components::{Notice, Tone},
};
use leptos::{prelude::*, task::spawn_local};
use leptos_meta::Title;
use leptos_router::{
    components::Outlet,
    hooks::{use_location, use_params_map, use_query_map},
};

/// The agent of the current route, shared by [`AgentLayout`] with its tabs.
#[derive(Debug, Clone, Copy)]
pub struct AgentContext {
    /// The agent id from the path.
    pub id: Memo<String>,
    /// The agent as last loaded or saved.
    pub agent: RwSignal<Loaded<Agent>>,
}

/// The [`AgentContext`] of the agent pages.
///
/// # Panics
/// Outside [`AgentLayout`].
pub fn use_agent() -> AgentContext {
    expect_context::<AgentContext>()
}

/// Loads the agent named by the path, shows its name and the tabs, and the tab's page.
#[component]
pub fn AgentLayout() -> impl IntoView {
    let params = use_params_map();
    let id = Memo::new(move |_| params.read().get("id").unwrap_or_default());
    let agent = RwSignal::new(Loaded::<Agent>::Loading);
    provide_context(AgentContext { id, agent });

    Effect::new(move || {
        let id = id.get();
        agent.set(Loaded::Loading);
        spawn_local(async move {
            let answer =
                client::get_json_signed_in::<AgentResponse>(&format!("/api/agents/{id}")).await;
            agent.set(match answer {
                Ok(answer) => Loaded::Ready(answer.agent),
                Err(err) => Loaded::Failed(err.message().to_owned()),
            });
        });
    });

    let failed = Memo::new(move |_| match &*agent.read() {
        Loaded::Failed(message) => Some(message.clone()),
        _ => None,
    });
    let pathname = use_location().pathname;
    let tab = move |suffix: &'static str| {
        let base = format!("/dashboard/agents/{}", id.get());
        let href = if suffix.is_empty() {
            base.clone()
        } else {
            format!("{base}/{suffix}")
        };
        let current = pathname.get().trim_end_matches('/') == href;
        (href, current.then_some("page"))
    };
    let link = move |suffix: &'static str, label: &'static str| {
        view! {
            <a href=move || tab(suffix).0 aria-current=move || tab(suffix).1>
                {label}
            </a>
        }
    };

    view! {
        <div class="agent-head">
            <p class="crumbs">
                <a href="/dashboard">"Agents"</a>
                " / "
            </p>
            <h1 data-testid="agent-name">
                {move || match agent.get() {
                    Loaded::Ready(agent) => agent.name,
                    Loaded::Loading => "Loading agent…".to_owned(),
                    Loaded::Failed(_) => "Agent".to_owned(),
                }}
            </h1>
            <nav class="tabs" aria-label="Agent">
                {link("", "Settings")}
                {link("chat", "Chat")}
                {link("knowledge", "Knowledge")}
                {link("start", "Get started")}
            </nav>
        </div>
        // Depends on the failure only, so that saving the agent keeps the tab's page.
        {move || match failed.get() {
            Some(message) => {
                view! { <Notice tone=Tone::Error testid="agent-error">{message}</Notice> }.into_any()
            }
            None => view! { <Outlet/> }.into_any(),
        }}
    }
    .into_any()
}

/// The agent's settings: the agent form, its tools and deletion.
#[component]
pub fn AgentSettings() -> impl IntoView {
    let AgentContext { agent, .. } = use_agent();
    let query = use_query_map();
    let created = move || query.read().get("created").is_some_and(|v| v == "1");
    let on_saved = Callback::new(move |saved: Agent| agent.set(Loaded::Ready(saved)));
    // The form depends on the agent's id only, so that saving (which updates the agent)
    // keeps the form and its "Saved." notice, while another agent starts it over.
    let ready_id = Memo::new(move |_| match &*agent.read() {
        Loaded::Ready(current) => Some(current.id.clone()),
        _ => None,
    });
    view! {
        <Title text="Agent settings"/>
        <div class="stack">
            <section class="card">
                <Show when=created>
                    <Notice tone=Tone::Success testid="agent-created">
                        "Agent created. Give it knowledge, then chat with it."
                    </Notice>
                </Show>
                {move || match (ready_id.get(), agent.get_untracked()) {
                    (Some(id), Loaded::Ready(current)) => {
                        let name = current.name.clone();
                        view! {
                            <h2 class="first">"Settings"</h2>
                            <AgentForm agent=Some(current) on_saved/>
                            <DeleteAgent id name/>
                        }
                            .into_any()
                    }
                    _ => view! { <p class="loading" role="status">"Loading agent…"</p> }.into_any(),
                }}
            </section>
            {move || ready_id.get().map(|id| view! { <ToolsSection agent_id=id/> })}
        </div>
    }
    .into_any()
}
