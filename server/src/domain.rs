//! Domain values that validate once at the edge: emails, passwords, names, countries,
//! phones, plans and scopes; and who said a message ([`Role`]).

use std::{collections::BTreeSet, fmt, str::FromStr};

use secrecy::{ExposeSecret, SecretString};

/// Longest email in bytes of the trimmed, lower-cased address (RFC 5321 § 4.5.3.1.3).
pub const EMAIL_MAX: usize = app::api::limits::EMAIL_MAX;

/// A trimmed, lower-cased email, valid per RFC 5322 addr-spec, at most [`EMAIL_MAX`] bytes.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Email(String);

impl Email {
    /// Parses `raw`; the error says what to fix.
    pub fn parse(raw: &str) -> Result<Self, String> {
        let s = raw.trim().to_lowercase();
        if s.is_empty() {
            return Err("email is required".into());
        }
        if s.len() > EMAIL_MAX {
            return Err(format!("email must be at most {EMAIL_MAX} characters"));
        }
        let parsed = email_address::EmailAddress::from_str(&s)
            .map_err(|_| format!("`{}` is not a valid email address", raw.trim()))?;
        // A bare host (`a@localhost`) is legal in RFC 5322 but never deliverable here.
        if !parsed.domain().contains('.') {
            return Err(format!("`{}` is not a valid email address", raw.trim()));
        }
        Ok(Self(s))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Email {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Password length bounds in characters (docs/api.md § Auth: 8..=128; OWASP ASVS 2.1.1/2.1.2).
pub const PASSWORD_MIN: usize = app::api::limits::PASSWORD_MIN;
pub const PASSWORD_MAX: usize = app::api::limits::PASSWORD_MAX;

/// A candidate password of 8..=128 characters, kept secret (its `Debug` is redacted).
pub struct Password(SecretString);

impl Password {
    /// Checks the length in Unicode scalar values.
    pub fn parse(raw: String) -> Result<Self, String> {
        let n = raw.chars().count();
        if n < PASSWORD_MIN {
            return Err(format!(
                "password must be at least {PASSWORD_MIN} characters"
            ));
        }
        if n > PASSWORD_MAX {
            return Err(format!(
                "password must be at most {PASSWORD_MAX} characters"
            ));
        }
        Ok(Self(SecretString::from(raw)))
    }

    /// The password text, for hashing only.
    pub fn expose(&self) -> &str {
        self.0.expose_secret()
    }
}

impl fmt::Debug for Password {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Password([REDACTED])")
    }
}

/// A required display name: trimmed, 1..=`max` characters, no control characters.
pub fn parse_name(field: &str, raw: &str, max: usize) -> Result<String, String> {
    let s = raw.trim();
    if s.is_empty() {
        return Err(format!("{field} is required"));
    }
    if s.chars().count() > max {
        return Err(format!("{field} must be at most {max} characters"));
    }
    if s.chars().any(char::is_control) {
        return Err(format!("{field} must not contain control characters"));
    }
    Ok(s.to_string())
}

/// An optional free-text field: `None` or empty stays `None`; otherwise as [`parse_name`].
pub fn parse_optional(
    field: &str,
    raw: Option<&str>,
    max: usize,
) -> Result<Option<String>, String> {
    match raw.map(str::trim) {
        None | Some("") => Ok(None),
        Some(s) => parse_name(field, s, max).map(Some),
    }
}

/// An ISO 3166-1 alpha-2 country code, upper-cased (e.g. `de` → `DE`).
pub fn parse_country(raw: &str) -> Result<String, String> {
    let code = raw.trim().to_uppercase();
    isocountry::CountryCode::for_alpha2(&code)
        .map(|c| c.alpha2().to_string())
        .map_err(|_| format!("country `{}` is not an ISO 3166-1 alpha-2 code", raw.trim()))
}

/// A phone number: optional `+`, 7..=15 digits (E.164) with spaces, dashes, dots or
/// parentheses; returned trimmed.
pub fn parse_phone(raw: &str) -> Result<String, String> {
    let s = raw.trim();
    let body = s.strip_prefix('+').unwrap_or(s);
    let digits = body.chars().filter(char::is_ascii_digit).count();
    let only_allowed = body
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, ' ' | '-' | '.' | '(' | ')'));
    if !only_allowed || !(7..=15).contains(&digits) {
        return Err(
            "phone must be 7 to 15 digits, optionally with a leading + and separators".into(),
        );
    }
    Ok(s.to_string())
}

