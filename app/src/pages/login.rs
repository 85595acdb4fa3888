//! `/login`: sign-in with email and password (`POST /api/auth/login`) or a configured
//! sign-in provider.
//!
//! The server answers a successful sign-in with httpOnly session cookies; the token pair
//! in the JSON body is deliberately ignored, so no token is ever reachable from scripts.

use crate::{
    api::{AuthProvider, AuthProvidersResponse, EmailRequest, LoginRequest, MessageResponse},
    client,
    components::{
        input_value, password_value, use_hydrated, FormError, FormErrorNotice, Notice, Tone,
    },
};
use leptos::{html, prelude::*};
use leptos_meta::Title;
use leptos_router::hooks::{use_navigate, use_query_map};
use serde::de::IgnoredAny;

/// The sign-in form, the banners for the verification redirect (`?verified=1`,
/// `?verifyError=1`) and for a failed third-party sign-in (`?oauthError=message`), and one
/// button per configured sign-in provider.
#[component]
pub fn Login() -> impl IntoView {
    let hydrated = use_hydrated();
    let navigate = use_navigate();
    let query = use_query_map();
    let error: FormError = RwSignal::new(None);
    // Set to the address when the server refused an unverified account (403).
    let unverified = RwSignal::new(None::<String>);
    let resend_state = RwSignal::new(None::<(Tone, String)>);
    // Without providers the list stays empty; a failure here must not block sign-in.
    let providers = LocalResource::new(|| async {
        client::get_json::<AuthProvidersResponse>("/api/auth/providers")
            .await
            .map(|answer| answer.providers)
            .unwrap_or_default()
    });

    let email = NodeRef::<html::Input>::new();
    let password = NodeRef::<html::Input>::new();

    let sign_in = Action::new_local(move |body: &LoginRequest| {
        let body = body.clone();
        let navigate = navigate.clone();
        async move {
            match client::post_json::<_, IgnoredAny>("/api/auth/login", &body).await {
                Ok(_) => navigate("/dashboard", Default::default()),
                Err(err) => {
                    if err.status == 403 {
                        unverified.set(Some(body.email));
                    }
                    error.set(Some(err.message().to_owned()));
                }
            }
        }
    });
    let pending = sign_in.pending();

    let resend_action = Action::new_local(move |address: &String| {
        let body = EmailRequest {
            email: address.clone(),
        };
        async move {
            let outcome = match client::post_json::<_, MessageResponse>(
                "/api/auth/resend-verification",
                &body,
            )
            .await
            {
                Ok(answer) => (Tone::Success, answer.message),
                Err(err) => (Tone::Error, err.message().to_owned()),
            };
            resend_state.set(Some(outcome));
        }
    });
    let resending = resend_action.pending();

    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if pending.get_untracked() {
            return;
        }
        let body = LoginRequest {
            email: input_value(&email),
            password: password_value(&password),
        };
        error.set(None);
        unverified.set(None);
        resend_state.set(None);
        sign_in.dispatch(body);
    };

    let resend = move |_| {
        let Some(address) = unverified.get_untracked() else {
            return;
        };
        resend_action.dispatch(address);
    };

    let flag = move |name: &str| query.read().get(name).is_some_and(|value| value == "1");

    view! {
        <Title text="Sign in"/>
        <section class="card auth-card">
            <h1>"Sign in to AgentChat"</h1>
            <Show when=move || flag("verified")>
                <Notice tone=Tone::Success testid="verified-banner">
                    "Email verified — you can sign in now"
                </Notice>
            </Show>
            {move || {
                query
                    .read()
                    .get("oauthError")
                    .map(|message| {
                        view! { <Notice tone=Tone::Error testid="oauth-error">{message}</Notice> }
                    })
            }}
            <Show when=move || flag("verifyError")>
                <Notice tone=Tone::Error testid="verify-error-banner">
                    "That verification link is invalid or expired"
                </Notice>
            </Show>
            <form class="form" on:submit=on_submit>
                <div class="field">
                    <label for="email">"Email"</label>
                    <input
                        id="email"
                        name="email"
                        type="email"
                        autocomplete="username"
                        required
                        node_ref=email
                    />
                </div>
                <div class="field">
                    <label for="password">"Password"</label>
                    <input
                        id="password"
                        name="password"
                        type="password"
                        autocomplete="current-password"
                        required
                        node_ref=password
                    />
                    <a class="small field-link" href="/forgot-password">"Forgot your password?"</a>
                </div>
                <FormErrorNotice error/>
                <Show when=move || unverified.get().is_some()>
                    <div class="resend">
                        <button
                            type="button"
                            class="button button-secondary button-block"
                            on:click=resend
                            disabled=move || resending.get()
                        >
                            "Resend verification email"
                        </button>
                        {move || {
                            resend_state
                                .get()
                                .map(|(tone, message)| {
                                    view! {
                                        <Notice tone testid="resend-result">
                                            {message}
                                        </Notice>
                                    }
                                })
                        }}
                    </div>
                </Show>
                <button
                    type="submit"
                    class="button button-block"
                    disabled=move || !hydrated.get() || pending.get()
                    aria-busy=move || pending.get().to_string()
                >
                    {move || if pending.get() { "Signing in…" } else { "Sign in" }}
                </button>
            </form>
            <Suspense>
                {move || Suspend::new(async move {
                    let listed = providers.await;
                    (!listed.is_empty())
                        .then(|| view! { <ProviderButtons providers=listed/> })
                })}
            </Suspense>
            <p class="muted">"New to AgentChat? " <a href="/signup">"Create an account"</a></p>
        </section>
    }
}

/// "or" and one button per configured sign-in provider.
#[component]
fn ProviderButtons(
    /// The providers the server offers (not empty).
    providers: Vec<AuthProvider>,
) -> impl IntoView {
    view! {
        <div class="divider" role="presentation">
            <span>"or"</span>
        </div>
        <div class="providers">
            {providers
                .into_iter()
                .map(|provider| {
                    // rel="external": a full page load, so the server can redirect to
                    // the provider instead of the client-side router handling the link.
                    view! {
                        <a
                            class="button button-secondary button-block"
                            rel="external"
                            href=format!("/api/auth/oauth/{}", provider.code)
                        >
                            {format!("Continue with {}", provider.name)}
                        </a>
                    }
                })
                .collect_view()}
        </div>
    }
}
