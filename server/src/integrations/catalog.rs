//! The integration providers: their credential and config fields and how each value is
//! checked, per each provider's documentation (Telegram tokens `<bot id>:<35 characters>`,
//! "Authorizing your bot"; Slack `xoxb-` tokens and 32-hex signing secrets; Discord 64-hex
//! Ed25519 public keys, "Interactions"; WhatsApp numeric phone ids; Zapier hooks on
//! `https://hooks.zapier.com/`).

use serde_json::{Map, Value};

pub use crate::domain::{ProviderCode, UnknownProvider};

/// How a field's value is checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// Any non-empty text of at most 4,096 characters.
    Text,
    /// Text matching a provider format (see [`check_format`]).
    Format(Format),
    /// An absolute `https` URL (or `http` to a loopback host, for development).
    Url,
    /// A list of web origins (`https://example.com`, `http://localhost:8080`).
    Origins,
    /// A whole number in `min..=max`.
    Integer { min: i64, max: i64 },
}

/// Provider-specific formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    TelegramBotToken,
    SlackBotToken,
    SlackSigningSecret,
    DiscordPublicKey,
    Digits,
    ZapierHook,
}

/// One credential or config field of a provider.
#[derive(Debug, Clone, Copy)]
pub struct Field {
    /// The JSON key, camelCase.
    pub name: &'static str,
    /// What the dashboard shows.
    pub label: &'static str,
    /// Never shown again after creation (masked in answers).
    pub secret: bool,
    pub required: bool,
    pub kind: FieldKind,
}

/// An integration provider.
#[derive(Debug, Clone, Copy)]
pub struct ProviderSpec {
    pub code: ProviderCode,
    pub name: &'static str,
    pub description: &'static str,
    pub credential_fields: &'static [Field],
    pub config_fields: &'static [Field],
    /// Whether this build runs its live channel; the others store and check settings only.
    pub live: bool,
}

const fn field(
    name: &'static str,
    label: &'static str,
    secret: bool,
    required: bool,
    kind: FieldKind,
) -> Field {
    Field {
        name,
        label,
        secret,
        required,
        kind,
    }
}

