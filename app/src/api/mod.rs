//! Request and response bodies of the REST API under `/api`, shared by the server (which
//! produces them) and the dashboard (which consumes them), so both speak one API.
//!
//! Field names are camelCase (docs/api.md: "field names are camelCase"). Timestamps are ISO
//! 8601 UTC strings such as `2026-11-20T10:00:00Z` (docs/api.md § Conventions).

use serde::{Deserialize, Serialize};

#[cfg(feature = "ssr")]
use utoipa::ToSchema;

/// Every error body of the API: `{"error": reason, "message": what to fix}`
/// (docs/api.md § Errors, § Conventions).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct ErrorBody {
    /// The HTTP reason phrase, or the contract's fixed value for 401/403/429.
    pub error: String,
    /// A human-readable explanation of what went wrong and how to fix it.
    pub message: String,
}

/// `POST /api/auth/signup` body (docs/api.md § Signup, § Auth).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SignupRequest {
    /// The user's full name; required, 1..=200 characters after trimming.
    pub name: String,
    /// A syntactically valid email address (RFC 5322 addr-spec), at most 254 characters.
    pub email: String,
    /// 8..=128 characters.
    pub password: String,
    /// Optional company name, at most 200 characters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub company: Option<String>,
    /// Optional ISO 3166-1 alpha-2 country code such as `DE`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub country: Option<String>,
    /// Optional phone number: digits with an optional leading `+`, spaces, dashes, dots
    /// and parentheses; 7..=15 digits (ITU-T E.164 length).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phone: Option<String>,
}

/// The public view of a user returned by signup and login.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct UserSummary {
    pub id: String,
    pub email: String,
    pub name: String,
}

/// `201` answer of signup.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SignupResponse {
    pub success: bool,
    pub user: UserSummary,
    pub message: String,
}

/// `POST /api/auth/login` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LoginRequest {
    pub email: String,
    pub password: String,
}

/// An access token (JWT, 15 minutes) and a refresh token (JWT, 7 days).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct TokenPair {
    pub access_token: String,
    pub refresh_token: String,
}

/// `200` answer of login.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LoginResponse {
    pub success: bool,
    pub user: UserSummary,
    pub tokens: TokenPair,
}

/// `POST /api/auth/refresh` body. The dashboard may omit `refreshToken`; the refresh
/// cookie is used then.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RefreshRequest {
    #[serde(default)]
    pub refresh_token: Option<String>,
}

/// `200` answer of refresh: a rotated token pair.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct RefreshResponse {
    pub success: bool,
    pub tokens: TokenPair,
}

/// A neutral `{success, message}` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MessageResponse {
    pub success: bool,
    pub message: String,
}

/// `{success}` answer of deletions.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct SuccessResponse {
    pub success: bool,
}

/// `POST /api/auth/verify-email` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct TokenRequest {
    pub token: String,
}

/// Body with one email: resend-verification and forgot-password.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct EmailRequest {
    pub email: String,
}

/// `POST /api/auth/reset-password` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct ResetPasswordRequest {
    pub token: String,
    /// The new password, 8..=128 characters.
    pub password: String,
}

/// The full profile of the signed-in user (`GET /api/auth/me`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct UserProfile {
    pub id: String,
    pub email: String,
    pub name: String,
    pub company: Option<String>,
    pub country: Option<String>,
    pub phone: Option<String>,
    /// `free`, `starter`, `business` or `pro`.
    pub plan: String,
    pub email_verified: bool,
    pub created_at: String,
}

/// The limits of the user's plan (docs/api.md § Limits; `RATE_LIMITS`, `AGENT_LIMITS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct PlanLimits {
    /// Requests per minute, counted per account (API keys count toward their owner).
    pub requests_per_minute: u32,
    /// Agents the account may own at once; creating one more answers 403.
    pub agents: u32,
}

