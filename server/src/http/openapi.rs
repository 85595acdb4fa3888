//! The OpenAPI document (`GET /api/openapi.json`): its fixed parts ([`ApiDoc`]), the shared
//! error answers the handlers reference (400 [`BadRequest`] on input, 413/415
//! [`JsonBodyErrors`] on JSON bodies, 429 [`RateLimited`] everywhere but health), and the
//! request fields' rules ([`apply_input_rules`]), written from the constants, lists and
//! catalogues the handlers validate with.

use app::api::ErrorBody;
use utoipa::{
    openapi::{schema::Schema, OpenApi, RefOr},
    IntoResponses, ToResponse,
};

use crate::{config::ChatConfig, domain::ProviderCode, store::Rating};

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
        rule(
            "WidgetFeedbackRequest",
            "visitorId",
            VISITOR_ID_MIN,
            Some(VISITOR_ID_MAX),
        ),
    ];
    for schema in ["FeedbackRequest", "WidgetFeedbackRequest"] {
        rules.extend([
            rule(schema, "rating", 1, None),
            rule(
                schema,
                "comment",
                0,
                Some(crate::chat::feedback::MAX_COMMENT_CHARS),
            ),
        ]);
    }
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

/// [`crate::domain::parse_name`]: no control character (`char::is_control`: U+0000–U+001F,
/// U+007F–U+009F) anywhere, and one character at least that trimming keeps (not Unicode
/// `White_Space`, which `str::trim` removes). The length rule is `maxLength`.
pub const NAME_PATTERN: &str = "^[^\\x00-\\x1F\\x7F-\\x9F]*\
    [^\\x00-\\x20\\x7F-\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]\
    [^\\x00-\\x1F\\x7F-\\x9F]*$";
/// [`crate::domain::parse_optional`]: blank (then absent), or as [`NAME_PATTERN`].
pub const OPTIONAL_NAME_PATTERN: &str = "^[^\\x00-\\x1F\\x7F-\\x9F]*$";
/// [`crate::domain::parse_phone`]: an optional `+`, then 7 to 15 digits among spaces,
/// dashes, dots and parentheses; or blank (then absent).
pub const PHONE_PATTERN: &str = "^(?:\\+?[ ().-]*(?:[0-9][ ().-]*){7,15})?$";
/// Text that must not be blank once trimmed (chat messages, credential values): one
/// character at least that is not Unicode `White_Space`.
pub const NOT_BLANK_PATTERN: &str =
    "[^\\t-\\r \\x85\\xA0\\u1680\\u2000-\\u200A\\u2028\\u2029\\u202F\\u205F\\u3000]";
/// A tool's name (`tools::service::check_name`; OpenAI's function-name rule).
pub const TOOL_NAME_PATTERN: &str = "^[a-zA-Z0-9_-]{1,64}$";
/// A tool's description (`tools::service::check_description`): no control character but
/// line feed and tab.
pub const TOOL_DESCRIPTION_PATTERN: &str = "^[^\\x00-\\x08\\x0B-\\x1F\\x7F-\\x9F]*$";
/// A widget visitor's id (`channels::widget::is_visitor_id`); its length is `minLength` /
/// `maxLength`.
pub const VISITOR_ID_PATTERN: &str = "^[A-Za-z0-9_-]+$";
/// A crawl's include or exclude glob on the URL path (`knowledge::crawl`): letters,
/// digits, `/ ? . _ ~ % + -` and single `*` wildcards (a `**` stands alone between
/// slashes, which this pattern leaves out).
pub const GLOB_PATTERN: &str = "^[A-Za-z0-9/?._~%+-]*(?:\\*[A-Za-z0-9/?._~%+-]+)*\\*?$";
/// A host name the URL rules accept: dot-separated labels of letters, digits and inner
/// hyphens, the last starting with a letter (so that it is never read as an IPv4 address).
const HOST: &str = "(?:[a-z0-9]+(?:-[a-z0-9]+)*\\.)*[a-z][a-z0-9]*(?:-[a-z0-9]+)*";
/// The path characters the URL rules accept.
const PATH: &str = "(?:/[A-Za-z0-9/_.~-]*)?";

