//! Input limits of request fields, in characters after trimming where the field is trimmed
//! (docs/api.md): defined once here, enforced by the server, stated as `minLength` /
//! `maxLength` in its OpenAPI document, and applied by the dashboard's forms.

/// A user's name at sign-up.
pub const USER_NAME_MAX: usize = 200;
/// A company name at sign-up.
pub const COMPANY_MAX: usize = 200;
/// An email address (RFC 5321 § 4.5.3.1.3: a path is at most 256 octets with its brackets).
pub const EMAIL_MAX: usize = 254;
/// Fewest characters of a password (OWASP Authentication Cheat Sheet).
pub const PASSWORD_MIN: usize = 8;
/// Most characters of a password.
pub const PASSWORD_MAX: usize = 128;
/// An agent's name.
pub const AGENT_NAME_MAX: usize = 100;
/// An agent's description.
pub const AGENT_DESCRIPTION_MAX: usize = 2_000;
/// An agent's system prompt.
pub const SYSTEM_PROMPT_MAX: usize = 32_000;
/// An API key's name.
pub const API_KEY_NAME_MAX: usize = 100;
/// An integration's name.
pub const INTEGRATION_NAME_MAX: usize = 200;
/// A webhook's description.
pub const WEBHOOK_DESCRIPTION_MAX: usize = 500;
/// A tool's description (the name's rule is `^[a-zA-Z0-9_-]{1,64}$`).
pub const TOOL_DESCRIPTION_MAX: usize = 1_024;
/// A tool's name (OpenAI function names: `^[a-zA-Z0-9_-]{1,64}$`).
pub const TOOL_NAME_MAX: usize = 64;
/// A URL given to crawl or to receive webhooks, in bytes.
pub const URL_MAX: usize = 2_048;
/// Most hours between scheduled refreshes of a crawled site (`config.refresh`): a year.
pub const REFRESH_HOURS_MAX: u32 = 8_760;
