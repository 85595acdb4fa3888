//! `/verify-email`: confirms an address from the link in the verification email
//! (`POST /api/auth/verify-email`), or sends the link again
//! (`POST /api/auth/resend-verification`).

use crate::{
    api::{MessageResponse, TokenRequest},
    client,
    components::{EmailRequestForm, Notice, Tone},
};
use leptos::{prelude::*, task::spawn_local};
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
    view! {
        <h2>"Resend the verification email"</h2>
        <p class="muted">"Enter the address you signed up with and we will send a new link."</p>
        <EmailRequestForm
            endpoint="/api/auth/resend-verification"
            input_id="resend-email"
            testid="resend-result"
            button="Resend verification email"
        />
    }
}
