//! `/dashboard/account`: the profile, the plan with its limits, and the live sessions with
//! "Sign out" for each (`GET /api/auth/me`, `GET /api/auth/sessions`,
//! `DELETE /api/auth/sessions/{id}`).

use super::{
    agents::{ConfirmButton, Loaded},
    dashboard::{short_time, use_session},
};
use crate::{
    api::{MeResponse, SessionInfo, SessionsResponse, SuccessResponse},
    client,
    components::{Notice, Tone},
    countries::country_name,
};
use leptos::{prelude::*, task::spawn_local};
use leptos_meta::Title;

/// The account page.
#[component]
pub fn AccountPage() -> impl IntoView {
    let session = use_session();
    view! {
        <Title text="Account"/>
        <div class="stack">
            <section class="card">
                <h1>"Account"</h1>
                {move || match session.me.get() {
                    Some(me) => view! { <Profile me/> }.into_any(),
                    None => view! { <p class="loading" role="status">"Loading your account…"</p> }.into_any(),
                }}
            </section>
            <Sessions/>
        </div>
    }
    .into_any()
}

/// Name, email, company, country, phone, plan and its limits.
#[component]
fn Profile(me: MeResponse) -> impl IntoView {
    let user = me.user;
    let optional = |value: Option<String>| value.unwrap_or_else(|| "—".to_owned());
    let item = |label: &'static str, value: String, testid: &'static str| {
        view! {
            <div>
                <dt>{label}</dt>
                <dd data-testid=testid>{value}</dd>
            </div>
        }
    };
    view! {
        <dl class="profile">
            {item("Name", user.name.clone(), "profile-name")}
            {item("Email", user.email.clone(), "profile-email")}
            {item("Company", optional(user.company.clone()), "profile-company")}
            {item(
                "Country",
                optional(user.country.clone().map(|code| country_name(&code).map_or(code, ToOwned::to_owned))),
                "profile-country",
            )}
            {item("Phone", optional(user.phone.clone()), "profile-phone")}
            {item("Member since", user.created_at.get(..10).unwrap_or(&user.created_at).to_owned(), "profile-since")}
        </dl>
        <h2>"Plan"</h2>
        <dl class="profile">
            {item("Plan", user.plan.clone(), "account-plan")}
            {item("Rate limit", format!("{} requests per minute", me.limits.requests_per_minute), "rate-limit")}
            {item("Agents", format!("up to {}", me.limits.agents), "plan-agent-limit")}
        </dl>
        <p class="muted small">
            "API keys count toward your account's rate limit. An administrator changes plans with "
            <code>"agentchat admin set-plan"</code>
            "."
        </p>
    }
    .into_any()
}

/// The live sessions (at most five), newest first, each with "Sign out".
#[component]
fn Sessions() -> impl IntoView {
    let sessions = RwSignal::new(Loaded::<Vec<SessionInfo>>::Loading);
    let load = move || {
        spawn_local(async move {
            sessions.set(
                match client::get_json_signed_in::<SessionsResponse>("/api/auth/sessions").await {
                    Ok(answer) => Loaded::Ready(answer.sessions),
                    Err(err) => Loaded::Failed(err.message().to_owned()),
                },
            );
        });
    };
    Effect::new(move |_| load());
    view! {
        <section class="card">
            <h2 class="first">"Active sessions"</h2>
            <p class="muted">"Every browser or device signed in to your account. A session unused for 24 hours ends by itself."</p>
            {move || match sessions.get() {
                Loaded::Loading => view! { <p class="loading" role="status">"Loading sessions…"</p> }.into_any(),
                Loaded::Failed(message) => {
                    view! { <Notice tone=Tone::Error testid="sessions-error">{message}</Notice> }.into_any()
                }
                Loaded::Ready(list) if list.is_empty() => {
                    view! { <p class="empty">"No active sessions."</p> }.into_any()
                }
                Loaded::Ready(list) => {
                    view! {
                        <ul class="sessions" data-testid="sessions">
                            {list
                                .into_iter()
                                .map(|s| view! { <SessionRow session=s on_ended=Callback::new(move |()| load())/> })
                                .collect_view()}
                        </ul>
                    }
                        .into_any()
                }
            }}
        </section>
    }
    .into_any()
}

/// One session: browser, address, when it started and was last used.
#[component]
fn SessionRow(session: SessionInfo, on_ended: Callback<()>) -> impl IntoView {
    let busy = RwSignal::new(false);
    let error = RwSignal::new(None::<String>);
    let current = session.current;
    let end = Callback::new({
        let id = session.id.clone();
        move |()| {
            let id = id.clone();
            busy.set(true);
            error.set(None);
            spawn_local(async move {
                match client::delete_signed_in::<SuccessResponse>(&format!(
                    "/api/auth/sessions/{id}"
                ))
                .await
                {
                    Ok(_) if current => client::to_sign_in(),
                    Ok(_) => on_ended.run(()),
                    Err(err) => error.set(Some(err.message().to_owned())),
                }
                busy.set(false);
            });
        }
    });
    view! {
        <li class="session" data-testid="session" data-current=current.to_string()>
            <div>
                <strong>{session.user_agent.clone().unwrap_or_else(|| "Unknown browser".to_owned())}</strong>
                {current.then(|| view! { <span class="pill">"this browser"</span> })}
                <p class="muted small">
                    {format!(
                        "{} · signed in {} · last used {}",
                        session.ip.clone().unwrap_or_else(|| "unknown address".to_owned()),
                        short_time(&session.created_at),
                        short_time(&session.last_seen_at),
                    )}
                </p>
            </div>
            <ConfirmButton
                label="Sign out"
                question=if current { "Sign out of this browser?".to_owned() } else { "End this session?".to_owned() }
                confirm="Yes, sign out"
                busy
                on_confirm=end
            />
            {move || error.get().map(|message| view! { <Notice tone=Tone::Error testid="session-error">{message}</Notice> })}
        </li>
    }
    .into_any()
}
