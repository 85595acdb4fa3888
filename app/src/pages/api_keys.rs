//! `/dashboard/api-keys`: API keys for programs (`POST /api/api-keys`, `GET /api/api-keys`,
//! `DELETE /api/api-keys/{id}`, `POST /api/api-keys/{id}/rotate`).
//!
//! The full key is shown once, right after creation or rotation; afterwards only its
//! prefix is listed (docs/api.md § API key lifecycle). A key may be bound to some of the
//! account's agents (`GET /api/agents` names them) and given a monthly token budget; the
//! list shows both and the key's tokens this month (docs/api.md § Token quotas).

use super::{agents::ConfirmButton, dashboard::short_time};
use crate::api::limits::API_KEY_NAME_MAX;
use crate::{
    api::{
        Agent, AgentsResponse, ApiKeyInfo, ApiKeysResponse, CreateApiKeyRequest, CreatedApiKey,
        SuccessResponse, SCOPES,
    },
    client,
    components::{
        counted, fetch_signed_in, load_error_view, loading_view, use_hydrated, Fetched, FormError,
        FormErrorNotice, Notice, ShownOnce, Tone, UsageMeter,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;

/// What each scope allows (docs/api.md § API key scopes).
pub fn scope_description(scope: &str) -> &'static str {
    match scope {
        "agents:read" => "List and view agents",
        "agents:write" => "Create, update and delete agents",
        "chat:read" => "Read conversations and messages",
        "chat:write" => "Send messages and create conversations",
        "knowledge:read" => "Read knowledge base documents",
        "knowledge:write" => "Add, update and delete knowledge base documents",
        "integrations:read" => "View integrations",
        "integrations:write" => "Manage integrations",
        "webhooks:read" => "View webhooks",
        "webhooks:write" => "Manage webhooks",
        _ => "",
    }
}

/// Reads the budget field: empty is no budget; otherwise a whole number of tokens, at least
/// 1, whose thousands may be grouped with commas, spaces, underscores or apostrophes
/// ("120,000").
///
/// # Errors
/// The rule broken, in words.
pub fn token_budget(text: &str) -> Result<Option<u64>, String> {
    let digits: String = text
        .chars()
        .filter(|c| !matches!(c, ',' | '_' | '\'' | ' ' | '\u{a0}' | '\u{202f}'))
        .collect();
    if digits.is_empty() {
        return Ok(None);
    }
    if !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err(
            "The monthly token budget is a whole number of tokens, e.g. 120000; leave it empty for no budget."
                .into(),
        );
    }
    match digits.parse::<u64>() {
        Ok(0) => Err(
            "The monthly token budget must be at least 1 token; leave it empty for no budget."
                .into(),
        ),
        Ok(budget) => Ok(Some(budget)),
        Err(_) => Err("The monthly token budget is too large.".into()),
    }
}

/// Checks the key form as the server would and returns the request body. `agents` is
/// `None` for every agent of the account, or the ids of the agents chosen.
///
/// # Errors
/// The first rule broken, in words.
pub fn key_request(
    name: &str,
    scopes: &[bool],
    expires: &str,
    today: &str,
    agents: Option<&[String]>,
    budget: &str,
) -> Result<CreateApiKeyRequest, String> {
    let name = name.trim();
    if name.is_empty() {
        return Err("Give the key a name, e.g. the program that uses it.".into());
    }
    if name.chars().count() > API_KEY_NAME_MAX {
        return Err(format!(
            "The name can have at most {API_KEY_NAME_MAX} characters."
        ));
    }
    let chosen: Vec<String> = SCOPES
        .iter()
        .zip(scopes)
        .filter(|(_, on)| **on)
        .map(|(scope, _)| (*scope).to_owned())
        .collect();
    if chosen.is_empty() {
        return Err("Choose at least one scope.".into());
    }
    if agents.is_some_and(<[String]>::is_empty) {
        return Err("Choose at least one agent, or “All agents”.".into());
    }
    if agents.is_some() && chosen.iter().any(|s| s.starts_with("webhooks:")) {
        return Err(
            "Webhooks carry every agent's events: a key for some agents cannot hold the webhook scopes."
                .into(),
        );
    }
    let monthly_token_budget = token_budget(budget)?;
    let expires = expires.trim();
    // ISO dates compare correctly as text.
    if !expires.is_empty() && !today.is_empty() && expires <= today {
        return Err("The expiry date must be in the future.".into());
    }
    Ok(CreateApiKeyRequest {
        name: name.to_owned(),
        scopes: chosen,
        expires_at: (!expires.is_empty()).then(|| format!("{expires}T23:59:59Z")),
        agent_ids: agents.map(<[String]>::to_vec),
        monthly_token_budget,
    })
}

