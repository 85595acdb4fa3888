//! The OpenAI Chat Completions wire format as AgentChat speaks it: the request body of
//! `POST /api/openai/v1/chat/completions` and its rules ([`ChatCompletionRequest::check`]),
//! and the answers: `chat.completion`, `chat.completion.chunk`, `model` and `list` objects.
//! Field names are OpenAI's (snake_case); AgentChat's own additions travel in one extension
//! field, `agentchat`, whose fields are camelCase like the rest of the API. Reference:
//! OpenAI's API reference, "Create chat completion" and "Models"
//! (<https://platform.openai.com/docs/api-reference/chat>).

use app::api::{Source, TokensUsed};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use super::error::OpenAiError;
use crate::{
    chat::ClientTools,
    llm::{FinishReason, Role, Sampling, ToolCall, ToolChoice, ToolExchange, ToolSpec, Turn},
};

/// Most stop sequences in one request (OpenAI's limit).
pub const MAX_STOP_SEQUENCES: usize = 4;
/// Most tools in one request (OpenAI's limit, "Create chat completion", `tools`:
/// <https://platform.openai.com/docs/api-reference/chat/create#chat-create-tools>).
pub const MAX_TOOLS: usize = 128;
/// Longest tool name, in characters (OpenAI's `function.name`: `^[a-zA-Z0-9_-]{1,64}$`).
pub const MAX_TOOL_NAME_CHARS: usize = 64;
/// Longest `user` value passed through to the provider, in characters.
pub const MAX_USER_CHARS: usize = 256;

/// The body of `POST /chat/completions`. Fields that change the shape of the answer in
/// ways agents do not support (`n` > 1, the deprecated `functions`, non-text output) are
/// refused with 400; `presence_penalty`, `frequency_penalty`, `logit_bias`, `seed`,
/// `metadata`, `store`, `service_tier`, `parallel_tool_calls`, `reasoning_effort` and any
/// field not listed here are accepted and ignored, so that the SDKs' defaults never break a
/// request.
///
/// With `tools`, the caller runs the tools: the agent's own are not offered, and a reply
/// that calls tools ends with `finish_reason: "tool_calls"` and `message.tool_calls`; the
/// caller sends the results back as `tool` messages (OpenAI's "Function calling" guide:
/// <https://platform.openai.com/docs/guides/function-calling>).
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct ChatCompletionRequest {
    /// The agent's id (as `GET /models` lists it).
    #[serde(default)]
    #[schema(min_length = 1, required = true)]
    pub model: String,
    /// The conversation, oldest first: `system` (or `developer`), `user` and `assistant`
    /// messages; the last non-system message is the user's new turn.
    #[serde(default)]
    #[schema(min_items = 1, required = true)]
    pub messages: Vec<ChatCompletionMessage>,
    /// Answer with server-sent `chat.completion.chunk` events.
    #[serde(default)]
    pub stream: Option<bool>,
    /// With `stream: true` only: `{"include_usage": true}` adds a usage chunk.
    #[serde(default)]
    pub stream_options: Option<ChatCompletionStreamOptions>,
    /// 0–2.
    #[serde(default)]
    pub temperature: Option<f64>,
    /// 0–1.
    #[serde(default)]
    pub top_p: Option<f64>,
    /// Most tokens of the reply, at least 1 (`max_completion_tokens` wins when both are
    /// given).
    #[serde(default)]
    #[schema(minimum = 1)]
    pub max_tokens: Option<u32>,
    /// Most tokens of the reply, at least 1.
    #[serde(default)]
    #[schema(minimum = 1)]
    pub max_completion_tokens: Option<u32>,
    /// A stop sequence or up to 4 of them.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub stop: Option<Stop>,
    /// The end user, passed to the provider (OpenAI `user`, Anthropic `metadata.user_id`);
    /// at most 256 characters.
    #[serde(default)]
    pub user: Option<String>,
    /// Number of choices: only 1.
    #[serde(default)]
    #[schema(minimum = 1, maximum = 1)]
    pub n: Option<u32>,
    /// Tools the caller defines and runs, at most 128: `{"type": "function", "function":
    /// {"name", "description"?, "parameters"?, "strict"?}}`, names matching
    /// `^[a-zA-Z0-9_-]{1,64}$` and unique, `parameters` a JSON Schema object (an empty
    /// object schema when absent). When given (and not empty), the agent's own tools are
    /// not offered: the model's calls are answered to the caller. `strict` is accepted and
    /// not passed on.
    #[serde(default)]
    #[schema(value_type = Option<Vec<ChatCompletionTool>>)]
    pub tools: Option<Vec<Value>>,
    /// Refused unless empty: the deprecated form of `tools`; send `tools`.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub functions: Option<Vec<Value>>,
    /// `"auto"` (the default), `"none"`, `"required"`, or `{"type": "function", "function":
    /// {"name"}}` naming one of `tools`. Without `tools`, only `"none"` and `"auto"`, which
    /// are then ignored.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub tool_choice: Option<Value>,
    /// `"none"` or `"auto"` only (the deprecated form of `tool_choice`).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub function_call: Option<Value>,
    /// Accepted and ignored: whether the model may call several tools at once is the
    /// provider's default.
    #[serde(default)]
    pub parallel_tool_calls: Option<bool>,
    /// `{"type": "text"}` only.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub response_format: Option<Value>,
    /// `false` only.
    #[serde(default)]
    pub logprobs: Option<bool>,
    /// Refused: log probabilities are not available.
    #[serde(default)]
    pub top_logprobs: Option<u32>,
    /// `["text"]` only.
    #[serde(default)]
    pub modalities: Option<Vec<String>>,
    /// Refused: replies are text.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub audio: Option<Value>,
    /// Accepted and ignored (−2 to 2).
    #[serde(default)]
    pub presence_penalty: Option<f64>,
    /// Accepted and ignored (−2 to 2).
    #[serde(default)]
    pub frequency_penalty: Option<f64>,
    /// Accepted and ignored.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub logit_bias: Option<Value>,
    /// Accepted and ignored.
    #[serde(default)]
    pub seed: Option<i64>,
}

/// `stream_options`.
#[derive(Debug, Default, Deserialize, ToSchema)]
pub struct ChatCompletionStreamOptions {
    /// Send a last chunk with the usage of the whole request (and `choices: []`).
    #[serde(default)]
    pub include_usage: Option<bool>,
}

/// `stop`: one sequence or a list.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Stop {
    /// One stop sequence.
    One(String),
    /// Up to [`MAX_STOP_SEQUENCES`].
    Many(Vec<String>),
}

/// A tool of `tools` (OpenAI's "Create chat completion", `tools`:
/// <https://platform.openai.com/docs/api-reference/chat/create#chat-create-tools>).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ChatCompletionTool {
    /// `function`.
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionDefinition,
}

