//! The "Tools" section of an agent's settings: what the agent's model may call while it
//! answers — the built-in tools, HTTP actions and MCP servers (`GET`/`POST
//! /api/agents/{agentId}/tools`, `PUT`/`DELETE .../tools/{toolId}`, `POST
//! .../tools/{toolId}/test`; docs/api.md § Tools), and the tools of an MCP server
//! integration, listed live (`GET /api/integrations/{integrationId}/tools`).
//!
//! Secret headers of an HTTP action are write-only: the server shows their names only, so
//! their inputs are never filled; an update that leaves them alone keeps the stored ones.

use super::agents::ConfirmButton;
use crate::api::limits::{TOOL_DESCRIPTION_MAX, TOOL_NAME_MAX};
use crate::{
    api::{
        CreateToolRequest, Integration, IntegrationsResponse, McpServerTool,
        McpServerToolsResponse, SuccessResponse, TestToolRequest, Tool, ToolResponse,
        ToolTestResult, ToolsResponse, UpdateToolRequest,
    },
    client::{self, ApiError},
    components::{
        fetch_signed_in, load_error_view, loading_view, use_hydrated, FormError, FormErrorNotice,
        Notice, Tone,
    },
};
use leptos::prelude::*;
use serde_json::{json, Map, Value};

/// Longest timeout of an HTTP action, in milliseconds.
pub const TOOL_TIMEOUT_MAX_MS: u64 = 120_000;
/// The methods an HTTP action may use.
pub const HTTP_METHODS: [&str; 5] = ["GET", "POST", "PUT", "PATCH", "DELETE"];
/// The provider code of MCP server integrations.
pub const MCP_PROVIDER: &str = "mcp";

/// The parameters of a new HTTP action: an object schema without properties.
const EMPTY_SCHEMA: &str = "{\n  \"type\": \"object\",\n  \"properties\": {}\n}";

/// The built-in tools: type, label, and what they let the model do.
const BUILT_INS: [(&str, &str, &str); 2] = [
    (
        "knowledge_search",
        "Knowledge search",
        "Lets the model search this agent's knowledge base with a query of its own.",
    ),
    (
        "web_fetch",
        "Web fetch",
        "Lets the model read one public web page (http or https) as plain text.",
    ),
];

/// Checks a tool name as the server does: 1 to 64 letters, digits, `_` or `-`.
///
/// # Errors
/// The rule, in words.
pub fn check_tool_name(name: &str) -> Result<(), String> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err("The name must be 1 to 64 letters, digits, underscores (_) or hyphens (-): it is what the model calls.".into())
    }
}

/// A secret header of the HTTP action form.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SecretHeader {
    /// The header's name.
    pub name: String,
    /// The value typed in; empty for a stored header left alone.
    pub value: String,
    /// Whether the server holds this header already (its value cannot be read back).
    pub stored: bool,
}

/// What the HTTP action form holds, as typed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct HttpActionForm {
    /// `GET`, `POST`, `PUT`, `PATCH` or `DELETE`.
    pub method: String,
    /// The URL, possibly with `{name}` placeholders.
    pub url: String,
    /// The JSON Schema of the arguments, as text.
    pub parameters: String,
    /// Plain headers, name and value.
    pub headers: Vec<(String, String)>,
    /// Secret headers: the stored ones (by name) and new ones.
    pub secret_headers: Vec<SecretHeader>,
    /// The names of the secret headers the server holds for this action.
    pub stored_secret_names: Vec<String>,
    /// The timeout in milliseconds; empty for the server's default.
    pub timeout_ms: String,
}

/// The `config` of an `http` tool from the form, checked as far as the browser can (the
/// server checks the rest and names the field it refuses). `secretHeaders` is left out
/// when the stored ones stay as they are.
///
/// # Errors
/// The first rule broken, in words.
pub fn http_action_config(form: &HttpActionForm) -> Result<Value, String> {
    if !HTTP_METHODS.contains(&form.method.as_str()) {
        return Err("Choose the method: GET, POST, PUT, PATCH or DELETE.".into());
    }
    let url = form.url.trim();
    if !(url.starts_with("https://") || url.starts_with("http://")) {
        return Err("Enter the URL to call, starting with https:// or http://.".into());
    }
    let parameters: Value = serde_json::from_str(form.parameters.trim()).map_err(|err| {
        format!("The parameters are not valid JSON ({err}). Enter a JSON Schema object such as {{\"type\": \"object\", \"properties\": {{}}}}.")
    })?;
    if !parameters.is_object() {
        return Err(
            "The parameters must be a JSON object: a JSON Schema with \"type\": \"object\".".into(),
        );
    }
    let mut config = Map::new();
    config.insert("method".into(), json!(form.method));
    config.insert("url".into(), json!(url));
    config.insert("parameters".into(), parameters);

    let mut headers = Map::new();
    for (i, (name, value)) in form.headers.iter().enumerate() {
        let name = name.trim();
        if name.is_empty() && value.trim().is_empty() {
            continue;
        }
        if name.is_empty() {
            return Err(format!("Header {} needs a name.", i + 1));
        }
        headers.insert(name.to_owned(), json!(value.trim()));
    }
    if !headers.is_empty() {
        config.insert("headers".into(), Value::Object(headers));
    }

    let rows: Vec<&SecretHeader> = form
        .secret_headers
        .iter()
        .filter(|s| s.stored || !s.name.trim().is_empty() || !s.value.is_empty())
        .collect();
    let kept_as_stored = rows.iter().all(|s| s.stored && s.value.is_empty())
        && form
            .stored_secret_names
            .iter()
            .all(|n| rows.iter().any(|s| s.stored && s.name == *n));
    if !kept_as_stored {
        let mut secrets = Map::new();
        for (i, secret) in rows.iter().enumerate() {
            let name = secret.name.trim();
            if name.is_empty() {
                return Err(format!("Secret header {} needs a name.", i + 1));
            }
            if secret.value.is_empty() {
                return Err(if secret.stored {
                    format!("To change the secret headers, enter the value of every one you keep: {name} is stored and cannot be read back. Enter it again, or remove it.")
                } else {
                    format!("Enter the value of the secret header {name}.")
                });
            }
            secrets.insert(name.to_owned(), json!(secret.value));
        }
        config.insert("secretHeaders".into(), Value::Object(secrets));
    }

    let timeout = form.timeout_ms.trim();
    if !timeout.is_empty() {
        match timeout.parse::<u64>() {
            Ok(ms) if (1..=TOOL_TIMEOUT_MAX_MS).contains(&ms) => {
                config.insert("timeoutMs".into(), json!(ms));
            }
            _ => {
                return Err(format!(
                    "The timeout must be a whole number of milliseconds from 1 to {TOOL_TIMEOUT_MAX_MS}, or empty for the server's default."
                ))
            }
        }
    }
    Ok(Value::Object(config))
}