/// An account's plan (docs/api.md § Limits).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Plan {
    /// 100 requests/minute, 3 agents.
    #[default]
    Free,
    /// 500 requests/minute, 10 agents.
    Starter,
    /// 2,000 requests/minute, 50 agents.
    Business,
    /// 10,000 requests/minute, 500 agents.
    Pro,
}

impl Plan {
    pub const ALL: [Plan; 4] = [Plan::Free, Plan::Starter, Plan::Business, Plan::Pro];

    /// Position in [`Plan::ALL`] (indexes per-plan configuration arrays).
    pub fn index(self) -> usize {
        self as usize
    }

    /// The stored and API name (`free`, `starter`, `business`, `pro`).
    pub fn as_str(self) -> &'static str {
        match self {
            Plan::Free => "free",
            Plan::Starter => "starter",
            Plan::Business => "business",
            Plan::Pro => "pro",
        }
    }

    /// Requests per minute (docs/api.md § Rate limits per plan: 100/500/2000/10000).
    pub fn requests_per_minute(self) -> u32 {
        match self {
            Plan::Free => 100,
            Plan::Starter => 500,
            Plan::Business => 2_000,
            Plan::Pro => 10_000,
        }
    }

    /// Default agents allowed (docs/api.md § Plans and limits: 3/10/50/500, configurable).
    pub fn default_agent_limit(self) -> u32 {
        match self {
            Plan::Free => 3,
            Plan::Starter => 10,
            Plan::Business => 50,
            Plan::Pro => 500,
        }
    }
}

impl FromStr for Plan {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().as_str() {
            "free" => Ok(Plan::Free),
            "starter" => Ok(Plan::Starter),
            "business" => Ok(Plan::Business),
            "pro" => Ok(Plan::Pro),
            other => Err(format!(
                "unknown plan `{other}`; use free, starter, business or pro"
            )),
        }
    }
}

impl fmt::Display for Plan {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An API key scope (docs/api.md § API key scopes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    AgentsRead,
    AgentsWrite,
    ChatRead,
    ChatWrite,
    KnowledgeRead,
    KnowledgeWrite,
    IntegrationsRead,
    IntegrationsWrite,
    WebhooksRead,
    WebhooksWrite,
}

impl Scope {
    /// All scopes in the contract's order.
    pub const ALL: [Scope; 10] = [
        Scope::AgentsRead,
        Scope::AgentsWrite,
        Scope::ChatRead,
        Scope::ChatWrite,
        Scope::KnowledgeRead,
        Scope::KnowledgeWrite,
        Scope::IntegrationsRead,
        Scope::IntegrationsWrite,
        Scope::WebhooksRead,
        Scope::WebhooksWrite,
    ];

    pub fn as_str(self) -> &'static str {
        app::api::SCOPES[self as usize]
    }
}

impl FromStr for Scope {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Scope::ALL
            .into_iter()
            .find(|scope| scope.as_str() == s)
            .ok_or_else(|| {
                format!(
                    "unknown scope `{s}`; valid scopes: {}",
                    app::api::SCOPES.join(", ")
                )
            })
    }
}

/// A non-empty set of scopes, kept sorted and de-duplicated.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ScopeSet(BTreeSet<Scope>);