/// `GET /api/auth/me` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct MeResponse {
    pub user: UserProfile,
    /// The limits of `user.plan` on this server.
    pub limits: PlanLimits,
}

/// One live session of the user.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct SessionInfo {
    pub id: String,
    pub created_at: String,
    pub last_seen_at: String,
    pub user_agent: Option<String>,
    pub ip: Option<String>,
    /// True for the session that made this request.
    pub current: bool,
}

/// `GET /api/auth/sessions` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct SessionsResponse {
    pub sessions: Vec<SessionInfo>,
}

/// A configured third-party sign-in provider.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct AuthProvider {
    /// `google`, `github` or `microsoft`.
    pub code: String,
    pub name: String,
}

/// `GET /api/auth/providers` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct AuthProvidersResponse {
    pub providers: Vec<AuthProvider>,
}

/// `POST /api/auth/oauth/exchange` body: the one-time code a native client received on its
/// loopback redirect URI.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(deny_unknown_fields)]
pub struct OAuthExchangeRequest {
    pub code: String,
}

/// `POST /api/auth/oauth/{provider}/link` answer: where to send the browser to connect
/// the provider (valid 10 minutes).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct OAuthLinkResponse {
    pub url: String,
}

/// A sign-in provider connected to the account.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct LinkedIdentity {
    /// `google`, `github` or `microsoft`.
    pub provider: String,
    /// The provider's display name.
    pub name: String,
    /// The email the provider gave when it was connected.
    pub email: String,
    pub created_at: String,
}

/// `GET /api/auth/identities` answer: how the account can sign in.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct IdentitiesResponse {
    pub identities: Vec<LinkedIdentity>,
    /// Whether the account has a password.
    pub has_password: bool,
}

/// Tokens over a period (may exceed `u32`, unlike one reply's [`TokensUsed`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct TokenTotals {
    pub prompt: u64,
    pub completion: u64,
    pub total: u64,
}

/// One UTC day of an account's chat use.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct UsageDayInfo {
    /// `YYYY-MM-DD` (UTC).
    pub date: String,
    /// Chat replies that day.
    pub chats: u64,
    pub tokens: TokenTotals,
}

/// `GET /api/usage` answer: the account's chat use this calendar month (UTC) and per day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct UsageResponse {
    /// The current month, `YYYY-MM` (UTC).
    pub month: String,
    pub chats_this_month: u64,
    pub tokens_this_month: TokenTotals,
    /// Every day of the requested window, oldest first, today last (zeros included).
    pub days: Vec<UsageDayInfo>,
}

/// `POST /api/api-keys` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CreateApiKeyRequest {
    /// 1..=100 characters.
    pub name: String,
    /// A non-empty set of scope names such as `agents:read` (docs/api.md § API key scopes).
    pub scopes: Vec<String>,
    /// Optional ISO 8601 expiry in the future, e.g. `2027-01-01T00:00:00Z`.
    #[serde(default)]
    pub expires_at: Option<String>,
}

/// An API key as listed: never the secret or its hash.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApiKeyInfo {
    pub id: String,
    pub name: String,
    /// The first 12 characters of the key, e.g. `key_AbCdEfGh`.
    pub prefix: String,
    pub scopes: Vec<String>,
    pub expires_at: Option<String>,
    pub created_at: String,
    pub last_used_at: Option<String>,
}

/// `201` answer of key creation and rotation: `key` is shown only here.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct CreatedApiKey {
    pub api_key: ApiKeyInfo,
    /// `key_` followed by base64url of 32 random bytes.
    pub key: String,
}

/// `GET /api/api-keys` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ApiKeysResponse {
    pub api_keys: Vec<ApiKeyInfo>,
}

/// `GET /api/health` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct HealthResponse {
    /// `ok` when the database answers.
    pub status: String,
    pub version: String,
}

