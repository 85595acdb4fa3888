//! `/reset-password?token=`: chooses a new password (`POST /api/auth/reset-password`).

use crate::api::limits::{PASSWORD_MAX, PASSWORD_MIN};
use crate::{
    api::{MessageResponse, ResetPasswordRequest},
    client,
    components::{password_value, use_hydrated, FormError, FormErrorNotice, Notice, Tone},
};
use leptos::{html, prelude::*};
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// The new-password form for the token in the reset link. The server ends every session
/// of the user on success, so the page sends the user to sign in again.
#[component]
pub fn ResetPassword() -> impl IntoView {
    let query = use_query_map();
    let token = query
        .read_untracked()
        .get("token")
        .filter(|token| !token.is_empty());
    view! {
        <Title text="Choose a new password"/>
        <section class="card auth-card">
            <h1>"Choose a new password"</h1>
            {match token {
                Some(token) => view! { <ResetForm token/> }.into_any(),
                None => {
                    view! {
                        <Notice tone=Tone::Error testid="reset-missing-token">
                            "This reset link is incomplete. Please ask for a new one."
                        </Notice>
                        <p>
                            <a class="button" href="/forgot-password">"Ask for a new link"</a>
                        </p>
                    }
                        .into_any()
                }
            }}
        </section>
    }
}

/// The two password fields, checked to match before anything is sent.
#[component]
fn ResetForm(token: String) -> impl IntoView {
    let hydrated = use_hydrated();
    let error: FormError = RwSignal::new(None);
    let done = RwSignal::new(None::<String>);
    let reset = Action::new_local(move |body: &ResetPasswordRequest| {
        let body = body.clone();
        async move {
            match client::post_json::<_, MessageResponse>("/api/auth/reset-password", &body).await {
                Ok(answer) => done.set(Some(answer.message)),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let pending = reset.pending();
    let password = NodeRef::<html::Input>::new();
    let confirm = NodeRef::<html::Input>::new();
    let token = StoredValue::new(token);

    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if pending.get_untracked() {
            return;
        }
        let new_password = password_value(&password);
        if new_password.chars().count() < PASSWORD_MIN {
            error.set(Some(format!(
                "The password needs at least {PASSWORD_MIN} characters."
            )));
            return;
        }
        if new_password != password_value(&confirm) {
            error.set(Some("The two passwords do not match.".to_owned()));
            return;
        }
        let body = ResetPasswordRequest {
            token: token.get_value(),
            password: new_password,
        };
        error.set(None);
        reset.dispatch(body);
    };

    view! {
        <Show
            when=move || done.get().is_some()
            fallback=move || {
                view! {
                    <form class="form" on:submit=on_submit>
                        <div class="field">
                            <label for="password">"New password"</label>
                            <input
                                id="password"
                                name="password"
                                type="password"
                                autocomplete="new-password"
                                minlength=PASSWORD_MIN.to_string()
                                maxlength=PASSWORD_MAX.to_string()
                                aria-describedby="password-hint"
                                required
                                node_ref=password
                            />
                            <p id="password-hint" class="hint">
                                {format!("At least {PASSWORD_MIN} characters.")}
                            </p>
                        </div>
                        <div class="field">
                            <label for="password-confirm">"Confirm password"</label>
                            <input
                                id="password-confirm"
                                name="passwordConfirm"
                                type="password"
                                autocomplete="new-password"
                                minlength=PASSWORD_MIN.to_string()
                                maxlength=PASSWORD_MAX.to_string()
                                required
                                node_ref=confirm
                            />
                        </div>
                        <FormErrorNotice error/>
                        <button
                            type="submit"
                            class="button button-block"
                            disabled=move || !hydrated.get() || pending.get()
                            aria-busy=move || pending.get().to_string()
                        >
                            {move || if pending.get() { "Saving…" } else { "Set new password" }}
                        </button>
                    </form>
                }
            }
        >
            <Notice tone=Tone::Success testid="reset-result">
                {move || done.get().unwrap_or_default()}
            </Notice>
            <p>
                <a class="button" href="/login">"Sign in"</a>
            </p>
        </Show>
    }
}
