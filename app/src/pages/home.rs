//! `/`: the landing page.

use leptos::prelude::*;
use leptos_meta::Title;

/// The landing page: what AgentChat is, with the way in.
#[component]
pub fn Home() -> impl IntoView {
    view! {
        <Title text="Welcome"/>
        <section class="hero">
            <h1>"AI agents for your product, on your own servers"</h1>
            <p class="lead">
                "AgentChat hosts configurable AI agents with their own knowledge base, "
                "chat API and integrations. Sign in to manage them."
            </p>
            <div class="actions">
                <a class="button" href="/signup">"Create an account"</a>
                <a class="button button-secondary" href="/login">"Sign in"</a>
            </div>
        </section>
    }
}