/// Every provider, in the order the dashboard lists them.
pub const PROVIDERS: &[ProviderSpec] = &[
    ProviderSpec {
        code: ProviderCode::Telegram,
        name: "Telegram",
        description: "A Telegram bot that answers through the linked agent, one conversation per chat.",
        credential_fields: &[field("botToken", "Bot token (from @BotFather)", true, true, FieldKind::Format(Format::TelegramBotToken))],
        config_fields: &[],
        live: true,
    },
    ProviderSpec {
        code: ProviderCode::Slack,
        name: "Slack",
        description: "A Slack app that answers mentions and direct messages in threads through the linked agent.",
        credential_fields: &[
            field("botToken", "Bot user OAuth token (xoxb-...)", true, true, FieldKind::Format(Format::SlackBotToken)),
            field("signingSecret", "Signing secret", true, true, FieldKind::Format(Format::SlackSigningSecret)),
        ],
        config_fields: &[],
        live: true,
    },
    ProviderSpec {
        code: ProviderCode::Discord,
        name: "Discord",
        description: "A Discord application whose slash command asks the linked agent.",
        credential_fields: &[
            field("botToken", "Bot token", true, true, FieldKind::Text),
            field("applicationId", "Application id", false, true, FieldKind::Format(Format::Digits)),
            field("publicKey", "Public key", false, true, FieldKind::Format(Format::DiscordPublicKey)),
        ],
        config_fields: &[],
        live: false,
    },
    ProviderSpec {
        code: ProviderCode::Whatsapp,
        name: "WhatsApp",
        description: "A WhatsApp Business number (Meta Cloud API) answered by the linked agent.",
        credential_fields: &[
            field("accessToken", "Access token", true, true, FieldKind::Text),
            field("phoneNumberId", "Phone number id", false, true, FieldKind::Format(Format::Digits)),
            field("appSecret", "App secret", true, true, FieldKind::Text),
            field("verifyToken", "Webhook verify token", true, true, FieldKind::Text),
        ],
        config_fields: &[],
        live: false,
    },
    ProviderSpec {
        code: ProviderCode::Zapier,
        name: "Zapier",
        description: "Sends each reply of the linked agent to a Zapier catch hook.",
        credential_fields: &[field("hookUrl", "Catch hook URL", true, true, FieldKind::Format(Format::ZapierHook))],
        config_fields: &[],
        live: false,
    },
    ProviderSpec {
        code: ProviderCode::Website,
        name: "Website widget",
        description: "A chat bubble for any web page: embed /widget.js with the integration's public id.",
        credential_fields: &[],
        config_fields: &[
            field("allowedOrigins", "Allowed origins (pages that may embed the widget)", false, true, FieldKind::Origins),
            field("welcomeMessage", "Welcome message", false, false, FieldKind::Text),
            field("requestsPerMinute", "Messages per minute, all visitors together (default 60)", false, false, FieldKind::Integer { min: 1, max: 600 }),
        ],
        live: true,
    },
    ProviderSpec {
        code: ProviderCode::Http,
        name: "HTTP",
        description: "Posts each reply of the linked agent to a URL of yours.",
        credential_fields: &[
            field("url", "Endpoint URL", false, true, FieldKind::Url),
            field("authorization", "Authorization header value", true, false, FieldKind::Text),
        ],
        config_fields: &[],
        live: false,
    },
    ProviderSpec {
        code: ProviderCode::Mcp,
        name: "MCP server",
        description: "A remote Model Context Protocol server (Streamable HTTP) whose tools your agents can call.",
        credential_fields: &[
            field("url", "Server URL (its Streamable HTTP endpoint, such as https://example.com/mcp)", false, true, FieldKind::Url),
            field("authorization", "Authorization header value (a bare token is sent as Bearer)", true, false, FieldKind::Text),
        ],
        config_fields: &[],
        live: false,
    },
];

/// The [`PROVIDERS`] entry of `code`.
pub fn provider(code: ProviderCode) -> &'static ProviderSpec {
    &PROVIDERS[code as usize]
}

/// Longest text value accepted, in characters.
pub const MAX_TEXT_CHARS: usize = 4096;
/// Most origins in one list.
pub const MAX_ORIGINS: usize = 50;

/// Checks `values` (a JSON object) against `fields`: required ones present, none unknown,
/// each of its kind; returns it with text trimmed. `what` names it (`credentials`, `config`).
/// Errors: a message naming the field.
pub fn check_fields(
    what: &str,
    fields: &[Field],
    values: &Map<String, Value>,
) -> Result<Map<String, Value>, String> {
    let mut out = Map::new();
    for name in values.keys() {
        if !fields.iter().any(|f| f.name == name) {
            let known: Vec<&str> = fields.iter().map(|f| f.name).collect();
            return Err(if known.is_empty() {
                format!("{what} must be empty for this provider (unknown field {name})")
            } else {
                format!(
                    "{what}.{name} is not a field of this provider; expected: {}",
                    known.join(", ")
                )
            });
        }
    }
    for f in fields {
        match values.get(f.name) {
            None | Some(Value::Null) if f.required => {
                return Err(format!("{what}.{} is required ({})", f.name, f.label))
            }
            None | Some(Value::Null) => {}
            Some(value) => {
                let checked = check_value(f, value)
                    .map_err(|problem| format!("{what}.{} {problem}", f.name))?;
                out.insert(f.name.to_string(), checked);
            }
        }
    }
    Ok(out)
}