impl ScopeSet {
    /// Parses scope names; unknown names and an empty list are errors.
    pub fn parse<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        if names.is_empty() {
            return Err("scopes must name at least one scope".into());
        }
        names
            .iter()
            .map(|n| n.as_ref().parse::<Scope>())
            .collect::<Result<BTreeSet<_>, _>>()
            .map(Self)
    }

    pub fn contains(&self, scope: Scope) -> bool {
        self.0.contains(&scope)
    }

    /// Wire names in the contract's order.
    pub fn names(&self) -> Vec<String> {
        self.0.iter().map(|s| s.as_str().to_string()).collect()
    }
}

/// A tool's kind (docs/api.md § Tools), stored and answered as [`ToolType::as_str`].
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "snake_case")]
#[sqlx(type_name = "TEXT", rename_all = "snake_case")]
pub enum ToolType {
    /// Searches the agent's own knowledge base.
    KnowledgeSearch,
    /// Reads one public web page as text.
    WebFetch,
    /// A custom HTTP action.
    Http,
    /// The tools of an MCP server integration.
    Mcp,
}

impl ToolType {
    pub const ALL: [Self; 4] = [Self::KnowledgeSearch, Self::WebFetch, Self::Http, Self::Mcp];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::KnowledgeSearch => "knowledge_search",
            Self::WebFetch => "web_fetch",
            Self::Http => "http",
            Self::Mcp => "mcp",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|t| t.as_str() == text)
    }
}

/// Who said a message (docs/api.md § Conversations and messages), stored as its text.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum Role {
    /// The person chatting: the message a chat request sends.
    User,
    /// The model: the reply to a chat request, whatever its outcome.
    Assistant,
}

impl Role {
    pub const ALL: [Role; 2] = [Role::User, Role::Assistant];

    pub fn as_str(self) -> &'static str {
        match self {
            Role::User => "user",
            Role::Assistant => "assistant",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A third-party sign-in provider (docs/api.md § Third-party sign-in); its
/// [`OAuthProvider::code`] is used in paths, answers and the store.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum OAuthProvider {
    /// `github`: GitHub's OAuth app flow and user API.
    Github,
    /// `google`: Google's OpenID Connect provider.
    Google,
    /// `microsoft`: the Microsoft identity platform (OpenID Connect).
    Microsoft,
}

impl OAuthProvider {
    pub const ALL: [OAuthProvider; 3] = [
        OAuthProvider::Google,
        OAuthProvider::Github,
        OAuthProvider::Microsoft,
    ];

    pub fn code(self) -> &'static str {
        match self {
            Self::Github => "github",
            Self::Google => "google",
            Self::Microsoft => "microsoft",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Self::Github => "GitHub",
            Self::Google => "Google",
            Self::Microsoft => "Microsoft",
        }
    }

    pub fn parse(code: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|p| p.code() == code)
    }
}

