//! `/dashboard/agents/{id}/*`: one agent — its settings and tools, chat, knowledge base
//! and the getting-started examples, under tabs (`GET /api/agents/{agentId}`).

use super::{
    agents::{AgentForm, DeleteAgent},
    tools::ToolsSection,
};
use crate::{
    api::{Agent, AgentResponse},
    client::{self, ApiError},
    components::{Notice, Tone},
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{
    components::Outlet,
    hooks::{use_location, use_params_map, use_query_map},
};

/// The agent of the current route, shared by [`AgentLayout`] with its tabs.
#[derive(Clone, Copy)]
pub struct AgentContext {
    /// The agent id from the path.
    pub id: Memo<String>,
    /// The agent as last loaded or saved, with the id it was loaded for (see
    /// [`AgentContext::current`]).
    pub agent: LocalResource<(String, Result<Agent, ApiError>)>,
}

impl AgentContext {
    /// The agent of the current path (reactive): `None` while it is loading, also right
    /// after the path named another agent, then the answer or the server's error.
    pub fn current(&self) -> Option<Result<Agent, ApiError>> {
        let id = self.id.get();
        self.agent
            .map(|(loaded_for, answer)| (*loaded_for == id).then(|| answer.clone()))
            .flatten()
    }

    /// Shows `saved` as the agent without loading it again.
    pub fn set_saved(&self, saved: Agent) {
        self.agent.set(Some((saved.id.clone(), Ok(saved))));
    }
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
    let agent = LocalResource::new(move || {
        let id = id.get();
        async move {
            let answer = client::get_json_signed_in::<AgentResponse>(&format!("/api/agents/{id}"))
                .await
                .map(|answer| answer.agent);
            (id, answer)
        }
    });
    let context = AgentContext { id, agent };
    provide_context(context);

    let failed = Memo::new(move |_| match context.current() {
        Some(Err(err)) => Some(err.message().to_owned()),
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
                {move || match context.current() {
                    Some(Ok(agent)) => agent.name,
                    None => "Loading agent…".to_owned(),
                    Some(Err(_)) => "Agent".to_owned(),
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
    let context = use_agent();
    let query = use_query_map();
    let created = move || query.read().get("created").is_some_and(|v| v == "1");
    let on_saved = Callback::new(move |saved: Agent| context.set_saved(saved));
    // The form depends on the agent's id only, so that saving (which updates the agent)
    // keeps the form and its "Saved." notice, while another agent starts it over.
    let ready_id = Memo::new(move |_| match context.current() {
        Some(Ok(current)) => Some(current.id),
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
                {move || match (ready_id.get(), untrack(|| context.current())) {
                    (Some(id), Some(Ok(current))) => {
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
