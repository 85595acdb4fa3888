//! `/dashboard/account`: the profile, the plan with its limits, the sign-in methods
//! (connect and disconnect Google, GitHub or Microsoft), the usage of this month with a chart
//! of chats per day (`GET /api/usage`), and the live sessions with
//! "Sign out" for each (`GET /api/auth/me`, `GET /api/auth/identities`,
//! `POST`/`DELETE /api/auth/oauth/{provider}/link`, `GET /api/auth/sessions`,
//! `DELETE /api/auth/sessions/{id}`).

use super::{
    agents::{ConfirmButton, Loaded},
    dashboard::{short_time, use_session},
};
use crate::{
    api::{
        AuthProvider, AuthProvidersResponse, IdentitiesResponse, MeResponse, OAuthLinkResponse,
        SessionInfo, SessionsResponse, SuccessResponse, UsageResponse,
    },
    client,
    components::{Notice, Tone},
    countries::country_name,
};
use leptos::{prelude::*, task::spawn_local};
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

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
            <Usage/>
            <SignInMethods/>
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

/// Replies and tokens this month, and a bar chart of chats per day over the last 30 days.
#[component]
fn Usage() -> impl IntoView {
    let usage = RwSignal::new(Loaded::<UsageResponse>::Loading);
    Effect::new(move |_| {
        spawn_local(async move {
            usage.set(
                match client::get_json_signed_in::<UsageResponse>("/api/usage?days=30").await {
                    Ok(answer) => Loaded::Ready(answer),
                    Err(err) => Loaded::Failed(err.message().to_owned()),
                },
            );
        });
    });
    view! {
        <section class="card">
            <h2 class="first">"Usage"</h2>
            {move || match usage.get() {
                state @ (Loaded::Loading | Loaded::Failed(_)) => state.status_view("usage", "usage"),
                Loaded::Ready(u) => {
                    let busiest = u.days.iter().map(|d| d.chats).max().unwrap_or(0).max(1);
                    let summary = format!(
                        "Chats per day over the last {} days: {} in all, at most {} in a day",
                        u.days.len(),
                        u.days.iter().map(|d| d.chats).sum::<u64>(),
                        busiest,
                    );
                    view! {
                        <dl class="profile">
                            <div>
                                <dt>{format!("Tokens in {}", u.month)}</dt>
                                <dd data-testid="usage-tokens">{format!(
                                    "{} ({} prompt, {} completion)",
                                    u.tokens_this_month.total,
                                    u.tokens_this_month.prompt,
                                    u.tokens_this_month.completion,
                                )}</dd>
                            </div>
                            <div>
                                <dt>{format!("Chats in {}", u.month)}</dt>
                                <dd data-testid="usage-chats">{u.chats_this_month.to_string()}</dd>
                            </div>
                        </dl>
                        <div class="usage-chart" role="img" aria-label=summary data-testid="usage-chart">
                            {u.days.into_iter().map(|d| {
                                let percent = d.chats * 100 / busiest;
                                let title = format!("{}: {} chats, {} tokens", d.date, d.chats, d.tokens.total);
                                view! {
                                    <div class="usage-bar" title=title data-chats=d.chats.to_string()>
                                        // Set through the CSS object model (not a `style` attribute, which
                                        // the dashboard's Content Security Policy refuses).
                                        <span style:height=format!("{percent}%")></span>
                                    </div>
                                }
                            }).collect_view()}
                        </div>
                    }.into_any()
                }
            }}
        </section>
    }
    .into_any()
}