/// An event type (docs/api.md § Event types); its name ([`EventType::as_str`]) is what
/// webhooks subscribe to, deliveries carry as `type`, and the store holds.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[sqlx(type_name = "TEXT")]
pub enum EventType {
    /// `agent.created`: an agent was created (`agents`).
    #[serde(rename = "agent.created")]
    #[sqlx(rename = "agent.created")]
    AgentCreated,
    /// `agent.updated`: an agent was updated (`agents`).
    #[serde(rename = "agent.updated")]
    #[sqlx(rename = "agent.updated")]
    AgentUpdated,
    /// `agent.deleted`: an agent was deleted with its conversations and knowledge.
    #[serde(rename = "agent.deleted")]
    #[sqlx(rename = "agent.deleted")]
    AgentDeleted,
    /// `conversation.created`: a chat started a new conversation (`chat`).
    #[serde(rename = "conversation.created")]
    #[sqlx(rename = "conversation.created")]
    ConversationCreated,
    /// `message.created`: an assistant reply was completed (`chat`).
    #[serde(rename = "message.created")]
    #[sqlx(rename = "message.created")]
    MessageCreated,
    /// `document.indexed`: a knowledge document was indexed (`knowledge::worker`).
    #[serde(rename = "document.indexed")]
    #[sqlx(rename = "document.indexed")]
    DocumentIndexed,
    /// `document.failed`: indexing a knowledge document failed (`knowledge::worker`).
    #[serde(rename = "document.failed")]
    #[sqlx(rename = "document.failed")]
    DocumentFailed,
    /// `crawl.completed`: a crawl finished and its pages are indexed.
    #[serde(rename = "crawl.completed")]
    #[sqlx(rename = "crawl.completed")]
    CrawlCompleted,
    /// `integration.created`: an integration was created (`http::integrations`).
    #[serde(rename = "integration.created")]
    #[sqlx(rename = "integration.created")]
    IntegrationCreated,
    /// `document.refreshed`: a re-crawl of a site finished, with its page counts
    /// (`knowledge::worker`; docs/knowledge.md § Refresh).
    #[serde(rename = "document.refreshed")]
    #[sqlx(rename = "document.refreshed")]
    DocumentRefreshed,
    /// `feedback.created`: a reply was rated, or its rating or comment changed
    /// (`chat::feedback`).
    #[serde(rename = "feedback.created")]
    #[sqlx(rename = "feedback.created")]
    FeedbackCreated,
    /// `usage.threshold`: 80 % or 100 % of a monthly token quota or key budget was reached
    /// (`chat::quota`).
    #[serde(rename = "usage.threshold")]
    #[sqlx(rename = "usage.threshold")]
    UsageThreshold,
}

impl EventType {
    /// Every event type, in the order of docs/api.md § Event types.
    pub const ALL: [EventType; 12] = [
        EventType::AgentCreated,
        EventType::AgentUpdated,
        EventType::AgentDeleted,
        EventType::ConversationCreated,
        EventType::MessageCreated,
        EventType::DocumentIndexed,
        EventType::DocumentFailed,
        EventType::CrawlCompleted,
        EventType::IntegrationCreated,
        EventType::DocumentRefreshed,
        EventType::FeedbackCreated,
        EventType::UsageThreshold,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::AgentCreated => "agent.created",
            Self::AgentUpdated => "agent.updated",
            Self::AgentDeleted => "agent.deleted",
            Self::ConversationCreated => "conversation.created",
            Self::MessageCreated => "message.created",
            Self::DocumentIndexed => "document.indexed",
            Self::DocumentFailed => "document.failed",
            Self::CrawlCompleted => "crawl.completed",
            Self::IntegrationCreated => "integration.created",
            Self::DocumentRefreshed => "document.refreshed",
            Self::FeedbackCreated => "feedback.created",
            Self::UsageThreshold => "usage.threshold",
        }
    }

    /// What the event means and what its `data` holds.
    pub fn description(self) -> &'static str {
        match self {
            Self::AgentCreated => "An agent was created. data: {agent}",
            Self::AgentUpdated => "An agent was updated. data: {agent} (after the change)",
            Self::AgentDeleted => "An agent was deleted with its conversations and knowledge. data: {agentId}",
            Self::ConversationCreated => {
                "A chat started a new conversation. data: {conversationId, agentId, title, createdAt}"
            }
            Self::MessageCreated => {
                "An assistant reply was completed. data: {messageId, conversationId, agentId, role, content, model, usage{promptTokens, completionTokens}, createdAt}"
            }
            Self::DocumentIndexed => {
                "A knowledge document (upload or crawled site) was indexed. data: {agentId, document}"
            }
            Self::DocumentFailed => "Indexing a knowledge document failed. data: {agentId, document} (with its error)",
            Self::CrawlCompleted => {
                "A crawl (or refresh) of a web site finished and its pages are indexed. data: {agentId, document}"
            }
            Self::IntegrationCreated => {
                "An integration was created. data: {integration} (credentials as masked hints only)"
            }
            Self::DocumentRefreshed => {
                "A re-crawl (manual or scheduled) of a web site finished. data: {agentId, document} (with lastRefreshedAt, nextRefreshAt and refreshCounts{added, changed, removed, unchanged})"
            }
            Self::FeedbackCreated => {
                "A reply was rated, or its rating or comment changed. data: {agentId, conversationId, messageId, rating, comment, createdAt}"
            }
            Self::UsageThreshold => {
                "80 % or 100 % of a monthly token quota or API key budget was reached (once per month). data: {quota (plan or apiKey), apiKeyId, threshold, limit, used, month, resetAt}"
            }
        }
    }

    /// The event's bit in a set of events (its place in [`EventType::ALL`]).
    pub fn bit(self) -> u32 {
        1 << Self::ALL.iter().position(|e| *e == self).unwrap_or(31)
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|e| e.as_str() == name)
    }
}

