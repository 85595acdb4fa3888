//! `/dashboard`: the signed-in page (`GET /api/auth/me`, `POST /api/auth/logout`).

use crate::{
    api::{MeResponse, UserProfile},
    client,
    components::{use_hydrated, Notice, Tone},
    countries::country_name,
};
use leptos::{prelude::*, task::spawn_local};
use leptos_meta::Title;
use leptos_router::hooks::use_navigate;
use serde::de::IgnoredAny;

/// What the page knows about the signed-in user.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Account {
    Loading,
    Ready(UserProfile),
    Failed(String),
}

/// The signed-in user's name, email and plan, and "Sign out". The session lives in
/// cookies, so the page loads the profile from the browser; without a session (after a
/// failed refresh) it sends the user to `/login`.
#[component]
pub fn Dashboard() -> impl IntoView {
    let hydrated = use_hydrated();
    let navigate = use_navigate();
    let account = RwSignal::new(Account::Loading);
    let signing_out = RwSignal::new(false);
    let sign_out_error = RwSignal::new(None::<String>);

    Effect::new({
        let navigate = navigate.clone();
        move || {
            let navigate = navigate.clone();
            spawn_local(async move {
                match client::get_json_signed_in::<MeResponse>("/api/auth/me").await {
                    Ok(me) => account.set(Account::Ready(me.user)),
                    Err(err) if err.status == 401 => navigate("/login", Default::default()),
                    Err(err) => account.set(Account::Failed(err.message().to_owned())),
                }
            });
        }
    });

    let sign_out = move |_| {
        signing_out.set(true);
        sign_out_error.set(None);
        let navigate = navigate.clone();
        spawn_local(async move {
            let outcome =
                client::post_json::<_, IgnoredAny>("/api/auth/logout", &serde_json::Map::new())
                    .await;
            match outcome {
                // 401: the session had already ended, which is what the user asked for.
                Ok(_) => navigate("/login", Default::default()),
                Err(err) if err.status == 401 => navigate("/login", Default::default()),
                Err(err) => sign_out_error.set(Some(err.message().to_owned())),
            }
            signing_out.set(false);
        });
    };

    view! {
        <Title text="Dashboard"/>
        <section class="card dashboard">
            <div class="dashboard-head">
                <h1>"Dashboard"</h1>
                <button
                    type="button"
                    class="button button-secondary"
                    on:click=sign_out
                    disabled=move || !hydrated.get() || signing_out.get()
                >
                    {move || if signing_out.get() { "Signing out…" } else { "Sign out" }}
                </button>
            </div>
            {move || {
                sign_out_error
                    .get()
                    .map(|message| {
                        view! {
                            <Notice tone=Tone::Error testid="sign-out-error">
                                {message}
                            </Notice>
                        }
                    })
            }}
            {move || match account.get() {
                Account::Loading => {
                    view! {
                        <p class="loading" role="status" aria-live="polite">
                            "Loading your account…"
                        </p>
                    }
                        .into_any()
                }
                Account::Failed(message) => {
                    view! {
                        <Notice tone=Tone::Error testid="account-error">
                            {message}
                        </Notice>
                    }
                        .into_any()
                }
                Account::Ready(user) => view! { <AccountSummary user/> }.into_any(),
            }}
        </section>
    }
}

/// The profile of the signed-in user.
#[component]
fn AccountSummary(user: UserProfile) -> impl IntoView {
    let optional = |value: Option<String>| value.unwrap_or_else(|| "—".to_owned());
    view! {
        <p class="signed-in" data-testid="signed-in-user">
            "Signed in as "
            <strong>{user.name.clone()}</strong>
            " "
            <span class="muted">{format!("({})", user.email)}</span>
        </p>
        <dl class="profile">
            <div>
                <dt>"Plan"</dt>
                <dd>
                    <span class="badge" data-testid="plan">
                        {user.plan.clone()}
                    </span>
                </dd>
            </div>
            <div>
                <dt>"Company"</dt>
                <dd>{optional(user.company)}</dd>
            </div>
            <div>
                <dt>"Country"</dt>
                <dd>
                    {optional(
                        user
                            .country
                            .map(|code| country_name(&code).map_or(code, ToOwned::to_owned)),
                    )}
                </dd>
            </div>
            <div>
                <dt>"Phone"</dt>
                <dd>{optional(user.phone)}</dd>
            </div>
            <div>
                <dt>"Member since"</dt>
                <dd>
                    <time datetime=user.created_at.clone()>
                        {user.created_at.get(..10).unwrap_or(&user.created_at).to_owned()}
                    </time>
                </dd>
            </div>
        </dl>
    }
}