/// The ten API key scopes (docs/api.md § API key scopes), in the contract's order.
pub const SCOPES: [&str; 10] = [
    "agents:read",
    "agents:write",
    "chat:read",
    "chat:write",
    "knowledge:read",
    "knowledge:write",
    "integrations:read",
    "integrations:write",
    "webhooks:read",
    "webhooks:write",
];

/// Name of the httpOnly cookie that carries the dashboard's access token.
pub const ACCESS_COOKIE: &str = "ac_access";
/// Name of the httpOnly cookie that carries the dashboard's refresh token.
pub const REFRESH_COOKIE: &str = "ac_refresh";
/// Name of the readable cookie holding the CSRF token (double-submit pattern).
pub const CSRF_COOKIE: &str = "ac_csrf";
/// Header in which cookie-authenticated unsafe requests echo the CSRF cookie.
pub const CSRF_HEADER: &str = "x-csrf-token";

/// An agent (docs/api.md § Agent; docs/api.md § Agents, models and chat).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Agent {
    pub id: String,
    pub name: String,
    pub description: String,
    pub system_prompt: String,
    /// The model id; empty means the server's default model.
    pub model: String,
    /// `active`.
    pub status: String,
    pub created_at: String,
    pub updated_at: String,
}

/// `POST /api/agents` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateAgentRequest {
    /// 1..=100 characters.
    pub name: String,
    /// At most 2,000 characters.
    #[serde(default)]
    pub description: Option<String>,
    /// At most 32,000 characters.
    #[serde(default)]
    pub system_prompt: Option<String>,
    /// One of the ids of `GET /api/models`; omitted: the server's default.
    #[serde(default)]
    pub model: Option<String>,
}

/// `PUT /api/agents/{agentId}` body: omitted fields stay unchanged.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateAgentRequest {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub system_prompt: Option<String>,
    #[serde(default)]
    pub model: Option<String>,
}

/// `{agent}` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct AgentResponse {
    pub agent: Agent,
}

/// `GET /api/agents` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct AgentsResponse {
    pub agents: Vec<Agent>,
}

/// A model usable as `agent.model`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ModelEntry {
    pub id: String,
    /// `openai`, `anthropic` or `builtin`.
    pub provider: String,
    /// Context window in tokens, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
}

/// `GET /api/models` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ModelsResponse {
    pub models: Vec<ModelEntry>,
    /// The model used by agents that name none.
    pub default_model: String,
}

/// A file attached to one chat turn: a text-bearing kind, base64-encoded.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Attachment {
    pub filename: String,
    /// e.g. `text/plain` or `text/markdown`.
    pub content_type: String,
    /// The file's bytes, base64 (standard alphabet).
    pub data: String,
}

/// Stream options of a chat request.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StreamOptions {
    /// Adds a usage frame before `[DONE]`.
    #[serde(default)]
    pub include_usage: bool,
}

/// `POST /api/agents/{agentId}/chat` body (docs/api.md § Send message).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ChatRequest {
    /// The message; 1..=32,000 characters by default.
    pub message: String,
    /// Continues this thread; omitted: a new thread.
    #[serde(default)]
    pub thread_id: Option<String>,
    /// Server-sent events when true.
    #[serde(default)]
    pub stream: bool,
    #[serde(default)]
    pub attachments: Vec<Attachment>,
    #[serde(default)]
    pub stream_options: Option<StreamOptions>,
}

/// Token usage of a reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct TokensUsed {
    pub prompt: u32,
    pub completion: u32,
    pub total: u32,
}

/// A knowledge base passage a reply used.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Source {
    pub document_id: String,
    pub title: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub chunk_id: String,
    pub score: f64,
    pub snippet: String,
}

/// The JSON chat reply (docs/api.md § Chat reply; the service adds threadId and sources).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ChatReply {
    pub message: String,
    pub model: String,
    pub tokens_used: TokensUsed,
    pub rag_chunks_used: u32,
    pub thread_id: String,
    pub sources: Vec<Source>,
}