/// The form of a stored HTTP action: its config as the server shows it (secret headers by
/// name only).
pub fn http_action_form(config: &Value) -> HttpActionForm {
    let text = |key: &str| config.get(key).and_then(Value::as_str).unwrap_or_default();
    let stored_secret_names: Vec<String> = config
        .get("secretHeaders")
        .and_then(Value::as_array)
        .map(|names| {
            names
                .iter()
                .filter_map(|n| n.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    HttpActionForm {
        method: Some(text("method"))
            .filter(|m| !m.is_empty())
            .unwrap_or("GET")
            .to_owned(),
        url: text("url").to_owned(),
        parameters: config
            .get("parameters")
            .and_then(|p| serde_json::to_string_pretty(p).ok())
            .unwrap_or_else(|| EMPTY_SCHEMA.to_owned()),
        headers: config
            .get("headers")
            .and_then(Value::as_object)
            .map(|h| {
                h.iter()
                    .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                    .collect()
            })
            .unwrap_or_default(),
        secret_headers: stored_secret_names
            .iter()
            .map(|name| SecretHeader {
                name: name.clone(),
                value: String::new(),
                stored: true,
            })
            .collect(),
        stored_secret_names,
        timeout_ms: config
            .get("timeoutMs")
            .and_then(Value::as_u64)
            .map(|ms| ms.to_string())
            .unwrap_or_default(),
    }
}

/// The `config` of an `mcp` tool: the integration, and `allowedTools` unless every tool
/// of the server is allowed (all ticked, or none ticked).
pub fn mcp_tool_config(integration_id: &str, ticked: &[String], listed: &[String]) -> Value {
    let every = ticked.is_empty()
        || (!listed.is_empty() && listed.iter().all(|name| ticked.contains(name)));
    if every {
        json!({"integrationId": integration_id})
    } else {
        // In the server's order, then any ticked earlier that it no longer lists.
        let mut allowed: Vec<&String> = listed.iter().filter(|n| ticked.contains(n)).collect();
        allowed.extend(ticked.iter().filter(|n| !listed.contains(n)));
        json!({"integrationId": integration_id, "allowedTools": allowed})
    }
}

/// A tool's switch: whether it is offered, or whether its calls wait for approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flag {
    Enabled,
    Approval,
}

/// Sets `flag` of the tool `existing`, or, for a built-in not created yet, creates it with
/// the flag set (`enabled` off unless that is the flag switched on).
async fn set_flag(
    agent_id: &str,
    existing: Option<String>,
    tool_type: &str,
    flag: Flag,
    on: bool,
) -> Result<Tool, ApiError> {
    match existing {
        Some(tool_id) => {
            let body = UpdateToolRequest {
                enabled: (flag == Flag::Enabled).then_some(on),
                requires_approval: (flag == Flag::Approval).then_some(on),
                ..UpdateToolRequest::default()
            };
            client::put_signed_in::<_, ToolResponse>(
                &format!("/api/agents/{agent_id}/tools/{tool_id}"),
                &body,
            )
            .await
            .map(|answer| answer.tool)
        }
        None => {
            let body = CreateToolRequest {
                tool_type: tool_type.to_owned(),
                enabled: Some(flag == Flag::Enabled && on),
                requires_approval: Some(flag == Flag::Approval && on),
                ..CreateToolRequest::default()
            };
            client::post_signed_in::<_, ToolResponse>(
                &format!("/api/agents/{agent_id}/tools"),
                &body,
            )
            .await
            .map(|answer| answer.tool)
        }
    }
}

/// Saves an editor's tool: updates the stored tool `editing`, or creates an enabled tool of
/// `tool_type` (an empty description leaves the type's default, which is empty for the
/// editors' types).
async fn save_tool(
    agent_id: &str,
    editing: Option<String>,
    tool_type: &str,
    name: String,
    description: String,
    requires_approval: bool,
    config: serde_json::Value,
) -> Result<Tool, ApiError> {
    let answer = match editing {
        Some(tool_id) => {
            let body = UpdateToolRequest {
                name: Some(name),
                description: Some(description),
                requires_approval: Some(requires_approval),
                config: Some(config),
                ..UpdateToolRequest::default()
            };
            client::put_signed_in::<_, ToolResponse>(
                &format!("/api/agents/{agent_id}/tools/{tool_id}"),
                &body,
            )
            .await
        }
        None => {
            let body = CreateToolRequest {
                tool_type: tool_type.to_owned(),
                name: Some(name),
                description: Some(description),
                enabled: Some(true),
                requires_approval: Some(requires_approval),
                config: Some(config),
            };
            client::post_signed_in::<_, ToolResponse>(
                &format!("/api/agents/{agent_id}/tools"),
                &body,
            )
            .await
        }
    };
    answer.map(|answer| answer.tool)
}

/// The fields of a tool editor, checked: name, description, whether calls wait for
/// approval, and the type's configuration.
type ToolFields = (String, String, bool, Value);

/// Saves an editor's tool (`save_tool`: creates it, or updates `editing`) and hands the
/// stored tool to `on_saved`, or the server's words to `error`.
fn save_action(
    agent: StoredValue<String>,
    editing: StoredValue<Option<String>>,
    tool_type: &'static str,
    on_saved: Callback<Tool>,
    error: FormError,
) -> Action<ToolFields, ()> {
    Action::new_local(move |fields: &ToolFields| {
        let (name, description, requires_approval, config) = fields.clone();
        async move {
            let agent_id = agent.get_value();
            let outcome = save_tool(
                &agent_id,
                editing.get_value(),
                tool_type,
                name,
                description,
                requires_approval,
                config,
            )
            .await;
            match outcome {
                Ok(tool) => on_saved.run(tool),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    })
}

/// Which editor is open: a new or a stored HTTP action, a new or a stored MCP server.
#[derive(Debug, Clone, PartialEq)]
enum Editor {
    Http(Option<Tool>),
    Mcp(Option<Tool>),
}

/// The "Tools" section of the agent editor: the built-ins switched on and off, the HTTP
/// actions and MCP servers with their switches, "Edit", "Test" and "Delete", and the
/// editors that add them.
#[component]
pub fn ToolsSection(
    /// The agent whose tools these are.
    agent_id: String,
) -> impl IntoView {
    let hydrated = use_hydrated();
    let agent = StoredValue::new(agent_id);
    // Loaded once; saving or deleting a tool updates the list in place, so the rows of the
    // other tools keep their state (the list is read directly rather than through
    // `Suspense`, which would build the whole section again on every change).
    let tools = fetch_signed_in(
        move || format!("/api/agents/{}/tools", agent.get_value()),
        |answer: ToolsResponse| answer.tools,
    );
    let editor = RwSignal::new(None::<Editor>);
    let saved = RwSignal::new(None::<String>);

    let upsert = Callback::new(move |tool: Tool| {
        tools.update(|state| {
            if let Some(Ok(list)) = state {
                match list.iter_mut().find(|t| t.id == tool.id) {
                    Some(slot) => *slot = tool,
                    None => list.push(tool),
                }
            }
        });
    });
    let on_deleted = Callback::new(move |id: String| {
        tools.update(|state| {
            if let Some(Ok(list)) = state {
                list.retain(|t| t.id != id);
            }
        });
    });
    let on_saved = Callback::new(move |tool: Tool| {
        saved.set(Some(format!("Saved the tool {}.", tool.name)));
        editor.set(None);
        upsert.run(tool);
    });
    let on_edit = Callback::new(move |tool: Tool| {
        saved.set(None);
        editor.set(Some(if tool.tool_type == "mcp" {
            Editor::Mcp(Some(tool))
        } else {
            Editor::Http(Some(tool))
        }));
    });
    let on_cancel = Callback::new(move |()| editor.set(None));
    let ready = Memo::new(move |_| tools.map(Result::is_ok).unwrap_or(false));
    let custom = move || {
        tools
            .map(|state| match state {
                Ok(list) => list
                    .iter()
                    .filter(|t| !BUILT_INS.iter().any(|(kind, ..)| *kind == t.tool_type))
                    .cloned()
                    .collect::<Vec<_>>(),
                Err(_) => Vec::new(),
            })
            .unwrap_or_default()
    };
    let built_in = move |kind: &'static str| {
        Signal::derive(move || {
            tools
                .map(|state| match state {
                    Ok(list) => list.iter().find(|t| t.tool_type == kind).cloned(),
                    Err(_) => None,
                })
                .flatten()
        })
    };

    view! {
        <section class="card" aria-labelledby="tools-title" data-testid="tools">
            <h2 id="tools-title" class="first">"Tools"</h2>
            <p class="muted">
                "What the agent's model may call while it answers: its knowledge base, a web page, your HTTP APIs, or the tools of an MCP server. A tool that requires approval waits in the chat until you approve or deny the call."
            </p>
            {move || {
                tools
                    .map(|state| match state {
                        Ok(_) => ().into_any(),
                        Err(err) => load_error_view(err, "tools"),
                    })
                    .unwrap_or_else(|| loading_view("tools"))
            }}
            <Show when=move || ready.get()>
                <h3>"Built-in tools"</h3>
                <ul class="tools" data-testid="built-in-tools">
                    {BUILT_INS
                        .iter()
                        .map(|&(kind, label, about)| {
                            view! {
                                <BuiltInRow
                                    agent_id=agent.get_value()
                                    kind
                                    label
                                    about
                                    tool=built_in(kind)
                                    on_saved=upsert
                                />
                            }
                        })
                        .collect_view()}
                </ul>
                <h3>"HTTP actions and MCP servers"</h3>
                <Show when=move || custom().is_empty()>
                    <p class="empty" data-testid="tools-empty">
                        "No actions yet. An HTTP action calls an API of yours with the arguments the model chooses."
                    </p>
                </Show>
                <ul class="tools" data-testid="custom-tools">
                    <For
                        each=custom
                        key=|tool| (tool.id.clone(), tool.updated_at.clone())
                        let(tool)
                    >
                        <ToolRow agent_id=agent.get_value() tool on_saved=upsert on_edit on_deleted/>
                    </For>
                </ul>
                {move || {
                    saved
                        .get()
                        .map(|message| view! { <Notice tone=Tone::Success testid="tool-saved">{message}</Notice> })
                }}
                <div class="form-actions">
                    <button
                        type="button"
                        class="button button-secondary"
                        disabled=move || !hydrated.get()
                        on:click=move |_| {
                            saved.set(None);
                            editor.set(Some(Editor::Http(None)));
                        }
                    >
                        "Add HTTP action"
                    </button>
                    <button
                        type="button"
                        class="button button-secondary"
                        disabled=move || !hydrated.get()
                        on:click=move |_| {
                            saved.set(None);
                            editor.set(Some(Editor::Mcp(None)));
                        }
                    >
                        "Attach MCP server"
                    </button>
                </div>
            </Show>
            {move || match editor.get() {
                None => ().into_any(),
                Some(Editor::Http(tool)) => {
                    view! { <HttpToolForm agent_id=agent.get_value() tool on_saved on_cancel/> }.into_any()
                }
                Some(Editor::Mcp(tool)) => {
                    view! { <McpToolForm agent_id=agent.get_value() tool on_saved on_cancel/> }.into_any()
                }
            }}
        </section>
    }
    .into_any()
}

/// A switch (a checkbox with `role="switch"`) and its label.
#[component]
fn Switch(
    /// The input's id.
    id: String,
    /// The visible label.
    label: &'static str,
    /// Whether it is on.
    #[prop(into)]
    on: Signal<bool>,
    /// Whether it is disabled.
    #[prop(into)]
    disabled: Signal<bool>,
    /// Runs with the new state.
    on_change: Callback<bool>,
) -> impl IntoView {
    let label_for = id.clone();
    view! {
        <span class="switch">
            <input
                id=id
                type="checkbox"
                role="switch"
                prop:checked=move || on.get()
                disabled=move || disabled.get()
                on:change=move |ev| on_change.run(event_target_checked(&ev))
            />
            <label for=label_for>{label}</label>
        </span>
    }
}

/// A built-in tool: switched on, it is created the first time and enabled afterwards.
#[component]
fn BuiltInRow(
    agent_id: String,
    kind: &'static str,
    label: &'static str,
    about: &'static str,
    /// The agent's tool of this type, once created.
    tool: Signal<Option<Tool>>,
    on_saved: Callback<Tool>,
) -> impl IntoView {
    let hydrated = use_hydrated();
    let agent = StoredValue::new(agent_id);
    let error = RwSignal::new(None::<String>);
    let testing = RwSignal::new(false);
    // Creates the tool the first time, then switches the flag of the stored one.
    let switch = Action::new_local(move |&(flag, on): &(Flag, bool)| {
        let existing = tool.get_untracked().map(|t| t.id);
        async move {
            match set_flag(&agent.get_value(), existing, kind, flag, on).await {
                Ok(tool) => on_saved.run(tool),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let busy = switch.pending();
    let change = move |flag: Flag| {
        Callback::new(move |on: bool| {
            error.set(None);
            switch.dispatch((flag, on));
        })
    };
    let enabled = Signal::derive(move || tool.get().is_some_and(|t| t.enabled));
    let approval = Signal::derive(move || tool.get().is_some_and(|t| t.requires_approval));
    let disabled = Signal::derive(move || !hydrated.get() || busy.get());
    view! {
        <li class="tool" data-testid="tool" data-type=kind>
            <div class="tool-main">
                <strong>{label}</strong>
                <code class="small">{kind}</code>
            </div>
            <p class="muted small">{about}</p>
            <div class="tool-switches">
                <Switch id=format!("tool-{kind}-enabled") label="Enabled" on=enabled disabled on_change=change(Flag::Enabled)/>
                <Switch
                    id=format!("tool-{kind}-approval")
                    label="Requires approval"
                    on=approval
                    disabled
                    on_change=change(Flag::Approval)
                />
                <Show when=move || tool.get().is_some()>
                    <button
                        type="button"
                        class="button button-secondary button-small"
                        aria-expanded=move || testing.get().to_string()
                        on:click=move |_| testing.update(|t| *t = !*t)
                    >
                        "Test"
                    </button>
                </Show>
            </div>
            {move || error.get().map(|message| view! { <Notice tone=Tone::Error testid="tool-error">{message}</Notice> })}
            {move || {
                tool.get()
                    .filter(|_| testing.get())
                    .map(|tool| view! { <ToolTest agent_id=agent.get_value() tool/> })
            }}
        </li>
    }
    .into_any()
}

/// One HTTP action or MCP server of the agent: its switches, "Edit", "Test", "Delete".
#[component]
fn ToolRow(
    agent_id: String,
    tool: Tool,
    on_saved: Callback<Tool>,
    on_edit: Callback<Tool>,
    on_deleted: Callback<String>,
) -> impl IntoView {
    let hydrated = use_hydrated();
    let agent = StoredValue::new(agent_id);
    let stored = StoredValue::new(tool.clone());
    let error = RwSignal::new(None::<String>);
    let testing = RwSignal::new(false);
    let switch = Action::new_local(move |&(flag, on): &(Flag, bool)| {
        let tool = stored.get_value();
        async move {
            match set_flag(&agent.get_value(), Some(tool.id), &tool.tool_type, flag, on).await {
                Ok(tool) => on_saved.run(tool),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let delete_action = Action::new_local(move |_: &()| {
        let id = stored.with_value(|t| t.id.clone());
        let path = format!("/api/agents/{}/tools/{id}", agent.get_value());
        async move {
            match client::delete_signed_in::<SuccessResponse>(&path).await {
                Ok(_) => on_deleted.run(id),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let (switching, deleting) = (switch.pending(), delete_action.pending());
    let busy = Signal::derive(move || switching.get() || deleting.get());
    let change = move |flag: Flag| {
        Callback::new(move |on: bool| {
            error.set(None);
            switch.dispatch((flag, on));
        })
    };
    let delete = Callback::new(move |()| {
        error.set(None);
        delete_action.dispatch(());
    });
    let summary = match tool.tool_type.as_str() {
        "http" => format!(
            "{} {}",
            tool.config
                .get("method")
                .and_then(Value::as_str)
                .unwrap_or("GET"),
            tool.config
                .get("url")
                .and_then(Value::as_str)
                .unwrap_or_default()
        ),
        "mcp" => match tool.config.get("allowedTools").and_then(Value::as_array) {
            Some(names) => format!("MCP server · {} of its tools", names.len()),
            None => "MCP server · all of its tools".to_owned(),
        },
        other => other.to_owned(),
    };
    let kind = match tool.tool_type.as_str() {
        "http" => "HTTP action",
        "mcp" => "MCP server",
        _ => "tool",
    };
    let disabled = Signal::derive(move || !hydrated.get() || busy.get());
    let id = tool.id.clone();
    view! {
        <li class="tool" data-testid="tool" data-type=tool.tool_type.clone() data-name=tool.name.clone()>
            <div class="tool-main">
                <code class="tool-name">{tool.name.clone()}</code>
                <span class="pill">{kind}</span>
                <span class="muted small tool-summary">{summary}</span>
            </div>
            {(!tool.description.is_empty()).then(|| view! { <p class="muted small">{tool.description.clone()}</p> })}
            <div class="tool-switches">
                <Switch id=format!("tool-{id}-enabled") label="Enabled" on=tool.enabled disabled on_change=change(Flag::Enabled)/>
                <Switch
                    id=format!("tool-{id}-approval")
                    label="Requires approval"
                    on=tool.requires_approval
                    disabled
                    on_change=change(Flag::Approval)
                />
            </div>
            <div class="row-actions">
                <button
                    type="button"
                    class="button button-secondary button-small"
                    disabled=move || disabled.get()
                    on:click=move |_| on_edit.run(stored.get_value())
                >
                    "Edit"
                </button>
                <button
                    type="button"
                    class="button button-secondary button-small"
                    aria-expanded=move || testing.get().to_string()
                    disabled=move || !hydrated.get()
                    on:click=move |_| testing.update(|t| *t = !*t)
                >
                    "Test"
                </button>
                <ConfirmButton
                    label="Delete"
                    question=format!("Delete the tool {}?", tool.name)
                    confirm="Yes, delete"
                    busy
                    on_confirm=delete
                />
            </div>
            {move || error.get().map(|message| view! { <Notice tone=Tone::Error testid="tool-error">{message}</Notice> })}
            <Show when=move || testing.get()>
                <ToolTest agent_id=agent.get_value() tool=stored.get_value()/>
            </Show>
        </li>
    }
    // Type-erased: the row's view type is deep enough to overflow the compiler's
    // recursion limit inside the list around it.
    .into_any()
}

/// Runs a tool once with arguments typed as JSON, as a chat would, and shows what came
/// back: its status, output or error, and how long it took.
#[component]
fn ToolTest(agent_id: String, tool: Tool) -> impl IntoView {
    let hydrated = use_hydrated();
    let arguments = RwSignal::new("{}".to_owned());
    let tool_name = RwSignal::new(String::new());
    let error: FormError = RwSignal::new(None);
    let result = RwSignal::new(None::<ToolTestResult>);
    let is_mcp = tool.tool_type == "mcp";
    let path = StoredValue::new(format!("/api/agents/{agent_id}/tools/{}/test", tool.id));
    let test = Action::new_local(move |body: &TestToolRequest| {
        let body = body.clone();
        async move {
            match client::post_signed_in::<_, ToolTestResult>(&path.get_value(), &body).await {
                Ok(answer) => result.set(Some(answer)),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let pending = test.pending();
    let args_id = format!("tool-test-{}-arguments", tool.id);
    let args_for = args_id.clone();
    let name_id = format!("tool-test-{}-name", tool.id);
    let name_for = name_id.clone();
    let run = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if pending.get_untracked() {
            return;
        }
        let parsed: Value = match serde_json::from_str(arguments.get_untracked().trim()) {
            Ok(value @ Value::Object(_)) => value,
            Ok(_) => {
                error.set(Some(
                    "The arguments must be a JSON object, such as {\"city\": \"Paris\"}.".into(),
                ));
                return;
            }
            Err(err) => {
                error.set(Some(format!("The arguments are not valid JSON ({err}).")));
                return;
            }
        };
        let body = TestToolRequest {
            arguments: parsed,
            tool_name: Some(tool_name.get_untracked().trim().to_owned()).filter(|n| !n.is_empty()),
        };
        error.set(None);
        result.set(None);
        test.dispatch(body);
    };
    view! {
        <form class="form tool-test" on:submit=run novalidate data-testid="tool-test">
            <div class="field">
                <label for=args_for>"Test arguments (JSON)"</label>
                <textarea
                    id=args_id
                    class="code"
                    rows="3"
                    spellcheck="false"
                    prop:value=move || arguments.get()
                    on:input=move |ev| arguments.set(event_target_value(&ev))
                ></textarea>
            </div>
            {is_mcp.then(|| view! {
                <div class="field">
                    <label for=name_for>"Tool on the server " <span class="optional">"(needed when it offers several)"</span></label>
                    <input id=name_id type="text" autocomplete="off"
                        prop:value=move || tool_name.get()
                        on:input=move |ev| tool_name.set(event_target_value(&ev))/>
                </div>
            })}
            <FormErrorNotice error/>
            <div class="form-actions">
                <button type="submit" class="button button-small" disabled=move || !hydrated.get() || pending.get()
                    aria-busy=move || pending.get().to_string()>
                    {move || if pending.get() { "Running…" } else { "Run test" }}
                </button>
            </div>
            {move || result.get().map(|r| {
                let class = if r.status == "succeeded" { "pill status-indexed" } else { "pill pill-error" };
                view! {
                    <div class="tool-test-result" data-testid="tool-test-result" data-status=r.status.clone() role="status">
                        <p>
                            <span class=class>{r.status.clone()}</span>
                            " "
                            <span class="muted small">{format!("{} ms", r.duration_ms)}</span>
                        </p>
                        {r.error.clone().map(|e| view! { <p class="error-text small" data-testid="tool-test-error">{e}</p> })}
                        {(!r.output.is_empty()).then(|| view! { <pre data-testid="tool-test-output">{r.output.clone()}</pre> })}
                    </div>
                }
            })}
        </form>
    }
}

/// One header row of the HTTP action form.
#[derive(Debug, Clone, Copy)]
struct HeaderRow {
    key: u64,
    name: RwSignal<String>,
    value: RwSignal<String>,
    /// A stored secret header: its name is fixed and its value cannot be read back.
    stored: bool,
}

impl HeaderRow {
    fn new(key: u64, name: String, value: String, stored: bool) -> Self {
        Self {
            key,
            name: RwSignal::new(name),
            value: RwSignal::new(value),
            stored,
        }
    }
}

/// Adds, edits and removes header rows; `secret` rows take their value in a password
/// input that is never filled from the server.
#[component]
fn HeaderRows(
    rows: RwSignal<Vec<HeaderRow>>,
    next_key: StoredValue<u64>,
    /// Secret headers (write-only values).
    secret: bool,
) -> impl IntoView {
    let what = if secret { "Secret header" } else { "Header" };
    let prefix = if secret { "secret-header" } else { "header" };
    let add = move |_| {
        next_key.update_value(|k| *k += 1);
        let key = next_key.get_value();
        rows.update(|list| list.push(HeaderRow::new(key, String::new(), String::new(), false)));
    };
    let position = move |key: u64| {
        rows.with(|list| list.iter().position(|r| r.key == key).map_or(0, |i| i + 1))
    };
    view! {
        <div class="header-rows" data-testid=format!("{prefix}s")>
            <For each=move || rows.get() key=|row| row.key let(row)>
                {
                    let name_id = format!("tool-{prefix}-{}-name", row.key);
                    let value_id = format!("tool-{prefix}-{}-value", row.key);
                    let (name_for, value_for) = (name_id.clone(), value_id.clone());
                    let placeholder = if row.stored { "stored, leave empty to keep" } else { "value" };
                    view! {
                        <div class="header-row" data-testid=format!("{prefix}-row")>
                            <label for=name_for class="visually-hidden">{move || format!("{what} {} name", position(row.key))}</label>
                            <input id=name_id type="text" autocomplete="off" placeholder="Name"
                                readonly=row.stored
                                prop:value=move || row.name.get()
                                on:input=move |ev| row.name.set(event_target_value(&ev))/>
                            <label for=value_for class="visually-hidden">{move || format!("{what} {} value", position(row.key))}</label>
                            <input id=value_id type=if secret { "password" } else { "text" } autocomplete="off"
                                placeholder=placeholder
                                prop:value=move || row.value.get()
                                on:input=move |ev| row.value.set(event_target_value(&ev))/>
                            <button type="button" class="button button-secondary button-small"
                                aria-label=move || format!("Remove {} {}", what.to_lowercase(), position(row.key))
                                on:click=move |_| rows.update(|list| list.retain(|r| r.key != row.key))>
                                "Remove"
                            </button>
                        </div>
                    }
                }
            </For>
            <button type="button" class="button button-secondary button-small" on:click=add>
                {if secret { "Add secret header" } else { "Add header" }}
            </button>
        </div>
    }
}

/// The editor of an HTTP action: name, description, method, URL, parameters (a JSON
/// Schema), headers, secret headers, timeout and whether calls wait for approval.
#[component]
fn HttpToolForm(
    agent_id: String,
    /// The action to edit; `None` adds one.
    tool: Option<Tool>,
    on_saved: Callback<Tool>,
    on_cancel: Callback<()>,
) -> impl IntoView {
    let hydrated = use_hydrated();
    let editing = tool.as_ref().map(|t| t.id.clone());
    let creating = editing.is_none();
    let form = tool
        .as_ref()
        .map(|t| http_action_form(&t.config))
        .unwrap_or_else(|| HttpActionForm {
            method: "GET".into(),
            parameters: EMPTY_SCHEMA.into(),
            ..HttpActionForm::default()
        });
    let next_key = StoredValue::new(0_u64);
    let row = move |name: String, value: String, stored: bool| {
        next_key.update_value(|k| *k += 1);
        HeaderRow::new(next_key.get_value(), name, value, stored)
    };
    let name = RwSignal::new(tool.as_ref().map(|t| t.name.clone()).unwrap_or_default());
    let description = RwSignal::new(
        tool.as_ref()
            .map(|t| t.description.clone())
            .unwrap_or_default(),
    );
    let approval = RwSignal::new(tool.as_ref().is_some_and(|t| t.requires_approval));
    let method = RwSignal::new(form.method.clone());
    let url = RwSignal::new(form.url.clone());
    let parameters = RwSignal::new(form.parameters.clone());
    let timeout = RwSignal::new(form.timeout_ms.clone());
    let headers = RwSignal::new(
        form.headers
            .iter()
            .map(|(n, v)| row(n.clone(), v.clone(), false))
            .collect::<Vec<_>>(),
    );
    let secrets = RwSignal::new(
        form.secret_headers
            .iter()
            .map(|s| row(s.name.clone(), String::new(), true))
            .collect::<Vec<_>>(),
    );
    let stored_secret_names = StoredValue::new(form.stored_secret_names.clone());
    let agent = StoredValue::new(agent_id);
    let editing = StoredValue::new(editing);
    let error: FormError = RwSignal::new(None);
    let save = save_action(agent, editing, "http", on_saved, error);
    let pending = save.pending();

    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if pending.get_untracked() {
            return;
        }
        let n = name.get_untracked().trim().to_owned();
        if let Err(message) = check_tool_name(&n) {
            error.set(Some(message));
            return;
        }
        let d = description.get_untracked().trim().to_owned();
        if d.chars().count() > TOOL_DESCRIPTION_MAX {
            error.set(Some(format!(
                "The description can have at most {TOOL_DESCRIPTION_MAX} characters."
            )));
            return;
        }
        let form = HttpActionForm {
            method: method.get_untracked(),
            url: url.get_untracked(),
            parameters: parameters.get_untracked(),
            headers: headers
                .get_untracked()
                .iter()
                .map(|r| (r.name.get_untracked(), r.value.get_untracked()))
                .collect(),
            secret_headers: secrets
                .get_untracked()
                .iter()
                .map(|r| SecretHeader {
                    name: r.name.get_untracked(),
                    value: r.value.get_untracked(),
                    stored: r.stored,
                })
                .collect(),
            stored_secret_names: stored_secret_names.get_value(),
            timeout_ms: timeout.get_untracked(),
        };
        let config = match http_action_config(&form) {
            Ok(config) => config,
            Err(message) => {
                error.set(Some(message));
                return;
            }
        };
        error.set(None);
        save.dispatch((n, d, approval.get_untracked(), config));
    };

    let has_stored_secrets = !form.stored_secret_names.is_empty();
    view! {
        <form class="form form-wide tool-editor" on:submit=submit novalidate data-testid="tool-editor"
            aria-labelledby="tool-editor-title">
            <h3 id="tool-editor-title">{if creating { "New HTTP action" } else { "Edit HTTP action" }}</h3>
            <div class="field-row">
                <div class="field">
                    <label for="tool-name">"Name"</label>
                    <input id="tool-name" type="text" maxlength=TOOL_NAME_MAX.to_string() autocomplete="off" placeholder="get_weather"
                        aria-describedby="tool-name-hint"
                        prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev))/>
                    <p id="tool-name-hint" class="hint">"What the model calls: letters, digits, _ and -."</p>
                </div>
                <div class="field">
                    <label for="tool-method">"Method"</label>
                    <select id="tool-method" prop:value=move || method.get()
                        on:change=move |ev| method.set(event_target_value(&ev))>
                        {HTTP_METHODS.iter().map(|m| view! { <option value=*m selected=form.method == *m>{*m}</option> }).collect_view()}
                    </select>
                </div>
            </div>
            <div class="field">
                <label for="tool-description">"Description"</label>
                <textarea id="tool-description" rows="2" maxlength=TOOL_DESCRIPTION_MAX.to_string()
                    aria-describedby="tool-description-hint"
                    prop:value=move || description.get() on:input=move |ev| description.set(event_target_value(&ev))></textarea>
                <p id="tool-description-hint" class="hint">"What the model is told the action does, and when to use it."</p>
            </div>
            <div class="field">
                <label for="tool-url">"URL"</label>
                <input id="tool-url" type="url" autocomplete="off" placeholder="https://api.example.com/weather/{city}"
                    aria-describedby="tool-url-hint"
                    prop:value=move || url.get() on:input=move |ev| url.set(event_target_value(&ev))/>
                <p id="tool-url-hint" class="hint">
                    "May hold {name} placeholders, each a property of the parameters. The other arguments go in the query string (GET, DELETE) or the JSON body (POST, PUT, PATCH)."
                </p>
            </div>
            <div class="field">
                <label for="tool-parameters">"Parameters (JSON Schema)"</label>
                <textarea id="tool-parameters" class="code" rows="8" spellcheck="false"
                    aria-describedby="tool-parameters-hint"
                    prop:value=move || parameters.get() on:input=move |ev| parameters.set(event_target_value(&ev))></textarea>
                <p id="tool-parameters-hint" class="hint">
                    {move || match serde_json::from_str::<Value>(&parameters.read()) {
                        Ok(Value::Object(_)) => "The arguments the model gives, as a JSON Schema object (\"type\": \"object\").".to_owned(),
                        Ok(_) => "Not a JSON object yet: the parameters must be a JSON Schema object.".to_owned(),
                        Err(err) => format!("Not valid JSON yet: {err}."),
                    }}
                </p>
            </div>
            <fieldset class="scopes headers">
                <legend>"Headers " <span class="optional">"(optional)"</span></legend>
                <HeaderRows rows=headers next_key secret=false/>
            </fieldset>
            <fieldset class="scopes headers">
                <legend>"Secret headers " <span class="optional">"(optional)"</span></legend>
                <p class="hint">
                    {if has_stored_secrets {
                        "Stored encrypted and never shown again. Leave a stored value empty to keep it; to change one, enter every secret header you keep."
                    } else {
                        "For API keys and tokens: stored encrypted, never shown again and never logged."
                    }}
                </p>
                <HeaderRows rows=secrets next_key secret=true/>
            </fieldset>
            <div class="field-row">
                <div class="field">
                    <label for="tool-timeout">"Timeout in milliseconds " <span class="optional">"(optional)"</span></label>
                    <input id="tool-timeout" type="number" min="1" max=TOOL_TIMEOUT_MAX_MS.to_string() placeholder="server default"
                        prop:value=move || timeout.get() on:input=move |ev| timeout.set(event_target_value(&ev))/>
                </div>
                <div class="field">
                    <label class="check" for="tool-approval">
                        <input id="tool-approval" type="checkbox" role="switch"
                            prop:checked=move || approval.get()
                            on:change=move |ev| approval.set(event_target_checked(&ev))/>
                        "Requires approval"
                    </label>
                    <p class="hint">"Each call waits in the chat until you approve or deny it."</p>
                </div>
            </div>
            <FormErrorNotice error/>
            <div class="form-actions">
                <button type="submit" class="button" disabled=move || !hydrated.get() || pending.get()
                    aria-busy=move || pending.get().to_string()>
                    {move || match (pending.get(), creating) {
                        (true, _) => "Saving…",
                        (false, true) => "Add action",
                        (false, false) => "Save action",
                    }}
                </button>
                <button type="button" class="button button-secondary" on:click=move |_| on_cancel.run(())>"Cancel"</button>
            </div>
        </form>
    }
    .into_any()
}

/// The tools an MCP server integration offers, listed live, each with a checkbox.
#[component]
fn McpToolChoice(
    /// The server's tools.
    listed: Vec<McpServerTool>,
    /// The names ticked.
    ticked: RwSignal<Vec<String>>,
) -> impl IntoView {
    view! {
        <fieldset class="scopes" data-testid="mcp-tools">
            <legend>"Tools the agent may call"</legend>
            <p class="hint">"None ticked, or all: every tool of the server, also tools it adds later."</p>
            {listed
                .into_iter()
                .map(|tool| {
                    let id = format!("mcp-tool-{}", tool.name);
                    let label_for = id.clone();
                    let name = tool.name.clone();
                    let checked_name = tool.name.clone();
                    view! {
                        <label class="check" for=label_for>
                            <input id=id type="checkbox"
                                prop:checked=move || ticked.read().contains(&checked_name)
                                on:change=move |ev| {
                                    let on = event_target_checked(&ev);
                                    let name = name.clone();
                                    ticked.update(|t| {
                                        t.retain(|n| *n != name);
                                        if on { t.push(name); }
                                    });
                                }/>
                            <code>{tool.name.clone()}</code>
                            <span class="muted small">{tool.description.clone()}</span>
                        </label>
                    }
                })
                .collect_view()}
        </fieldset>
    }
}

/// The editor of an MCP server tool: the integration (an MCP server of the account), the
/// server's tools the agent may call, name, description and approval.
#[component]
fn McpToolForm(
    agent_id: String,
    /// The tool to edit; `None` attaches a server.
    tool: Option<Tool>,
    on_saved: Callback<Tool>,
    on_cancel: Callback<()>,
) -> impl IntoView {
    let hydrated = use_hydrated();
    let creating = tool.is_none();
    let config = tool.as_ref().map(|t| t.config.clone()).unwrap_or_default();
    let integration = RwSignal::new(
        config
            .get("integrationId")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned(),
    );
    let ticked = RwSignal::new(
        config
            .get("allowedTools")
            .and_then(Value::as_array)
            .map(|names| {
                names
                    .iter()
                    .filter_map(|n| n.as_str().map(str::to_owned))
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default(),
    );
    let name = RwSignal::new(tool.as_ref().map(|t| t.name.clone()).unwrap_or_default());
    let description = RwSignal::new(
        tool.as_ref()
            .map(|t| t.description.clone())
            .unwrap_or_default(),
    );
    let approval = RwSignal::new(tool.as_ref().is_some_and(|t| t.requires_approval));
    let servers = fetch_signed_in(
        || "/api/integrations".to_owned(),
        |answer: IntegrationsResponse| -> Vec<Integration> {
            answer
                .integrations
                .into_iter()
                .filter(|i| i.provider_code == MCP_PROVIDER)
                .collect()
        },
    );
    // The chosen server's tools, live, with the server they were listed for.
    let listing = LocalResource::new(move || {
        let id = integration.get();
        async move {
            let answer = if id.is_empty() {
                None
            } else {
                Some(
                    client::get_json_signed_in::<McpServerToolsResponse>(&format!(
                        "/api/integrations/{id}/tools"
                    ))
                    .await
                    .map(|answer| answer.tools),
                )
            };
            (id, answer)
        }
    });
    // `None` without a chosen server; `Some(None)` while its tools are loading.
    let listed = move || -> Option<Option<Result<Vec<McpServerTool>, ApiError>>> {
        let id = integration.get();
        if id.is_empty() {
            return None;
        }
        Some(
            listing
                .map(|(listed_for, answer)| answer.clone().filter(|_| *listed_for == id))
                .flatten(),
        )
    };
    let agent = StoredValue::new(agent_id);
    let editing = StoredValue::new(tool.as_ref().map(|t| t.id.clone()));
    let error: FormError = RwSignal::new(None);
    let save = save_action(agent, editing, "mcp", on_saved, error);
    let pending = save.pending();

    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if pending.get_untracked() {
            return;
        }
        let integration_id = integration.get_untracked();
        if integration_id.is_empty() {
            error.set(Some("Choose the MCP server.".into()));
            return;
        }
        let n = name.get_untracked().trim().to_owned();
        if let Err(message) = check_tool_name(&n) {
            error.set(Some(message));
            return;
        }
        let d = description.get_untracked().trim().to_owned();
        if d.chars().count() > TOOL_DESCRIPTION_MAX {
            error.set(Some(format!(
                "The description can have at most {TOOL_DESCRIPTION_MAX} characters."
            )));
            return;
        }
        let names: Vec<String> = match untrack(listed) {
            Some(Some(Ok(tools))) => tools.into_iter().map(|t| t.name).collect(),
            _ => Vec::new(),
        };
        let config = mcp_tool_config(&integration_id, &ticked.get_untracked(), &names);
        error.set(None);
        save.dispatch((n, d, approval.get_untracked(), config));
    };

    view! {
        <form class="form form-wide tool-editor" on:submit=submit novalidate data-testid="mcp-editor"
            aria-labelledby="mcp-editor-title">
            <h3 id="mcp-editor-title">{if creating { "Attach an MCP server" } else { "Edit MCP server" }}</h3>
            <div class="field">
                <label for="mcp-integration">"MCP server"</label>
                <Suspense fallback=|| loading_view("MCP servers")>
                {move || Suspend::new(async move { match servers.await {
                    Err(err) => load_error_view(&err, "mcp-servers"),
                    Ok(list) if list.is_empty() => view! {
                        <Notice tone=Tone::Info testid="mcp-servers-empty">
                            "No MCP server yet. Add one on the "
                            <a href="/dashboard/integrations">"Integrations"</a>
                            " page (provider “MCP server”, with the server's URL), then attach it here."
                        </Notice>
                    }.into_any(),
                    Ok(list) => {
                        let current = integration.get_untracked();
                        view! {
                            <select id="mcp-integration" prop:value=move || integration.get()
                                on:change=move |ev| { integration.set(event_target_value(&ev)); ticked.set(Vec::new()); }>
                                <option value="" selected=current.is_empty()>"Choose a server"</option>
                                {list.into_iter().map(|i| {
                                    let selected = i.id == current;
                                    view! { <option value=i.id.clone() selected=selected>{i.name.clone()}</option> }
                                }).collect_view()}
                            </select>
                        }.into_any()
                    }
                }})}
                </Suspense>
            </div>
            {move || match listed() {
                None => ().into_any(),
                Some(None) => loading_view("the server's tools"),
                Some(Some(Err(err))) => load_error_view(&err, "mcp-tools"),
                Some(Some(Ok(tools))) if tools.is_empty() => {
                    view! { <p class="empty">"The server offers no tools."</p> }.into_any()
                }
                Some(Some(Ok(tools))) => view! { <McpToolChoice listed=tools ticked/> }.into_any(),
            }}
            <div class="field">
                <label for="mcp-name">"Name"</label>
                <input id="mcp-name" type="text" maxlength=TOOL_NAME_MAX.to_string() autocomplete="off" placeholder="docs_server"
                    aria-describedby="mcp-name-hint"
                    prop:value=move || name.get() on:input=move |ev| name.set(event_target_value(&ev))/>
                <p id="mcp-name-hint" class="hint">"Names this server among the agent's tools: letters, digits, _ and -."</p>
            </div>
            <div class="field">
                <label for="mcp-description">"Description " <span class="optional">"(optional)"</span></label>
                <textarea id="mcp-description" rows="2" maxlength=TOOL_DESCRIPTION_MAX.to_string()
                    prop:value=move || description.get() on:input=move |ev| description.set(event_target_value(&ev))></textarea>
            </div>
            <label class="check" for="mcp-approval">
                <input id="mcp-approval" type="checkbox" role="switch"
                    prop:checked=move || approval.get()
                    on:change=move |ev| approval.set(event_target_checked(&ev))/>
                "Requires approval"
            </label>
            <FormErrorNotice error/>
            <div class="form-actions">
                <button type="submit" class="button" disabled=move || !hydrated.get() || pending.get()
                    aria-busy=move || pending.get().to_string()>
                    {move || match (pending.get(), creating) {
                        (true, _) => "Saving…",
                        (false, true) => "Attach server",
                        (false, false) => "Save server",
                    }}
                </button>
                <button type="button" class="button button-secondary" on:click=move |_| on_cancel.run(())>"Cancel"</button>
            </div>
        </form>
    }
    .into_any()
}

/// The tools of an MCP server integration, listed live (`GET
/// /api/integrations/{integrationId}/tools`): a "Tools" button for the integrations page.
#[component]
pub fn McpServerTools(
    /// The integration (provider `mcp`).
    integration_id: String,
) -> impl IntoView {
    let open = RwSignal::new(false);
    let id = StoredValue::new(integration_id);
    view! {
        <button type="button" class="button button-secondary button-small"
            aria-expanded=move || open.get().to_string() on:click=move |_| open.update(|o| *o = !*o)>
            "Tools"
        </button>
        <Show when=move || open.get()>
            <McpToolList integration_id=id.get_value()/>
        </Show>
    }
}

/// The tools an MCP server integration offers, loaded each time the list is opened.
#[component]
fn McpToolList(integration_id: String) -> impl IntoView {
    let listed = fetch_signed_in(
        move || format!("/api/integrations/{integration_id}/tools"),
        |answer: McpServerToolsResponse| answer.tools,
    );
    view! {
        <Suspense fallback=|| loading_view("the server's tools")>
            {move || Suspend::new(async move { match listed.await {
                Err(err) => load_error_view(&err, "mcp-tools"),
                Ok(tools) if tools.is_empty() => {
                    view! { <p class="empty">"The server offers no tools."</p> }.into_any()
                }
                Ok(tools) => view! {
                    <ul class="mcp-tool-list" data-testid="mcp-tools">
                        {tools.into_iter().map(|t| view! {
                            <li><code>{t.name}</code>" "<span class="muted small">{t.description}</span></li>
                        }).collect_view()}
                    </ul>
                }.into_any(),
            }})}
        </Suspense>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn form() -> HttpActionForm {
        HttpActionForm {
            method: "POST".into(),
            url: " https://api.example.com/orders/{id} ".into(),
            parameters: r#"{"type": "object", "properties": {"id": {"type": "string"}}}"#.into(),
            ..HttpActionForm::default()
        }
    }

    #[test]
    fn tool_names_follow_the_server_rule() {
        assert!(check_tool_name("get_weather-2").is_ok());
        assert!(check_tool_name("").is_err());
        assert!(check_tool_name("has space").is_err());
        assert!(check_tool_name(&"n".repeat(65)).is_err());
    }

    #[test]
    fn an_http_action_form_becomes_its_config() {
        let mut f = form();
        f.headers = vec![
            ("Accept".into(), "application/json".into()),
            (" ".into(), " ".into()),
        ];
        f.secret_headers = vec![SecretHeader {
            name: "X-Key".into(),
            value: "s3cret".into(),
            stored: false,
        }];
        f.timeout_ms = "5000".into();
        assert_eq!(
            http_action_config(&f).unwrap(),
            json!({
                "method": "POST",
                "url": "https://api.example.com/orders/{id}",
                "parameters": {"type": "object", "properties": {"id": {"type": "string"}}},
                "headers": {"Accept": "application/json"},
                "secretHeaders": {"X-Key": "s3cret"},
                "timeoutMs": 5000
            })
        );
    }

    #[test]
    fn malformed_parameters_and_fields_are_refused_in_words() {
        let mut f = form();
        f.parameters = "{oops".into();
        assert!(http_action_config(&f)
            .unwrap_err()
            .contains("not valid JSON"));
        f.parameters = "[1]".into();
        assert!(http_action_config(&f).unwrap_err().contains("JSON object"));
        let mut f = form();
        f.url = "ftp://x".into();
        assert!(http_action_config(&f).unwrap_err().contains("URL"));
        let mut f = form();
        f.timeout_ms = "0".into();
        assert!(http_action_config(&f).unwrap_err().contains("timeout"));
        let mut f = form();
        f.headers = vec![(String::new(), "v".into())];
        assert!(http_action_config(&f)
            .unwrap_err()
            .contains("Header 1 needs a name"));
    }

    #[test]
    fn stored_secret_headers_are_kept_unless_changed() {
        let stored = json!({
            "method": "GET", "url": "https://a.example/x", "parameters": {"type": "object"},
            "secretHeaders": ["X-Key", "X-Other"]
        });
        let mut f = http_action_form(&stored);
        assert_eq!(f.secret_headers.len(), 2);
        assert!(f
            .secret_headers
            .iter()
            .all(|s| s.stored && s.value.is_empty()));
        // Left alone: the update omits secretHeaders and the server keeps them.
        assert!(http_action_config(&f)
            .unwrap()
            .get("secretHeaders")
            .is_none());
        // One changed: every kept one must be entered again (values cannot be read back).
        f.secret_headers[0].value = "new".into();
        assert!(http_action_config(&f)
            .unwrap_err()
            .contains("X-Other is stored"));
        f.secret_headers[1].value = "other".into();
        assert_eq!(
            http_action_config(&f).unwrap()["secretHeaders"],
            json!({"X-Key": "new", "X-Other": "other"})
        );
        // All removed: an empty object clears them.
        f.secret_headers.clear();
        assert_eq!(http_action_config(&f).unwrap()["secretHeaders"], json!({}));
    }

    #[test]
    fn mcp_allowed_tools_are_omitted_when_every_tool_is_allowed() {
        let listed = vec!["search".to_owned(), "fetch".to_owned()];
        assert_eq!(
            mcp_tool_config("int_1", &[], &listed),
            json!({"integrationId": "int_1"})
        );
        assert_eq!(
            mcp_tool_config("int_1", &["fetch".into(), "search".into()], &listed),
            json!({"integrationId": "int_1"})
        );
        assert_eq!(
            mcp_tool_config("int_1", &["fetch".into()], &listed),
            json!({"integrationId": "int_1", "allowedTools": ["fetch"]})
        );
        // The server could not be listed: the ticked names are kept as they are.
        assert_eq!(
            mcp_tool_config("int_1", &["fetch".into()], &[]),
            json!({"integrationId": "int_1", "allowedTools": ["fetch"]})
        );
    }
}
