//! `/dashboard/webhooks`: signed webhook deliveries of the account's events
//! (`GET /api/integrations/webhooks/events`, `GET`/`POST /api/integrations/webhooks`,
//! `DELETE /api/integrations/webhooks/{id}`, `GET .../{id}/deliveries`,
//! `POST .../{id}/deliveries/{deliveryId}/redeliver`).
//!
//! The signing secret is shown once, right after creation. Each webhook has a delivery log
//! with the outcome of every delivery and a way to send one again.

use super::{agents::ConfirmButton, dashboard::short_time};
use crate::api::limits::WEBHOOK_DESCRIPTION_MAX;
use crate::{
    api::{
        CreateWebhookRequest, CreatedWebhook, SuccessResponse, Webhook, WebhookDeliveriesResponse,
        WebhookDelivery, WebhookEventsResponse, WebhooksResponse,
    },
    client,
    components::{
        fetch_signed_in, load_error_view, loading_view, use_hydrated, FormError, FormErrorNotice,
        Notice, ShownOnce, Tone,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;

/// Checks the webhook form as the server would and returns the body.
///
/// # Errors
/// The first rule broken, in words.
pub fn webhook_request(
    url: &str,
    description: &str,
    events: &[String],
) -> Result<CreateWebhookRequest, String> {
    let url = url.trim();
    if !(url.starts_with("https://") || url.starts_with("http://")) || url.len() < 10 {
        return Err("Enter the receiver's URL, starting with https://.".into());
    }
    if events.is_empty() {
        return Err("Choose at least one event.".into());
    }
    let description = description.trim();
    if description.chars().count() > WEBHOOK_DESCRIPTION_MAX {
        return Err(format!(
            "The description can have at most {WEBHOOK_DESCRIPTION_MAX} characters."
        ));
    }
    Ok(CreateWebhookRequest {
        url: url.to_owned(),
        events: events.to_vec(),
        description: (!description.is_empty()).then(|| description.to_owned()),
    })
}

/// The form, the once-shown secret, and the webhooks with their delivery logs.
#[component]
pub fn WebhooksPage() -> impl IntoView {
    let hydrated = use_hydrated();
    let catalogue = fetch_signed_in(
        || "/api/integrations/webhooks/events".to_owned(),
        |answer: WebhookEventsResponse| answer.events,
    );
    let webhooks = fetch_signed_in(
        || "/api/integrations/webhooks".to_owned(),
        |answer: WebhooksResponse| answer.webhooks,
    );
    let url = RwSignal::new(String::new());
    let description = RwSignal::new(String::new());
    let chosen = RwSignal::new(Vec::<String>::new());
    let error: FormError = RwSignal::new(None);
    let created = RwSignal::new(None::<CreatedWebhook>);
    let load = move || webhooks.refetch();

    let create = Action::new_local(move |body: &CreateWebhookRequest| {
        let body = body.clone();
        async move {
            match client::post_signed_in::<_, CreatedWebhook>("/api/integrations/webhooks", &body)
                .await
            {
                Ok(answer) => {
                    created.set(Some(answer));
                    url.set(String::new());
                    description.set(String::new());
                    chosen.set(Vec::new());
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
        let body = match webhook_request(
            &url.get_untracked(),
            &description.get_untracked(),
            &chosen.get_untracked(),
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

    view! {
        <Title text="Webhooks"/>
        <div class="stack">
            {move || created.get().map(|answer| view! {
                <ShownOnce
                    testid="new-secret"
                    title=format!("Signing secret of {}", answer.webhook.url)
                    warning="Copy this signing secret now and keep it in your receiver's configuration. It is shown only this once."
                    label="Signing secret"
                    value=answer.secret
                    on_close=Callback::new(move |()| created.set(None))
                />
            })}
            <section class="card">
                <h1>"Webhooks"</h1>
                <p class="muted">
                    "AgentChat POSTs each chosen event as JSON to your URL, signed per Standard Webhooks ("
                    <code>"webhook-id"</code>", "<code>"webhook-timestamp"</code>", "<code>"webhook-signature"</code>
                    "), and retries failed deliveries with backoff for about a day. An answer of 410 Gone disables the webhook."
                </p>
                <form class="form form-wide" on:submit=submit novalidate>
                    <div class="field">
                        <label for="webhook-url">"Receiver URL"</label>
                        <input id="webhook-url" type="url" placeholder="https://example.com/agentchat/events"
                            prop:value=move || url.get() on:input=move |ev| url.set(event_target_value(&ev)) />
                    </div>
                    <div class="field">
                        <label for="webhook-description">"Description " <span class="optional">"(optional)"</span></label>
                        <input id="webhook-description" type="text" maxlength=WEBHOOK_DESCRIPTION_MAX.to_string()
                            prop:value=move || description.get() on:input=move |ev| description.set(event_target_value(&ev)) />
                    </div>
                    <fieldset class="scopes">
                        <legend>"Events"</legend>
                        <Suspense fallback=|| loading_view("events")>
                        {move || Suspend::new(async move { match catalogue.await {
                            Err(err) => load_error_view(&err, "events"),
                            Ok(events) => events.into_iter().map(|event| {
                                let id = format!("event-{}", event.kind.replace('.', "-"));
                                let label_for = id.clone();
                                let kind = event.kind.clone();
                                let checked_kind = event.kind.clone();
                                view! {
                                    <label class="check" for=label_for>
                                        <input id=id type="checkbox" value=event.kind.clone()
                                            prop:checked=move || chosen.read().contains(&checked_kind)
                                            on:change=move |ev| {
                                                let on = event_target_checked(&ev);
                                                let kind = kind.clone();
                                                chosen.update(|c| {
                                                    c.retain(|k| *k != kind);
                                                    if on { c.push(kind); }
                                                });
                                            } />
                                        <code>{event.kind.clone()}</code>
                                        <span class="muted small">{event.description.clone()}</span>
                                    </label>
                                }
                            }).collect_view().into_any(),
                        }})}
                        </Suspense>
                    </fieldset>
                    <FormErrorNotice error/>
                    <div class="form-actions">
                        <button type="submit" class="button" disabled=move || !hydrated.get() || pending.get()>
                            {move || if pending.get() { "Creating…" } else { "Create webhook" }}
                        </button>
                    </div>
                </form>
            </section>
            <section class="card">
                <h2 class="first">"Your webhooks"</h2>
                <Transition fallback=|| loading_view("webhooks")>
                {move || Suspend::new(async move { match webhooks.await {
                    Err(err) => load_error_view(&err, "webhooks"),
                    Ok(list) if list.is_empty() => view! { <p class="empty" data-testid="webhooks-empty">"No webhooks yet."</p> }.into_any(),
                    Ok(list) => view! {
                        <ul class="sessions" data-testid="webhooks">
                            {list.into_iter().map(|w| view! { <WebhookRow webhook=w on_deleted=Callback::new(move |()| load())/> }).collect_view()}
                        </ul>
                    }.into_any(),
                }})}
                </Transition>
            </section>
        </div>
    }
    .into_any()
}

/// One webhook: URL, events, state, "Deliveries" (the log) and "Delete".
#[component]
fn WebhookRow(webhook: Webhook, on_deleted: Callback<()>) -> impl IntoView {
    let error = RwSignal::new(None::<String>);
    let open = RwSignal::new(false);
    let id = webhook.id.clone();
    let toggle = move |_| open.update(|open| *open = !*open);
    let delete_action = Action::new_local(move |id: &String| {
        let path = format!("/api/integrations/webhooks/{id}");
        async move {
            match client::delete_signed_in::<SuccessResponse>(&path).await {
                Ok(_) => on_deleted.run(()),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let busy = delete_action.pending();
    let delete = Callback::new({
        let id = id.clone();
        move |()| {
            delete_action.dispatch(id.clone());
        }
    });
    let state = if webhook.active {
        "active"
    } else {
        "disabled (the receiver answered 410 Gone)"
    };
    view! {
        <li class="session" data-testid="webhook">
            <div>
                <strong class="break">{webhook.url.clone()}</strong>
                <span class=if webhook.active { "pill" } else { "pill pill-error" }>{state}</span>
                <p class="muted small">{format!("{} · created {}", webhook.events.join(", "), short_time(&webhook.created_at))}</p>
                {(!webhook.description.is_empty()).then(|| view! { <p class="small">{webhook.description.clone()}</p> })}
                <button type="button" class="button button-secondary button-small" on:click=toggle
                    aria-expanded=move || open.get().to_string()>
                    {move || if open.get() { "Hide deliveries" } else { "Deliveries" }}
                </button>
            </div>
            <ConfirmButton label="Delete" question="Delete this webhook?".to_owned() confirm="Yes, delete" busy on_confirm=delete/>
            {move || error.get().map(|message| view! { <Notice tone=Tone::Error testid="webhook-error">{message}</Notice> })}
            <Show when=move || open.get()>
                <DeliveryLog webhook_id=id.clone() error/>
            </Show>
        </li>
    }
    .into_any()
}

/// The delivery log of one webhook, loaded each time it is opened, with "Redeliver" per
/// delivery (which reloads the log); a failed redelivery's words go to `error`.
#[component]
fn DeliveryLog(webhook_id: String, error: RwSignal<Option<String>>) -> impl IntoView {
    let deliveries = fetch_signed_in(
        {
            let webhook_id = webhook_id.clone();
            move || format!("/api/integrations/webhooks/{webhook_id}/deliveries")
        },
        |answer: WebhookDeliveriesResponse| answer.deliveries,
    );
    let redeliver = Action::new_local(move |delivery: &String| {
        let path =
            format!("/api/integrations/webhooks/{webhook_id}/deliveries/{delivery}/redeliver");
        async move {
            match client::post_signed_in::<_, serde::de::IgnoredAny>(&path, &serde_json::Map::new())
                .await
            {
                Ok(_) => deliveries.refetch(),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    view! {
        <Transition fallback=|| loading_view("deliveries")>
            {move || Suspend::new(async move { match deliveries.await {
                Err(err) => load_error_view(&err, "deliveries"),
                Ok(list) if list.is_empty() => view! { <p class="empty" data-testid="deliveries-empty">"Nothing delivered yet."</p> }.into_any(),
                Ok(list) => view! { <DeliveryTable list redeliver/> }.into_any(),
            }})}
        </Transition>
    }
}

/// The deliveries of a webhook, newest first as the server lists them.
#[component]
fn DeliveryTable(list: Vec<WebhookDelivery>, redeliver: Action<String, ()>) -> impl IntoView {
    view! {
        <div class="table-wrap">
            <table class="table" data-testid="deliveries">
                <thead><tr>
                    <th scope="col">"Event"</th><th scope="col">"Status"</th><th scope="col">"Attempts"</th>
                    <th scope="col">"Answer"</th><th scope="col">"Created"</th><th scope="col">"Next attempt"</th><th scope="col">""</th>
                </tr></thead>
                <tbody>
                    {list.into_iter().map(|d| {
                        let delivery = d.id.clone();
                        view! {
                            <tr data-testid="delivery" data-status=d.status.clone()>
                                <td><code>{d.event.clone()}</code></td>
                                <td>{d.status.clone()}</td>
                                <td>{d.attempts.to_string()}</td>
                                <td title=d.last_error.clone().unwrap_or_default()>
                                    {d.response_status.map_or_else(|| d.last_error.clone().unwrap_or_else(|| "—".into()), |s| s.to_string())}
                                </td>
                                <td>{short_time(&d.created_at)}</td>
                                <td>{d.next_attempt_at.as_deref().map_or_else(|| "—".to_owned(), short_time)}</td>
                                <td><button type="button" class="button button-secondary button-small"
                                    on:click=move |_| { redeliver.dispatch(delivery.clone()); }>"Redeliver"</button></td>
                            </tr>
                        }
                    }).collect_view()}
                </tbody>
            </table>
        </div>
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_form_is_checked_before_sending() {
        let events = vec!["agent.created".to_owned()];
        assert!(webhook_request("example.com", "", &events).is_err());
        assert!(webhook_request("https://example.com/hook", "", &[]).is_err());
        assert!(webhook_request("https://example.com/hook", &"x".repeat(501), &events).is_err());
        let body = webhook_request(" https://example.com/hook ", " ", &events).unwrap();
        assert_eq!(body.url, "https://example.com/hook");
        assert_eq!(body.description, None);
        assert_eq!(body.events, events);
    }
}