/// An absolute http(s) URL such as the crawler and webhook deliveries request: `format:
/// uri` and this pattern. Whether its host resolves to a public address is checked when it
/// is used (docs/security.md), which no schema can say.
pub fn http_url_pattern() -> String {
    format!("^https?://{HOST}(?::[0-9]{{1,4}})?{PATH}$")
}

/// A web origin (`integrations::catalog` `Origins`, `public_url::origin`).
fn origin_pattern() -> String {
    format!("^https?://{HOST}(?::[0-9]{{1,4}})?/?$")
}

/// The JSON Schema of one credential or config field of an integration provider, from the
/// rule [`crate::integrations::catalog::check_fields`] applies to it.
fn integration_field_schema(field: &crate::integrations::catalog::Field) -> serde_json::Value {
    use crate::integrations::catalog::{FieldKind, Format, MAX_ORIGINS, MAX_TEXT_CHARS};
    use serde_json::json;
    let text = |pattern: String| {
        json!({"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS,
               "pattern": pattern, "description": field.label})
    };
    match field.kind {
        FieldKind::Text => text(NOT_BLANK_PATTERN.into()),
        FieldKind::Format(format) => text(
            match format {
                Format::TelegramBotToken => "^[0-9]+:[A-Za-z0-9_-]{30,}$",
                Format::SlackBotToken => "^xoxb-[A-Za-z0-9-]{11,}$",
                Format::SlackSigningSecret => "^[0-9A-Fa-f]{32}$",
                Format::DiscordPublicKey => "^[0-9A-Fa-f]{64}$",
                Format::Digits => "^[0-9]{1,32}$",
                Format::ZapierHook => "^https://hooks\\.zapier\\.com/[A-Za-z0-9/_.~-]*$",
            }
            .into(),
        ),
        FieldKind::Url => {
            let mut schema = text(format!(
                "^(?:https://{HOST}|http://(?:localhost|127\\.0\\.0\\.1))(?::[0-9]{{1,4}})?{PATH}$"
            ));
            schema["format"] = json!("uri");
            schema
        }
        FieldKind::Origins => json!({
            "type": "array", "minItems": 1, "maxItems": MAX_ORIGINS, "description": field.label,
            "items": {"type": "string", "pattern": origin_pattern()}
        }),
        FieldKind::Integer { min, max } => {
            json!({"type": "integer", "minimum": min, "maximum": max, "description": field.label})
        }
    }
}

/// An object of a provider's fields (`credentials` or `config`): each field's rule (`null`
/// also for an optional one, which it leaves unset), the required ones, nothing else.
fn integration_fields_schema(
    fields: &[crate::integrations::catalog::Field],
    nullable: bool,
) -> serde_json::Value {
    let properties: serde_json::Map<String, serde_json::Value> = fields
        .iter()
        .map(|f| {
            let mut schema = integration_field_schema(f);
            if !f.required {
                schema["type"] = serde_json::json!([schema["type"].clone(), "null"]);
            }
            (f.name.to_string(), schema)
        })
        .collect();
    let required: Vec<&str> = fields
        .iter()
        .filter(|f| f.required)
        .map(|f| f.name)
        .collect();
    let kind = if nullable {
        serde_json::json!(["object", "null"])
    } else {
        serde_json::json!("object")
    };
    serde_json::json!({"type": kind, "properties": properties, "required": required,
                       "additionalProperties": false})
}

