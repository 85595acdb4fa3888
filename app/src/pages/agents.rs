//! `/dashboard` (the agent list), `/dashboard/new-agent` and the agent form shared by
//! creation and the agent's settings (`GET/POST /api/agents`, `PUT/DELETE
//! /api/agents/{agentId}`, `GET /api/models`).

use super::dashboard::{short_time, use_session};
use crate::api::limits::{AGENT_DESCRIPTION_MAX, AGENT_NAME_MAX, SYSTEM_PROMPT_MAX};
use crate::{
    api::{
        Agent, AgentResponse, AgentsResponse, CreateAgentRequest, ModelsResponse, SuccessResponse,
        UpdateAgentRequest,
    },
    client,
    components::{
        fetch_signed_in, load_error_view, loading_view, use_hydrated, FormError, FormErrorNotice,
        Notice, Tone,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_navigate;

/// The agents of the user with their model, status and last update, how many the plan
/// allows, and the way to create one.
#[component]
pub fn AgentsPage() -> impl IntoView {
    let session = use_session();
    let agents = fetch_signed_in(|| "/api/agents".to_owned(), |a: AgentsResponse| a.agents);

    let count = move || {
        agents
            .map(|loaded| loaded.as_ref().ok().map(Vec::len))
            .flatten()
    };
    let limit = move || session.me.get().map(|me| (me.limits.agents, me.user.plan));

    view! {
        <Title text="Agents"/>
        <section class="card">
            <div class="section-head">
                <h1>"Agents"</h1>
                <a class="button" href="/dashboard/new-agent">"New agent"</a>
            </div>
            {move || {
                match (count(), limit()) {
                    (Some(count), Some((limit, plan))) => {
                        let full = count as u32 >= limit;
                        view! {
                            <p class="muted" data-testid="agent-limit">
                                {format!("{count} of {limit} agents on the {plan} plan.")}
                            </p>
                            <Show when=move || full>
                                <Notice tone=Tone::Info testid="agent-limit-reached">
                                    {format!(
                                        "You have reached your plan's limit of {limit} agents. Delete an agent or upgrade your plan to create another.",
                                    )}
                                </Notice>
                            </Show>
                        }
                            .into_any()
                    }
                    _ => ().into_any(),
                }
            }}
            <Suspense fallback=|| loading_view("agents")>
            {move || Suspend::new(async move { match agents.await {
                Err(err) => load_error_view(&err, "agents"),
                Ok(list) if list.is_empty() => {
                    view! {
                        <p class="empty" data-testid="agents-empty">
                            "No agents yet. Create one to chat with it and give it a knowledge base."
                        </p>
                    }
                        .into_any()
                }
                Ok(list) => {
                    view! {
                        <div class="table-wrap">
                            <table class="table" data-testid="agents-table">
                                <thead>
                                    <tr>
                                        <th scope="col">"Name"</th>
                                        <th scope="col">"Model"</th>
                                        <th scope="col">"Status"</th>
                                        <th scope="col">"Updated"</th>
                                    </tr>
                                </thead>
                                <tbody>
                                    {list
                                        .into_iter()
                                        .map(|agent| {
                                            view! {
                                                <tr>
                                                    <td>
                                                        <a href=format!("/dashboard/agents/{}", agent.id)>
                                                            {agent.name.clone()}
                                                        </a>
                                                    </td>
                                                    <td>
                                                        <code>{agent.model.clone()}</code>
                                                    </td>
                                                    <td>
                                                        <span class="status">{agent.status.clone()}</span>
                                                    </td>
                                                    <td>
                                                        <time datetime=agent.updated_at.clone()>
                                                            {short_time(&agent.updated_at)}
                                                        </time>
                                                    </td>
                                                </tr>
                                            }
                                        })
                                        .collect_view()}
                                </tbody>
                            </table>
                        </div>
                    }
                        .into_any()
                }
            }})}
            </Suspense>
        </section>
    }
    .into_any()
}

/// `/dashboard/new-agent`: the agent form in creation mode.
#[component]
pub fn NewAgentPage() -> impl IntoView {
    let navigate = use_navigate();
    let on_saved = Callback::new(move |agent: Agent| {
        navigate(
            &format!("/dashboard/agents/{}?created=1", agent.id),
            Default::default(),
        );
    });
    view! {
        <Title text="New agent"/>
        <section class="card">
            <h1>"New agent"</h1>
            <AgentForm agent=None on_saved/>
        </section>
    }
    .into_any()
}

/// Checks a form's fields as the server would (docs/api.md § Agents, models and chat) and says what to fix.
///
/// # Errors
/// The first rule broken, in words.
pub fn validate_agent(name: &str, description: &str, prompt: &str) -> Result<(), String> {
    if name.trim().is_empty() {
        return Err("Give the agent a name.".into());
    }
    if name.trim().chars().count() > AGENT_NAME_MAX {
        return Err(format!(
            "The name can have at most {AGENT_NAME_MAX} characters."
        ));
    }
    if description.chars().count() > AGENT_DESCRIPTION_MAX {
        return Err(format!(
            "The description can have at most {AGENT_DESCRIPTION_MAX} characters."
        ));
    }
    if prompt.chars().count() > SYSTEM_PROMPT_MAX {
        return Err(format!(
            "The system prompt can have at most {SYSTEM_PROMPT_MAX} characters."
        ));
    }
    Ok(())
}

/// The agent's name, description, system prompt and model. With `agent` it edits that
/// agent (`PUT`), without it creates one (`POST`; a 403 at the plan's agent limit is
/// explained). `on_saved` receives the server's answer.
#[component]
pub fn AgentForm(
    /// The agent to edit; `None` creates one.
    agent: Option<Agent>,
    /// Called with the saved agent.
    on_saved: Callback<Agent>,
) -> impl IntoView {
    let hydrated = use_hydrated();
    let editing = agent.as_ref().map(|a| a.id.clone());
    let name = RwSignal::new(agent.as_ref().map(|a| a.name.clone()).unwrap_or_default());
    let description = RwSignal::new(
        agent
            .as_ref()
            .map(|a| a.description.clone())
            .unwrap_or_default(),
    );
    let prompt = RwSignal::new(
        agent
            .as_ref()
            .map(|a| a.system_prompt.clone())
            .unwrap_or_default(),
    );
    let model = RwSignal::new(agent.as_ref().map(|a| a.model.clone()).unwrap_or_default());
    let models = fetch_signed_in(|| "/api/models".to_owned(), |m: ModelsResponse| m);
    let error: FormError = RwSignal::new(None);
    let limit_hit = RwSignal::new(false);
    let saved = RwSignal::new(false);

    // Creates (`POST`) or updates (`PUT`) the agent with the checked name, description,
    // prompt and model (empty: the server's default).
    let save = Action::new_local(move |(n, d, p, m): &(String, String, String, String)| {
        let (n, d, p, m) = (n.clone(), d.clone(), p.clone(), m.clone());
        let editing = editing.clone();
        async move {
            let model = (!m.is_empty()).then_some(m);
            let outcome = match editing {
                Some(id) => {
                    let body = UpdateAgentRequest {
                        name: Some(n),
                        description: Some(d),
                        system_prompt: Some(p),
                        model,
                    };
                    client::put_signed_in::<_, AgentResponse>(&format!("/api/agents/{id}"), &body)
                        .await
                }
                None => {
                    let body = CreateAgentRequest {
                        name: n,
                        description: Some(d).filter(|d| !d.is_empty()),
                        system_prompt: Some(p).filter(|p| !p.is_empty()),
                        model,
                    };
                    client::post_signed_in::<_, AgentResponse>("/api/agents", &body).await
                }
            };
            match outcome {
                Ok(answer) => {
                    saved.set(true);
                    on_saved.run(answer.agent);
                }
                Err(err) => {
                    limit_hit.set(err.status == 403);
                    error.set(Some(err.message().to_owned()));
                }
            }
        }
    });
    let pending = save.pending();

    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if pending.get_untracked() {
            return;
        }
        let (n, d, p, m) = (
            name.get_untracked().trim().to_owned(),
            description.get_untracked(),
            prompt.get_untracked(),
            model.get_untracked(),
        );
        saved.set(false);
        limit_hit.set(false);
        if let Err(message) = validate_agent(&n, &d, &p) {
            error.set(Some(message));
            return;
        }
        error.set(None);
        save.dispatch((n, d, p, m));
    };

    let creating = agent.is_none();
    view! {
        <form class="form form-wide" on:submit=on_submit novalidate>
            <div class="field">
                <label for="agent-name">"Name"</label>
                <input
                    id="agent-name"
                    type="text"
                    required
                    maxlength=AGENT_NAME_MAX.to_string()
                    prop:value=move || name.get()
                    on:input=move |ev| name.set(event_target_value(&ev))
                />
            </div>
            <div class="field">
                <label for="agent-description">
                    "Description " <span class="optional">"(optional)"</span>
                </label>
                <textarea
                    id="agent-description"
                    rows="2"
                    maxlength=AGENT_DESCRIPTION_MAX.to_string()
                    prop:value=move || description.get()
                    on:input=move |ev| description.set(event_target_value(&ev))
                ></textarea>
            </div>
            <div class="field">
                <label for="agent-prompt">"System prompt"</label>
                <textarea
                    id="agent-prompt"
                    class="prompt"
                    rows="14"
                    maxlength=SYSTEM_PROMPT_MAX.to_string()
                    aria-describedby="agent-prompt-hint"
                    prop:value=move || prompt.get()
                    on:input=move |ev| prompt.set(event_target_value(&ev))
                ></textarea>
                <p id="agent-prompt-hint" class="hint">
                    {move || {
                        format!(
                            "How the agent behaves. {} of {SYSTEM_PROMPT_MAX} characters.",
                            prompt.read().chars().count(),
                        )
                    }}
                </p>
            </div>
            <div class="field">
                <label for="agent-model">"Model"</label>
                <Suspense fallback=|| loading_view("models")>
                {move || Suspend::new(async move { match models.await {
                    Err(err) => load_error_view(&err, "models"),
                    Ok(answer) => {
                        let current = model.get_untracked();
                        let listed = current.is_empty()
                            || answer.models.iter().any(|m| m.id == current);
                        view! {
                            <select
                                id="agent-model"
                                prop:value=move || model.get()
                                on:change=move |ev| model.set(event_target_value(&ev))
                            >
                                <option value="" selected=current.is_empty()>
                                    {format!("Server default ({})", answer.default_model)}
                                </option>
                                {(!listed)
                                    .then(|| {
                                        view! {
                                            <option value=current.clone() selected=true>
                                                {format!("{current} (no longer offered)")}
                                            </option>
                                        }
                                    })}
                                {answer
                                    .models
                                    .iter()
                                    .map(|m| {
                                        let label = match m.context_window {
                                            Some(window) => {
                                                format!("{} · {} · {window} tokens", m.id, m.provider)
                                            }
                                            None => format!("{} · {}", m.id, m.provider),
                                        };
                                        view! {
                                            <option value=m.id.clone() selected=m.id == current>
                                                {label}
                                            </option>
                                        }
                                    })
                                    .collect_view()}
                            </select>
                        }
                            .into_any()
                    }
                }})}
                </Suspense>
            </div>
            <FormErrorNotice error/>
            <Show when=move || limit_hit.get() && creating>
                <Notice tone=Tone::Info testid="agent-limit-help">
                    "Your plan's agent limit is reached: delete an agent you no longer need, or ask an administrator to move your account to a larger plan."
                </Notice>
            </Show>
            <Show when=move || saved.get() && !creating>
                <Notice tone=Tone::Success testid="agent-saved">"Saved."</Notice>
            </Show>
            <div class="form-actions">
                <button
                    type="submit"
                    class="button"
                    disabled=move || !hydrated.get() || pending.get()
                    aria-busy=move || pending.get().to_string()
                >
                    {move || match (pending.get(), creating) {
                        (true, _) => "Saving…",
                        (false, true) => "Create agent",
                        (false, false) => "Save changes",
                    }}
                </button>
            </div>
        </form>
    }
    .into_any()
}

/// "Delete" with an inline confirmation; `on_confirm` runs after the second click.
#[component]
pub fn ConfirmButton(
    /// The first button's label, e.g. "Delete agent".
    label: &'static str,
    /// The question shown after the first click.
    #[prop(into)]
    question: String,
    /// The confirming button's label, e.g. "Yes, delete".
    confirm: &'static str,
    /// Whether the action is under way (disables the buttons).
    #[prop(into)]
    busy: Signal<bool>,
    /// The action.
    on_confirm: Callback<()>,
) -> impl IntoView {
    let asking = RwSignal::new(false);
    view! {
        <Show
            when=move || asking.get()
            fallback=move || {
                view! {
                    <button
                        type="button"
                        class="button button-danger button-small"
                        on:click=move |_| asking.set(true)
                        disabled=move || busy.get()
                    >
                        {label}
                    </button>
                }
            }
        >
            <span class="confirm" role="group" aria-label="Confirm">
                <span>{question.clone()}</span>
                <button
                    type="button"
                    class="button button-danger button-small"
                    on:click=move |_| {
                        asking.set(false);
                        on_confirm.run(());
                    }
                    disabled=move || busy.get()
                >
                    {confirm}
                </button>
                <button
                    type="button"
                    class="button button-secondary button-small"
                    on:click=move |_| asking.set(false)
                >
                    "Cancel"
                </button>
            </span>
        </Show>
    }
    .into_any()
}

/// Deletes the agent after confirmation and returns to the list.
#[component]
pub fn DeleteAgent(
    /// The agent's id.
    id: String,
    /// The agent's name, for the question.
    name: String,
) -> impl IntoView {
    let navigate = use_navigate();
    let error = RwSignal::new(None::<String>);
    let delete = Action::new_local(move |id: &String| {
        let id = id.clone();
        let navigate = navigate.clone();
        async move {
            match client::delete_signed_in::<SuccessResponse>(&format!("/api/agents/{id}")).await {
                Ok(_) => navigate("/dashboard", Default::default()),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let busy = delete.pending();
    let on_confirm = Callback::new(move |()| {
        error.set(None);
        delete.dispatch(id.clone());
    });
    view! {
        <div class="danger-zone">
            <h2>"Delete this agent"</h2>
            <p class="muted">"Its conversations and knowledge base are deleted with it."</p>
            <ConfirmButton
                label="Delete agent"
                question=format!("Delete “{name}” for good?")
                confirm="Yes, delete"
                busy
                on_confirm
            />
            {move || {
                error
                    .get()
                    .map(|message| {
                        view! { <Notice tone=Tone::Error testid="delete-error">{message}</Notice> }
                    })
            }}
        </div>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn agent_forms_are_checked_before_sending() {
        assert!(validate_agent("  ", "", "").is_err());
        assert!(validate_agent(&"n".repeat(AGENT_NAME_MAX + 1), "", "").is_err());
        assert!(validate_agent("Support", &"d".repeat(AGENT_DESCRIPTION_MAX + 1), "").is_err());
        assert!(validate_agent("Support", "", &"p".repeat(SYSTEM_PROMPT_MAX + 1)).is_err());
        assert!(validate_agent("Support", "Helps", "Answer briefly.").is_ok());
    }
}
