//! `/dashboard/api-keys`: API keys for programs (`POST /api/api-keys`, `GET /api/api-keys`,
//! `DELETE /api/api-keys/{id}`, `POST /api/api-keys/{id}/rotate`).
//!
//! The full key is shown once, right after creation or rotation; afterwards only its
//! prefix is listed (docs/api.md § API key lifecycle).

use super::{agents::ConfirmButton, dashboard::short_time};
use crate::api::limits::API_KEY_NAME_MAX;
use crate::{
    api::{
        ApiKeyInfo, ApiKeysResponse, CreateApiKeyRequest, CreatedApiKey, SuccessResponse, SCOPES,
    },
    client,
    components::{
        fetch_signed_in, load_error_view, loading_view, use_hydrated, FormError, FormErrorNotice,
        Notice, ShownOnce, Tone,
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

/// Checks the key form as the server would and returns the request body.
///
/// # Errors
/// The first rule broken, in words.
pub fn key_request(
    name: &str,
    scopes: &[bool],
    expires: &str,
    today: &str,
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
    let expires = expires.trim();
    // ISO dates compare correctly as text.
    if !expires.is_empty() && !today.is_empty() && expires <= today {
        return Err("The expiry date must be in the future.".into());
    }
    Ok(CreateApiKeyRequest {
        name: name.to_owned(),
        scopes: chosen,
        expires_at: (!expires.is_empty()).then(|| format!("{expires}T23:59:59Z")),
    })
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
    let name = RwSignal::new(String::new());
    let scopes = RwSignal::new([false; SCOPES.len()]);
    let expires = RwSignal::new(String::new());
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
        let body = match key_request(
            &name.get_untracked(),
            &scopes.get_untracked(),
            &expires.get_untracked(),
            &today(),
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
                                            <th scope="col">"Created"</th>
                                            <th scope="col">"Last used"</th>
                                            <th scope="col">"Expires"</th>
                                            <th scope="col">"Actions"</th>
                                        </tr>
                                    </thead>
                                    <tbody>
                                        {list
                                            .into_iter()
                                            .map(|key| view! { <KeyRow key on_rotated on_revoked/> })
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
    view! {
        <tr data-testid="key-row">
            <td>{key.name.clone()}</td>
            <td>
                <code data-testid="key-prefix">{format!("{}…", key.prefix)}</code>
            </td>
            <td class="scope-cell">
                {key.scopes.iter().map(|s| view! { <code class="tag">{s.clone()}</code> }).collect_view()}
            </td>
            <td>{short_time(&key.created_at)}</td>
            <td>{optional(key.last_used_at.clone(), "never")}</td>
            <td>{optional(key.expires_at.clone(), "never")}</td>
            <td class="row-actions">
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
            </td>
        </tr>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_forms_are_checked_before_sending() {
        let mut scopes = [false; SCOPES.len()];
        assert!(
            key_request("CI", &scopes, "", "2026-11-20").is_err(),
            "no scope"
        );
        scopes[0] = true;
        scopes[3] = true;
        assert!(
            key_request(" ", &scopes, "", "2026-11-20").is_err(),
            "no name"
        );
        assert!(
            key_request("CI", &scopes, "2026-11-20", "2026-11-20").is_err(),
            "past expiry"
        );
        let body = key_request("CI", &scopes, "2027-01-31", "2026-11-20").unwrap();
        assert_eq!(body.scopes, vec!["agents:read", "chat:write"]);
        assert_eq!(body.expires_at.as_deref(), Some("2027-01-31T23:59:59Z"));
        assert_eq!(key_request("CI", &scopes, "", "").unwrap().expires_at, None);
    }

    #[test]
    fn every_scope_is_described() {
        assert!(SCOPES.iter().all(|s| !scope_description(s).is_empty()));
    }
}