/// `CreateIntegrationRequest` as a `oneOf` of one variant per provider, told apart by
/// `providerCode` (the discriminator): each with its credential and config fields, from the
/// catalogue the server checks them with.
fn integration_variants(doc: &mut OpenApi) -> Result<(), String> {
    use crate::integrations::catalog::PROVIDERS;
    use serde_json::json;
    let base = schema_json(doc, "CreateIntegrationRequest")?;
    let mut variants = Vec::new();
    for provider in PROVIDERS {
        let code = provider.code.as_str();
        let mut variant = base.clone();
        variant["description"] = json!(format!("{}: {}", provider.name, provider.description));
        variant["properties"]["providerCode"] = json!({"type": "string", "enum": [code]});
        variant["properties"]["credentials"] =
            integration_fields_schema(provider.credential_fields, false);
        let config_required = provider.config_fields.iter().any(|f| f.required);
        variant["properties"]["config"] =
            integration_fields_schema(provider.config_fields, !config_required);
        if config_required {
            variant["required"]
                .as_array_mut()
                .ok_or("no required list")?
                .push(json!("config"));
        }
        variants.push((code.to_string(), variant));
    }
    insert_tagged_one_of(
        doc,
        "CreateIntegrationRequest",
        "providerCode",
        &base,
        variants,
    )
}

/// Schema `name` of the document's components, as JSON.
fn schema_json(doc: &mut OpenApi, name: &str) -> Result<serde_json::Value, String> {
    let components = doc.components.get_or_insert_with(Default::default);
    let schema = components.schemas.get(name).ok_or(format!("no {name}"))?;
    serde_json::to_value(schema).map_err(|e| e.to_string())
}

/// Replaces schema `name` by a `oneOf` of `variants` (`(tag, schema)`, each registered as
/// the component `{name}_{tag}`), told apart by `property` (OpenAPI 3.1 § Discriminator
/// Object); `base` gives the description.
fn insert_tagged_one_of(
    doc: &mut OpenApi,
    name: &str,
    property: &str,
    base: &serde_json::Value,
    variants: Vec<(String, serde_json::Value)>,
) -> Result<(), String> {
    use serde_json::json;
    let components = doc.components.get_or_insert_with(Default::default);
    let mut refs = Vec::new();
    let mut mapping = serde_json::Map::new();
    for (tag, mut variant) in variants {
        let title = format!("{name}_{tag}");
        variant["title"] = json!(title);
        let schema: utoipa::openapi::schema::Object =
            serde_json::from_value(variant).map_err(|e| e.to_string())?;
        components
            .schemas
            .insert(title.clone(), RefOr::T(Schema::Object(schema)));
        let reference = format!("#/components/schemas/{title}");
        mapping.insert(tag, json!(reference));
        refs.push(json!({ "$ref": reference }));
    }
    let one_of = json!({
        "oneOf": refs,
        "discriminator": {"propertyName": property, "mapping": mapping},
        "description": base.get("description").cloned().unwrap_or_default(),
    });
    let schema: utoipa::openapi::schema::OneOf =
        serde_json::from_value(one_of).map_err(|e| e.to_string())?;
    components
        .schemas
        .insert(name.into(), RefOr::T(Schema::OneOf(schema)));
    Ok(())
}