/// A conversation thread in a list.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Conversation {
    pub thread_id: String,
    pub title: String,
    pub message_count: u32,
    pub created_at: String,
    pub updated_at: String,
}

/// `GET /api/agents/{agentId}/conversations` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ConversationsResponse {
    pub conversations: Vec<Conversation>,
    /// Pass as `?cursor=` for the next page; null on the last page.
    pub next_cursor: Option<String>,
}

/// A stored message.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct ChatMessage {
    pub id: String,
    /// `user` or `assistant`.
    pub role: String,
    pub content: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tokens_used: Option<TokensUsed>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sources: Option<Vec<Source>>,
    /// `complete`, or `failed` / `cancelled` for a reply cut short.
    pub status: String,
    pub created_at: String,
}

/// `GET .../conversations/{threadId}/messages` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct MessagesResponse {
    pub messages: Vec<ChatMessage>,
    pub next_cursor: Option<String>,
}

/// `POST /api/agents/{agentId}/knowledge/file` answer (201): the document is stored and
/// waits for indexing.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct UploadResponse {
    pub success: bool,
    pub document_id: String,
    /// `pending`.
    pub status: String,
}

/// Crawl options of `POST /api/agents/{agentId}/knowledge/url`; omitted fields take the
/// defaults shown.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CrawlOptions {
    /// Links followed from the start page: 0 (that page only) to 5, default 2.
    #[serde(default)]
    pub crawl_depth: Option<u8>,
    /// Pages indexed at most: 1 to 1,000, default 50.
    #[serde(default)]
    pub max_pages: Option<u32>,
    /// Globs on the URL path a page must match (any); empty: every page.
    #[serde(default)]
    pub include_patterns: Option<Vec<String>>,
    /// Globs on the URL path that exclude a page (win over includes).
    #[serde(default)]
    pub exclude_patterns: Option<Vec<String>>,
    /// Stay on the start URL's host; default true.
    #[serde(default)]
    pub same_domain: Option<bool>,
    /// Seed the crawl from the site's sitemap; default false.
    #[serde(default)]
    pub use_sitemap: Option<bool>,
    /// Obey robots.txt for the user agent `AgentChat`; default true.
    #[serde(default)]
    pub respect_robots: Option<bool>,
}

/// `POST /api/agents/{agentId}/knowledge/url` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AddUrlRequest {
    /// An http or https URL on a public address.
    pub url: String,
    #[serde(default)]
    pub config: Option<CrawlOptions>,
}

/// `POST /api/agents/{agentId}/knowledge/url` answer (202).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct AddUrlResponse {
    pub success: bool,
    pub document_id: String,
    pub job_id: String,
}

/// A knowledge document (docs/api.md § Knowledge document, § Knowledge base).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct KnowledgeDocument {
    pub document_id: String,
    /// `file` or `url`.
    pub kind: String,
    /// The uploaded file's name, or the crawl's start URL.
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `pending`, `processing`, `indexed` or `failed`.
    pub status: String,
    /// Why indexing failed, in words.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Pages crawled (sites) or read (PDF).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pages: Option<u32>,
    pub chunks: u32,
    pub bytes: u64,
    pub created_at: String,
    pub updated_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub indexed_at: Option<String>,
}

/// `GET /api/agents/{agentId}/knowledge` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct DocumentsResponse {
    pub documents: Vec<KnowledgeDocument>,
}

/// `GET /api/agents/{agentId}/knowledge/{documentId}` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct DocumentResponse {
    pub document: KnowledgeDocument,
}

/// `POST /api/agents/{agentId}/knowledge/{documentId}/refresh` answer (202).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct DocumentRefreshResponse {
    pub success: bool,
    pub job_id: String,
}

/// Progress of a job: pages done of pages found (crawls), or 0/1 then 1/1 (uploads).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct JobProgress {
    pub done: u32,
    pub total: u32,
}

