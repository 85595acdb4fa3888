//! `/dashboard/integrations`: integrations with third-party providers
//! (`GET /api/integrations/providers`, `GET`/`POST /api/integrations`,
//! `DELETE /api/integrations/{id}`).
//!
//! The form is built from the provider catalogue: each provider's credential fields (secret
//! ones as password inputs) and config fields. Credentials are never shown again after
//! creation; the list shows their masked hints. An MCP server integration can list its
//! tools live (`GET /api/integrations/{id}/tools`).

use super::{
    agents::ConfirmButton,
    dashboard::short_time,
    tools::{McpServerTools, MCP_PROVIDER},
};
use crate::api::limits::INTEGRATION_NAME_MAX;
use crate::{
    api::{
        Agent, AgentsResponse, CreateIntegrationRequest, CreatedResponse, Integration,
        IntegrationField, IntegrationProvider, IntegrationProvidersResponse, IntegrationsResponse,
        SuccessResponse,
    },
    client,
    components::{
        fetch_signed_in, load_error_view, loading_view, use_hydrated, FormError, FormErrorNotice,
        Notice, Tone,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;
use serde_json::{Map, Value};

/// Config fields whose value is a list, entered one item per line.
const LIST_FIELDS: &[&str] = &["allowedOrigins"];
/// Config fields whose value is a whole number.
const NUMBER_FIELDS: &[&str] = &["requestsPerMinute"];

/// The JSON value of a form field: lists one item per line, numbers parsed, text trimmed;
/// `None` when left empty.
///
/// # Errors
/// A number field that is not a whole number.
fn field_value(field: &IntegrationField, raw: &str) -> Result<Option<Value>, String> {
    let raw = raw.trim();
    if raw.is_empty() {
        return Ok(None);
    }
    if LIST_FIELDS.contains(&field.name.as_str()) {
        let items: Vec<Value> = raw
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .map(Value::from)
            .collect();
        return Ok(Some(Value::Array(items)));
    }
    if NUMBER_FIELDS.contains(&field.name.as_str()) {
        return raw
            .parse::<i64>()
            .map(|n| Some(Value::from(n)))
            .map_err(|_| format!("{} must be a whole number.", field.label));
    }
    Ok(Some(Value::from(raw)))
}

/// Checks the form as the server would (name, required fields) and returns the body.
///
/// # Errors
/// The first rule broken, in words.
pub fn integration_request(
    provider: &IntegrationProvider,
    name: &str,
    agent_id: &str,
    values: &[(String, String)],
) -> Result<CreateIntegrationRequest, String> {
    let name = name.trim();
    if name.is_empty() {
        return Err("Give the integration a name.".into());
    }
    let value_of = |field: &str| {
        values
            .iter()
            .find(|(n, _)| n == field)
            .map_or("", |(_, v)| v.as_str())
    };
    let collect = |fields: &[IntegrationField]| -> Result<Map<String, Value>, String> {
        let mut map = Map::new();
        for field in fields {
            match field_value(field, value_of(&field.name))? {
                Some(value) => {
                    map.insert(field.name.clone(), value);
                }
                None if field.required => return Err(format!("{} is required.", field.label)),
                None => {}
            }
        }
        Ok(map)
    };
    let credentials = collect(&provider.credential_fields)?;
    let config = collect(&provider.config_fields)?;
    Ok(CreateIntegrationRequest {
        provider_code: provider.code.clone(),
        name: name.to_owned(),
        agent_id: (!agent_id.trim().is_empty()).then(|| agent_id.trim().to_owned()),
        credentials: Value::Object(credentials),
        config: (!config.is_empty()).then_some(Value::Object(config)),
    })
}

/// The catalogue, the form for the chosen provider, and the user's integrations.
#[component]
pub fn IntegrationsPage() -> impl IntoView {
    let hydrated = use_hydrated();
    let chosen = RwSignal::new(String::new());
    // The catalogue; the form starts with its first provider.
    let providers = LocalResource::new(move || async move {
        let answer = client::get_json_signed_in::<IntegrationProvidersResponse>(
            "/api/integrations/providers",
        )
        .await
        .map(|answer| answer.providers);
        if let Some(first) = answer.as_ref().ok().and_then(|list| list.first()) {
            chosen.set(first.code.clone());
        }
        answer
    });
    // The agents an integration can be linked to; none when they cannot be listed.
    let agent_list = LocalResource::new(|| async {
        client::get_json_signed_in::<AgentsResponse>("/api/agents")
            .await
            .map(|answer| answer.agents)
            .unwrap_or_default()
    });
    let agents = Signal::derive(move || agent_list.get().unwrap_or_default());
    let integrations = fetch_signed_in(
        || "/api/integrations".to_owned(),
        |answer: IntegrationsResponse| answer.integrations,
    );
    let name = RwSignal::new(String::new());
    let agent = RwSignal::new(String::new());
    let values = RwSignal::new(Vec::<(String, String)>::new());
    let error: FormError = RwSignal::new(None);
    let created = RwSignal::new(None::<String>);
    let load = move || integrations.refetch();

    let provider = move || {
        providers
            .map(|loaded| {
                let chosen = chosen.get();
                loaded
                    .as_ref()
                    .ok()
                    .and_then(|list| list.iter().find(|p| p.code == chosen).cloned())
            })
            .flatten()
    };
    let create = Action::new_local(move |body: &CreateIntegrationRequest| {
        let body = body.clone();
        async move {
            match client::post_signed_in::<_, CreatedResponse>("/api/integrations", &body).await {
                Ok(answer) => {
                    created.set(Some(answer.message));
                    name.set(String::new());
                    values.set(Vec::new());
                    load();
                }
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let pending = create.pending();
    let set_value = move |field: String, value: String| {
        values.update(|vs| match vs.iter_mut().find(|(n, _)| *n == field) {
            Some(entry) => entry.1 = value,
            None => vs.push((field, value)),
        });
    };

    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if pending.get_untracked() {
            return;
        }
        let Some(p) = provider() else { return };
        let body = match integration_request(
            &p,
            &name.get_untracked(),
            &agent.get_untracked(),
            &values.get_untracked(),
        ) {
            Ok(body) => body,
            Err(message) => {
                error.set(Some(message));
                return;
            }
        };
        error.set(None);
        created.set(None);
        create.dispatch(body);
    };

    let field_input = move |field: IntegrationField, group: &'static str| {
        let id = format!("integration-{group}-{}", field.name);
        let label_for = id.clone();
        let key = field.name.clone();
        let current = {
            let key = key.clone();
            move || {
                values
                    .read()
                    .iter()
                    .find(|(n, _)| *n == key)
                    .map(|(_, v)| v.clone())
                    .unwrap_or_default()
            }
        };
        let optional =
            (!field.required).then(|| view! { <span class="optional">" (optional)"</span> });
        let input = if LIST_FIELDS.contains(&field.name.as_str()) {
            view! {
                <textarea id=id rows="3" placeholder="https://www.example.com"
                    prop:value=current
                    on:input=move |ev| set_value(key.clone(), event_target_value(&ev))
                ></textarea>
            }
            .into_any()
        } else {
            let kind = if field.secret {
                "password"
            } else if NUMBER_FIELDS.contains(&field.name.as_str()) {
                "number"
            } else {
                "text"
            };
            view! {
                <input id=id type=kind autocomplete="off"
                    prop:value=current
                    on:input=move |ev| set_value(key.clone(), event_target_value(&ev))
                />
            }
            .into_any()
        };
        view! {
            <div class="field">
                <label for=label_for>{field.label.clone()} {optional}</label>
                {input}
            </div>
        }
    };

    view! {
        <Title text="Integrations"/>
        <div class="stack">
            <section class="card">
                <h1>"Integrations"</h1>
                <p class="muted">
                    "Connect an agent to a chat platform, a website or another service. Credentials are encrypted when stored and never shown again."
                </p>
                <Suspense fallback=|| loading_view("providers")>
                {move || Suspend::new(async move { match providers.await {
                    Err(err) => load_error_view(&err, "providers"),
                    Ok(list) => view! {
                        <form class="form form-wide" on:submit=submit novalidate>
                            <div class="field">
                                <label for="integration-provider">"Provider"</label>
                                <select id="integration-provider"
                                    prop:value=move || chosen.get()
                                    on:change=move |ev| { chosen.set(event_target_value(&ev)); values.set(Vec::new()); error.set(None); }>
                                    {list.iter().map(|p| view! { <option value=p.code.clone()>{p.name.clone()}</option> }).collect_view()}
                                </select>
                                <p class="muted small" data-testid="provider-description">
                                    {move || provider().map(|p| {
                                        let live = if p.live { "" } else { " Its settings are stored and checked; the live channel is not running on this server yet." };
                                        format!("{}{live}", p.description)
                                    })}
                                </p>
                            </div>
                            <div class="field">
                                <label for="integration-name">"Name"</label>
                                <input id="integration-name" type="text" maxlength=INTEGRATION_NAME_MAX.to_string() placeholder="Support bot"
                                    prop:value=move || name.get()
                                    on:input=move |ev| name.set(event_target_value(&ev)) />
                            </div>
                            <div class="field">
                                <label for="integration-agent">"Agent " <span class="optional">"(optional)"</span></label>
                                <select id="integration-agent" prop:value=move || agent.get()
                                    on:change=move |ev| agent.set(event_target_value(&ev))>
                                    <option value="">"No agent"</option>
                                    {move || agents.get().into_iter().map(|a| view! { <option value=a.id.clone()>{a.name.clone()}</option> }).collect_view()}
                                </select>
                            </div>
                            {move || provider().map(|p| view! {
                                <div data-testid="provider-fields">
                                    {p.credential_fields.into_iter().map(|f| field_input(f, "credential")).collect_view()}
                                    {p.config_fields.into_iter().map(|f| field_input(f, "config")).collect_view()}
                                </div>
                            })}
                            <FormErrorNotice error/>
                            {move || created.get().map(|message| view! { <Notice tone=Tone::Success testid="integration-created">{message}</Notice> })}
                            <div class="form-actions">
                                <button type="submit" class="button" disabled=move || !hydrated.get() || pending.get()>
                                    {move || if pending.get() { "Creating…" } else { "Create integration" }}
                                </button>
                            </div>
                        </form>
                    }.into_any(),
                }})}
                </Suspense>
            </section>
            <section class="card">
                <h2 class="first">"Your integrations"</h2>
                <Transition fallback=|| loading_view("integrations")>
                {move || Suspend::new(async move { match integrations.await {
                    Err(err) => load_error_view(&err, "integrations"),
                    Ok(list) if list.is_empty() => view! { <p class="empty" data-testid="integrations-empty">"No integrations yet."</p> }.into_any(),
                    Ok(list) => view! {
                        <ul class="sessions" data-testid="integrations">
                            {list.into_iter().map(|i| view! { <IntegrationRow integration=i agents on_deleted=Callback::new(move |()| load())/> }).collect_view()}
                        </ul>
                    }.into_any(),
                }})}
                </Transition>
            </section>
        </div>
    }
    .into_any()
}

/// One integration: provider, linked agent, masked credentials, and "Delete".
#[component]
fn IntegrationRow(
    integration: Integration,
    agents: Signal<Vec<Agent>>,
    on_deleted: Callback<()>,
) -> impl IntoView {
    let error = RwSignal::new(None::<String>);
    let id = integration.id.clone();
    let delete_action = Action::new_local(move |id: &String| {
        let path = format!("/api/integrations/{id}");
        async move {
            match client::delete_signed_in::<SuccessResponse>(&path).await {
                Ok(_) => on_deleted.run(()),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let busy = delete_action.pending();
    let delete = Callback::new(move |()| {
        delete_action.dispatch(id.clone());
    });
    let agent_id = integration.agent_id.clone();
    let agent_name = move || match &agent_id {
        None => "no agent".to_owned(),
        Some(id) => agents.with(|list| {
            list.iter()
                .find(|a| &a.id == id)
                .map_or_else(|| "an agent".to_owned(), |a| format!("agent “{}”", a.name))
        }),
    };
    let hints: Vec<String> = integration
        .credentials
        .as_object()
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k} {}", v.as_str().unwrap_or("••••")))
                .collect()
        })
        .unwrap_or_default();
    let status_detail = integration.status_detail.clone();
    // An MCP server's tools can be listed live.
    let mcp_tools = (integration.provider_code == MCP_PROVIDER).then(|| {
        view! { <div class="row-actions"><McpServerTools integration_id=integration.id.clone()/></div> }
    });
    let connection = integration.connection.clone().map(|c| {
        let webhook = c.webhook_url.map(|url| {
            let label = if integration.provider_code == "slack" {
                "Event Subscriptions request URL"
            } else {
                "Webhook URL"
            };
            view! {
                <p class="muted small" data-testid="integration-webhook-url">{label}": "<code>{url}</code></p>
            }
        });
        let embed = c.embed_code.map(|code| {
            let field_id = format!("embed-{}", integration.id);
            let label_for = field_id.clone();
            view! {
                <div class="field">
                    <label for=label_for>"Embed code (paste before </body>)"</label>
                    <textarea id=field_id readonly rows="2" data-testid="integration-embed-code">{code}</textarea>
                </div>
            }
        });
        view! { {webhook} {embed} }
    });
    view! {
        <li class="session" data-testid="integration">
            <div>
                <strong>{integration.name.clone()}</strong>
                <span class="pill">{integration.provider_code.clone()}</span>
                <p class="muted small">
                    {move || format!("{} · {} · created {}", agent_name(), integration.status, short_time(&integration.created_at))}
                </p>
                {status_detail.map(|detail| view! { <Notice tone=Tone::Error testid="integration-status-detail">{detail}</Notice> })}
                <p class="muted small" data-testid="integration-credentials">{hints.join(" · ")}</p>
                {connection}
                {mcp_tools}
            </div>
            <ConfirmButton
                label="Delete"
                question=format!("Delete “{}”?", integration.name)
                confirm="Yes, delete"
                busy
                on_confirm=delete
            />
            {move || error.get().map(|message| view! { <Notice tone=Tone::Error testid="integration-error">{message}</Notice> })}
        </li>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn provider() -> IntegrationProvider {
        let field = |name: &str, secret: bool, required: bool| IntegrationField {
            name: name.into(),
            label: name.into(),
            secret,
            required,
        };
        IntegrationProvider {
            code: "website".into(),
            name: "Website".into(),
            description: String::new(),
            credential_fields: vec![field("token", true, false)],
            config_fields: vec![
                field("allowedOrigins", false, true),
                field("requestsPerMinute", false, false),
            ],
            live: false,
        }
    }

    #[test]
    fn the_form_is_checked_and_shaped_before_sending() {
        let p = provider();
        let values = |pairs: &[(&str, &str)]| -> Vec<(String, String)> {
            pairs
                .iter()
                .map(|(a, b)| ((*a).into(), (*b).into()))
                .collect()
        };
        assert!(integration_request(&p, " ", "", &[])
            .unwrap_err()
            .contains("name"));
        assert!(integration_request(&p, "Site", "", &[])
            .unwrap_err()
            .contains("allowedOrigins is required"));
        let bad = values(&[
            ("allowedOrigins", "https://a.example"),
            ("requestsPerMinute", "ten"),
        ]);
        assert!(integration_request(&p, "Site", "", &bad)
            .unwrap_err()
            .contains("whole number"));
        let good = values(&[
            ("allowedOrigins", "https://a.example\n\n https://b.example "),
            ("requestsPerMinute", "20"),
        ]);
        let body = integration_request(&p, " Site ", " agent-1 ", &good).unwrap();
        assert_eq!(body.name, "Site");
        assert_eq!(body.agent_id.as_deref(), Some("agent-1"));
        assert_eq!(body.credentials, serde_json::json!({}));
        assert_eq!(
            body.config,
            Some(
                serde_json::json!({"allowedOrigins": ["https://a.example", "https://b.example"], "requestsPerMinute": 20})
            )
        );
    }
}
