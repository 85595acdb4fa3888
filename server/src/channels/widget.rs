//! The website widget: `/widget.js` draws a chat bubble on pages that embed it with an
//! integration's public id and talks to `/api/widget/{publicId}/...`. Only `Origin`s in the
//! integration's `allowedOrigins` are served (Fetch standard, "CORS protocol"), answered with
//! that one origin; requests without `Origin` are refused. One conversation per visitor id
//! (random, kept in the page's `localStorage`).

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use rand::RngCore;
use serde_json::Value;

use crate::{ids::PublicId, public_url};

/// Messages per minute of one widget, all visitors together, unless its config says.
pub const DEFAULT_REQUESTS_PER_MINUTE: u32 = 60;
/// Prefix of public ids.
pub const PUBLIC_ID_PREFIX: &str = "pub_";

/// A website integration's settings, read from its config.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WidgetSettings {
    /// Normalised origins (`catalog::origin`).
    pub allowed_origins: Vec<String>,
    pub welcome_message: Option<String>,
    pub requests_per_minute: u32,
}

impl WidgetSettings {
    /// The settings in a stored config object (checked when it was stored).
    pub fn from_config(config: &str) -> Self {
        let config: Value = serde_json::from_str(config).unwrap_or(Value::Null);
        Self {
            allowed_origins: config["allowedOrigins"]
                .as_array()
                .map(|list| {
                    list.iter()
                        .filter_map(Value::as_str)
                        .map(str::to_string)
                        .collect()
                })
                .unwrap_or_default(),
            welcome_message: config["welcomeMessage"].as_str().map(str::to_string),
            requests_per_minute: config["requestsPerMinute"]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .filter(|n| *n > 0)
                .unwrap_or(DEFAULT_REQUESTS_PER_MINUTE),
        }
    }

    /// Whether a page of `origin` (an `Origin` header value) may use the widget.
    pub fn allows(&self, origin: &str) -> bool {
        public_url::origin(origin.trim()).is_ok_and(|o| self.allowed_origins.contains(&o))
    }
}

/// A new public id: `pub_` + 16 random bytes, base64url (26 characters in all).
pub fn new_public_id() -> PublicId {
    let mut bytes = [0u8; 16];
    rand::thread_rng().fill_bytes(&mut bytes);
    PublicId::from(format!(
        "{PUBLIC_ID_PREFIX}{}",
        URL_SAFE_NO_PAD.encode(bytes)
    ))
}

/// Shortest visitor id, in characters.
pub const VISITOR_ID_MIN: usize = 16;
/// Longest visitor id, in characters.
pub const VISITOR_ID_MAX: usize = 64;

/// Whether `id` is a visitor id: [`VISITOR_ID_MIN`] to [`VISITOR_ID_MAX`] of `A-Z a-z 0-9 _ -`.
pub fn valid_visitor_id(id: &str) -> bool {
    (VISITOR_ID_MIN..=VISITOR_ID_MAX).contains(&id.len())
        && id
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// The key of a visitor's conversation in `channel_threads`.
pub fn conversation_key(visitor_id: &str) -> String {
    format!("visitor:{visitor_id}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_compared_normalised_and_exactly() {
        let s = WidgetSettings::from_config(
            r#"{"allowedOrigins": ["https://shop.example", "http://localhost:8080"]}"#,
        );
        assert_eq!(s.requests_per_minute, DEFAULT_REQUESTS_PER_MINUTE);
        assert!(s.allows("https://shop.example"));
        assert!(s.allows("HTTPS://Shop.Example:443"));
        assert!(s.allows("http://localhost:8080"));
        assert!(!s.allows("http://shop.example"), "scheme matters");
        assert!(!s.allows("https://evil.shop.example"));
        assert!(!s.allows("https://shop.example.evil.com"));
        assert!(!s.allows("http://localhost:8081"), "port matters");
        assert!(!s.allows("null"));
        assert!(!s.allows(""));
    }

    #[test]
    fn settings_fall_back_to_defaults() {
        let s = WidgetSettings::from_config(r#"{"allowedOrigins": [], "requestsPerMinute": 5}"#);
        assert_eq!(s.requests_per_minute, 5);
        assert!(!s.allows("https://a.example"));
        assert_eq!(
            WidgetSettings::from_config("not json").requests_per_minute,
            60
        );
    }

    #[test]
    fn ids_have_their_shapes() {
        let id = new_public_id();
        assert!(
            id.as_str().starts_with("pub_") && id.as_str().len() == 26,
            "{id}"
        );
        assert_ne!(id, new_public_id());
        assert!(valid_visitor_id("0f8fad5b-d9cb-469f-a165-70867728950e"));
        assert!(!valid_visitor_id("short"));
        assert!(!valid_visitor_id("has spaces in it, which is bad"));
        assert!(!valid_visitor_id(&"a".repeat(65)));
    }
}