/// A background job (docs/api.md § Knowledge base).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Job {
    pub id: String,
    /// `ingest` (an upload) or `crawl`.
    pub kind: String,
    /// `queued`, `running`, `succeeded` or `failed`.
    pub status: String,
    pub progress: JobProgress,
    pub document_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    pub created_at: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
}

/// `GET /api/jobs/{jobId}` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct JobResponse {
    pub job: Job,
}

/// A credential or config field of an integration provider.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct IntegrationField {
    /// The JSON key inside `credentials` or `config`.
    pub name: String,
    pub label: String,
    /// Never shown again after creation.
    pub secret: bool,
    pub required: bool,
}

/// An integration provider of the catalogue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct IntegrationProvider {
    pub code: String,
    pub name: String,
    pub description: String,
    pub credential_fields: Vec<IntegrationField>,
    pub config_fields: Vec<IntegrationField>,
    /// Whether this server runs the provider's live channel; otherwise its settings are
    /// stored and checked only.
    pub live: bool,
}

/// `GET /api/integrations/providers` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct IntegrationProvidersResponse {
    pub providers: Vec<IntegrationProvider>,
}

/// `POST /api/integrations` body (docs/api.md § Create integration).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateIntegrationRequest {
    pub provider_code: String,
    pub name: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<String>,
    /// The provider's credential fields.
    #[cfg_attr(feature = "ssr", schema(value_type = Object))]
    pub credentials: serde_json::Value,
    /// The provider's config fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ssr", schema(value_type = Option<Object>))]
    pub config: Option<serde_json::Value>,
}

/// `PUT /api/integrations/{id}` body: omitted fields stay as they are.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UpdateIntegrationRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// An agent id links; `null` unlinks.
    #[serde(
        default,
        deserialize_with = "present",
        skip_serializing_if = "Option::is_none"
    )]
    #[cfg_attr(feature = "ssr", schema(value_type = Option<String>))]
    pub agent_id: Option<Option<String>>,
    /// Credential fields to replace; the others are kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ssr", schema(value_type = Option<Object>))]
    pub credentials: Option<serde_json::Value>,
    /// The whole new config.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[cfg_attr(feature = "ssr", schema(value_type = Option<Object>))]
    pub config: Option<serde_json::Value>,
}

/// A field that is present (even as `null`) becomes `Some`; absent stays `None` (default).
fn present<'de, D, T>(deserializer: D) -> Result<Option<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    T::deserialize(deserializer).map(Some)
}

/// An integration as answers show it: credentials masked.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Integration {
    pub id: String,
    pub provider_code: String,
    pub name: String,
    pub agent_id: Option<String>,
    #[cfg_attr(feature = "ssr", schema(value_type = Object))]
    pub config: serde_json::Value,
    /// Each credential field with a masked hint (`••••abcd`), never the value.
    #[cfg_attr(feature = "ssr", schema(value_type = Object))]
    pub credentials: serde_json::Value,
    /// `active`, or `error` when a live channel could not be set up (`statusDetail` says
    /// why; updating the credentials tries again).
    pub status: String,
    /// Why the status is `error`, e.g. what Telegram answered when the webhook was set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status_detail: Option<String>,
    /// How the provider or a web page reaches a live channel (Telegram, Slack, website).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connection: Option<IntegrationConnection>,
    pub created_at: String,
    pub updated_at: String,
}

/// Where a live channel receives its messages.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct IntegrationConnection {
    /// Telegram: the webhook URL registered with the Bot API. Slack: the Events API request
    /// URL to enter under the app's Event Subscriptions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook_url: Option<String>,
    /// Website: the public id the widget is embedded with (`pub_...`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub public_id: Option<String>,
    /// Website: the HTML that embeds the widget on a page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub embed_code: Option<String>,
}

/// `GET /api/integrations` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct IntegrationsResponse {
    pub integrations: Vec<Integration>,
}

