//! `/forgot-password`: asks for a password reset link (`POST /api/auth/forgot-password`).

use crate::components::EmailRequestForm;
use leptos::prelude::*;
use leptos_meta::Title;

/// The reset request form. The answer is neutral, so it never reveals whether the address
/// has an account (OWASP Forgot Password Cheat Sheet).
#[component]
pub fn ForgotPassword() -> impl IntoView {
    view! {
        <Title text="Reset your password"/>
        <section class="card auth-card">
            <h1>"Reset your password"</h1>
            <p class="muted">
                "Enter the email address of your account and we will send you a link to choose a new password."
            </p>
            <EmailRequestForm
                endpoint="/api/auth/forgot-password"
                input_id="email"
                testid="forgot-result"
                button="Send reset link"
            />
        </section>
    }
}
