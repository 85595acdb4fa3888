//! `/verify-email`: confirms an address from the link in the verification email
//! (`POST /api/auth/verify-email`), or sends the link again
//! (`POST /api/auth/resend-verification`).

use crate::{
    api::{EmailRequest, MessageResponse, TokenRequest},
    client,
    components::{input_value, use_hydrated, FormError, FormErrorNotice, Notice, Tone},
};
use leptos::{html, prelude::*, task::spawn_local};
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// Where the verification of a `?token=` stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Verification {
    Pending,
    Done(String),
    Failed(String),
}

/// With `?token=`: verifies the address and links to sign-in. Without: a form that sends
/// the verification email again.
#[component]
pub fn VerifyEmail() -> impl IntoView {
    let query = use_query_map();
    let token = query
        .read_untracked()
        .get("token")
        .filter(|token| !token.is_empty());
    view! {
        <Title text="Verify your email"/>
        <section class="card auth-card">
            {match token {
                Some(token) => view! { <VerifyToken token/> }.into_any(),
                None => view! { <ResendVerification/> }.into_any(),
            }}
        </section>
    }
}

/// Posts the token once the page runs in the browser and shows the outcome.
#[component]
fn VerifyToken(token: String) -> impl IntoView {
    let state = RwSignal::new(Verification::Pending);
    Effect::new(move || {
        let body = TokenRequest {
            token: token.clone(),
        };
        spawn_local(async move {
            let outcome = match client::post_json::<_, MessageResponse>(
                "/api/auth/verify-email",
                &body,
            )
            .await
            {
                Ok(answer) => Verification::Done(answer.message),
                Err(err) => Verification::Failed(err.message().to_owned()),
            };
            state.set(outcome);
        });
    });
    view! {
        <h1>"Verify your email"</h1>
        {move || match state.get() {
            Verification::Pending => {
                view! {
                    <p class="loading" role="status" aria-live="polite">
                        "Verifying your email address…"
                    </p>
                }
                    .into_any()
            }
            Verification::Done(message) => {
                view! {
                    <Notice tone=Tone::Success testid="verify-result">
                        {message}
                    </Notice>
                    <p>
                        <a class="button" href="/login">"Sign in"</a>
                    </p>
                }
                    .into_any()
            }
            Verification::Failed(message) => {
                view! {
                    <Notice tone=Tone::Error testid="verify-result">
                        {message}
                    </Notice>
                    <p>
                        "You can ask for a new link below, or "
                        <a href="/login">"go to sign in"</a>
                        "."
                    </p>
                    <ResendVerification/>
                }
                    .into_any()
            }
        }}
    }
}

/// The "send the verification email again" form; the server answers neutrally whether
/// or not the address has an account.
#[component]
fn ResendVerification() -> impl IntoView {
    let hydrated = use_hydrated();
    let pending = RwSignal::new(false);
    let error: FormError = RwSignal::new(None);
    let sent = RwSignal::new(None::<String>);
    let email = NodeRef::<html::Input>::new();

    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if pending.get_untracked() {
            return;
        }
        let body = EmailRequest {
            email: input_value(&email),
        };
        pending.set(true);
        error.set(None);
        sent.set(None);
        spawn_local(async move {
            match client::post_json::<_, MessageResponse>("/api/auth/resend-verification", &body)
                .await
            {
                Ok(answer) => sent.set(Some(answer.message)),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
            pending.set(false);
        });
    };

    view! {
        <h2>"Resend the verification email"</h2>
        <p class="muted">"Enter the address you signed up with and we will send a new link."</p>
        <form class="form" on:submit=on_submit>
            <div class="field">
                <label for="resend-email">"Email"</label>
                <input
                    id="resend-email"
                    name="email"
                    type="email"
                    autocomplete="email"
                    required
                    node_ref=email
                />
            </div>
            <FormErrorNotice error/>
            {move || {
                sent.get()
                    .map(|message| {
                        view! {
                            <Notice tone=Tone::Success testid="resend-result">
                                {message}
                            </Notice>
                        }
                    })
            }}
            <button
                type="submit"
                class="button button-block"
                disabled=move || !hydrated.get() || pending.get()
                aria-busy=move || pending.get().to_string()
            >
                {move || if pending.get() { "Sending…" } else { "Resend verification email" }}
            </button>
        </form>
        <p class="muted">
            <a href="/login">"Back to sign in"</a>
        </p>
    }
}
