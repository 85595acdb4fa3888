//! `/dashboard/account`: the profile, the plan with its limits, the sign-in methods
//! (connect and disconnect Google, GitHub or Microsoft), the usage of this month with a chart
//! of chats per day (`GET /api/usage`), and the live sessions with
//! "Sign out" for each (`GET /api/auth/me`, `GET /api/auth/identities`,
//! `POST`/`DELETE /api/auth/oauth/{provider}/link`, `GET /api/auth/sessions`,
//! `DELETE /api/auth/sessions/{id}`).

use super::{
    agents::ConfirmButton,
    dashboard::{short_time, use_session},
};
use crate::{
    api::{
        AuthProvidersResponse, IdentitiesResponse, MeResponse, OAuthLinkResponse, SessionInfo,
        SessionsResponse, SuccessResponse, UsageResponse,
    },
    client::{self, ApiError},
    components::{fetch_signed_in, load_error_view, loading_view, Notice, Tone},
    countries::country_name,
};
use leptos::prelude::*;
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
    let usage = fetch_signed_in(|| "/api/usage?days=30".to_owned(), |u: UsageResponse| u);
    view! {
        <section class="card">
            <h2 class="first">"Usage"</h2>
            <Suspense fallback=|| loading_view("usage")>
            {move || Suspend::new(async move { match usage.await {
                Err(err) => load_error_view(&err, "usage"),
                Ok(u) => {
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
            }})}
            </Suspense>
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
    let state = LocalResource::new(|| async {
        let providers = client::get_json::<AuthProvidersResponse>("/api/auth/providers").await;
        let identities =
            client::get_json_signed_in::<IdentitiesResponse>("/api/auth/identities").await;
        Ok::<_, ApiError>((providers?.providers, identities?))
    });
    let error = RwSignal::new(None::<String>);
    // Set once the browser is on its way to the provider, so the buttons stay disabled.
    let leaving = RwSignal::new(false);
    let connect_action = Action::new_local(move |code: &String| {
        let path = format!("/api/auth/oauth/{code}/link");
        async move {
            match client::post_signed_in::<_, OAuthLinkResponse>(&path, &()).await {
                Ok(answer) => {
                    leaving.set(true);
                    client::go_to(&answer.url);
                }
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let disconnect_action = Action::new_local(move |code: &String| {
        let path = format!("/api/auth/oauth/{code}/link");
        async move {
            match client::delete_signed_in::<SuccessResponse>(&path).await {
                Ok(_) => state.refetch(),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let (connecting, disconnecting) = (connect_action.pending(), disconnect_action.pending());
    let busy = Signal::derive(move || leaving.get() || connecting.get() || disconnecting.get());
    let connect = move |code: String| {
        error.set(None);
        connect_action.dispatch(code);
    };
    let disconnect = move |code: String| {
        error.set(None);
        disconnect_action.dispatch(code);
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
            <Transition fallback=|| loading_view("sign-in methods")>
            {move || Suspend::new(async move { match state.await {
                Err(err) => load_error_view(&err, "methods"),
                Ok((providers, identities)) => {
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
            }})}
            </Transition>
        </section>
    }
    .into_any()
}

/// The live sessions (at most five), newest first, each with "Sign out".
#[component]
fn Sessions() -> impl IntoView {
    let sessions = fetch_signed_in(
        || "/api/auth/sessions".to_owned(),
        |answer: SessionsResponse| answer.sessions,
    );
    let load = move || sessions.refetch();
    view! {
        <section class="card">
            <h2 class="first">"Active sessions"</h2>
            <p class="muted">"Every browser or device signed in to your account. A session unused for 24 hours ends by itself."</p>
            <Transition fallback=|| loading_view("sessions")>
            {move || Suspend::new(async move { match sessions.await {
                Err(err) => load_error_view(&err, "sessions"),
                Ok(list) if list.is_empty() => {
                    view! { <p class="empty">"No active sessions."</p> }.into_any()
                }
                Ok(list) => {
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
            }})}
            </Transition>
        </section>
    }
    .into_any()
}

/// One session: browser, address, when it started and was last used.
#[component]
fn SessionRow(session: SessionInfo, on_ended: Callback<()>) -> impl IntoView {
    let error = RwSignal::new(None::<String>);
    let current = session.current;
    let end_action = Action::new_local(move |id: &String| {
        let path = format!("/api/auth/sessions/{id}");
        async move {
            match client::delete_signed_in::<SuccessResponse>(&path).await {
                Ok(_) if current => client::to_sign_in(),
                Ok(_) => on_ended.run(()),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let busy = end_action.pending();
    let end = Callback::new({
        let id = session.id.clone();
        move |()| {
            error.set(None);
            end_action.dispatch(id.clone());
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