/// The `config` of each tool type as [`crate::tools`]' `check_config` reads it, keyed by
/// type: `knowledge_search` and `web_fetch` take `{}` (or nothing); `http` the
/// [`crate::tools::http_action::HttpActionConfig`] fields and `secretHeaders`; `mcp`
/// `{integrationId, allowedTools?}`.
fn tool_configs() -> Vec<(&'static str, serde_json::Value)> {
    use crate::domain::ToolType;
    use crate::tools::{
        http_action::{MAX_TIMEOUT_MS, MAX_URL_CHARS},
        service::MAX_ALLOWED_TOOLS,
    };
    use serde_json::json;
    let empty = json!({"type": ["object", "null"], "additionalProperties": false,
        "description": "No settings: `{}`, `null` or absent"});
    let headers = |description: &str| {
        json!({"type": ["object", "null"], "additionalProperties": {"type": "string"},
               "description": description})
    };
    let http = json!({
        "type": "object", "required": ["method", "url", "parameters"], "additionalProperties": false,
        "properties": {
            "method": {"type": "string", "enum": ["GET", "POST", "PUT", "PATCH", "DELETE"]},
            "url": {"type": "string", "pattern": "^https?://", "maxLength": MAX_URL_CHARS,
                    "description": "Absolute http(s) URL; its path and query may hold `{name}` placeholders, each a property of `parameters`"},
            "parameters": {"type": "object", "description": "The JSON Schema (an object schema) of the arguments"},
            "headers": headers("Headers sent with every call (shown by reads)"),
            "secretHeaders": headers("Headers sent with every call, stored sealed (reads show their names only)"),
            "timeoutMs": {"type": ["integer", "null"], "minimum": 1, "maximum": MAX_TIMEOUT_MS},
        }
    });
    let mcp = json!({
        "type": "object", "required": ["integrationId"], "additionalProperties": false,
        "properties": {
            "integrationId": {"type": "string", "pattern": NOT_BLANK_PATTERN,
                              "description": "An MCP server integration of the caller"},
            "allowedTools": {"type": ["array", "null"], "maxItems": MAX_ALLOWED_TOOLS,
                             "items": {"type": "string", "minLength": 1, "maxLength": 128},
                             "description": "The MCP server's tools offered (all when absent)"},
        }
    });
    ToolType::ALL
        .into_iter()
        .map(|t| {
            let config = match t {
                ToolType::KnowledgeSearch | ToolType::WebFetch => empty.clone(),
                ToolType::Http => http.clone(),
                ToolType::Mcp => mcp.clone(),
            };
            (t.as_str(), config)
        })
        .collect()
}

/// `CreateToolRequest` as a `oneOf` of one variant per tool type, told apart by `type`
/// (the discriminator), each with its `config` (required for `http` and `mcp`, whose `name`
/// an `http` tool also requires); `UpdateToolRequest.config` is any of those configs (the
/// stored tool's type decides) or `null` (unchanged); `TestToolRequest.arguments` any JSON
/// value (`null` read as `{}`).
fn tool_variants(doc: &mut OpenApi) -> Result<(), String> {
    use serde_json::json;
    let configs = tool_configs();
    let base = schema_json(doc, "CreateToolRequest")?;
    let mut variants = Vec::new();
    for (code, config) in &configs {
        let mut variant = base.clone();
        variant["properties"]["type"] = json!({"type": "string", "enum": [code]});
        variant["properties"]["config"] = config.clone();
        let required = variant["required"]
            .as_array_mut()
            .ok_or("no required list")?;
        if !config["type"].is_array() {
            required.push(json!("config"));
        }
        if *code == crate::domain::ToolType::Http.as_str() {
            required.push(json!("name"));
            variant["properties"]["name"]["type"] = json!("string");
        }
        variants.push((code.to_string(), variant));
    }
    insert_tagged_one_of(doc, "CreateToolRequest", "type", &base, variants)?;

    // One config per distinct schema (the built-ins share theirs), plus `null`.
    let mut update: Vec<serde_json::Value> = Vec::new();
    for (_, config) in configs {
        if !update.contains(&config) {
            update.push(config);
        }
    }
    let update = json!({"anyOf": update,
        "description": "The tool's new config, of its type's shape; `null` or absent leaves it unchanged"});
    let update: utoipa::openapi::schema::AnyOf =
        serde_json::from_value(update).map_err(|e| e.to_string())?;
    *property(doc, "UpdateToolRequest", "config").ok_or("no UpdateToolRequest.config")? =
        Schema::AnyOf(update);

    let arguments =
        property(doc, "TestToolRequest", "arguments").ok_or("no TestToolRequest.arguments")?;
    *arguments = Schema::Object(
        utoipa::openapi::ObjectBuilder::new()
            .schema_type(utoipa::openapi::schema::SchemaType::AnyValue)
            .description(Some(
                "The arguments, as the model would give them: any JSON value (`null` or absent \
                 is `{}`), checked against the tool's own parameters",
            ))
            .build(),
    );
    Ok(())
}

