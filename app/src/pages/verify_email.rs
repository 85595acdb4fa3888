//! `/verify-email`: confirms an address from the link in the verification email
//! (`POST /api/auth/verify-email`), or sends the link again
//! (`POST /api/auth/resend-verification`).

use crate::{
    api::{MessageResponse, TokenRequest},
    client,
    components::{EmailRequestForm, Notice, Tone},
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

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
    // Runs once, in the browser only (the link must not be used up by server rendering).
    let outcome = LocalResource::new(move || {
        let body = TokenRequest {
            token: token.clone(),
        };
        async move {
            client::post_json::<_, MessageResponse>("/api/auth/verify-email", &body)
                .await
                .map(|answer| answer.message)
                .map_err(|err| err.message().to_owned())
        }
    });
    view! {
        <h1>"Verify your email"</h1>
        <Suspense fallback=|| {
            view! {
                <p class="loading" role="status" aria-live="polite">
                    "Verifying your email address…"
                </p>
            }
        }>
        {move || Suspend::new(async move { match outcome.await {
            Ok(message) => {
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
            Err(message) => {
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
        }})}
        </Suspense>
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
