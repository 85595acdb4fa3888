//! `/dashboard/*`: the frame of the signed-in pages (`GET /api/auth/me`, navigation,
//! `POST /api/auth/logout`) around the page of the current route.

use crate::{
    api::MeResponse,
    client,
    components::{fetch_signed_in, use_hydrated, Notice, Tone},
};
use leptos::prelude::*;
use leptos_router::{components::Outlet, hooks::use_location};
use serde::de::IgnoredAny;

/// The signed-in user and the limits of their plan, loaded once by [`DashboardLayout`] and
/// shared with the pages inside it through the context.
#[derive(Debug, Clone, Copy)]
pub struct Session {
    /// `None` until `GET /api/auth/me` answered (and when it failed).
    pub me: Signal<Option<MeResponse>>,
}

/// The [`Session`] provided by the dashboard frame.
///
/// # Panics
/// Outside [`DashboardLayout`].
pub fn use_session() -> Session {
    expect_context::<Session>()
}

/// The frame of every signed-in page: who is signed in, the plan, the navigation, "Sign
/// out", and the page of the route below it. The session lives in cookies, so the profile
/// is loaded from the browser; without a session (after a failed refresh) the client sends
/// the user to `/login`.
#[component]
pub fn DashboardLayout() -> impl IntoView {
    let hydrated = use_hydrated();
    let profile = fetch_signed_in(|| "/api/auth/me".to_owned(), |me: MeResponse| me);
    let me = Signal::derive(move || profile.map(|loaded| loaded.clone().ok()).flatten());
    // 401: the client is already on its way to the sign-in page.
    let load_error = move || {
        profile
            .map(|loaded| match loaded {
                Err(err) if err.status != 401 => Some(err.message().to_owned()),
                _ => None,
            })
            .flatten()
    };
    let sign_out_error = RwSignal::new(None::<String>);
    provide_context(Session { me });

    let sign_out_action = Action::new_local(move |_: &()| async move {
        let outcome =
            client::post_json::<_, IgnoredAny>("/api/auth/logout", &serde_json::Map::new()).await;
        match outcome {
            // 401: the session had already ended, which is what the user asked for.
            Ok(_) => client::to_sign_in(),
            Err(err) if err.status == 401 => client::to_sign_in(),
            Err(err) => sign_out_error.set(Some(err.message().to_owned())),
        }
    });
    let signing_out = sign_out_action.pending();
    let sign_out = move |_| {
        sign_out_error.set(None);
        sign_out_action.dispatch(());
    };

    let pathname = use_location().pathname;
    let current = move |prefix: &'static str, exact: bool| {
        let path = pathname.get();
        let active = if exact {
            path == prefix
                || path.starts_with("/dashboard/agents")
                || path == "/dashboard/new-agent"
        } else {
            path.starts_with(prefix)
        };
        active.then_some("page")
    };

    view! {
        <div class="dashboard">
            <div class="dashboard-bar">
                <p class="signed-in" data-testid="signed-in-user">
                    <Suspense fallback=|| view! { <span class="muted">"Loading your account…"</span> }>
                    {move || Suspend::new(async move { match profile.await {
                        Ok(answer) => {
                            view! {
                                "Signed in as "
                                <strong>{answer.user.name.clone()}</strong>
                                " "
                                <span class="muted">{format!("({})", answer.user.email)}</span>
                                " "
                                <span class="badge" data-testid="plan">
                                    {answer.user.plan.clone()}
                                </span>
                            }
                                .into_any()
                        }
                        Err(_) => view! { <span class="muted">"Loading your account…"</span> }.into_any(),
                    }})}
                    </Suspense>
                </p>
                <button
                    type="button"
                    class="button button-secondary button-small"
                    on:click=sign_out
                    disabled=move || !hydrated.get() || signing_out.get()
                >
                    {move || if signing_out.get() { "Signing out…" } else { "Sign out" }}
                </button>
            </div>
            <nav class="dashboard-nav" aria-label="Dashboard">
                <a href="/dashboard" aria-current=move || current("/dashboard", true)>
                    "Agents"
                </a>
                <a href="/dashboard/conversations" aria-current=move || current("/dashboard/conversations", false)>
                    "Conversations"
                </a>
                <a href="/dashboard/analytics" aria-current=move || current("/dashboard/analytics", false)>
                    "Analytics"
                </a>
                <a href="/dashboard/api-keys" aria-current=move || current("/dashboard/api-keys", false)>
                    "API keys"
                </a>
                <a href="/dashboard/integrations" aria-current=move || current("/dashboard/integrations", false)>
                    "Integrations"
                </a>
                <a href="/dashboard/webhooks" aria-current=move || current("/dashboard/webhooks", false)>
                    "Webhooks"
                </a>
                <a href="/dashboard/account" aria-current=move || current("/dashboard/account", false)>
                    "Account"
                </a>
            </nav>
            {move || {
                sign_out_error
                    .get()
                    .map(|message| {
                        view! { <Notice tone=Tone::Error testid="sign-out-error">{message}</Notice> }
                    })
            }}
            {move || {
                load_error()
                    .map(|message| {
                        view! { <Notice tone=Tone::Error testid="account-error">{message}</Notice> }
                    })
            }}
            <Outlet/>
        </div>
    }
    .into_any()
}

/// A short date (`2026-11-20`) and time (`10:00`) of an ISO 8601 timestamp, in UTC.
pub fn short_time(iso: &str) -> String {
    match (iso.get(..10), iso.get(11..16)) {
        (Some(date), Some(time)) => format!("{date} {time}"),
        _ => iso.to_owned(),
    }
}