/// The function of a [`ChatCompletionTool`].
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct FunctionDefinition {
    /// `^[a-zA-Z0-9_-]{1,64}$`, unique among the request's tools.
    #[schema(pattern = "^[a-zA-Z0-9_-]{1,64}$")]
    pub name: String,
    /// What the function does, for the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The arguments as a JSON Schema object; absent for a function without arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<Object>)]
    pub parameters: Option<Value>,
    /// Accepted and not passed on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub strict: Option<bool>,
}

/// One message of `messages`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatCompletionMessage {
    /// `system`, `developer`, `user`, `assistant` or `tool` (`function` is refused).
    #[schema(min_length = 1)]
    pub role: String,
    /// A string, or an array of `{"type": "text", "text": ...}` parts (image, audio and
    /// file parts are refused). May be null in an assistant message with `tool_calls`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub content: Option<Content>,
    /// Accepted and ignored.
    #[serde(default)]
    pub name: Option<String>,
    /// An assistant message's calls of the request's tools: `[{"id", "type": "function",
    /// "function": {"name", "arguments"}}]`, `arguments` the JSON text the model wrote. Each
    /// must be answered by a `tool` message after it.
    #[serde(default)]
    #[schema(value_type = Option<Vec<ChatCompletionMessageToolCall>>)]
    pub tool_calls: Option<Vec<Value>>,
    /// A `tool` message's answer to: the `id` of a call of the assistant message before it.
    #[serde(default)]
    pub tool_call_id: Option<String>,
    /// Refused: the deprecated form of `tool_calls`.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub function_call: Option<Value>,
}

/// A message's `content`.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
pub enum Content {
    /// Plain text.
    Text(String),
    /// Content parts.
    Parts(Vec<ContentPart>),
}

/// One part of an array `content`.
#[derive(Debug, Deserialize)]
pub struct ContentPart {
    /// `text`; `image_url`, `input_audio`, `file` and others are refused.
    #[serde(rename = "type")]
    pub kind: String,
    /// The text of a `text` part.
    #[serde(default)]
    pub text: Option<String>,
}

/// What a request asks of the agent, once checked ([`ChatCompletionRequest::check`]).
#[derive(Debug, Clone)]
pub struct Checked {
    /// The agent id.
    pub agent_id: String,
    /// The caller's `system` and `developer` messages, in order, joined by blank lines;
    /// empty when none.
    pub instructions: String,
    /// The earlier `user` and `assistant` turns (with the client tool calls they made and
    /// their results), oldest first.
    pub history: Vec<Turn>,
    /// The last `user` message: the new turn.
    pub message: String,
    /// The turns after the last `user` message when the conversation ends with `tool`
    /// results: the assistant's calls with their results (and any text between them).
    pub after: Vec<Turn>,
    /// The caller's tools and tool choice; `None` without `tools`.
    pub client_tools: Option<ClientTools>,
    /// Sampling settings for the provider.
    pub sampling: Sampling,
    /// Whether to stream.
    pub stream: bool,
    /// Whether a stream ends with a usage chunk.
    pub include_usage: bool,
}

fn invalid(param: impl Into<String>, message: impl Into<String>) -> OpenAiError {
    OpenAiError::invalid(message, Some(param.into()))
}

fn unsupported(param: impl Into<String>, message: impl Into<String>) -> OpenAiError {
    OpenAiError::invalid(message, Some(param.into())).with_code("unsupported_parameter")
}

fn in_range(param: &str, value: Option<f64>, min: f64, max: f64) -> Result<(), OpenAiError> {
    match value {
        Some(v) if !(min..=max).contains(&v) => Err(invalid(
            param,
            format!("`{param}` must be between {min} and {max}; it is {v}"),
        )),
        _ => Ok(()),
    }
}

/// Whether a tool-choice value leaves the model free not to call a tool.
fn no_tool_needed(choice: &Option<Value>) -> bool {
    match choice {
        None | Some(Value::Null) => true,
        Some(Value::String(s)) => s == "none" || s == "auto",
        Some(_) => false,
    }
}

