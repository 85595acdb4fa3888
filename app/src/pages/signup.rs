//! `/signup`: account creation (`POST /api/auth/signup`).

use crate::api::limits::{COMPANY_MAX, EMAIL_MAX, PASSWORD_MAX, PASSWORD_MIN, USER_NAME_MAX};
use crate::{
    api::{SignupRequest, SignupResponse},
    client,
    components::{
        input_value, non_empty, password_value, select_value, use_hydrated, FormError,
        FormErrorNotice, Notice, Tone,
    },
    countries::COUNTRIES,
};
use leptos::{html, prelude::*};
use leptos_meta::Title;

/// The signup form; after a successful signup it is replaced by "Check your email".
#[component]
pub fn Signup() -> impl IntoView {
    let hydrated = use_hydrated();
    let error: FormError = RwSignal::new(None);
    let signed_up = RwSignal::new(None::<String>);
    let sign_up = Action::new_local(move |body: &SignupRequest| {
        let body = body.clone();
        async move {
            match client::post_json::<_, SignupResponse>("/api/auth/signup", &body).await {
                Ok(answer) => signed_up.set(Some(answer.user.email)),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let pending = sign_up.pending();

    let name = NodeRef::<html::Input>::new();
    let email = NodeRef::<html::Input>::new();
    let password = NodeRef::<html::Input>::new();
    let company = NodeRef::<html::Input>::new();
    let country = NodeRef::<html::Select>::new();
    let phone = NodeRef::<html::Input>::new();

    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if pending.get_untracked() {
            return;
        }
        let body = SignupRequest {
            name: input_value(&name),
            email: input_value(&email),
            password: password_value(&password),
            company: non_empty(input_value(&company)),
            country: non_empty(select_value(&country)),
            phone: non_empty(input_value(&phone)),
        };
        if body.password.chars().count() < PASSWORD_MIN {
            error.set(Some(format!(
                "The password needs at least {PASSWORD_MIN} characters."
            )));
            return;
        }
        error.set(None);
        sign_up.dispatch(body);
    };

    view! {
        <Title text="Create your account"/>
        <section class="card auth-card">
            <Show
                when=move || signed_up.get().is_some()
                fallback=move || {
                    view! {
                        <h1>"Create your account"</h1>
                        <p class="muted">
                            "Already registered? " <a href="/login">"Sign in"</a>
                        </p>
                        <form class="form" on:submit=on_submit>
                            <div class="field">
                                <label for="name">"Full name"</label>
                                <input
                                    id="name"
                                    name="name"
                                    type="text"
                                    autocomplete="name"
                                    maxlength=USER_NAME_MAX.to_string()
                                    required
                                    node_ref=name
                                />
                            </div>
                            <div class="field">
                                <label for="email">"Email"</label>
                                <input
                                    id="email"
                                    name="email"
                                    type="email"
                                    autocomplete="email"
                                    maxlength=EMAIL_MAX.to_string()
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
                                <label for="company">
                                    "Company " <span class="optional">"(optional)"</span>
                                </label>
                                <input
                                    id="company"
                                    name="company"
                                    type="text"
                                    autocomplete="organization"
                                    maxlength=COMPANY_MAX.to_string()
                                    node_ref=company
                                />
                            </div>
                            <div class="field">
                                <label for="country">
                                    "Country " <span class="optional">"(optional)"</span>
                                </label>
                                <select
                                    id="country"
                                    name="country"
                                    autocomplete="country"
                                    node_ref=country
                                >
                                    <option value="">"Choose a country"</option>
                                    {COUNTRIES
                                        .iter()
                                        .map(|(code, label)| {
                                            view! { <option value=*code>{*label}</option> }
                                        })
                                        .collect_view()}
                                </select>
                            </div>
                            <div class="field">
                                <label for="phone">
                                    "Phone " <span class="optional">"(optional)"</span>
                                </label>
                                <input
                                    id="phone"
                                    name="phone"
                                    type="tel"
                                    autocomplete="tel"
                                    placeholder="+49 30 1234567"
                                    node_ref=phone
                                />
                            </div>
                            <FormErrorNotice error/>
                            <button
                                type="submit"
                                class="button button-block"
                                disabled=move || !hydrated.get() || pending.get()
                                aria-busy=move || pending.get().to_string()
                            >
                                {move || {
                                    if pending.get() { "Creating account…" } else { "Create account" }
                                }}
                            </button>
                        </form>
                    }
                }
            >
                <h1>"Check your email to verify your account"</h1>
                <Notice tone=Tone::Success testid="signup-success">
                    "We sent a verification link to "
                    <strong>{move || signed_up.get().unwrap_or_default()}</strong>
                    ". Open it to activate your account, then sign in."
                </Notice>
                <p>
                    <a class="button" href="/login">"Go to sign in"</a>
                </p>
                <p class="muted">
                    "No email? " <a href="/verify-email">"Send the link again"</a>
                </p>
            </Show>
        </section>
    }
}