/// An integration provider (docs/api.md § Providers); its code is `providerCode` and is stored.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize, sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum ProviderCode {
    /// `telegram`: a Telegram bot (live channel).
    Telegram,
    /// `slack`: a Slack app (live channel).
    Slack,
    /// `discord`: a Discord application (settings only).
    Discord,
    /// `whatsapp`: a WhatsApp Business number on Meta's Cloud API (settings only).
    Whatsapp,
    /// `zapier`: a Zapier catch hook (settings only).
    Zapier,
    /// `website`: the website chat widget (live channel).
    Website,
    /// `http`: a URL of the owner's that receives replies (settings only).
    Http,
    /// `mcp`: a remote MCP server whose tools agents use (tools of type `mcp`).
    Mcp,
}

impl ProviderCode {
    pub const ALL: [Self; 8] = [
        Self::Telegram,
        Self::Slack,
        Self::Discord,
        Self::Whatsapp,
        Self::Zapier,
        Self::Website,
        Self::Http,
        Self::Mcp,
    ];

    /// The stored and wire code.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Telegram => "telegram",
            Self::Slack => "slack",
            Self::Discord => "discord",
            Self::Whatsapp => "whatsapp",
            Self::Zapier => "zapier",
            Self::Website => "website",
            Self::Http => "http",
            Self::Mcp => "mcp",
        }
    }
}

impl fmt::Display for ProviderCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A code not in the catalogue; its text (listing the codes) is the 400 answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("providerCode must be one of: {}", ProviderCode::ALL.map(ProviderCode::as_str).join(", "))]
pub struct UnknownProvider;

impl FromStr for ProviderCode {
    type Err = UnknownProvider;

    /// The provider with exactly the code `code` (no trimming, no case folding).
    fn from_str(code: &str) -> Result<Self, UnknownProvider> {
        Self::ALL
            .into_iter()
            .find(|p| p.as_str() == code)
            .ok_or(UnknownProvider)
    }
}

/// Where a conversation started (docs/api.md § Conversation inbox); stored with its thread
/// when the thread is created and never changed.
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    Hash,
    serde::Serialize,
    serde::Deserialize,
    sqlx::Type,
)]
#[serde(rename_all = "lowercase")]
#[sqlx(type_name = "TEXT", rename_all = "lowercase")]
pub enum Channel {
    /// `POST /api/agents/{agentId}/chat` with a bearer access token or API key.
    #[default]
    Api,
    /// The same endpoint from the dashboard, authenticated by its session cookie.
    Dashboard,
    /// The website chat widget.
    Widget,
    Telegram,
    Slack,
    /// The OpenAI-compatible API (`/api/openai/v1`).
    Openai,
    /// The MCP server endpoint (`/api/mcp`).
    Mcp,
}

impl Channel {
    pub const ALL: [Self; 7] = [
        Self::Api,
        Self::Dashboard,
        Self::Widget,
        Self::Telegram,
        Self::Slack,
        Self::Openai,
        Self::Mcp,
    ];