/// The multipart body of `POST /api/agents/{agentId}/knowledge/file`: the one field `file`,
/// not empty (the upload refuses any other field, a body without it and an empty file).
fn upload_form(doc: &mut OpenApi) -> Result<(), String> {
    let body = doc
        .paths
        .paths
        .get_mut("/api/agents/{agentId}/knowledge/file")
        .and_then(|item| item.post.as_mut())
        .and_then(|operation| operation.request_body.as_mut())
        .ok_or("no request body")?;
    let content = body
        .content
        .get_mut("multipart/form-data")
        .ok_or("no multipart/form-data content")?;
    let form = serde_json::json!({
        "type": "object", "required": ["file"], "additionalProperties": false,
        "properties": {"file": {"type": "string", "format": "binary", "minLength": 1,
                                "description": "The document's bytes (not empty)"}}
    });
    content.schema = Some(RefOr::T(Schema::Object(
        serde_json::from_value(form).map_err(|e| e.to_string())?,
    )));
    body.required = Some(utoipa::openapi::Required::True);
    Ok(())
}

/// `ChatCompletionRequest.stop` as [`crate::http::openai::wire::Stop`] parses it and
/// `check` refuses: one non-empty sequence, or a list of at most
/// [`crate::http::openai::wire::MAX_STOP_SEQUENCES`] non-empty ones; `null` as absent.
fn stop_schema() -> Result<Schema, String> {
    use crate::http::openai::wire::MAX_STOP_SEQUENCES;
    let stop = serde_json::json!({
        "oneOf": [
            {"type": "null"},
            {"type": "string", "minLength": 1},
            {"type": "array", "maxItems": MAX_STOP_SEQUENCES,
             "items": {"type": "string", "minLength": 1}},
        ],
        "description": "A stop sequence or up to 4 of them, none empty",
    });
    Ok(Schema::OneOf(
        serde_json::from_value(stop).map_err(|e| e.to_string())?,
    ))
}

/// Keywords added to one property of a component schema: `(schema, field, keywords)`.
type Keywords = (&'static str, &'static str, serde_json::Value);

