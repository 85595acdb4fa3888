//! Build script of the `agentchat` binary.
//!
//! - `AGENTCHAT_BUILD_COMMIT` (set by `scripts/release.sh`): the commit that
//!   `agentchat --version` prints after the version; "unknown commit" when unset.
//! - With the `embedded-site` feature (README § Building and deploying), the dashboard's
//!   built files are compiled into the binary: `{site}/pkg` (the WASM, its JS loader and
//!   the CSS, from `cargo leptos build --release --frontend-only`) and `public/` (the
//!   favicon), where `{site}` is `LEPTOS_SITE_ROOT` (set by cargo-leptos) or the
//!   workspace's `target/site`. Text files are brotli-compressed here, at build time
//!   (`memory-serve`). `AGENTCHAT_SITE_HASH` is the first 16 hex digits of the SHA-256 of
//!   the `pkg` files (names and contents): the binary serves them under `/pkg/{hash}/`,
//!   so a browser may keep them for a year and still never mixes two builds.
//! - The `migrations/` folders, which `sqlx::migrate!` compiles in: Cargo does not watch
//!   the files a macro reads, so a new or changed migration reruns this script, and with it
//!   the crate's build (<https://docs.rs/sqlx/latest/sqlx/macro.migrate.html>).

fn main() {
    println!("cargo::rerun-if-changed=../migrations");
    println!("cargo::rerun-if-env-changed=AGENTCHAT_BUILD_COMMIT");
    let commit =
        std::env::var("AGENTCHAT_BUILD_COMMIT").unwrap_or_else(|_| "unknown commit".into());
    println!("cargo::rustc-env=AGENTCHAT_BUILD_COMMIT={commit}");
    #[cfg(feature = "embedded-site")]
    embed_site();
}

#[cfg(feature = "embedded-site")]
fn embed_site() {
    use sha2::{Digest, Sha256};
    use std::path::{Path, PathBuf};

    println!("cargo::rerun-if-env-changed=LEPTOS_SITE_ROOT");
    let manifest = PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let workspace = manifest.parent().expect("server/ is in the workspace");
    let site = match std::env::var("LEPTOS_SITE_ROOT") {
        Ok(root) if Path::new(&root).is_absolute() => PathBuf::from(root),
        Ok(root) => workspace.join(root),
        Err(_) => workspace.join("target/site"),
    };
    let pkg = site.join("pkg");
    for file in ["agentchat.js", "agentchat.wasm", "agentchat.css"] {
        if !pkg.join(file).is_file() {
            panic!(
                "the embedded-site feature needs the built dashboard, and {} is missing: \
                 run `cargo leptos build --release --frontend-only` first (or \
                 scripts/release.sh, which does both)",
                pkg.join(file).display()
            );
        }
    }
    // Only what the browser loads (the JS loader, the WASM, the CSS), copied out of the
    // site folder: wasm-bindgen's type declarations (`*.d.ts`) stay out of the binary.
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("set by cargo")).join("pkg");
    // Files are written only when they changed: memory-serve asks cargo to run this script
    // again when that folder changes, and an unchanged copy must not count as a change.
    std::fs::create_dir_all(&out).expect("OUT_DIR is writable");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&pkg)
        .expect("the site's pkg folder is readable")
        .map(|entry| entry.expect("a readable folder entry").path())
        .filter(|path| {
            path.is_file()
                && matches!(
                    path.extension().and_then(|e| e.to_str()),
                    Some("js" | "wasm" | "css")
                )
        })
        .collect();
    files.sort();
    for stale in std::fs::read_dir(&out).expect("OUT_DIR is readable") {
        let stale = stale.expect("a readable folder entry").path();
        if !files.iter().any(|f| f.file_name() == stale.file_name()) {
            std::fs::remove_file(stale).expect("OUT_DIR is writable");
        }
    }
    let mut hash = Sha256::new();
    for file in &files {
        let name = file.file_name().expect("a file name");
        let bytes = std::fs::read(file).expect("a readable site file");
        let copy = out.join(name);
        if std::fs::read(&copy).ok().as_deref() != Some(&bytes[..]) {
            std::fs::write(&copy, &bytes).expect("OUT_DIR is writable");
        }
        hash.update(name.to_string_lossy().as_bytes());
        hash.update([0]);
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
    }
    println!("cargo::rerun-if-changed={}", pkg.display());
    let digest = hash.finalize();
    let hex: String = digest[..8].iter().map(|b| format!("{b:02x}")).collect();
    println!("cargo::rustc-env=AGENTCHAT_SITE_HASH={hex}");
    memory_serve::load_names_directories(
        [("pkg", out), ("public", workspace.join("public"))],
        true,
    );
}
