//! The OpenAPI document (`GET /api/openapi.json`): its fixed parts ([`ApiDoc`]), the shared
//! error answers the handlers reference (400 [`BadRequest`] on input, 413/415
//! [`JsonBodyErrors`] on JSON bodies, 429 [`RateLimited`] everywhere but health), and the
//! request fields' length rules, written from the constants the handlers validate with.

use app::api::ErrorBody;
use utoipa::{
    openapi::{schema::Schema, OpenApi, RefOr},
    IntoResponses, ToResponse,
};

use crate::config::ChatConfig;

/// The input is invalid: the JSON body is malformed or not a JSON object, a field is
/// missing, has the wrong type or breaks its rule (see the request schema), or a path or
/// query parameter is malformed. `message` says which, and how to fix it.
#[derive(ToResponse)]
pub struct BadRequest(pub ErrorBody);

/// The request body is larger than allowed: 1 MiB for JSON bodies (README § Limits).
#[derive(ToResponse)]
pub struct PayloadTooLarge(pub ErrorBody);

/// The body is not sent as JSON: `Content-Type` must be `application/json` (parameters
/// such as `charset` allowed) or another `application/*+json` type.
#[derive(ToResponse)]
pub struct UnsupportedMediaType(pub ErrorBody);

/// A request budget is spent (README § Limits): the account's plan, the client IP's on
/// unauthenticated endpoints, or the one of the endpoint itself where its description names
/// one. The body is the contract's fixed `{"error": "Rate limit exceeded", "message": ...}`.
#[derive(ToResponse)]
#[response(headers(
    ("Retry-After" = u64, description = "Seconds to wait before a request can succeed (RFC 9110 § 10.2.3)"),
    ("X-RateLimit-Limit" = u32, description = "Requests per minute of the budget"),
    ("X-RateLimit-Remaining" = u32, description = "Requests that may still be made now: 0"),
    ("X-RateLimit-Reset" = i64, description = "Unix epoch seconds at which the full budget is back")
))]
pub struct TooManyRequests(pub ErrorBody);

