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
use crate::llm::{FinishReason, Role, Sampling, Turn};

/// Most stop sequences in one request (OpenAI's limit).
pub const MAX_STOP_SEQUENCES: usize = 4;
/// Longest `user` value passed through to the provider, in characters.
pub const MAX_USER_CHARS: usize = 256;

/// The body of `POST /chat/completions`. Fields that change the shape of the answer in
/// ways agents do not support yet (`n` > 1, tools, non-text output) are refused with 400;
/// `presence_penalty`, `frequency_penalty`, `logit_bias`, `seed`, `metadata`, `store`,
/// `service_tier`, `parallel_tool_calls`, `reasoning_effort` and any field not listed here
/// are accepted and ignored, so that the SDKs' defaults never break a request.
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
    /// Refused unless empty: client-defined tools are not supported yet (the agent's own run inside).
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tools: Option<Vec<Value>>,
    /// Refused unless empty (the deprecated form of `tools`).
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub functions: Option<Vec<Value>>,
    /// `"none"` or `"auto"` only.
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub tool_choice: Option<Value>,
    /// `"none"` or `"auto"` only (the deprecated form of `tool_choice`).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub function_call: Option<Value>,
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

/// One message of `messages`.
#[derive(Debug, Deserialize, ToSchema)]
pub struct ChatCompletionMessage {
    /// `system`, `developer`, `user` or `assistant` (`tool` and `function` are refused).
    #[schema(min_length = 1)]
    pub role: String,
    /// A string, or an array of `{"type": "text", "text": ...}` parts (image, audio and
    /// file parts are refused).
    #[serde(default)]
    #[schema(value_type = Option<Object>)]
    pub content: Option<Content>,
    /// Accepted and ignored.
    #[serde(default)]
    pub name: Option<String>,
    /// Refused unless empty.
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub tool_calls: Option<Vec<Value>>,
    /// Refused.
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
    /// The earlier `user` and `assistant` turns, oldest first.
    pub history: Vec<Turn>,
    /// The last `user` message: the new turn.
    pub message: String,
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
        for (param, list) in [("tools", &self.tools), ("functions", &self.functions)] {
            if list.as_ref().is_some_and(|l| !l.is_empty()) {
                return Err(unsupported(
                    param,
                    format!("`{param}` are not supported: client-defined tools are not supported yet; the agent's own tools run inside the completion"),
                ));
            }
        }
        for (param, choice) in [
            ("tool_choice", &self.tool_choice),
            ("function_call", &self.function_call),
        ] {
            if !no_tool_needed(choice) {
                return Err(unsupported(
                    param,
                    format!(
                        "`{param}` may only be \"none\" or \"auto\": client-defined tools are not supported yet"
                    ),
                ));
            }
        }
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

        let mut instructions: Vec<String> = Vec::new();
        let mut turns: Vec<Turn> = Vec::new();
        for (i, m) in self.messages.iter().enumerate() {
            let at = format!("messages[{i}]");
            let role = match m.role.as_str() {
                "system" | "developer" => None,
                "user" => Some(Role::User),
                "assistant" => Some(Role::Assistant),
                "tool" | "function" => {
                    return Err(unsupported(
                        format!("{at}.role"),
                        format!(
                        "`{}` messages are not supported: client-defined tools are not supported yet; the agent's own tools run inside the completion",
                        m.role
                    ),
                    ))
                }
                other => {
                    return Err(invalid(
                        format!("{at}.role"),
                        format!("Unknown role `{other}`: use system, developer, user or assistant"),
                    ))
                }
            };
            if m.tool_calls.as_ref().is_some_and(|c| !c.is_empty())
                || m.function_call.as_ref().is_some_and(|c| !c.is_null())
            {
                return Err(unsupported(
                    format!("{at}.tool_calls"),
                    "Tool calls are not supported: client-defined tools are not supported yet; the agent's own tools run inside the completion",
                ));
            }
            let Some(content) = &m.content else {
                return Err(invalid(
                    format!("{at}.content"),
                    format!("`{at}.content` is required"),
                ));
            };
            let text = text_of(content, &at)?;
            match role {
                None => {
                    if !text.trim().is_empty() {
                        instructions.push(text);
                    }
                }
                Some(role) => turns.push(Turn::text(role, text)),
            }
        }
        let last = turns.pop();
        let message = match last {
            Some(Turn {
                role: Role::User,
                content,
                ..
            }) => content,
            _ => {
                return Err(invalid(
                    "messages",
                    "The last message (besides system messages) must be the user's",
                ))
            }
        };
        if message.trim().is_empty() {
            return Err(invalid(
                format!("messages[{}].content", self.messages.len() - 1),
                "The user's message must not be empty",
            ));
        }
        Ok(Checked {
            agent_id: self.model,
            instructions: instructions.join("\n\n"),
            history: turns,
            message,
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
    /// The reply.
    pub content: String,
    /// Always null: agents do not refuse through this field.
    pub refusal: Option<String>,
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
    /// `stop`, `length` (the token limit) or `content_filter`.
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
    /// Null until the last content chunk's successor: `stop`, `length` or `content_filter`.
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
                "tools",
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
                "messages[0].role",
            ),
            (
                json!({"model": "a", "messages": [{"role": "robot", "content": "r"}]}),
                "messages[0].role",
            ),
            (
                json!({"model": "a", "messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": null, "tool_calls": [{"id": "c"}]}]}),
                "messages[1].tool_calls",
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
                    role: None,
                    content: Some("Hi".into()),
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