/// The rules of request fields beyond their lengths: patterns, formats, enums and bounds,
/// each from the constant, list or validator the server checks the field with.
fn keyword_rules() -> Vec<Keywords> {
    use crate::domain::{EventType, ToolType};
    use crate::knowledge::crawl::{
        MAX_CRAWL_DEPTH, MAX_PAGES_LIMIT, MAX_PATTERNS, MAX_PATTERN_LEN,
    };
    use serde_json::json;
    let name = json!({ "pattern": NAME_PATTERN });
    let email = json!({"format": "email"});
    let countries: Vec<serde_json::Value> = [serde_json::Value::Null, json!("")]
        .into_iter()
        .chain(isocountry::CountryCode::iter().map(|c| json!(c.alpha2())))
        .collect();
    let url = json!({"format": "uri", "pattern": http_url_pattern()});
    let globs = json!({"maxItems": MAX_PATTERNS, "items": {
        "minLength": 1, "maxLength": MAX_PATTERN_LEN, "pattern": GLOB_PATTERN}});
    vec![
        ("SignupRequest", "name", name.clone()),
        ("SignupRequest", "email", email.clone()),
        (
            "SignupRequest",
            "company",
            json!({ "pattern": OPTIONAL_NAME_PATTERN }),
        ),
        ("SignupRequest", "country", json!({ "enum": countries })),
        (
            "SignupRequest",
            "phone",
            json!({ "pattern": PHONE_PATTERN }),
        ),
        ("LoginRequest", "email", email.clone()),
        ("EmailRequest", "email", email),
        ("CreateApiKeyRequest", "name", name.clone()),
        (
            "CreateApiKeyRequest",
            "scopes",
            json!({"items": {"enum": app::api::SCOPES}}),
        ),
        (
            "CreateApiKeyRequest",
            "expiresAt",
            json!({"format": "date-time"}),
        ),
        ("CreateAgentRequest", "name", name.clone()),
        ("UpdateAgentRequest", "name", name.clone()),
        ("CreateIntegrationRequest", "name", name.clone()),
        (
            "CreateIntegrationRequest",
            "providerCode",
            json!({"enum": ProviderCode::ALL.map(ProviderCode::as_str)}),
        ),
        ("UpdateIntegrationRequest", "name", name),
        (
            "ChatRequest",
            "message",
            json!({ "pattern": NOT_BLANK_PATTERN }),
        ),
        (
            "WidgetChatRequest",
            "message",
            json!({ "pattern": NOT_BLANK_PATTERN }),
        ),
        (
            "FeedbackRequest",
            "rating",
            json!({"enum": [Rating::Up.as_str(), Rating::Down.as_str()]}),
        ),
        (
            "WidgetFeedbackRequest",
            "rating",
            json!({"enum": [Rating::Up.as_str(), Rating::Down.as_str()]}),
        ),
        (
            "WidgetChatRequest",
            "visitorId",
            json!({ "pattern": VISITOR_ID_PATTERN }),
        ),
        (
            "WidgetFeedbackRequest",
            "visitorId",
            json!({ "pattern": VISITOR_ID_PATTERN }),
        ),
        ("AddUrlRequest", "url", url.clone()),
        (
            "CrawlOptions",
            "crawlDepth",
            json!({ "maximum": MAX_CRAWL_DEPTH }),
        ),
        (
            "CrawlOptions",
            "maxPages",
            json!({"minimum": 1, "maximum": MAX_PAGES_LIMIT}),
        ),
        ("CrawlOptions", "includePatterns", globs.clone()),
        ("CrawlOptions", "excludePatterns", globs),
        ("CreateWebhookRequest", "url", url),
        (
            "CreateWebhookRequest",
            "events",
            json!({"items": {"enum": EventType::ALL.map(EventType::as_str)}}),
        ),
        (
            "CreateToolRequest",
            "type",
            json!({"enum": ToolType::ALL.map(ToolType::as_str)}),
        ),
        (
            "CreateToolRequest",
            "name",
            json!({ "pattern": TOOL_NAME_PATTERN }),
        ),
        (
            "UpdateToolRequest",
            "name",
            json!({ "pattern": TOOL_NAME_PATTERN }),
        ),
        (
            "CreateToolRequest",
            "description",
            json!({ "pattern": TOOL_DESCRIPTION_PATTERN }),
        ),
        (
            "UpdateToolRequest",
            "description",
            json!({ "pattern": TOOL_DESCRIPTION_PATTERN }),
        ),
    ]
}

/// Query parameters' rules: `(path, parameter, keywords)`, from the constants the handlers
/// check them with.
fn query_rules() -> Vec<Keywords> {
    use crate::channels::widget::{VISITOR_ID_MAX, VISITOR_ID_MIN};
    use crate::chat::history::{MAX_DAYS, MAX_PAGE};
    use serde_json::json;
    let page = json!({"minimum": 1, "maximum": MAX_PAGE});
    let visitor = json!({"minLength": VISITOR_ID_MIN, "maxLength": VISITOR_ID_MAX,
                         "pattern": VISITOR_ID_PATTERN});
    vec![
        ("/api/agents/{agentId}/conversations", "limit", page.clone()),
        (
            "/api/agents/{agentId}/conversations/{threadId}/messages",
            "limit",
            page,
        ),
        (
            "/api/usage",
            "days",
            json!({"minimum": 1, "maximum": MAX_DAYS}),
        ),
        (
            "/api/widget/{publicId}/messages",
            "visitorId",
            visitor.clone(),
        ),
        (
            "/api/widget/{publicId}/messages/{messageId}/feedback",
            "visitorId",
            visitor,
        ),
    ]
}