/// Whether `name` may name a tool: `^[a-zA-Z0-9_-]{1,64}$`.
pub fn valid_tool_name(name: &str) -> bool {
    (1..=MAX_TOOL_NAME_CHARS).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// The tools of `tools`, checked: at most [`MAX_TOOLS`], each `{"type": "function",
/// "function": {"name", "description"?, "parameters"?, "strict"?}}` with a valid, unique
/// name and an object `parameters`.
fn tool_specs(tools: &[Value]) -> Result<Vec<ToolSpec>, OpenAiError> {
    if tools.len() > MAX_TOOLS {
        return Err(invalid(
            "tools",
            format!(
                "`tools` may hold at most {MAX_TOOLS} tools; it has {}",
                tools.len()
            ),
        ));
    }
    let mut specs: Vec<ToolSpec> = Vec::with_capacity(tools.len());
    for (i, tool) in tools.iter().enumerate() {
        let at = format!("tools[{i}]");
        let Some(tool) = tool.as_object() else {
            return Err(invalid(at, "a tool must be an object"));
        };
        match tool.get("type").and_then(Value::as_str) {
            Some("function") => {}
            Some(other) => {
                return Err(unsupported(
                    format!("{at}.type"),
                    format!("Tools of type `{other}` are not supported: use `function`"),
                ))
            }
            None => return Err(invalid(format!("{at}.type"), "`type` must be `function`")),
        }
        let Some(function) = tool.get("function").and_then(Value::as_object) else {
            return Err(invalid(
                format!("{at}.function"),
                "`function` must be an object with a `name`",
            ));
        };
        let name = function.get("name").and_then(Value::as_str).unwrap_or("");
        if !valid_tool_name(name) {
            return Err(invalid(
                format!("{at}.function.name"),
                format!(
                    "Invalid tool name `{name}`: it must match ^[a-zA-Z0-9_-]{{1,64}}$ (letters, digits, `_` and `-`, at most 64)"
                ),
            ));
        }
        if specs.iter().any(|s| s.name == name) {
            return Err(invalid(
                format!("{at}.function.name"),
                format!("Tool names must be unique: `{name}` is given twice"),
            ));
        }
        let description = match function.get("description") {
            None | Some(Value::Null) => String::new(),
            Some(Value::String(d)) => d.clone(),
            Some(_) => {
                return Err(invalid(
                    format!("{at}.function.description"),
                    "`description` must be a string",
                ))
            }
        };
        let parameters = match function.get("parameters") {
            None | Some(Value::Null) => serde_json::json!({"type": "object", "properties": {}}),
            Some(p @ Value::Object(_)) => p.clone(),
            Some(_) => {
                return Err(invalid(
                    format!("{at}.function.parameters"),
                    "`parameters` must be a JSON Schema object",
                ))
            }
        };
        if function
            .get("strict")
            .is_some_and(|s| !s.is_null() && !s.is_boolean())
        {
            return Err(invalid(
                format!("{at}.function.strict"),
                "`strict` must be a boolean",
            ));
        }
        specs.push(ToolSpec {
            name: name.to_string(),
            description,
            parameters,
        });
    }
    Ok(specs)
}

/// `tool_choice` for the request's `specs`: `"auto"` (also when absent), `"none"`,
/// `"required"`, or `{"type": "function", "function": {"name"}}` naming one of them.
fn tool_choice(choice: Option<&Value>, specs: &[ToolSpec]) -> Result<ToolChoice, OpenAiError> {
    let refused = |message: String| Err(invalid("tool_choice", message));
    match choice {
        None | Some(Value::Null) => Ok(ToolChoice::Auto),
        Some(Value::String(mode)) => match mode.as_str() {
            "auto" => Ok(ToolChoice::Auto),
            "none" => Ok(ToolChoice::None),
            "required" => Ok(ToolChoice::Required),
            other => refused(format!(
                "Invalid `tool_choice` `{other}`: use \"none\", \"auto\", \"required\" or {{\"type\": \"function\", \"function\": {{\"name\"}}}}"
            )),
        },
        Some(Value::Object(named)) => {
            let name = named.get("function").and_then(|f| f.get("name")).and_then(Value::as_str);
            match (named.get("type").and_then(Value::as_str), name) {
                (Some("function"), Some(name)) if specs.iter().any(|s| s.name == name) => {
                    Ok(ToolChoice::Named(name.to_string()))
                }
                (Some("function"), Some(name)) => refused(format!(
                    "`tool_choice` names the function `{name}`, which is not one of `tools`"
                )),
                _ => refused(
                    "An object `tool_choice` must be {\"type\": \"function\", \"function\": {\"name\"}}"
                        .to_string(),
                ),
            }
        }
        Some(_) => refused("`tool_choice` must be a string or an object".to_string()),
    }
}

/// The calls of an assistant message's `tool_calls` (at `messages[i]`), checked: each
/// `{"id", "type": "function", "function": {"name", "arguments"}}`, `arguments` a string.
fn message_tool_calls(calls: &[Value], at: &str) -> Result<Vec<ToolCall>, OpenAiError> {
    calls
        .iter()
        .enumerate()
        .map(|(j, call)| {
            let at = format!("{at}.tool_calls[{j}]");
            let id = call.get("id").and_then(Value::as_str).unwrap_or("");
            if id.is_empty() {
                return Err(invalid(format!("{at}.id"), "a tool call needs its `id`"));
            }
            if call.get("type").and_then(Value::as_str) != Some("function") {
                return Err(invalid(
                    format!("{at}.type"),
                    "a tool call's `type` must be `function`",
                ));
            }
            let name = call
                .pointer("/function/name")
                .and_then(Value::as_str)
                .unwrap_or("");
            if name.is_empty() {
                return Err(invalid(
                    format!("{at}.function.name"),
                    "a tool call needs its `function.name`",
                ));
            }
            let Some(arguments) = call.pointer("/function/arguments").and_then(Value::as_str)
            else {
                return Err(invalid(
                    format!("{at}.function.arguments"),
                    "a tool call's `function.arguments` must be a string (the arguments' JSON text)",
                ));
            };
            Ok(ToolCall {
                id: id.to_string(),
                name: name.to_string(),
                arguments: arguments.to_string(),
            })
        })
        .collect()
}

/// The text of a message's content, or why it is refused.
fn text_of(content: &Content, at: &str) -> Result<String, OpenAiError> {
    match content {
        Content::Text(text) => Ok(text.clone()),
        Content::Parts(parts) => {
            let mut text = String::new();
            for (j, part) in parts.iter().enumerate() {
                let param = format!("{at}.content[{j}]");
                match part.kind.as_str() {
                    "text" => {
                        let Some(piece) = &part.text else {
                            return Err(invalid(
                                param,
                                "a `text` content part needs a `text` string",
                            ));
                        };
                        if !text.is_empty() {
                            text.push('\n');
                        }
                        text.push_str(piece);
                    }
                    "image_url" | "input_image" | "image" => {
                        return Err(unsupported(
                            param,
                            "Image inputs are not supported: AgentChat agents read text only",
                        ))
                    }
                    other => {
                        return Err(unsupported(
                            param,
                            format!(
                                "Content parts of type `{other}` are not supported: send `text` parts or a string"
                            ),
                        ))
                    }
                }
            }
            Ok(text)
        }
    }
}

impl ChatCompletionRequest {
    /// Checks the request against the rules of docs/api.md § OpenAI-compatible API and
    /// returns what it asks.
    ///
    /// Errors (400, `invalid_request_error`, `param` naming the field): an empty `model` or
    /// `messages`; a `tool` or `function` message, an assistant message with tool calls, a
    /// role other than `system`, `developer`, `user` or `assistant`; a message without
    /// content (assistant replies may be empty strings); image, audio or file content parts
    /// (code `unsupported_parameter`); a last non-system message that is not the user's, or
    /// is blank; `temperature` outside 0–2, `top_p` outside 0–1, `presence_penalty` or
    /// `frequency_penalty` outside −2–2, a token limit of 0; more than 4 stop sequences or
    /// an empty one; a `user` over 256 characters; `n` other than 1; tools, functions or a
    /// tool choice that requires one; a `response_format` other than text; `logprobs`,
    /// `top_logprobs`, audio output; `stream_options` without `stream: true`.
    pub fn check(self) -> Result<Checked, OpenAiError> {
        if self.model.trim().is_empty() {
            return Err(invalid(
                "model",
                "`model` must be an agent id; see GET /models",
            ));
        }
        if self.messages.is_empty() {
            return Err(invalid("messages", "`messages` must be a non-empty array"));
        }
        if self.n.is_some_and(|n| n != 1) {
            return Err(unsupported(
                "n",
                "Only `n: 1` is supported: an agent gives one reply",
            ));
        }
        if self.functions.as_ref().is_some_and(|l| !l.is_empty()) {
            return Err(unsupported(
                "functions",
                "`functions` (deprecated by OpenAI) is not supported: send `tools`",
            ));
        }
        if !no_tool_needed(&self.function_call) {
            return Err(unsupported(
                "function_call",
                "`function_call` (deprecated by OpenAI) may only be \"none\" or \"auto\": send `tools` and `tool_choice`",
            ));
        }
        let client_tools = match self.tools.as_deref() {
            Some(tools) if !tools.is_empty() => {
                let specs = tool_specs(tools)?;
                let choice = tool_choice(self.tool_choice.as_ref(), &specs)?;
                Some(ClientTools { specs, choice })
            }
            _ => {
                if !no_tool_needed(&self.tool_choice) {
                    return Err(invalid(
                        "tool_choice",
                        "`tool_choice` may only be \"none\" or \"auto\" without `tools`",
                    ));
                }
                None
            }
        };
        match &self.response_format {
            None | Some(Value::Null) => {}
            Some(format) if format.get("type").and_then(Value::as_str) == Some("text") => {}
            Some(_) => {
                return Err(unsupported(
                    "response_format",
                    "Only `{\"type\": \"text\"}` is supported as `response_format`",
                ))
            }
        }
        if self.logprobs == Some(true) || self.top_logprobs.is_some() {
            let param = if self.logprobs == Some(true) {
                "logprobs"
            } else {
                "top_logprobs"
            };
            return Err(unsupported(param, "Log probabilities are not available"));
        }
        if self
            .modalities
            .as_ref()
            .is_some_and(|m| m.iter().any(|m| m != "text"))
            || self.audio.as_ref().is_some_and(|a| !a.is_null())
        {
            let param = if self.audio.as_ref().is_some_and(|a| !a.is_null()) {
                "audio"
            } else {
                "modalities"
            };
            return Err(unsupported(param, "Agents reply with text only"));
        }
        in_range("temperature", self.temperature, 0.0, 2.0)?;
        in_range("top_p", self.top_p, 0.0, 1.0)?;
        in_range("presence_penalty", self.presence_penalty, -2.0, 2.0)?;
        in_range("frequency_penalty", self.frequency_penalty, -2.0, 2.0)?;
        for (param, value) in [
            ("max_tokens", self.max_tokens),
            ("max_completion_tokens", self.max_completion_tokens),
        ] {
            if value == Some(0) {
                return Err(invalid(param, format!("`{param}` must be at least 1")));
            }
        }
        let stop = match self.stop {
            None => Vec::new(),
            Some(Stop::One(s)) => vec![s],
            Some(Stop::Many(list)) => list,
        };
        if stop.len() > MAX_STOP_SEQUENCES {
            return Err(invalid(
                "stop",
                format!("`stop` may hold at most {MAX_STOP_SEQUENCES} sequences"),
            ));
        }
        if stop.iter().any(String::is_empty) {
            return Err(invalid("stop", "stop sequences must not be empty"));
        }
        if self
            .user
            .as_ref()
            .is_some_and(|u| u.chars().count() > MAX_USER_CHARS)
        {
            return Err(invalid(
                "user",
                format!("`user` must be at most {MAX_USER_CHARS} characters"),
            ));
        }
        let stream = self.stream.unwrap_or(false);
        if self.stream_options.is_some() && !stream {
            return Err(invalid(
                "stream_options",
                "The 'stream_options' parameter is only allowed when 'stream' is enabled.",
            ));
        }
        let include_usage = self
            .stream_options
            .as_ref()
            .and_then(|o| o.include_usage)
            .unwrap_or(false);

        let Conversation {
            instructions,
            mut turns,
            positions,
        } = conversation(&self.messages)?;
        if client_tools.is_none() {
            if let Some(i) = turns.iter().position(|t| !t.tool_calls.is_empty()) {
                return Err(invalid(
                    "tools",
                    format!(
                        "`messages[{}]` calls tools: send the `tools` they were made with (`tool_choice: \"none\"` forbids new calls)",
                        positions[i]
                    ),
                ));
            }
        }
        // The new turn is the last user message: the last message, or the one before the
        // assistant's calls whose results end the conversation.
        let ends_with_results = turns
            .last()
            .is_some_and(|t| t.role == Role::Assistant && !t.tool_calls.is_empty());
        let last_user = turns.iter().rposition(|t| t.role == Role::User);
        let (at, after) = match (turns.last().map(|t| t.role), last_user) {
            (Some(Role::User), Some(at)) => (at, Vec::new()),
            (_, Some(at)) if ends_with_results => (at, turns.split_off(at + 1)),
            (_, None) if ends_with_results => {
                return Err(invalid(
                    "messages",
                    "The conversation needs a user message before the assistant's tool calls",
                ))
            }
            _ => {
                return Err(invalid(
                    "messages",
                    "The last message (besides system messages) must be the user's, or a `tool` result of the assistant's tool calls",
                ))
            }
        };
        let message = turns.pop().map(|t| t.content).unwrap_or_default();
        if message.trim().is_empty() {
            return Err(invalid(
                format!("messages[{}].content", positions[at]),
                "The user's message must not be empty",
            ));
        }
        Ok(Checked {
            agent_id: self.model,
            instructions: instructions.join("\n\n"),
            history: turns,
            message,
            after,
            client_tools,
            sampling: Sampling {
                temperature: self.temperature,
                top_p: self.top_p,
                max_tokens: self.max_completion_tokens.or(self.max_tokens),
                stop,
                user: self.user.filter(|u| !u.is_empty()),
            },
            stream,
            include_usage,
        })
    }
}

/// The conversation of `messages`, checked ([`ChatCompletionRequest::check`]).
struct Conversation {
    /// The texts of the `system` and `developer` messages, in order (blank ones left out).
    instructions: Vec<String>,
    /// The `user` and `assistant` turns, an assistant's tool calls with the results of
    /// the `tool` messages that answer them.
    turns: Vec<Turn>,
    /// The position in `messages` of each turn.
    positions: Vec<usize>,
}

/// Reads `messages` into a [`Conversation`]. Every call of an assistant message must be
/// answered by a `tool` message (`tool_call_id`) before the next user or assistant
/// message, and a `tool` message must answer a call of the assistant message before it.
fn conversation(messages: &[ChatCompletionMessage]) -> Result<Conversation, OpenAiError> {
    let mut instructions: Vec<String> = Vec::new();
    let mut turns: Vec<Turn> = Vec::new();
    let mut positions: Vec<usize> = Vec::new();
    // The calls of the last assistant message not answered yet: (call id, its index).
    let mut waiting: Vec<(String, usize)> = Vec::new();
    // The assistant message with calls is the last turn while they wait.
    let unanswered = |waiting: &[(String, usize)], positions: &[usize]| {
        let (id, j) = &waiting[0];
        let at = positions.last().copied().unwrap_or(0);
        invalid(
            format!("messages[{at}].tool_calls[{j}]"),
            format!("The tool call `{id}` has no `tool` message answering it (`tool_call_id`) before the next message"),
        )
    };
    for (i, m) in messages.iter().enumerate() {
        let at = format!("messages[{i}]");
        let role = match m.role.as_str() {
            "system" | "developer" => None,
            "user" => Some(Role::User),
            "assistant" => Some(Role::Assistant),
            "tool" => {
                let Some(id) = m.tool_call_id.as_deref().filter(|id| !id.is_empty()) else {
                    return Err(invalid(
                        format!("{at}.tool_call_id"),
                        "A `tool` message needs the `tool_call_id` of the call it answers",
                    ));
                };
                let Some(k) = waiting.iter().position(|(w, _)| w == id) else {
                    return Err(invalid(
                        format!("{at}.tool_call_id"),
                        format!("`tool_call_id` `{id}` answers no tool call of the assistant message before it"),
                    ));
                };
                let (_, j) = waiting.remove(k);
                let Some(content) = &m.content else {
                    return Err(invalid(
                        format!("{at}.content"),
                        format!("`{at}.content` is required"),
                    ));
                };
                let result = text_of(content, &at)?;
                if let Some(turn) = turns.last_mut() {
                    turn.tool_calls[j].result = result;
                }
                continue;
            }
            "function" => {
                return Err(unsupported(
                    format!("{at}.role"),
                    "`function` messages (deprecated by OpenAI) are not supported: send `tool` messages",
                ))
            }
            other => {
                return Err(invalid(
                    format!("{at}.role"),
                    format!(
                        "Unknown role `{other}`: use system, developer, user, assistant or tool"
                    ),
                ))
            }
        };
        if role.is_some() && !waiting.is_empty() {
            return Err(unanswered(&waiting, &positions));
        }
        if m.function_call.as_ref().is_some_and(|c| !c.is_null()) {
            return Err(unsupported(
                format!("{at}.function_call"),
                "`function_call` (deprecated by OpenAI) is not supported: send `tool_calls`",
            ));
        }
        let calls = match (&m.tool_calls, role) {
            (Some(calls), Some(Role::Assistant)) => message_tool_calls(calls, &at)?,
            (Some(calls), _) if !calls.is_empty() => {
                return Err(invalid(
                    format!("{at}.tool_calls"),
                    "Only assistant messages carry `tool_calls`",
                ))
            }
            _ => Vec::new(),
        };
        let text = match &m.content {
            Some(content) => text_of(content, &at)?,
            // An assistant message of tool calls alone has no content.
            None if !calls.is_empty() => String::new(),
            None => {
                return Err(invalid(
                    format!("{at}.content"),
                    format!("`{at}.content` is required"),
                ))
            }
        };
        match role {
            None => {
                if !text.trim().is_empty() {
                    instructions.push(text);
                }
            }
            Some(role) => {
                waiting = calls
                    .iter()
                    .enumerate()
                    .map(|(j, c)| (c.id.clone(), j))
                    .collect();
                turns.push(Turn {
                    role,
                    content: text,
                    tool_calls: calls
                        .into_iter()
                        .map(|call| ToolExchange {
                            call,
                            result: String::new(),
                            is_error: false,
                        })
                        .collect(),
                });
                positions.push(i);
            }
        }
    }
    if !waiting.is_empty() {
        return Err(unanswered(&waiting, &positions));
    }
    Ok(Conversation {
        instructions,
        turns,
        positions,
    })
}

/// The extension field `agentchat` of replies, which OpenAI's SDKs ignore (and keep: the
/// Python SDK as `completion.model_extra["agentchat"]`).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentChatExtension {
    /// The conversation this call was recorded as (`GET /api/agents/{agentId}/conversations`).
    pub thread_id: String,
    /// The language model that answered.
    pub model: String,
    /// Knowledge base chunks put into the prompt.
    pub rag_chunks_used: u32,
    /// The chunks, best first (docs/api.md § Chat reply).
    pub sources: Vec<Source>,
}