/// The answers of the body rules every JSON request body has, besides its 400: list it in
/// the `responses(...)` of each operation that reads a JSON body.
#[derive(IntoResponses)]
pub enum JsonBodyErrors {
    /// Over the body limit.
    #[response(status = 413)]
    TooLarge(#[ref_response] PayloadTooLarge),
    /// Not sent as JSON.
    #[response(status = 415)]
    NotJson(#[ref_response] UnsupportedMediaType),
}

/// The 429 of every metered operation (every one but `GET /api/health`): list it in the
/// `responses(...)` of each.
#[derive(IntoResponses)]
#[response(status = 429)]
pub struct RateLimited(#[ref_response] pub TooManyRequests);

/// A length rule of one string field of a request body, in characters.
struct Length {
    /// The request body's schema, e.g. `CreateAgentRequest`.
    schema: &'static str,
    /// The field's JSON name.
    field: &'static str,
    /// Fewest characters; 0 adds no `minLength`.
    min: usize,
    /// Most characters, when the handler enforces a maximum.
    max: Option<usize>,
}

/// The length rules of request fields, each taken from the constant or the configuration
/// that its handler checks. Strings that must not be empty have at least 1 character.
fn lengths(config: &ChatConfig) -> Vec<Length> {
    use crate::{
        channels::widget::{VISITOR_ID_MAX, VISITOR_ID_MIN},
        domain::{EMAIL_MAX, PASSWORD_MAX, PASSWORD_MIN},
        http::{agents, api_keys, auth, webhooks},
        integrations::MAX_NAME_CHARS as INTEGRATION_NAME_MAX,
        public_url::URL_MAX,
    };
    let rule = |schema, field, min, max| Length {
        schema,
        field,
        min,
        max,
    };
    let message_max = Some(config.max_message_chars);
    let mut rules = vec![
        rule("SignupRequest", "name", 1, Some(auth::USER_NAME_MAX)),
        rule("SignupRequest", "email", 1, Some(EMAIL_MAX)),
        rule(
            "SignupRequest",
            "password",
            PASSWORD_MIN,
            Some(PASSWORD_MAX),
        ),
        rule("SignupRequest", "company", 0, Some(auth::COMPANY_MAX)),
        rule("LoginRequest", "email", 1, Some(EMAIL_MAX)),
        rule("LoginRequest", "password", 1, None),
        rule("EmailRequest", "email", 1, Some(EMAIL_MAX)),
        rule("TokenRequest", "token", 1, None),
        rule("ResetPasswordRequest", "token", 1, None),
        rule(
            "ResetPasswordRequest",
            "password",
            PASSWORD_MIN,
            Some(PASSWORD_MAX),
        ),
        rule("OAuthExchangeRequest", "code", 1, None),
        rule("CreateApiKeyRequest", "name", 1, Some(api_keys::NAME_MAX)),
        rule("ChatRequest", "message", 1, message_max),
        rule("AddUrlRequest", "url", 1, Some(URL_MAX)),
        rule("CreateIntegrationRequest", "providerCode", 1, None),
        rule(
            "CreateIntegrationRequest",
            "name",
            1,
            Some(INTEGRATION_NAME_MAX),
        ),
        rule(
            "UpdateIntegrationRequest",
            "name",
            1,
            Some(INTEGRATION_NAME_MAX),
        ),
        rule("CreateWebhookRequest", "url", 1, Some(URL_MAX)),
        rule(
            "CreateWebhookRequest",
            "description",
            0,
            Some(webhooks::DESCRIPTION_MAX),
        ),
        rule(
            "WidgetChatRequest",
            "visitorId",
            VISITOR_ID_MIN,
            Some(VISITOR_ID_MAX),
        ),
        rule("WidgetChatRequest", "message", 1, message_max),
    ];
    for schema in ["CreateAgentRequest", "UpdateAgentRequest"] {
        rules.extend([
            rule(schema, "name", 1, Some(agents::NAME_MAX)),
            rule(schema, "description", 0, Some(agents::DESCRIPTION_MAX)),
            rule(schema, "systemPrompt", 0, Some(agents::SYSTEM_PROMPT_MAX)),
        ]);
    }
    rules
}

/// Array fields of request bodies that must not be empty: `(schema, field)`.
const NON_EMPTY_LISTS: [(&str, &str); 2] = [
    ("CreateApiKeyRequest", "scopes"),
    ("CreateWebhookRequest", "events"),
];

/// The property `field` of the component schema `schema`, when both exist.
fn property<'a>(doc: &'a mut OpenApi, schema: &str, field: &str) -> Option<&'a mut Schema> {
    let components = doc.components.as_mut()?;
    let RefOr::T(Schema::Object(object)) = components.schemas.get_mut(schema)? else {
        return None;
    };
    match object.properties.get_mut(field)? {
        RefOr::T(property) => Some(property),
        RefOr::Ref(_) => None,
    }
}

/// Writes the length rules of request fields into `doc`'s schemas (`minLength`/`maxLength`,
/// `minItems`, the visitor id `pattern`; JSON Schema 2020-12 § 6.3–6.4), message limits
/// from `config`. Returns the `schema.field` rules whose field is missing: empty when all
/// applied.
pub fn apply_input_rules(doc: &mut OpenApi, config: &ChatConfig) -> Vec<String> {
    let mut missing = Vec::new();
    for rule in lengths(config) {
        match property(doc, rule.schema, rule.field) {
            Some(Schema::Object(string)) => {
                if rule.min > 0 {
                    string.min_length = Some(rule.min);
                }
                string.max_length = rule.max;
                if (rule.schema, rule.field) == ("WidgetChatRequest", "visitorId") {
                    string.pattern = Some("^[A-Za-z0-9_-]+$".into());
                }
            }
            _ => missing.push(format!("{}.{}", rule.schema, rule.field)),
        }
    }
    for (schema, field) in NON_EMPTY_LISTS {
        match property(doc, schema, field) {
            Some(Schema::Array(list)) => list.min_items = Some(1),
            _ => missing.push(format!("{schema}.{field}")),
        }
    }
    missing
}

/// The OpenAPI document's fixed parts; paths come from the handlers' annotations.
#[derive(utoipa::OpenApi)]
#[openapi(
    info(
        title = "AgentChat API",
        description = "Configurable AI agents: accounts, API keys, agents, chat, knowledge, integrations and webhooks. \
            Authenticate with `Authorization: Bearer <accessToken | apiKey>`. Errors are `{error, message}`.",
        license(name = "Apache-2.0")
    ),
    modifiers(&SecurityAddon),
    components(responses(
        BadRequest,
        PayloadTooLarge,
        UnsupportedMediaType,
        TooManyRequests
    )),
    tags(
        (name = "auth", description = "Accounts, sessions and tokens"),
        (name = "api-keys", description = "API keys for programmatic access"),
        (name = "agents", description = "Agents and the models they can use"),
        (name = "tools", description = "Agents' tools: knowledge search, web fetch and custom HTTP actions the model may call"),
        (name = "chat", description = "Chat replies (JSON or server-sent events) and conversations"),
        (name = "knowledge", description = "Knowledge base: uploaded documents, crawled sites and their jobs"),
        (name = "integrations", description = "Integrations with third-party providers (credentials encrypted, never returned)"),
        (name = "webhooks", description = "Webhooks: signed event deliveries (Standard Webhooks v1) and their history"),
        (name = "channels", description = "Inbound requests of live channels: Telegram updates and Slack events (authenticated by the integration's secrets)"),
        (name = "widget", description = "The website widget's public API, for pages of the integration's allowed origins"),
        (name = "openai", description = "The OpenAI-compatible API, base URL `/api/openai/v1`: the caller's agents as models and chat \
            completions in OpenAI's wire format, for OpenAI's SDKs and the tools built on them. Errors are OpenAI's \
            `{\"error\": {message, type, param, code}}`"),
        (name = "mcp", description = "The Model Context Protocol server (Streamable HTTP, MCP 2025-06-18): the caller's agents as MCP tools"),
        (name = "operations", description = "Health, metrics and API description")
    )
)]
pub struct ApiDoc;

struct SecurityAddon;

impl utoipa::Modify for SecurityAddon {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "An access token (JWT) from login or refresh, or an API key `key_...`",
                    ))
                    .build(),
            ),
        );
        components.add_security_scheme(
            "metricsToken",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "`METRICS_TOKEN`, for `GET /metrics` (README § Metrics)",
                    ))
                    .build(),
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_input_rule_finds_its_field() {
        let (_, mut doc) = crate::http::api_router().split_for_parts();
        let config = ChatConfig {
            max_message_chars: 1234,
            ..ChatConfig::default()
        };
        assert_eq!(apply_input_rules(&mut doc, &config), Vec::<String>::new());
        let json = serde_json::to_value(&doc).unwrap();
        let field = |schema: &str, field: &str| {
            json["components"]["schemas"][schema]["properties"][field].clone()
        };
        assert_eq!(field("ChatRequest", "message")["maxLength"], 1234);
        assert_eq!(field("ChatRequest", "message")["minLength"], 1);
        assert_eq!(
            field("CreateAgentRequest", "name")["maxLength"],
            crate::http::agents::NAME_MAX
        );
        assert!(field("CreateAgentRequest", "description")
            .get("minLength")
            .is_none());
        assert_eq!(field("CreateWebhookRequest", "events")["minItems"], 1);
    }
}