    /// The stored and wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Api => "api",
            Self::Dashboard => "dashboard",
            Self::Widget => "widget",
            Self::Telegram => "telegram",
            Self::Slack => "slack",
            Self::Openai => "openai",
            Self::Mcp => "mcp",
        }
    }

    pub fn parse(name: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|c| c.as_str() == name)
    }

    /// The channel of a live channel's provider: `website` is the widget; `None` for
    /// providers that carry no conversations.
    pub fn of_provider(provider: ProviderCode) -> Option<Self> {
        match provider {
            ProviderCode::Website => Some(Self::Widget),
            ProviderCode::Telegram => Some(Self::Telegram),
            ProviderCode::Slack => Some(Self::Slack),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn email_is_normalised_and_validated() {
        assert_eq!(
            Email::parse("  Ada@Example.COM ").unwrap().as_str(),
            "ada@example.com"
        );
        for bad in [
            "",
            "ada",
            "ada@",
            "@example.com",
            "ada@localhost",
            "a b@example.com",
        ] {
            assert!(Email::parse(bad).is_err(), "{bad} accepted");
        }
        let long = format!("{}@example.com", "a".repeat(250));
        assert!(Email::parse(&long).is_err());
    }

    #[test]
    fn password_bounds_are_8_to_128_characters() {
        assert!(Password::parse("1234567".into()).is_err());
        assert!(Password::parse("12345678".into()).is_ok());
        assert!(Password::parse("é".repeat(128)).is_ok());
        assert!(Password::parse("x".repeat(129)).is_err());
        assert_eq!(
            format!("{:?}", Password::parse("hunter2hunter2".into()).unwrap()),
            "Password([REDACTED])"
        );
    }

    #[test]
    fn country_and_phone() {
        assert_eq!(parse_country("de").unwrap(), "DE");
        assert!(parse_country("XX").is_err());
        assert!(parse_country("DEU").is_err());
        assert!(parse_phone("+49 (30) 123-4567").is_ok());
        assert!(parse_phone("12345").is_err());
        assert!(parse_phone("+1 555 CALL NOW").is_err());
        assert!(parse_phone("1234567890123456").is_err());
    }

    #[test]
    fn plans_have_the_contract_limits() {
        let rpm: Vec<u32> = Plan::ALL.iter().map(|p| p.requests_per_minute()).collect();
        assert_eq!(rpm, [100, 500, 2000, 10000]);
        let agents: Vec<u32> = Plan::ALL.iter().map(|p| p.default_agent_limit()).collect();
        assert_eq!(agents, [3, 10, 50, 500]);
        assert_eq!("Pro".parse::<Plan>().unwrap(), Plan::Pro);
        assert!("gold".parse::<Plan>().is_err());
    }

    #[test]
    fn scopes_parse_strictly() {
        let set = ScopeSet::parse(&["chat:write", "agents:read", "agents:read"]).unwrap();
        assert_eq!(set.names(), ["agents:read", "chat:write"]);
        assert!(ScopeSet::parse::<&str>(&[]).is_err());
        assert!(ScopeSet::parse(&["agents:admin"]).is_err());
        assert_eq!(Scope::ALL.map(|s| s.as_str()), app::api::SCOPES);
    }

    #[test]
    fn roles_are_the_stored_and_wire_text() {
        // The CHECK list of `messages.role` (migrations/sqlite/0002_agents_chat.sql).
        assert_eq!(Role::ALL.map(Role::as_str), ["user", "assistant"]);
        for role in Role::ALL {
            let json = serde_json::to_value(role).unwrap();
            assert_eq!(json, role.as_str());
            assert_eq!(serde_json::from_value::<Role>(json).unwrap(), role);
            assert_eq!(role.to_string(), role.as_str());
        }
    }
}
