//! The AgentChat dashboard (Leptos 0.8, SSR + hydration) and the API types it shares with
//! the server.
//!
//! The server renders every page ([`shell`]) and the browser hydrates it
//! (`frontend::hydrate`). Pages talk to the REST API from the browser only
//! ([`client`]), with the session cookies the server sets at sign-in.
// The views of the agent editor's tools are nested deeply enough that laying out their
// hydration futures exceeds the default limit of 128 in the WASM build.
#![recursion_limit = "256"]

pub mod api;
pub mod chart;
pub mod client;
pub mod components;
pub mod countries;
pub mod markdown;
pub mod pages;
pub mod query;
pub mod sse;

use leptos::prelude::*;
use leptos_meta::{provide_meta_context, Link, MetaTags, Title};
use leptos_router::{
    components::{ParentRoute, Route, Router, Routes},
    hooks::use_location,
    path, StaticSegment,
};
use pages::{
    AccountPage, AgentLayout, AgentSettings, AgentsPage, AnalyticsPage, ApiKeysPage, ChatPage,
    ConversationsPage, DashboardLayout, ForgotPassword, GettingStarted, Home, IntegrationsPage,
    KnowledgePage, Login, NewAgentPage, NotFound, ResetPassword, Signup, VerifyEmail, WebhooksPage,
};

/// The HTML document around the app, rendered by the server for every page.
pub fn shell(options: LeptosOptions) -> impl IntoView {
    // The stylesheet sits beside the WASM (`/{site_pkg_dir}`, which holds the build's hash
    // when the files are inside the binary), so it is linked here, where the options are.
    let stylesheet = format!("/{}/{}.css", options.site_pkg_dir, options.output_name);
    view! {
        <!DOCTYPE html>
        <html lang="en">
            <head>
                <meta charset="utf-8"/>
                <meta name="viewport" content="width=device-width, initial-scale=1"/>
                <meta name="color-scheme" content="light dark"/>
                <link rel="stylesheet" id="leptos" href=stylesheet/>
                <AutoReload options=options.clone()/>
                <HydrationScripts options/>
                <MetaTags/>
            </head>
            <body>
                <App/>
            </body>
        </html>
    }
}

/// The root component: the page frame and the routes of the dashboard.
#[component]
pub fn App() -> impl IntoView {
    provide_meta_context();
    view! {
        <Link rel="icon" type_="image/svg+xml" href="/favicon.svg"/>
        <Title formatter=|page: String| format!("{page} · AgentChat")/>
        <Router>
            <SiteHeader/>
            <main id="main" class="main">
                <Routes fallback=NotFound>
                    <Route path=StaticSegment("") view=Home/>
                    <Route path=StaticSegment("signup") view=Signup/>
                    <Route path=StaticSegment("login") view=Login/>
                    <Route path=StaticSegment("verify-email") view=VerifyEmail/>
                    <Route path=StaticSegment("forgot-password") view=ForgotPassword/>
                    <Route path=StaticSegment("reset-password") view=ResetPassword/>
                    <ParentRoute path=path!("/dashboard") view=DashboardLayout>
                        <Route path=path!("") view=AgentsPage/>
                        <Route path=path!("new-agent") view=NewAgentPage/>
                        <ParentRoute path=path!("agents/:id") view=AgentLayout>
                            <Route path=path!("") view=AgentSettings/>
                            <Route path=path!("chat") view=ChatPage/>
                            <Route path=path!("knowledge") view=KnowledgePage/>
                            <Route path=path!("start") view=GettingStarted/>
                        </ParentRoute>
                        <Route path=path!("conversations") view=ConversationsPage/>
                        <Route path=path!("analytics") view=AnalyticsPage/>
                        <Route path=path!("api-keys") view=ApiKeysPage/>
                        <Route path=path!("integrations") view=IntegrationsPage/>
                        <Route path=path!("webhooks") view=WebhooksPage/>
                        <Route path=path!("account") view=AccountPage/>
                    </ParentRoute>
                </Routes>
            </main>
        </Router>
    }
}

/// The top bar: the product name, and the sign-in links everywhere except on the
/// signed-in pages (which offer "Sign out" instead).
#[component]
fn SiteHeader() -> impl IntoView {
    let location = use_location();
    let signed_in_page = move || location.pathname.read().starts_with("/dashboard");
    view! {
        <a class="skip-link" href="#main">"Skip to content"</a>
        <header class="site-header">
            <a class="brand" href="/">
                <img src="/favicon.svg" alt="" width="28" height="28"/>
                <span>"AgentChat"</span>
            </a>
            <Show when=move || !signed_in_page()>
                <nav class="site-nav" aria-label="Account">
                    <a href="/login">"Sign in"</a>
                    <a class="button button-small" href="/signup">"Create account"</a>
                </nav>
            </Show>
        </header>
    }
}
