//! Security headers (README.md § Security): `nosniff` on every answer, a strict Content
//! Security Policy with a per-page nonce on dashboard pages, a hash-based one on
//! `/api/docs`, `/widget.js` loadable by other sites, and HSTS only with an https
//! `PUBLIC_URL`.

use base64::Engine as _;
use reqwest::Response;
use sha2::Digest as _;

use crate::helpers::*;

fn header<'a>(res: &'a Response, name: &str) -> Option<&'a str> {
    res.headers().get(name).map(|v| v.to_str().unwrap())
}

/// The nonce a dashboard page's policy names.
fn nonce_of(csp: &str) -> String {
    let start = csp.find("'nonce-").expect("a nonce in the policy") + "'nonce-".len();
    csp[start..].split('\'').next().unwrap().to_string()
}

#[tokio::test]
async fn dashboard_pages_have_a_strict_policy_with_a_nonce_for_each_page() {
    let app = spawn_app().await;
    let mut nonces = Vec::new();
    for (path, status) in [
        ("/login", 200),
        ("/login", 200),
        ("/dashboard", 200),
        ("/no-such-page", 404),
    ] {
        let res = app.get(path, None).await;
        assert_eq!(res.status(), status, "{path}");
        let csp = header(&res, "content-security-policy")
            .unwrap_or_else(|| panic!("{path} has a policy"))
            .to_string();
        let nonce = nonce_of(&csp);
        for directive in [
            "default-src 'self'",
            &format!("script-src 'self' 'nonce-{nonce}' 'wasm-unsafe-eval'"),
            "style-src 'self'",
            "connect-src 'self';",
            "object-src 'none'",
            "base-uri 'self'",
            "form-action 'self'",
            "frame-ancestors 'none'",
        ] {
            assert!(csp.contains(directive), "{path}: {directive} in {csp}");
        }
        assert!(
            !csp.contains("unsafe-inline") && !csp.contains("ws:"),
            "{csp}"
        );
        assert_eq!(header(&res, "x-frame-options"), Some("DENY"), "{path}");
        assert_eq!(
            header(&res, "x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(
            header(&res, "referrer-policy"),
            Some("same-origin"),
            "{path}"
        );
        assert_eq!(header(&res, "strict-transport-security"), None, "{path}");
        // Every inline script, the hydration script among them, carries the page's nonce.
        let html = res.text().await.unwrap();
        let scripts: Vec<&str> = html.split("<script").skip(1).collect();
        assert!(!scripts.is_empty(), "{path}");
        for script in scripts {
            let tag = script.split('>').next().unwrap();
            assert!(
                tag.contains(" src=") || tag.contains(&format!("nonce=\"{nonce}\"")),
                "{path}: <script{tag}>"
            );
        }
        nonces.push(nonce);
    }
    nonces.sort();
    nonces.dedup();
    assert_eq!(nonces.len(), 4, "a new nonce for every page");
}

#[tokio::test]
async fn under_cargo_leptos_watch_pages_may_reach_the_live_reload_socket() {
    let app = spawn_app_with(|c| c.server.live_reload_port = Some(3001)).await;
    let res = app.get("/login", None).await;
    let csp = header(&res, "content-security-policy").unwrap();
    assert!(
        csp.contains("connect-src 'self' ws://*:3001 wss://*:3001;"),
        "{csp}"
    );
}

#[tokio::test]
async fn api_answers_are_nosniff_and_load_nothing() {
    let app = spawn_app().await;
    let user = app.user().await;
    for (path, bearer, status) in [
        ("/api/health", None, 200),
        ("/api/openapi.json", None, 200),
        ("/api/auth/me", Some(user.access.as_str()), 200),
        ("/api/auth/me", None, 401),
        ("/api/no-such-endpoint", None, 404),
    ] {
        let res = app.get(path, bearer).await;
        assert_eq!(res.status(), status, "{path}");
        assert_eq!(
            header(&res, "x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
        assert_eq!(
            header(&res, "content-security-policy"),
            Some("default-src 'none'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
            "{path}"
        );
        assert_eq!(header(&res, "x-frame-options"), Some("DENY"), "{path}");
        assert_eq!(
            header(&res, "referrer-policy"),
            Some("strict-origin-when-cross-origin"),
            "{path}"
        );
        assert_eq!(header(&res, "strict-transport-security"), None, "{path}");
    }
}

#[tokio::test]
async fn the_reference_page_allows_only_its_own_stylesheet() {
    let app = spawn_app().await;
    let res = app.get("/api/docs", None).await;
    assert_eq!(res.status(), 200);
    assert_eq!(header(&res, "x-content-type-options"), Some("nosniff"));
    let csp = header(&res, "content-security-policy").unwrap().to_string();
    let html = res.text().await.unwrap();
    let style = html
        .split_once("<style>")
        .and_then(|(_, rest)| rest.split_once("</style>"))
        .expect("an inline stylesheet")
        .0;
    let hash = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(style));
    assert_eq!(
        csp,
        format!(
            "default-src 'none'; style-src 'sha256-{hash}'; base-uri 'none'; \
             form-action 'none'; frame-ancestors 'none'"
        )
    );
    assert_eq!(html.matches("<style").count(), 1);
    assert!(!html.contains("<script") && !html.contains(" style="));
}

#[tokio::test]
async fn the_widget_script_loads_on_other_sites() {
    let app = spawn_app().await;
    let res = app
        .client
        .get(app.url("/widget.js"))
        .header("origin", "https://shop.example")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    // A JavaScript type, so that nosniff lets it run; cross-origin loads allowed.
    assert_eq!(
        header(&res, "content-type"),
        Some("text/javascript; charset=utf-8")
    );
    assert_eq!(header(&res, "x-content-type-options"), Some("nosniff"));
    assert_eq!(
        header(&res, "cross-origin-resource-policy"),
        Some("cross-origin")
    );
    let script = res.text().await.unwrap();
    assert!(
        script.contains("adoptedStyleSheets"),
        "styles without a <style> element"
    );
}

#[tokio::test]
async fn hsts_is_sent_only_with_an_https_public_url() {
    let app = spawn_app_with(|c| c.server.public_url = "https://chat.example.com".into()).await;
    for path in ["/api/health", "/login", "/widget.js", "/api/docs"] {
        let res = app.get(path, None).await;
        assert_eq!(
            header(&res, "strict-transport-security"),
            Some("max-age=31536000; includeSubDomains"),
            "{path}"
        );
    }
    let plain = spawn_app().await;
    let res = plain.get("/login", None).await;
    assert_eq!(header(&res, "strict-transport-security"), None);
}