/// Merges `keywords` into `schema` (JSON Schema objects merge key by key).
fn merge(schema: &mut serde_json::Value, keywords: &serde_json::Value) {
    match (schema, keywords) {
        (serde_json::Value::Object(target), serde_json::Value::Object(add)) => {
            for (key, value) in add {
                match target.get_mut(key) {
                    Some(existing) if existing.is_object() && value.is_object() => {
                        merge(existing, value)
                    }
                    _ => {
                        target.insert(key.clone(), value.clone());
                    }
                }
            }
        }
        (schema, keywords) => *schema = keywords.clone(),
    }
}

/// Adds `keywords` to `schema`, through its JSON form; the schema stays of its kind.
fn add_keywords(schema: &mut Schema, keywords: &serde_json::Value) -> Result<(), String> {
    fn read<T: serde::de::DeserializeOwned>(json: serde_json::Value) -> Result<T, String> {
        serde_json::from_value(json).map_err(|e| e.to_string())
    }
    let mut json = serde_json::to_value(&*schema).map_err(|e| e.to_string())?;
    merge(&mut json, keywords);
    *schema = match schema {
        Schema::Object(_) => Schema::Object(read(json)?),
        Schema::Array(_) => Schema::Array(read(json)?),
        Schema::OneOf(_) => Schema::OneOf(read(json)?),
        Schema::AllOf(_) => Schema::AllOf(read(json)?),
        Schema::AnyOf(_) => Schema::AnyOf(read(json)?),
        _ => return Err("a schema of another kind".into()),
    };
    Ok(())
}

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

/// Adds `keywords` to the schema of the query parameter `name` of every operation on
/// `path`.
fn query_parameter(
    doc: &mut OpenApi,
    path: &str,
    name: &str,
    keywords: &serde_json::Value,
) -> Result<(), String> {
    let item = doc.paths.paths.get_mut(path).ok_or("no such path")?;
    let mut found = false;
    for operation in [
        &mut item.get,
        &mut item.post,
        &mut item.put,
        &mut item.delete,
    ]
    .into_iter()
    .flatten()
    {
        for parameter in operation.parameters.iter_mut().flatten() {
            if parameter.name == name {
                if let Some(RefOr::T(schema)) = parameter.schema.as_mut() {
                    add_keywords(schema, keywords)?;
                    found = true;
                }
            }
        }
    }
    if found {
        Ok(())
    } else {
        Err("no such parameter".into())
    }
}