/// The configured sign-in providers, each connected (with its email and "Disconnect") or
/// not (with "Connect", which goes through the provider and comes back here with
/// `?linked=code` or `?oauthError=message`).
#[component]
fn SignInMethods() -> impl IntoView {
    let query = use_query_map();
    let state = RwSignal::new(Loaded::<(Vec<AuthProvider>, IdentitiesResponse)>::Loading);
    let error = RwSignal::new(None::<String>);
    let busy = RwSignal::new(false);
    let load = move || {
        spawn_local(async move {
            let providers = client::get_json::<AuthProvidersResponse>("/api/auth/providers").await;
            let identities =
                client::get_json_signed_in::<IdentitiesResponse>("/api/auth/identities").await;
            state.set(match (providers, identities) {
                (Ok(p), Ok(i)) => Loaded::Ready((p.providers, i)),
                (Err(err), _) | (_, Err(err)) => Loaded::Failed(err.message().to_owned()),
            });
        });
    };
    Effect::new(move |_| load());
    let connect = move |code: String| {
        busy.set(true);
        error.set(None);
        spawn_local(async move {
            match client::post_signed_in::<_, OAuthLinkResponse>(
                &format!("/api/auth/oauth/{code}/link"),
                &(),
            )
            .await
            {
                Ok(answer) => client::go_to(&answer.url),
                Err(err) => {
                    error.set(Some(err.message().to_owned()));
                    busy.set(false);
                }
            }
        });
    };
    let disconnect = move |code: String| {
        busy.set(true);
        error.set(None);
        spawn_local(async move {
            match client::delete_signed_in::<SuccessResponse>(&format!(
                "/api/auth/oauth/{code}/link"
            ))
            .await
            {
                Ok(_) => load(),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
            busy.set(false);
        });
    };
    view! {
        <section class="card">
            <h2 class="first">"Sign-in methods"</h2>
            {move || query.read().get("linked").map(|code| view! {
                <Notice tone=Tone::Success testid="linked-banner">{format!("Connected {code}. You can now sign in with it.")}</Notice>
            })}
            {move || query.read().get("oauthError").map(|message| view! {
                <Notice tone=Tone::Error testid="link-error">{message}</Notice>
            })}
            {move || error.get().map(|message| view! { <Notice tone=Tone::Error testid="methods-error">{message}</Notice> })}
            {move || match state.get() {
                state @ (Loaded::Loading | Loaded::Failed(_)) => state.status_view("sign-in methods", "methods"),
                Loaded::Ready((providers, identities)) => {
                    let password = if identities.has_password { "Password: set" } else { "Password: not set (use “Forgot your password?” on the sign-in page to set one)" };
                    view! {
                        <p class="muted" data-testid="password-method">{password}</p>
                        {providers.is_empty().then(|| view! { <p class="empty">"No sign-in providers are configured on this server."</p> })}
                        <ul class="sessions" data-testid="sign-in-methods">
                            {providers.into_iter().map(|provider| {
                                let linked = identities.identities.iter().find(|i| i.provider == provider.code).cloned();
                                let code = provider.code.clone();
                                view! {
                                    <li class="session" data-testid=format!("method-{}", provider.code)>
                                        <div>
                                            <strong>{provider.name.clone()}</strong>
                                            <p class="muted small">{linked.as_ref().map_or_else(
                                                || "Not connected".to_owned(),
                                                |i| format!("Connected as {} since {}", i.email, short_time(&i.created_at)),
                                            )}</p>
                                        </div>
                                        {if linked.is_some() {
                                            view! {
                                                <ConfirmButton
                                                    label="Disconnect"
                                                    question=format!("Disconnect {}?", provider.name)
                                                    confirm="Yes, disconnect"
                                                    busy
                                                    on_confirm=Callback::new(move |()| disconnect(code.clone()))
                                                />
                                            }.into_any()
                                        } else {
                                            view! {
                                                <button type="button" class="button button-secondary" disabled=move || busy.get()
                                                    on:click=move |_| connect(code.clone())>
                                                    {format!("Connect {}", provider.name)}
                                                </button>
                                            }.into_any()
                                        }}
                                    </li>
                                }
                            }).collect_view()}
                        </ul>
                    }.into_any()
                }
            }}
        </section>
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
                client::get_json_signed_in::<SessionsResponse>("/api/auth/sessions")
                    .await
                    .map(|answer| answer.sessions)
                    .into(),
            );
        });
    };
    Effect::new(move |_| load());
    view! {
        <section class="card">
            <h2 class="first">"Active sessions"</h2>
            <p class="muted">"Every browser or device signed in to your account. A session unused for 24 hours ends by itself."</p>
            {move || match sessions.get() {
                state @ (Loaded::Loading | Loaded::Failed(_)) => state.status_view("sessions", "sessions"),
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