/// The agents a key works for, as shown in the list: "All agents" for a key of every
/// agent, otherwise each agent's name (its id when it is not among `agents`, e.g. while
/// they load or after the agent was deleted).
pub fn key_agent_names(agent_ids: Option<&[String]>, agents: &[Agent]) -> Vec<String> {
    match agent_ids {
        None => vec!["All agents".to_owned()],
        Some(ids) => ids
            .iter()
            .map(|id| {
                agents
                    .iter()
                    .find(|a| &a.id == id)
                    .map_or_else(|| id.clone(), |a| a.name.clone())
            })
            .collect(),
    }
}

/// A key's budget in words: "No budget" or "120,000 tokens / month".
pub fn budget_words(budget: Option<u64>) -> String {
    budget.map_or_else(
        || "No budget".to_owned(),
        |n| format!("{} / month", counted(n, "token")),
    )
}

/// Today's date in UTC as `YYYY-MM-DD`, from the browser's clock; empty on the server.
fn today() -> String {
    if !cfg!(feature = "hydrate") {
        return String::new();
    }
    String::from(js_sys::Date::new_0().to_iso_string())
        .get(..10)
        .unwrap_or_default()
        .to_owned()
}

/// The key form, the once-shown new key, and the list of keys.
#[component]
pub fn ApiKeysPage() -> impl IntoView {
    let hydrated = use_hydrated();
    let keys = fetch_signed_in(
        || "/api/api-keys".to_owned(),
        |answer: ApiKeysResponse| answer.api_keys,
    );
    let agents = fetch_signed_in(|| "/api/agents".to_owned(), |a: AgentsResponse| a.agents);
    let name = RwSignal::new(String::new());
    let scopes = RwSignal::new([false; SCOPES.len()]);
    let expires = RwSignal::new(String::new());
    // Every agent (`true`), or only those whose ids are in `chosen_agents`.
    let all_agents = RwSignal::new(true);
    let chosen_agents = RwSignal::new(Vec::<String>::new());
    let budget = RwSignal::new(String::new());
    let error: FormError = RwSignal::new(None);
    let created = RwSignal::new(None::<CreatedApiKey>);
    let load = move || keys.refetch();

    let create = Action::new_local(move |body: &CreateApiKeyRequest| {
        let body = body.clone();
        async move {
            match client::post_signed_in::<_, CreatedApiKey>("/api/api-keys", &body).await {
                Ok(answer) => {
                    created.set(Some(answer));
                    name.set(String::new());
                    scopes.set([false; SCOPES.len()]);
                    expires.set(String::new());
                    all_agents.set(true);
                    chosen_agents.set(Vec::new());
                    budget.set(String::new());
                    load();
                }
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let pending = create.pending();

    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if pending.get_untracked() {
            return;
        }
        // The chosen agents in the list's order, leaving out any no longer listed.
        let agent_ids = (!all_agents.get_untracked()).then(|| {
            let chosen = chosen_agents.get_untracked();
            untrack(|| {
                agents.map(|answer| {
                    answer.as_ref().map_or_else(
                        |_| Vec::new(),
                        |list| {
                            list.iter()
                                .filter(|a| chosen.contains(&a.id))
                                .map(|a| a.id.clone())
                                .collect()
                        },
                    )
                })
            })
            .unwrap_or_default()
        });
        let body = match key_request(
            &name.get_untracked(),
            &scopes.get_untracked(),
            &expires.get_untracked(),
            &today(),
            agent_ids.as_deref(),
            &budget.get_untracked(),
        ) {
            Ok(body) => body,
            Err(message) => {
                error.set(Some(message));
                return;
            }
        };
        error.set(None);
        create.dispatch(body);
    };

    let on_rotated = Callback::new(move |answer: CreatedApiKey| {
        created.set(Some(answer));
        load();
    });
    let on_revoked = Callback::new(move |()| load());

    view! {
        <Title text="API keys"/>
        <div class="stack">
            {move || created.get().map(|answer| view! { <NewKey answer on_close=Callback::new(move |()| created.set(None))/> })}
            <section class="card">
                <h1>"API keys"</h1>
                <p class="muted">
                    "Programs call the API with a key in "
                    <code>"Authorization: Bearer key_…"</code>
                    ". A key holds only the scopes you give it and can never manage keys, sessions or the account."
                </p>
                <form class="form form-wide" on:submit=submit novalidate>
                    <div class="field">
                        <label for="key-name">"Name"</label>
                        <input
                            id="key-name"
                            type="text"
                            maxlength=API_KEY_NAME_MAX.to_string()
                            placeholder="CI pipeline"
                            prop:value=move || name.get()
                            on:input=move |ev| name.set(event_target_value(&ev))
                        />
                    </div>
                    <fieldset class="scopes">
                        <legend>"Scopes"</legend>
                        {SCOPES
                            .iter()
                            .enumerate()
                            .map(|(index, scope)| {
                                let id = format!("scope-{}", scope.replace(':', "-"));
                                let label_for = id.clone();
                                view! {
                                    <label class="check" for=label_for>
                                        <input
                                            id=id
                                            type="checkbox"
                                            value=*scope
                                            prop:checked=move || scopes.read()[index]
                                            on:change=move |ev| {
                                                let on = event_target_checked(&ev);
                                                scopes.update(|s| s[index] = on);
                                            }
                                        />
                                        <code>{*scope}</code>
                                        <span class="muted small">{scope_description(scope)}</span>
                                    </label>
                                }
                            })
                            .collect_view()}
                    </fieldset>
                    <AgentChoice agents all_agents chosen_agents/>
                    <div class="field-row">
                        <div class="field">
                            <label for="key-budget">
                                "Monthly token budget " <span class="optional">"(optional)"</span>
                            </label>
                            // Text with a numeric keyboard rather than type="number", which
                            // reads letters as an empty field and would silently drop the budget.
                            <input
                                id="key-budget"
                                type="text"
                                inputmode="numeric"
                                autocomplete="off"
                                placeholder="e.g. 120000"
                                aria-describedby="key-budget-hint"
                                data-testid="key-budget"
                                prop:value=move || budget.get()
                                on:input=move |ev| budget.set(event_target_value(&ev))
                            />
                            <p id="key-budget-hint" class="hint">
                                "Tokens (prompt + completion) the key may use per calendar month (UTC). Empty: no budget of its own; your plan's quota still applies."
                            </p>
                        </div>
                        <div class="field">
                            <label for="key-expires">
                                "Expires on " <span class="optional">"(optional)"</span>
                            </label>
                            <input
                                id="key-expires"
                                type="date"
                                prop:value=move || expires.get()
                                on:input=move |ev| expires.set(event_target_value(&ev))
                            />
                        </div>
                    </div>
                    <FormErrorNotice error/>
                    <div class="form-actions">
                        <button
                            type="submit"
                            class="button"
                            disabled=move || !hydrated.get() || pending.get()
                        >
                            {move || if pending.get() { "Creating…" } else { "Create key" }}
                        </button>
                    </div>
                </form>
            </section>
            <section class="card">
                <h2 class="first">"Your keys"</h2>
                <Transition fallback=|| loading_view("keys")>
                {move || Suspend::new(async move { match keys.await {
                    Err(err) => load_error_view(&err, "keys"),
                    Ok(list) if list.is_empty() => {
                        view! { <p class="empty" data-testid="keys-empty">"No API keys yet."</p> }.into_any()
                    }
                    Ok(list) => {
                        view! {
                            <div class="table-wrap">
                                <table class="table" data-testid="keys-table">
                                    <thead>
                                        <tr>
                                            <th scope="col">"Name"</th>
                                            <th scope="col">"Key"</th>
                                            <th scope="col">"Scopes"</th>
                                            <th scope="col">"Agents"</th>
                                            <th scope="col">"Monthly tokens"</th>
                                            <th scope="col">"Created"</th>
                                            <th scope="col">"Last used"</th>
                                            <th scope="col">"Expires"</th>
                                            <th scope="col">"Actions"</th>
                                        </tr>
                                    </thead>
                                    <tbody>
                                        {list
                                            .into_iter()
                                            .map(|key| view! { <KeyRow key agents on_rotated on_revoked/> })
                                            .collect_view()}
                                    </tbody>
                                </table>
                            </div>
                        }
                            .into_any()
                    }
                }})}
                </Transition>
            </section>
        </div>
    }
    .into_any()
}

/// "Agents" of the key form: "All agents", or "Only these agents" with a checkbox for
/// each of the account's agents.
#[component]
fn AgentChoice(
    /// The account's agents.
    agents: Fetched<Vec<Agent>>,
    /// Whether the key works for every agent.
    all_agents: RwSignal<bool>,
    /// The ids of the agents ticked (used when `all_agents` is false).
    chosen_agents: RwSignal<Vec<String>>,
) -> impl IntoView {
    let checkboxes = move || {
        let Some(loaded) = agents.map(Clone::clone) else {
            return loading_view("agents");
        };
        match loaded {
            Err(err) => {
                let message = format!("The agents could not be loaded: {}", err.message());
                view! { <p class="hint error-text">{message}</p> }.into_any()
            }
            Ok(list) if list.is_empty() => {
                let message =
                    "You have no agents yet; create one first, or give the key all agents.";
                view! { <p class="hint">{message}</p> }.into_any()
            }
            Ok(list) => list
                .into_iter()
                .map(|agent| agent_checkbox(agent, chosen_agents))
                .collect_view()
                .into_any(),
        }
    };
    view! {
        <fieldset class="choices" data-testid="key-agents" aria-describedby="key-agents-hint">
            <legend>"Agents"</legend>
            <label class="check" for="key-agents-all">
                <input
                    id="key-agents-all"
                    type="radio"
                    name="key-agents"
                    value="all"
                    checked=move || all_agents.get()
                    prop:checked=move || all_agents.get()
                    on:change=move |_| all_agents.set(true)
                />
                <span>"All agents"</span>
            </label>
            <label class="check" for="key-agents-some">
                <input
                    id="key-agents-some"
                    type="radio"
                    name="key-agents"
                    value="some"
                    checked=move || !all_agents.get()
                    prop:checked=move || !all_agents.get()
                    on:change=move |_| all_agents.set(false)
                />
                <span>"Only these agents"</span>
            </label>
            <Show when=move || !all_agents.get()>
                <div class="choice-list" role="group" aria-label="Agents the key works for" data-testid="key-agent-list">
                    {checkboxes}
                </div>
            </Show>
            <p id="key-agents-hint" class="hint">
                "A key for some agents sees and answers for those alone, and cannot create agents."
            </p>
        </fieldset>
    }
}

/// The checkbox of one agent in [`AgentChoice`], ticked while its id is in `chosen_agents`.
fn agent_checkbox(agent: Agent, chosen_agents: RwSignal<Vec<String>>) -> impl IntoView {
    let id = format!("key-agent-{}", agent.id);
    let label_for = id.clone();
    let agent_id = agent.id.clone();
    let checked = {
        let agent_id = agent_id.clone();
        move || chosen_agents.read().contains(&agent_id)
    };
    view! {
        <label class="check" for=label_for>
            <input
                id=id
                type="checkbox"
                value=agent.id.clone()
                prop:checked=checked
                on:change=move |ev| {
                    let on = event_target_checked(&ev);
                    chosen_agents.update(|ids| {
                        ids.retain(|id| *id != agent_id);
                        if on {
                            ids.push(agent_id.clone());
                        }
                    });
                }
            />
            <span>{agent.name}</span>
        </label>
    }
}

/// The key just created or rotated, shown once with "Copy" and a warning.
#[component]
fn NewKey(answer: CreatedApiKey, on_close: Callback<()>) -> impl IntoView {
    view! {
        <ShownOnce
            testid="new-key"
            title=format!("Your new key “{}”", answer.api_key.name)
            warning="Copy this key now and keep it somewhere safe. It is shown only this once: after you leave this page, only its first characters are listed."
            label="API key"
            value=answer.key
            on_close
        />
    }
}

/// One key of the list with "Rotate" and "Revoke", each confirmed first.
#[component]
fn KeyRow(
    key: ApiKeyInfo,
    agents: Fetched<Vec<Agent>>,
    on_rotated: Callback<CreatedApiKey>,
    on_revoked: Callback<()>,
) -> impl IntoView {
    let error = RwSignal::new(None::<String>);
    let revoke_action = Action::new_local(move |id: &String| {
        let path = format!("/api/api-keys/{id}");
        async move {
            match client::delete_signed_in::<SuccessResponse>(&path).await {
                Ok(_) => on_revoked.run(()),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let rotate_action = Action::new_local(move |id: &String| {
        let path = format!("/api/api-keys/{id}/rotate");
        async move {
            match client::post_signed_in::<_, CreatedApiKey>(&path, &serde_json::Map::new()).await {
                Ok(answer) => on_rotated.run(answer),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let (revoking, rotating) = (revoke_action.pending(), rotate_action.pending());
    let busy = Signal::derive(move || revoking.get() || rotating.get());
    let revoke = Callback::new({
        let id = key.id.clone();
        move |()| {
            error.set(None);
            revoke_action.dispatch(id.clone());
        }
    });
    let rotate = Callback::new({
        let id = key.id.clone();
        move |()| {
            error.set(None);
            rotate_action.dispatch(id.clone());
        }
    });
    let optional = |value: Option<String>, none: &str| {
        value.map_or_else(|| none.to_owned(), |v| short_time(&v))
    };
    let agent_names = {
        let ids = key.agent_ids.clone();
        move || {
            let names = agents
                .map(|answer| {
                    let listed = answer.as_ref().map(Vec::as_slice).unwrap_or_default();
                    key_agent_names(ids.as_deref(), listed)
                })
                .unwrap_or_else(|| key_agent_names(ids.as_deref(), &[]));
            names
                .into_iter()
                .map(|name| view! { <span class="tag">{name}</span> })
                .collect_view()
        }
    };
    let (used, budget) = (key.tokens_this_month, key.monthly_token_budget);
    view! {
        <tr data-testid="key-row">
            <td>{key.name.clone()}</td>
            <td>
                <code data-testid="key-prefix">{format!("{}…", key.prefix)}</code>
            </td>
            // The flex boxes sit inside the cells: a cell shown as flex leaves the table.
            <td>
                <div class="scope-cell">
                    {key.scopes.iter().map(|s| view! { <code class="tag">{s.clone()}</code> }).collect_view()}
                </div>
            </td>
            <td>
                <div
                    class="scope-cell"
                    data-testid="key-agent-names"
                    data-all=key.agent_ids.is_none().to_string()
                >
                    {agent_names}
                </div>
            </td>
            <td>
                <div class="key-usage">
                    <span data-testid="key-tokens-month" data-tokens=used.to_string()>
                        {format!("{} this month", counted(used, "token"))}
                    </span>
                    {budget.map(|limit| view! { <UsageMeter used limit label="Tokens this month of the key's budget"/> })}
                    <span
                        class="muted small"
                        data-testid="key-budget-shown"
                        data-budget=budget.map(|b| b.to_string())
                    >
                        {budget_words(budget)}
                    </span>
                </div>
            </td>
            <td>{short_time(&key.created_at)}</td>
            <td>{optional(key.last_used_at.clone(), "never")}</td>
            <td>{optional(key.expires_at.clone(), "never")}</td>
            <td>
                <div class="row-actions">
                    <ConfirmButton
                        label="Rotate"
                        question="Replace this key with a new one? The old key stops working at once."
                        confirm="Yes, rotate"
                        busy
                        on_confirm=rotate
                    />
                    <ConfirmButton
                        label="Revoke"
                        question="Revoke this key? Programs using it are refused at once."
                        confirm="Yes, revoke"
                        busy
                        on_confirm=revoke
                    />
                    {move || error.get().map(|message| view! { <Notice tone=Tone::Error testid="key-error">{message}</Notice> })}
                </div>
            </td>
        </tr>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(id: &str, name: &str) -> Agent {
        Agent {
            id: id.to_owned(),
            name: name.to_owned(),
            description: String::new(),
            system_prompt: String::new(),
            model: String::new(),
            status: "active".to_owned(),
            created_at: "2026-11-20T10:00:00Z".to_owned(),
            updated_at: "2026-11-20T10:00:00Z".to_owned(),
        }
    }

    #[test]
    fn key_forms_are_checked_before_sending() {
        let mut scopes = [false; SCOPES.len()];
        assert!(
            key_request("CI", &scopes, "", "2026-11-20", None, "").is_err(),
            "no scope"
        );
        scopes[0] = true;
        scopes[3] = true;
        assert!(
            key_request(" ", &scopes, "", "2026-11-20", None, "").is_err(),
            "no name"
        );
        assert!(
            key_request("CI", &scopes, "2026-11-20", "2026-11-20", None, "").is_err(),
            "past expiry"
        );
        let body = key_request("CI", &scopes, "2027-01-31", "2026-11-20", None, "").unwrap();
        assert_eq!(body.scopes, vec!["agents:read", "chat:write"]);
        assert_eq!(body.expires_at.as_deref(), Some("2027-01-31T23:59:59Z"));
        assert_eq!(body.agent_ids, None);
        assert_eq!(body.monthly_token_budget, None);
        assert_eq!(
            key_request("CI", &scopes, "", "", None, "")
                .unwrap()
                .expires_at,
            None
        );
    }

    #[test]
    fn agents_and_budget_are_checked_before_sending() {
        let mut scopes = [true; SCOPES.len()];
        assert!(
            key_request("CI", &scopes, "", "", Some(&[]), "").is_err(),
            "no agent chosen"
        );
        let ids = vec!["a1".to_owned(), "a2".to_owned()];
        assert!(
            key_request("CI", &scopes, "", "", Some(&ids), "")
                .unwrap_err()
                .contains("webhook"),
            "a key bound to agents holds no webhook scope"
        );
        assert!(key_request("CI", &scopes, "", "", None, "").is_ok());
        for (scope, on) in SCOPES.iter().zip(scopes.iter_mut()) {
            *on = !scope.starts_with("webhooks:");
        }
        let body = key_request("CI", &scopes, "", "", Some(&ids), " 120,000 ").unwrap();
        assert_eq!(body.agent_ids, Some(ids));
        assert_eq!(body.monthly_token_budget, Some(120_000));
        for bad in ["0", "1.5", "-3", "ten", "99999999999999999999"] {
            assert!(
                key_request("CI", &scopes, "", "", None, bad).is_err(),
                "budget {bad}"
            );
        }
        // Absent fields stay out of the body: the server refuses unknown ones and reads
        // absent ones as "every agent" and "no budget".
        let body = key_request("CI", &scopes, "", "", None, "  ").unwrap();
        let json = serde_json::to_value(&body).unwrap();
        assert!(json.get("agentIds").is_none());
        assert!(json.get("monthlyTokenBudget").is_none());
        let body = key_request("CI", &scopes, "", "", Some(&["a1".to_owned()]), "5").unwrap();
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(json["agentIds"], serde_json::json!(["a1"]));
        assert_eq!(json["monthlyTokenBudget"], serde_json::json!(5));
    }

    #[test]
    fn budgets_read_grouped_digits() {
        assert_eq!(token_budget(""), Ok(None));
        assert_eq!(token_budget("1"), Ok(Some(1)));
        assert_eq!(token_budget("120 000"), Ok(Some(120_000)));
        assert_eq!(token_budget("1_000'000"), Ok(Some(1_000_000)));
        assert!(token_budget("0").is_err());
        assert!(token_budget("1e6").is_err());
    }

    #[test]
    fn keys_show_their_agents_and_budget() {
        let agents = [agent("a1", "Support"), agent("a2", "Sales")];
        assert_eq!(key_agent_names(None, &agents), vec!["All agents"]);
        let ids = ["a2".to_owned(), "gone".to_owned()];
        assert_eq!(key_agent_names(Some(&ids), &agents), vec!["Sales", "gone"]);
        assert_eq!(key_agent_names(Some(&ids), &[]), vec!["a2", "gone"]);
        assert_eq!(budget_words(None), "No budget");
        assert_eq!(budget_words(Some(120_000)), "120,000 tokens / month");
        assert_eq!(budget_words(Some(1)), "1 token / month");
    }

    #[test]
    fn every_scope_is_described() {
        assert!(SCOPES.iter().all(|s| !scope_description(s).is_empty()));
    }
}