fn check_value(f: &Field, value: &Value) -> Result<Value, String> {
    match f.kind {
        FieldKind::Integer { min, max } => match value.as_i64() {
            Some(n) if (min..=max).contains(&n) => Ok(Value::from(n)),
            _ => Err(format!("must be a whole number from {min} to {max}")),
        },
        FieldKind::Origins => {
            let list = value
                .as_array()
                .ok_or("must be a list of origins such as [\"https://example.com\"]")?;
            if list.is_empty() || list.len() > MAX_ORIGINS {
                return Err(format!("must list 1 to {MAX_ORIGINS} origins"));
            }
            let mut origins = Vec::with_capacity(list.len());
            for item in list {
                let raw = item.as_str().ok_or("must contain only strings")?;
                origins.push(Value::from(crate::public_url::origin(raw.trim())?));
            }
            Ok(Value::Array(origins))
        }
        kind => {
            let text = value.as_str().ok_or("must be a string")?.trim();
            if text.is_empty() {
                return Err("must not be empty".into());
            }
            if text.chars().count() > MAX_TEXT_CHARS {
                return Err(format!("must be at most {MAX_TEXT_CHARS} characters"));
            }
            match kind {
                FieldKind::Format(format) => check_format(format, text)?,
                FieldKind::Url => check_url(text)?,
                _ => {}
            }
            Ok(Value::from(text))
        }
    }
}

/// Checks a provider format (sources in the module documentation).
pub fn check_format(format: Format, text: &str) -> Result<(), String> {
    let ok = match format {
        Format::TelegramBotToken => text.split_once(':').is_some_and(|(id, secret)| {
            !id.is_empty()
                && id.bytes().all(|b| b.is_ascii_digit())
                && secret.len() >= 30
                && secret
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        }),
        Format::SlackBotToken => {
            text.starts_with("xoxb-")
                && text.len() > 15
                && text.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        }
        Format::SlackSigningSecret => {
            text.len() == 32 && text.bytes().all(|b| b.is_ascii_hexdigit())
        }
        Format::DiscordPublicKey => text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()),
        Format::Digits => text.len() <= 32 && text.bytes().all(|b| b.is_ascii_digit()),
        Format::ZapierHook => url::Url::parse(text)
            .is_ok_and(|u| u.scheme() == "https" && u.host_str() == Some("hooks.zapier.com")),
    };
    if ok {
        Ok(())
    } else {
        Err(match format {
            Format::TelegramBotToken => {
                "must look like 123456789:AA... (the token @BotFather gives)"
            }
            Format::SlackBotToken => "must be a bot token starting with xoxb-",
            Format::SlackSigningSecret => {
                "must be the 32 hexadecimal characters of the app's signing secret"
            }
            Format::DiscordPublicKey => {
                "must be the application's 64 hexadecimal character public key"
            }
            Format::Digits => "must be digits only",
            Format::ZapierHook => "must be a https://hooks.zapier.com/ catch hook URL",
        }
        .into())
    }
}

fn check_url(text: &str) -> Result<(), String> {
    let url = url::Url::parse(text).map_err(|_| "must be an absolute URL".to_string())?;
    let loopback = matches!(url.host_str(), Some("localhost" | "127.0.0.1" | "[::1]"));
    match url.scheme() {
        "https" => Ok(()),
        "http" if loopback => Ok(()),
        _ => Err("must be an https URL".into()),
    }
}