/// `usage`.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, ToSchema, PartialEq, Eq)]
pub struct CompletionUsage {
    pub prompt_tokens: u32,
    pub completion_tokens: u32,
    pub total_tokens: u32,
}

impl From<TokensUsed> for CompletionUsage {
    fn from(t: TokensUsed) -> Self {
        Self {
            prompt_tokens: t.prompt,
            completion_tokens: t.completion,
            total_tokens: t.total,
        }
    }
}

/// The assistant's message of a choice.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ChatCompletionAssistantMessage {
    /// `assistant`.
    pub role: String,
    /// The reply; null when the model only called tools.
    pub content: Option<String>,
    /// Always null: agents do not refuse through this field.
    pub refusal: Option<String>,
    /// The model's calls of the request's `tools` (`finish_reason` `tool_calls`), for the
    /// caller to run and answer with `tool` messages; absent otherwise.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ChatCompletionMessageToolCall>>,
}

/// A call of one of the request's tools (OpenAI's "The chat completion object",
/// `choices[].message.tool_calls`:
/// <https://platform.openai.com/docs/api-reference/chat/object>).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ChatCompletionMessageToolCall {
    /// The call's id, which the `tool` message answering it repeats as `tool_call_id`.
    pub id: String,
    /// `function`.
    #[serde(rename = "type")]
    pub kind: String,
    pub function: FunctionCall,
}

