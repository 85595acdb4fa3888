//! The dashboard's static files (WASM, JS loader, CSS under `/{LEPTOS_SITE_PKG_DIR}`, and
//! `public/`). By default read from `LEPTOS_SITE_ROOT` and compressed per request. With the
//! `embedded-site` feature (`scripts/release.sh`) they are compiled in, brotli-compressed at
//! build time (`server/build.rs`) and served under `/pkg/{hash}` with
//! `Cache-Control: max-age=31536000, immutable`; the favicon at `/favicon.svg` for a week.

use axum::Router;
use leptos::prelude::LeptosOptions;

/// Whether the dashboard's files are inside this binary (the `embedded-site` feature).
pub const EMBEDDED: bool = cfg!(feature = "embedded-site");

/// The path the WASM, JS and CSS are served under: `configured` (`LEPTOS_SITE_PKG_DIR`,
/// default `pkg`), or `pkg/{hash}` (16 hex digits) when embedded.
pub fn pkg_dir(configured: &str) -> String {
    #[cfg(feature = "embedded-site")]
    {
        let _ = configured;
        format!("pkg/{}", env!("AGENTCHAT_SITE_HASH"))
    }
    #[cfg(not(feature = "embedded-site"))]
    configured.to_owned()
}

/// The routes of the dashboard's files (`leptos.site_pkg_dir` being [`pkg_dir`]'s answer); from
/// the site folder only `/{pkg}`, `public/` being served by the dashboard's fallback.
pub fn routes<S: Clone + Send + Sync + 'static>(leptos: &LeptosOptions) -> Router<S> {
    let pkg_path = format!("/{}", leptos.site_pkg_dir);
    #[cfg(feature = "embedded-site")]
    {
        use memory_serve::CacheControl;
        let pkg = memory_serve::load!("pkg")
            .index_file(None)
            .enable_brotli(true)
            .enable_gzip(true)
            .cache_control(CacheControl::Long)
            .into_router();
        let public = memory_serve::load!("public")
            .index_file(None)
            .enable_brotli(true)
            .enable_gzip(true)
            .cache_control(CacheControl::Medium)
            .into_router();
        Router::new().nest(&pkg_path, pkg).merge(public)
    }
    #[cfg(not(feature = "embedded-site"))]
    {
        use tower_http::{
            compression::{CompressionLayer, CompressionLevel},
            services::ServeDir,
        };
        // Compressed per request (brotli or gzip, as the browser accepts).
        let dir =
            std::path::Path::new(leptos.site_root.as_ref()).join(leptos.site_pkg_dir.as_ref());
        let pkg = tower::ServiceBuilder::new()
            .layer(CompressionLayer::new().quality(CompressionLevel::Precise(5)))
            .service(ServeDir::new(dir));
        Router::new().nest_service(&pkg_path, pkg)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use http::{header, Request, StatusCode};
    use tower::ServiceExt as _;

    fn options(site_root: &str) -> LeptosOptions {
        LeptosOptions::builder()
            .output_name("agentchat")
            .site_root(site_root)
            .site_pkg_dir(pkg_dir("pkg"))
            .build()
    }

    async fn get(router: Router, path: &str, accept: &str) -> http::Response<Body> {
        router
            .oneshot(
                Request::get(path)
                    .header(header::ACCEPT_ENCODING, accept)
                    .body(Body::empty())
                    .unwrap(),
            )
            .await
            .unwrap()
    }

    #[cfg(not(feature = "embedded-site"))]
    #[tokio::test]
    async fn from_the_site_folder_the_files_are_served_under_pkg_compressed_per_request() {
        let site = tempfile::tempdir().unwrap();
        std::fs::create_dir(site.path().join("pkg")).unwrap();
        let css = "body { color: black; }\n".repeat(200);
        std::fs::write(site.path().join("pkg/agentchat.css"), &css).unwrap();
        let leptos = options(site.path().to_str().unwrap());
        assert_eq!(&*leptos.site_pkg_dir, "pkg");
        let response = get(routes(&leptos), "/pkg/agentchat.css", "br").await;
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(response.headers()[header::CONTENT_ENCODING], "br");
        let missing = get(routes(&leptos), "/pkg/nothing.js", "br").await;
        assert_eq!(missing.status(), StatusCode::NOT_FOUND);
    }

    #[cfg(feature = "embedded-site")]
    #[tokio::test]
    async fn inside_the_binary_the_files_are_served_under_their_hash_for_a_year() {
        let leptos = options("/nonexistent");
        let pkg = format!("/{}", leptos.site_pkg_dir);
        assert_eq!(pkg.len(), "/pkg/".len() + 16, "{pkg}");
        for (accept, encoding) in [("br", Some("br")), ("gzip", Some("gzip")), ("", None)] {
            let response = get(routes(&leptos), &format!("{pkg}/agentchat.wasm"), accept).await;
            assert_eq!(response.status(), StatusCode::OK);
            assert_eq!(
                response
                    .headers()
                    .get(header::CONTENT_ENCODING)
                    .map(|v| v.to_str().unwrap()),
                encoding
            );
            assert_eq!(
                response.headers()[header::CACHE_CONTROL],
                "max-age=31536000, immutable"
            );
        }
        for path in ["/pkg/agentchat.wasm", &format!("{pkg}/agentchat.d.ts")] {
            let response = get(routes(&leptos), path, "br").await;
            assert_eq!(response.status(), StatusCode::NOT_FOUND, "{path}");
        }
        let favicon = get(routes(&leptos), "/favicon.svg", "").await;
        assert_eq!(favicon.status(), StatusCode::OK);
    }
}