/// A harmless hint of a stored value: the last four characters of a secret over 12, else bullets.
pub fn mask(value: &str) -> String {
    let chars: Vec<char> = value.chars().collect();
    if chars.len() > 12 {
        format!(
            "••••{}",
            chars[chars.len() - 4..].iter().collect::<String>()
        )
    } else {
        "••••".into()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn check(code: &str, credentials: Value) -> Result<Map<String, Value>, String> {
        let p = provider(code.parse().unwrap());
        check_fields(
            "credentials",
            p.credential_fields,
            credentials.as_object().unwrap(),
        )
    }

    #[test]
    fn provider_formats_are_checked() {
        assert!(check(
            "telegram",
            json!({"botToken": "123456:ABCdefGhIJKlmNoPQRsTUVwxyZ0123456789"})
        )
        .is_ok());
        let e = check("telegram", json!({"botToken": "not-a-token"})).unwrap_err();
        assert!(e.starts_with("credentials.botToken must look like"), "{e}");
        assert!(check("slack", json!({"botToken": "xoxb-1234-5678-abcdefgh", "signingSecret": "0123456789abcdef0123456789abcdef"})).is_ok());
        assert!(check("slack", json!({"botToken": "xoxp-1234-5678-abcdefgh", "signingSecret": "0123456789abcdef0123456789abcdef"})).is_err());
        assert!(check(
            "zapier",
            json!({"hookUrl": "https://hooks.zapier.com/hooks/catch/1/abc/"})
        )
        .is_ok());
        assert!(check(
            "zapier",
            json!({"hookUrl": "https://evil.example/hooks/catch/1/abc/"})
        )
        .is_err());
        assert!(check("http", json!({"url": "http://example.com/x"})).is_err());
        assert!(check("http", json!({"url": "https://example.com/x"})).is_ok());
    }

    #[test]
    fn required_unknown_and_typed_fields() {
        let e = check("slack", json!({"botToken": "xoxb-1234-5678-abcdefgh"})).unwrap_err();
        assert!(e.contains("credentials.signingSecret is required"), "{e}");
        let e = check("website", json!({"x": "y"})).unwrap_err();
        assert!(e.contains("must be empty"), "{e}");
        let e = check("telegram", json!({"botToken": 5})).unwrap_err();
        assert!(e.contains("must be a string"), "{e}");
        let e = check(
            "telegram",
            json!({"botToken": "123456:ABCdefGhIJKlmNoPQRsTUVwxyZ0123456789", "extra": 1}),
        )
        .unwrap_err();
        assert!(e.contains("credentials.extra is not a field"), "{e}");
    }

    #[test]
    fn origins_are_normalised() {
        let p = provider(ProviderCode::Website);
        let ok = check_fields(
            "config",
            p.config_fields,
            json!({"allowedOrigins": ["https://Example.com", "http://localhost:8080"]})
                .as_object()
                .unwrap(),
        )
        .unwrap();
        assert_eq!(
            ok["allowedOrigins"],
            json!(["https://example.com", "http://localhost:8080"])
        );
        for bad in [
            json!([]),
            json!(["https://example.com/page"]),
            json!(["ftp://x"]),
            json!("https://a.b"),
        ] {
            let r = check_fields(
                "config",
                p.config_fields,
                json!({"allowedOrigins": bad}).as_object().unwrap(),
            );
            assert!(r.is_err(), "{bad}");
        }
    }

    #[test]
    fn provider_codes_are_the_stored_and_wire_text() {
        // docs/api.md § Providers, in the catalogue's order.
        assert_eq!(
            ProviderCode::ALL.map(ProviderCode::as_str),
            ["telegram", "slack", "discord", "whatsapp", "zapier", "website", "http", "mcp"]
        );
        for code in ProviderCode::ALL {
            assert_eq!(
                provider(code).code,
                code,
                "PROVIDERS follows ProviderCode::ALL"
            );
            assert_eq!(code.as_str().parse::<ProviderCode>(), Ok(code));
            let json = serde_json::to_value(code).unwrap();
            assert_eq!(json, code.as_str());
            assert_eq!(serde_json::from_value::<ProviderCode>(json).unwrap(), code);
        }
        assert_eq!(PROVIDERS.len(), ProviderCode::ALL.len());
        for unknown in ["", "Telegram", " slack", "sms"] {
            assert_eq!(unknown.parse::<ProviderCode>(), Err(UnknownProvider));
        }
        assert_eq!(
            UnknownProvider.to_string(),
            "providerCode must be one of: telegram, slack, discord, whatsapp, zapier, website, http, mcp"
        );
    }

    #[test]
    fn masks_give_little_away() {
        assert_eq!(mask("xoxb-1234-5678-abcdefgh"), "••••efgh");
        assert_eq!(mask("short"), "••••");
    }
}