/// The function a [`ChatCompletionMessageToolCall`] calls.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FunctionCall {
    /// One of the request's tools.
    pub name: String,
    /// The arguments as the JSON text the model wrote: it may not parse, or not match the
    /// tool's schema; check it before running the tool.
    pub arguments: String,
}

impl From<&ToolCall> for ChatCompletionMessageToolCall {
    fn from(call: &ToolCall) -> Self {
        Self {
            id: call.id.clone(),
            kind: "function".into(),
            function: FunctionCall {
                name: call.name.clone(),
                arguments: call.arguments.clone(),
            },
        }
    }
}

/// A piece of a tool call in a chunk's `delta.tool_calls` (OpenAI's "The chat completion
/// chunk object": <https://platform.openai.com/docs/api-reference/chat-streaming>): the
/// first piece of a call carries its `id`, `type` and `function.name` (and `arguments`
/// `""`), the next ones the arguments' text to append; `index` tells the calls apart.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct ChatCompletionToolCallDelta {
    /// The call's position among the reply's calls, from 0.
    pub index: u32,
    /// In the call's first piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// `function`, in the call's first piece.
    #[serde(rename = "type", default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    pub function: FunctionCallDelta,
}

/// The `function` of a [`ChatCompletionToolCallDelta`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct FunctionCallDelta {
    /// In the call's first piece.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The next piece of the arguments' JSON text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<String>,
}

/// A choice of a `chat.completion`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ChatCompletionChoice {
    /// 0.
    pub index: u32,
    pub message: ChatCompletionAssistantMessage,
    /// Always null.
    #[schema(value_type = Option<Object>)]
    pub logprobs: Option<Value>,
    /// `stop`, `length` (the token limit), `content_filter`, or `tool_calls` (the model
    /// called the request's tools: `message.tool_calls`).
    pub finish_reason: String,
}