/// `GET`/`PUT /api/integrations/{id}` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct IntegrationResponse {
    pub integration: Integration,
}

/// `POST /api/integrations` answer (docs/api.md § Create integration).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct CreatedResponse {
    pub id: String,
    pub message: String,
}

/// A webhook subscription (docs/api.md § Integrations and webhooks). The signing secret is in
/// the creation answer only, never here.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct Webhook {
    pub id: String,
    /// The http(s) URL deliveries are POSTed to.
    pub url: String,
    /// Event types from `GET /api/integrations/webhooks/events`.
    pub events: Vec<String>,
    /// Up to 500 characters; empty when none was given.
    pub description: String,
    /// False once the receiver answered 410 Gone: nothing more is delivered.
    pub active: bool,
    pub created_at: String,
}

/// `GET /api/integrations/webhooks` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct WebhooksResponse {
    pub webhooks: Vec<Webhook>,
}

/// `POST /api/integrations/webhooks` body.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateWebhookRequest {
    /// An http or https URL on a public address (at most 2,048 bytes).
    pub url: String,
    /// A non-empty list of event types from the catalogue.
    pub events: Vec<String>,
    /// At most 500 characters.
    #[serde(default)]
    pub description: Option<String>,
}

/// `POST /api/integrations/webhooks` answer: the webhook and its signing secret
/// (`whsec_` + base64 of 32 random bytes, Standard Webhooks v1), shown this once.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct CreatedWebhook {
    pub webhook: Webhook,
    pub secret: String,
}

/// One entry of the event catalogue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct WebhookEventType {
    /// E.g. `agent.created`.
    #[serde(rename = "type")]
    pub kind: String,
    pub description: String,
}

/// `GET /api/integrations/webhooks/events` answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct WebhookEventsResponse {
    pub events: Vec<WebhookEventType>,
}

/// One event sent (or to be sent) to one webhook.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WebhookDelivery {
    /// Also the `webhook-id` header of every attempt (Standard Webhooks message id).
    pub id: String,
    /// The event type.
    pub event: String,
    /// `pending` (waiting for its next attempt), `sending`, `succeeded` or `failed`
    /// (given up, or the webhook was disabled).
    pub status: String,
    /// Attempts made so far.
    pub attempts: u32,
    /// HTTP status of the last answer; absent when none came (timeout, connection error).
    pub response_status: Option<u16>,
    /// Why the last attempt failed, when it did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_error: Option<String>,
    pub created_at: String,
    /// When the next attempt is due; absent once the delivery has ended.
    pub next_attempt_at: Option<String>,
}

/// `GET /api/integrations/webhooks/{id}/deliveries` answer, newest first (at most 100).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct WebhookDeliveriesResponse {
    pub deliveries: Vec<WebhookDelivery>,
}

/// `GET /api/widget/{publicId}` answer: what the website widget shows before a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WidgetInfo {
    /// The integration's name (the widget's title).
    pub name: String,
    /// The config's welcome message, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub welcome_message: Option<String>,
    /// Whether an agent is linked (the widget can answer).
    pub available: bool,
}

/// `POST /api/widget/{publicId}/chat` body.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct WidgetChatRequest {
    /// The visitor's id, 16 to 64 characters of `A-Z a-z 0-9 _ -`, kept by the widget in the
    /// page's localStorage; one conversation per visitor.
    pub visitor_id: String,
    pub message: String,
}

/// One message of a visitor's conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
#[serde(rename_all = "camelCase")]
pub struct WidgetMessage {
    /// `user` or `assistant`.
    pub role: String,
    pub content: String,
    pub created_at: String,
}

/// `GET /api/widget/{publicId}/messages` answer: the visitor's conversation, oldest first.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "ssr", derive(ToSchema))]
pub struct WidgetMessagesResponse {
    pub messages: Vec<WidgetMessage>,
}
