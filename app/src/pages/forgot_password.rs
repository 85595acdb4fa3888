//! `/forgot-password`: asks for a password reset link (`POST /api/auth/forgot-password`).

use crate::{
    api::{EmailRequest, MessageResponse},
    client,
    components::{input_value, use_hydrated, FormError, FormErrorNotice, Notice, Tone},
};
use leptos::{html, prelude::*, task::spawn_local};
use leptos_meta::Title;

/// The reset request form. The answer is neutral, so it never reveals whether the address
/// has an account (OWASP Forgot Password Cheat Sheet).
#[component]
pub fn ForgotPassword() -> impl IntoView {
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
            match client::post_json::<_, MessageResponse>("/api/auth/forgot-password", &body).await
            {
                Ok(answer) => sent.set(Some(answer.message)),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
            pending.set(false);
        });
    };

    view! {
        <Title text="Reset your password"/>
        <section class="card auth-card">
            <h1>"Reset your password"</h1>
            <p class="muted">
                "Enter the email address of your account and we will send you a link to choose a new password."
            </p>
            <form class="form" on:submit=on_submit>
                <div class="field">
                    <label for="email">"Email"</label>
                    <input
                        id="email"
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
                                <Notice tone=Tone::Success testid="forgot-result">
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
                    {move || if pending.get() { "Sending…" } else { "Send reset link" }}
                </button>
            </form>
            <p class="muted">
                <a href="/login">"Back to sign in"</a>
            </p>
        </section>
    }
}