/// A `chat.completion`: the non-streaming answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ChatCompletion {
    /// `chatcmpl-` and the conversation's id.
    pub id: String,
    /// `chat.completion`.
    pub object: String,
    /// Unix seconds.
    pub created: i64,
    /// The agent id, as requested.
    pub model: String,
    /// One choice.
    pub choices: Vec<ChatCompletionChoice>,
    pub usage: CompletionUsage,
    /// AgentChat's extension.
    pub agentchat: AgentChatExtension,
}

/// The `delta` of a chunk.
#[derive(Debug, Clone, Default, Serialize, Deserialize, ToSchema)]
pub struct ChatCompletionDelta {
    /// `assistant`, in the first chunk only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// A piece of the reply.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// Pieces of the model's calls of the request's tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_calls: Option<Vec<ChatCompletionToolCallDelta>>,
}

/// A choice of a chunk.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ChatCompletionChunkChoice {
    /// 0.
    pub index: u32,
    pub delta: ChatCompletionDelta,
    /// Always null.
    #[schema(value_type = Option<Object>)]
    pub logprobs: Option<Value>,
    /// Null until the last content chunk's successor: `stop`, `length`, `content_filter`
    /// or `tool_calls`.
    pub finish_reason: Option<String>,
}

/// A `chat.completion.chunk`: one server-sent event of a streamed answer.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ChatCompletionChunk {
    /// The same for every chunk of a stream: `chatcmpl-` and the conversation's id.
    pub id: String,
    /// `chat.completion.chunk`.
    pub object: String,
    /// Unix seconds, the same for every chunk.
    pub created: i64,
    /// The agent id.
    pub model: String,
    /// One choice; none in the usage chunk.
    pub choices: Vec<ChatCompletionChunkChoice>,
    /// With `stream_options.include_usage`: null on every chunk but the last, which carries
    /// the usage of the whole request.
    #[serde(skip_serializing_if = "Option::is_none")]
    #[schema(value_type = Option<CompletionUsage>)]
    pub usage: Option<Option<CompletionUsage>>,
    /// AgentChat's extension, on the chunk that carries `finish_reason`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agentchat: Option<AgentChatExtension>,
}

/// One JSON event of a streamed chat completion: a chunk, or the error that ended the
/// stream after it started (`[DONE]` follows it).
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(untagged)]
pub enum ChatCompletionStreamFrame {
    Chunk(ChatCompletionChunk),
    Error(super::error::OpenAiErrorBody),
}

/// One server-sent event of a streamed chat completion: `data` is a JSON
/// [`ChatCompletionStreamFrame`], or `[DONE]` on the last event.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct ChatCompletionStreamEvent {
    #[schema(schema_with = chat_completion_stream_data)]
    pub data: String,
}

fn chat_completion_stream_data() -> utoipa::openapi::schema::Schema {
    app::api::stream_data_schema(
        "ChatCompletionStreamFrame",
        "A JSON `ChatCompletionStreamFrame`, or `[DONE]` on the last event",
    )
}

/// A `model`: one of the caller's agents.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentModel {
    /// The agent id: the `model` of a chat completion.
    pub id: String,
    /// `model`.
    pub object: String,
    /// The agent's creation, Unix seconds.
    pub created: i64,
    /// `agentchat`.
    pub owned_by: String,
    /// AgentChat's extension: the agent's name, description and language model.
    pub agentchat: AgentModelExtension,
}

/// The `agentchat` extension of a [`AgentModel`].
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct AgentModelExtension {
    pub name: String,
    pub description: String,
    /// The agent's language model; empty for the server's default.
    pub model: String,
}

/// The answer of `GET /models`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AgentModelList {
    /// `list`.
    pub object: String,
    /// The caller's agents, oldest first.
    pub data: Vec<AgentModel>,
}

