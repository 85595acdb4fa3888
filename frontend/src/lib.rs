//! The WASM entry point of the dashboard: it hydrates the server-rendered page.

/// Called by the generated JS loader once the WASM module is ready: attaches the Leptos
/// app to the server-rendered DOM.
#[wasm_bindgen::prelude::wasm_bindgen]
pub fn hydrate() {
    _ = console_log::init_with_level(log::Level::Info);
    console_error_panic_hook::set_once();
    leptos::mount::hydrate_body(app::App);
}
