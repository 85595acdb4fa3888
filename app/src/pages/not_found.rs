//! The page for any path the dashboard does not know.

use leptos::prelude::*;
use leptos_meta::Title;

/// "Page not found", answered with status 404 by the server.
#[component]
pub fn NotFound() -> impl IntoView {
    #[cfg(feature = "ssr")]
    if let Some(response) = use_context::<leptos_axum::ResponseOptions>() {
        response.set_status(http::StatusCode::NOT_FOUND);
    }
    view! {
        <Title text="Page not found"/>
        <section class="card">
            <h1>"Page not found"</h1>
            <p>"There is nothing at this address."</p>
            <p>
                <a href="/">"Go to the start page"</a>
            </p>
        </section>
    }
}
