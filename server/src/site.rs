//! The dashboard's static files: its WASM, the WASM's JS loader and the CSS (under
//! `/{LEPTOS_SITE_PKG_DIR}`) and the files of `public/` (the favicon, at `/`).
//!
//! Two ways to have them (README § Building and deploying):
//! - **From the site folder** (the default): the files `cargo leptos build` wrote under
//!   `LEPTOS_SITE_ROOT`, read from disk, compressed per request (brotli or gzip, as the
//!   browser accepts), under `/pkg`.
//! - **Inside the binary** (the `embedded-site` feature, which `scripts/release.sh` turns
//!   on): compiled in and brotli-compressed at build time (`memory-serve`; see
//!   `server/build.rs`), served with `Content-Encoding` as the browser accepts, an `ETag`,
//!   and under `/pkg/{hash}` (the hash of the files' names and contents) with
//!   `Cache-Control: max-age=31536000, immutable`, so a browser keeps them for a year and a
//!   new build is fetched at once. The favicon is served at `/favicon.svg` with a week's
//!   caching. The binary then needs no other file.

use axum::Router;
use leptos::prelude::LeptosOptions;

/// Whether the dashboard's files are inside this binary (the `embedded-site` feature).
pub const EMBEDDED: bool = cfg!(feature = "embedded-site");

/// The path under `/` (without slashes around it) that the WASM, JS and CSS are served
/// from: `configured` (`LEPTOS_SITE_PKG_DIR`, default `pkg`), or `pkg/{hash}` when they
/// are inside the binary (the hash is 16 hex digits, fixed at build time).
pub fn pkg_dir(configured: &str) -> String {
    #[cfg(feature = "embedded-site")]
    {
        let _ = configured;
        format!("pkg/{}", env!("AGENTCHAT_SITE_HASH"))
    }
    #[cfg(not(feature = "embedded-site"))]
    configured.to_owned()
}

/// The routes of the dashboard's files for `leptos` (whose `site_pkg_dir` is
/// [`pkg_dir`]'s answer). From the site folder, only `/{pkg}` is routed here; the files of
/// `public/` are found by the dashboard's fallback, which reads `LEPTOS_SITE_ROOT`.
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
        // Compressed per request: the release WASM is about 2 MB and 0.6 MB as brotli
        // (bench/HISTORY.md § Dashboard).
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