/// Writes the rules of request fields into `doc`'s schemas: lengths (`minLength` /
/// `maxLength`, `minItems`; message limits from `config`), patterns, formats, enums, the
/// bounds of query parameters, and one variant per integration provider (JSON Schema
/// 2020-12 § 6). The bodies whose types refuse unknown fields (`#[serde(deny_unknown_fields)]`)
/// already say `additionalProperties: false`. Returns the rules that found no place: empty
/// when all applied.
pub fn apply_input_rules(doc: &mut OpenApi, config: &ChatConfig) -> Vec<String> {
    let mut missing = Vec::new();
    for rule in lengths(config) {
        match property(doc, rule.schema, rule.field) {
            Some(Schema::Object(string)) => {
                if rule.min > 0 {
                    string.min_length = Some(rule.min);
                }
                string.max_length = rule.max;
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
    for (schema, field, keywords) in keyword_rules() {
        let applied = property(doc, schema, field)
            .ok_or_else(|| "no such field".to_string())
            .and_then(|property| add_keywords(property, &keywords));
        if let Err(e) = applied {
            missing.push(format!("{schema}.{field} ({e})"));
        }
    }
    for (path, name, keywords) in query_rules() {
        if let Err(e) = query_parameter(doc, path, name, &keywords) {
            missing.push(format!("{path}?{name} ({e})"));
        }
    }
    // Last: the variants copy the rules above.
    if let Err(e) = integration_variants(doc) {
        missing.push(format!("integration variants ({e})"));
    }
    if let Err(e) = tool_variants(doc) {
        missing.push(format!("tool variants ({e})"));
    }
    if let Err(e) = upload_form(doc) {
        missing.push(format!("upload form ({e})"));
    }
    let stop = stop_schema().and_then(|schema| {
        let stop = property(doc, "ChatCompletionRequest", "stop").ok_or("no such field")?;
        *stop = schema;
        Ok(())
    });
    if let Err(e) = stop {
        missing.push(format!("ChatCompletionRequest.stop ({e})"));
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
    components(
        responses(BadRequest, PayloadTooLarge, UnsupportedMediaType, TooManyRequests),
        // The JSON of stream events, named by their `contentSchema`.
        schemas(
            app::api::ChatStreamFrame,
            crate::http::openai::wire::ChatCompletionStreamFrame
        )
    ),
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

/// The schema of a query parameter that takes one of `values`, for `#[param(schema_with)]`.
pub fn one_of(values: &[&str]) -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(values.iter().copied()))
        .build()
}

/// The schema of a day parameter, `YYYY-MM-DD` (OpenAPI `format: date`, RFC 3339
/// `full-date`), for `#[param(schema_with)]`.
pub fn day() -> utoipa::openapi::schema::Object {
    use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
    ObjectBuilder::new()
        .schema_type(Type::String)
        .format(Some(SchemaFormat::KnownFormat(KnownFormat::Date)))
        .build()
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

    /// Whether `text` matches `pattern` as a JSON Schema validator reads it (ECMA-262).
    fn matches(pattern: &str, text: &str) -> bool {
        jsonschema::validator_for(&serde_json::json!({ "pattern": pattern }))
            .unwrap()
            .is_valid(&serde_json::json!(text))
    }

    /// Texts at the edges of the text rules: controls (C0, C1), Unicode spaces that
    /// trimming removes and a few it keeps.
    const SAMPLES: &[&str] = &[
        "",
        " ",
        "a",
        " a ",
        "Ada Lovelace",
        "\u{85}",
        "a\u{85}",
        "\u{9F}b",
        "\u{A0}",
        "\u{A0}x",
        "\u{3000}",
        "\u{2028}",
        "\u{FEFF}",
        "\t",
        "a\tb",
        "a\nb",
        "\u{7F}",
        "é",
        "日本",
        "+49 (30) 1234-567",
        "1234567",
        "123456",
        "1234567890123456",
        "+",
        "12.34.56.78",
        "abc_DEF-9",
        "a b",
        "x\n",
    ];

    #[test]
    fn the_text_patterns_accept_only_what_the_validators_accept() {
        for text in SAMPLES {
            if matches(NAME_PATTERN, text) {
                assert!(
                    crate::domain::parse_name("name", text, 1000).is_ok(),
                    "name {text:?}"
                );
            }
            if matches(OPTIONAL_NAME_PATTERN, text) {
                assert!(
                    crate::domain::parse_optional("company", Some(text), 1000).is_ok(),
                    "company {text:?}"
                );
            }
            if matches(PHONE_PATTERN, text) && !text.trim().is_empty() {
                assert!(crate::domain::parse_phone(text).is_ok(), "phone {text:?}");
            }
            assert_eq!(
                matches(NOT_BLANK_PATTERN, text),
                !text.trim().is_empty(),
                "not blank {text:?}"
            );
        }
        for name in ["a", " a ", "Ada Lovelace", "é", "\u{A0}x", "\u{FEFF}"] {
            assert!(matches(NAME_PATTERN, name), "{name:?}");
        }
        assert!(matches(PHONE_PATTERN, "+49 (30) 1234-567"));
        assert!(!matches(PHONE_PATTERN, "123456"));
        assert!(!matches(PHONE_PATTERN, "1234567890123456"));
        assert!(matches(&http_url_pattern(), "https://example.com/a/b"));
        assert!(!matches(&http_url_pattern(), "ftp://example.com/"));
        assert!(!matches(&http_url_pattern(), "https://1.2.3.4/"));
    }
}