/// `finish_reason` as OpenAI names it.
pub fn finish_reason(reason: FinishReason) -> String {
    reason.as_str().to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(body: Value) -> Result<Checked, OpenAiError> {
        serde_json::from_value::<ChatCompletionRequest>(body)
            .unwrap()
            .check()
    }

    #[test]
    fn the_conversation_is_split_into_instructions_history_and_the_new_turn() {
        let checked = parse(json!({
            "model": "agent-1",
            "messages": [
                {"role": "system", "content": "Answer in French."},
                {"role": "user", "content": "Hi"},
                {"role": "assistant", "content": "Bonjour"},
                {"role": "developer", "content": [{"type": "text", "text": "Be brief."}]},
                {"role": "user", "content": [{"type": "text", "text": "How"}, {"type": "text", "text": "are you?"}]}
            ],
            "temperature": 0.5, "top_p": 0.9, "max_tokens": 50, "stop": "END", "user": "u-1",
            "n": 1, "presence_penalty": 0.1, "seed": 4, "logit_bias": {}, "response_format": {"type": "text"},
            "tool_choice": "none", "some_vendor_field": true
        }))
        .unwrap();
        assert_eq!(checked.instructions, "Answer in French.\n\nBe brief.");
        assert_eq!(checked.history.len(), 2);
        assert_eq!(checked.history[1].content, "Bonjour");
        assert_eq!(checked.message, "How\nare you?");
        assert_eq!(
            checked.sampling,
            Sampling {
                temperature: Some(0.5),
                top_p: Some(0.9),
                max_tokens: Some(50),
                stop: vec!["END".into()],
                user: Some("u-1".into()),
            }
        );
        assert!(!checked.stream);
    }

    #[test]
    fn max_completion_tokens_wins_over_max_tokens() {
        let checked = parse(
            json!({"model": "a", "messages": [{"role": "user", "content": "x"}],
            "max_tokens": 10, "max_completion_tokens": 5}),
        )
        .unwrap();
        assert_eq!(checked.sampling.max_tokens, Some(5));
    }

    #[test]
    fn unsupported_features_are_refused_naming_the_parameter() {
        let user = json!([{"role": "user", "content": "x"}]);
        let cases = [
            (json!({"model": "", "messages": user}), "model"),
            (json!({"model": "a", "messages": []}), "messages"),
            (json!({"model": "a", "messages": user, "n": 2}), "n"),
            (
                json!({"model": "a", "messages": user, "tools": [{"type": "function"}]}),
                "tools[0].function",
            ),
            (
                json!({"model": "a", "messages": user, "tool_choice": "required"}),
                "tool_choice",
            ),
            (
                json!({"model": "a", "messages": user, "response_format": {"type": "json_object"}}),
                "response_format",
            ),
            (
                json!({"model": "a", "messages": user, "logprobs": true}),
                "logprobs",
            ),
            (
                json!({"model": "a", "messages": user, "modalities": ["text", "audio"]}),
                "modalities",
            ),
            (
                json!({"model": "a", "messages": user, "temperature": 2.5}),
                "temperature",
            ),
            (
                json!({"model": "a", "messages": user, "top_p": -0.1}),
                "top_p",
            ),
            (
                json!({"model": "a", "messages": user, "max_tokens": 0}),
                "max_tokens",
            ),
            (
                json!({"model": "a", "messages": user, "stop": ["a", "b", "c", "d", "e"]}),
                "stop",
            ),
            (
                json!({"model": "a", "messages": user, "user": "u".repeat(257)}),
                "user",
            ),
            (
                json!({"model": "a", "messages": user, "stream_options": {"include_usage": true}}),
                "stream_options",
            ),
            (
                json!({"model": "a", "messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}]}),
                "messages[0].content[0]",
            ),
            (
                json!({"model": "a", "messages": [{"role": "tool", "content": "r", "tool_call_id": "c"}]}),
                "messages[0].tool_call_id",
            ),
            (
                json!({"model": "a", "messages": [{"role": "robot", "content": "r"}]}),
                "messages[0].role",
            ),
            (
                json!({"model": "a", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c"}]}]}),
                "messages[1].tool_calls[0].type",
            ),
            (
                json!({"model": "a", "messages": [{"role": "user"}]}),
                "messages[0].content",
            ),
            (
                json!({"model": "a", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}),
                "messages",
            ),
            (
                json!({"model": "a", "messages": [{"role": "system", "content": "s"}]}),
                "messages",
            ),
            (
                json!({"model": "a", "messages": [{"role": "user", "content": "  "}]}),
                "messages[0].content",
            ),
        ];
        for (body, param) in cases {
            let err = parse(body.clone()).unwrap_err();
            assert_eq!(err.status.as_u16(), 400, "{body}");
            assert_eq!(err.param.as_deref(), Some(param), "{body}: {}", err.message);
            assert_eq!(err.kind, "invalid_request_error");
        }
    }

    fn weather_tool() -> Value {
        json!({"type": "function", "function": {"name": "get_weather", "description": "Weather by city",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": true}})
    }

    #[test]
    fn client_tools_and_their_choice_reach_the_turn() {
        let user = json!([{"role": "user", "content": "weather?"}]);
        let now = json!({"type": "function", "function": {"name": "now"}});
        let checked = parse(
            json!({"model": "a", "messages": user, "tools": [weather_tool(), now],
                                   "parallel_tool_calls": false}),
        )
        .unwrap();
        let tools = checked.client_tools.unwrap();
        assert_eq!(tools.choice, ToolChoice::Auto);
        assert_eq!(tools.specs.len(), 2);
        assert_eq!(tools.specs[0].name, "get_weather");
        assert_eq!(tools.specs[0].description, "Weather by city");
        assert_eq!(
            tools.specs[0].parameters["properties"]["city"]["type"],
            "string"
        );
        // A function without parameters takes none.
        assert_eq!(
            tools.specs[1].parameters,
            json!({"type": "object", "properties": {}})
        );
        assert_eq!(tools.specs[1].description, "");
        for (choice, expected) in [
            (json!("auto"), ToolChoice::Auto),
            (json!("none"), ToolChoice::None),
            (json!("required"), ToolChoice::Required),
            (
                json!({"type": "function", "function": {"name": "get_weather"}}),
                ToolChoice::Named("get_weather".into()),
            ),
        ] {
            let checked = parse(
                json!({"model": "a", "messages": user, "tools": [weather_tool()],
                                       "tool_choice": choice}),
            )
            .unwrap();
            assert_eq!(checked.client_tools.unwrap().choice, expected);
        }
        // Without tools, `none` and `auto` are accepted and change nothing; so is `tools: []`.
        for body in [
            json!({"model": "a", "messages": user, "tool_choice": "none"}),
            json!({"model": "a", "messages": user, "tools": [], "tool_choice": "auto"}),
        ] {
            assert!(parse(body).unwrap().client_tools.is_none());
        }
    }

    #[test]
    fn tool_results_continue_the_last_user_turn() {
        let checked = parse(json!({"model": "a", "tools": [weather_tool()], "messages": [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "earlier"},
            {"role": "assistant", "content": "Sure."},
            {"role": "user", "content": "weather in Paris and Oslo?"},
            {"role": "assistant", "content": null, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
                {"id": "call_2", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Oslo\"}"}}]},
            {"role": "tool", "tool_call_id": "call_2", "content": "3 C"},
            {"role": "tool", "tool_call_id": "call_1", "content": [{"type": "text", "text": "18 C"}]}
        ]}))
        .unwrap();
        assert_eq!(checked.message, "weather in Paris and Oslo?");
        assert_eq!(checked.instructions, "Be brief.");
        assert_eq!(checked.history.len(), 2);
        assert_eq!(checked.after.len(), 1);
        let turn = &checked.after[0];
        assert_eq!((turn.role, turn.content.as_str()), (Role::Assistant, ""));
        let exchanges: Vec<(&str, &str, &str)> = turn
            .tool_calls
            .iter()
            .map(|e| {
                (
                    e.call.id.as_str(),
                    e.call.arguments.as_str(),
                    e.result.as_str(),
                )
            })
            .collect();
        assert_eq!(
            exchanges,
            [
                ("call_1", r#"{"city":"Paris"}"#, "18 C"),
                ("call_2", r#"{"city":"Oslo"}"#, "3 C")
            ],
            "the results in the order of the calls"
        );
        assert!(turn.tool_calls.iter().all(|e| !e.is_error));

        // A round of calls before a new question is history.
        let checked = parse(json!({"model": "a", "tools": [weather_tool()], "messages": [
            {"role": "user", "content": "q1"},
            {"role": "assistant", "content": "Looking.", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": "get_weather", "arguments": "{}"}}]},
            {"role": "tool", "tool_call_id": "c", "content": "sunny"},
            {"role": "assistant", "content": "It is sunny."},
            {"role": "user", "content": "q2"}
        ]}))
        .unwrap();
        assert_eq!(checked.message, "q2");
        assert!(checked.after.is_empty());
        assert_eq!(checked.history[1].content, "Looking.");
        assert_eq!(checked.history[1].tool_calls[0].result, "sunny");
    }

    #[test]
    fn bad_tools_and_tool_messages_are_refused_naming_the_parameter() {
        let user = json!([{"role": "user", "content": "x"}]);
        let named = |name: &str| json!({"type": "function", "function": {"name": name}});
        let call = |id: &str| json!({"id": id, "type": "function", "function": {"name": "get_weather", "arguments": "{}"}});
        let too_many: Vec<Value> = (0..=MAX_TOOLS).map(|i| named(&format!("t{i}"))).collect();
        let cases = [
            (
                json!({"model": "a", "messages": user, "tools": [named("get weather")]}),
                "tools[0].function.name",
                None,
            ),
            (
                json!({"model": "a", "messages": user, "tools": [named("")]}),
                "tools[0].function.name",
                None,
            ),
            (
                json!({"model": "a", "messages": user, "tools": [named(&"x".repeat(65))]}),
                "tools[0].function.name",
                None,
            ),
            (
                json!({"model": "a", "messages": user, "tools": [weather_tool(), named("get_weather")]}),
                "tools[1].function.name",
                None,
            ),
            (
                json!({"model": "a", "messages": user, "tools": too_many}),
                "tools",
                None,
            ),
            (
                json!({"model": "a", "messages": user, "tools": [{"type": "function", "function": {"name": "f", "parameters": "{}"}}]}),
                "tools[0].function.parameters",
                None,
            ),
            (
                json!({"model": "a", "messages": user, "tools": [{"type": "function", "function": {"name": "f", "description": 3}}]}),
                "tools[0].function.description",
                None,
            ),
            (
                json!({"model": "a", "messages": user, "tools": [{"type": "custom", "custom": {"name": "f"}}]}),
                "tools[0].type",
                Some("unsupported_parameter"),
            ),
            (
                json!({"model": "a", "messages": user, "tools": [weather_tool()], "tool_choice": "sometimes"}),
                "tool_choice",
                None,
            ),
            (
                json!({"model": "a", "messages": user, "tools": [weather_tool()], "tool_choice": {"type": "function", "function": {"name": "other"}}}),
                "tool_choice",
                None,
            ),
            (
                json!({"model": "a", "messages": user, "tools": [weather_tool()], "tool_choice": {"type": "allowed_tools"}}),
                "tool_choice",
                None,
            ),
            (
                json!({"model": "a", "messages": user, "tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
                "tool_choice",
                None,
            ),
            (
                json!({"model": "a", "messages": user, "functions": [{"name": "f"}]}),
                "functions",
                Some("unsupported_parameter"),
            ),
            (
                json!({"model": "a", "messages": user, "function_call": {"name": "f"}}),
                "function_call",
                Some("unsupported_parameter"),
            ),
            (
                json!({"model": "a", "tools": [weather_tool()], "messages": [{"role": "user", "content": "q"}, {"role": "tool", "tool_call_id": "nope", "content": "r"}]}),
                "messages[1].tool_call_id",
                None,
            ),
            (
                json!({"model": "a", "tools": [weather_tool()], "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [call("c")]}, {"role": "tool", "content": "r"}]}),
                "messages[2].tool_call_id",
                None,
            ),
            (
                json!({"model": "a", "tools": [weather_tool()], "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [call("c1"), call("c2")]}, {"role": "tool", "tool_call_id": "c1", "content": "r"}]}),
                "messages[1].tool_calls[1]",
                None,
            ),
            (
                json!({"model": "a", "tools": [weather_tool()], "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [call("c")]}, {"role": "user", "content": "and?"}]}),
                "messages[1].tool_calls[0]",
                None,
            ),
            (
                json!({"model": "a", "tools": [weather_tool()], "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [call("c")]}, {"role": "tool", "tool_call_id": "c", "content": "r"}, {"role": "tool", "tool_call_id": "c", "content": "again"}]}),
                "messages[3].tool_call_id",
                None,
            ),
            (
                json!({"model": "a", "tools": [weather_tool()], "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": {}}}]}]}),
                "messages[1].tool_calls[0].function.arguments",
                None,
            ),
            (
                json!({"model": "a", "tools": [weather_tool()], "messages": [{"role": "user", "content": "q", "tool_calls": [call("c")]}]}),
                "messages[0].tool_calls",
                None,
            ),
            (
                json!({"model": "a", "tools": [weather_tool()], "messages": [{"role": "assistant", "tool_calls": [call("c")]}, {"role": "tool", "tool_call_id": "c", "content": "r"}]}),
                "messages",
                None,
            ),
            (
                json!({"model": "a", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "tool_calls": [call("c")]}, {"role": "tool", "tool_call_id": "c", "content": "r"}]}),
                "tools",
                None,
            ),
            (
                json!({"model": "a", "messages": [{"role": "function", "name": "f", "content": "r"}]}),
                "messages[0].role",
                Some("unsupported_parameter"),
            ),
        ];
        for (body, param, code) in cases {
            let err = parse(body.clone()).unwrap_err();
            assert_eq!(err.status.as_u16(), 400, "{body}");
            assert_eq!(err.param.as_deref(), Some(param), "{body}: {}", err.message);
            assert_eq!(err.code, code, "{body}");
        }
    }

    #[test]
    fn tool_calls_have_openais_shape() {
        let call = ToolCall {
            id: "call_1".into(),
            name: "get_weather".into(),
            arguments: r#"{"city":"Paris"}"#.into(),
        };
        let message = ChatCompletionAssistantMessage {
            role: "assistant".into(),
            content: None,
            refusal: None,
            tool_calls: Some(vec![ChatCompletionMessageToolCall::from(&call)]),
        };
        assert_eq!(
            serde_json::to_value(&message).unwrap(),
            json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": [
                {"id": "call_1", "type": "function",
                 "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}}]})
        );
        let delta = ChatCompletionDelta {
            tool_calls: Some(vec![ChatCompletionToolCallDelta {
                index: 1,
                id: None,
                kind: None,
                function: FunctionCallDelta {
                    name: None,
                    arguments: Some("{}".into()),
                },
            }]),
            ..ChatCompletionDelta::default()
        };
        assert_eq!(
            serde_json::to_value(&delta).unwrap(),
            json!({"tool_calls": [{"index": 1, "function": {"arguments": "{}"}}]})
        );
        let text = ChatCompletionAssistantMessage {
            role: "assistant".into(),
            content: Some("Hi".into()),
            refusal: None,
            tool_calls: None,
        };
        assert!(serde_json::to_value(&text)
            .unwrap()
            .get("tool_calls")
            .is_none());
    }

    #[test]
    fn streams_may_ask_for_usage() {
        let checked = parse(
            json!({"model": "a", "messages": [{"role": "user", "content": "x"}],
            "stream": true, "stream_options": {"include_usage": true}}),
        )
        .unwrap();
        assert!(checked.stream && checked.include_usage);
    }

    #[test]
    fn chunks_leave_out_what_they_do_not_carry() {
        let chunk = ChatCompletionChunk {
            id: "chatcmpl-1".into(),
            object: "chat.completion.chunk".into(),
            created: 1,
            model: "a".into(),
            choices: vec![ChatCompletionChunkChoice {
                index: 0,
                delta: ChatCompletionDelta {
                    content: Some("Hi".into()),
                    ..ChatCompletionDelta::default()
                },
                logprobs: None,
                finish_reason: None,
            }],
            usage: Some(None),
            agentchat: None,
        };
        let v = serde_json::to_value(&chunk).unwrap();
        assert_eq!(v["choices"][0]["delta"], json!({"content": "Hi"}));
        assert!(v["usage"].is_null() && v.as_object().unwrap().contains_key("usage"));
        assert!(!v.as_object().unwrap().contains_key("agentchat"));
    }
}
