//! Tool calling in requests: the offered tools, the tool choice and the history of calls and
//! results, checked as strictly as the real APIs do, and read into a [`ToolContext`].
//!
//! OpenAI ("Create chat completion",
//! <https://platform.openai.com/docs/api-reference/chat/create>): `tools` is a non-empty
//! array of `{type: "function", function: {name, description?, parameters?}}`;
//! `tool_choice` (`"auto"`, `"none"`, `"required"` or `{type: "function", function: {name}}`)
//! is only allowed with `tools`; an assistant message's `tool_calls` are
//! `{id, type: "function", function: {name, arguments}}` with `arguments` a string, and
//! must be followed by one `role: "tool"` message per call, each naming its call in
//! `tool_call_id`.
//!
//! Anthropic ("Tool use", <https://docs.anthropic.com/en/docs/build-with-claude/tool-use>):
//! `tools` are `{name, description?, input_schema}`; `tool_choice` is `{type: "auto" |
//! "any" | "none"}` or `{type: "tool", name}`; an assistant message's `tool_use` blocks
//! (`{id, name, input}`, `input` an object) must be answered in the next message, a user
//! message, by `tool_result` blocks (`{tool_use_id, content?, is_error?}`, `content` a
//! string or an array of text blocks) naming them, and every `tool_result` must answer a
//! `tool_use` of the message before it.

use serde_json::Value;

use crate::common::{text_of, Forced, ToolContext};
use crate::markers::valid_tool_name;

/// A refused request: what the API would say, and the parameter it names (OpenAI's
/// `param`; Anthropic puts the path in the message).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Invalid {
    pub message: String,
    pub param: Option<String>,
}

fn invalid(message: impl Into<String>, param: impl Into<String>) -> Invalid {
    Invalid {
        message: message.into(),
        param: Some(param.into()),
    }
}

/// Checks the tools, tool choice and tool messages of an OpenAI request and reads them.
pub(crate) fn openai(request: &Value, messages: &[Value]) -> Result<ToolContext, Invalid> {
    let tools = match request.get("tools") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(tools)) if tools.is_empty() => {
            return Err(invalid(
                "Invalid 'tools': empty array. Expected an array with minimum length 1, but got an empty array instead.",
                "tools",
            ))
        }
        Some(Value::Array(tools)) => tools.as_slice(),
        Some(_) => return Err(invalid("Invalid type for 'tools': expected an array.", "tools")),
    };
    for (i, tool) in tools.iter().enumerate() {
        if tool.get("type").and_then(Value::as_str) != Some("function") {
            return Err(invalid(
                format!("Invalid value for 'tools[{i}].type': expected 'function'."),
                format!("tools[{i}].type"),
            ));
        }
        let name = tool.pointer("/function/name").and_then(Value::as_str);
        if !name.is_some_and(valid_tool_name) {
            return Err(invalid(
                format!("Invalid 'tools[{i}].function.name': string does not match pattern. Expected a string that matches the pattern '^[a-zA-Z0-9_-]+$'."),
                format!("tools[{i}].function.name"),
            ));
        }
        if let Some(parameters) = tool.pointer("/function/parameters") {
            if !parameters.is_object() {
                return Err(invalid(
                    format!(
                        "Invalid type for 'tools[{i}].function.parameters': expected an object."
                    ),
                    format!("tools[{i}].function.parameters"),
                ));
            }
        }
    }
    let choice = request.get("tool_choice").filter(|c| !c.is_null());
    if let Some(choice) = choice {
        if tools.is_empty() {
            return Err(invalid(
                "Invalid value for 'tool_choice': 'tool_choice' is only allowed when 'tools' are specified.",
                "tool_choice",
            ));
        }
        let valid = match choice {
            Value::String(mode) => matches!(mode.as_str(), "auto" | "none" | "required"),
            Value::Object(_) => {
                choice.get("type").and_then(Value::as_str) == Some("function")
                    && choice
                        .pointer("/function/name")
                        .and_then(Value::as_str)
                        .is_some()
            }
            _ => false,
        };
        if !valid {
            return Err(invalid(
                "Invalid value for 'tool_choice': expected 'none', 'auto', 'required', or a named function.",
                "tool_choice",
            ));
        }
    }

    // The calls of the last assistant message with calls not answered yet, and where it is.
    let mut pending: Vec<String> = Vec::new();
    let mut asked_at = 0;
    let unanswered = |at: usize, pending: &[String]| {
        invalid(
            format!(
                "An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: {}",
                pending.join(", ")
            ),
            format!("messages.[{at}].role"),
        )
    };
    for (i, message) in messages.iter().enumerate() {
        let role = message.get("role").and_then(Value::as_str).unwrap_or("");
        if role == "tool" {
            let Some(id) = message.get("tool_call_id").and_then(Value::as_str) else {
                return Err(invalid(
                    format!("Missing required parameter: 'messages[{i}].tool_call_id'."),
                    format!("messages.[{i}].tool_call_id"),
                ));
            };
            let Some(at) = pending.iter().position(|p| p == id) else {
                return Err(invalid(
                    "Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls'.",
                    format!("messages.[{i}].role"),
                ));
            };
            pending.remove(at);
            if !matches!(
                message.get("content"),
                Some(Value::String(_) | Value::Array(_))
            ) {
                return Err(invalid(
                    format!("Missing required parameter: 'messages[{i}].content'."),
                    format!("messages.[{i}].content"),
                ));
            }
            continue;
        }
        if !pending.is_empty() {
            return Err(unanswered(asked_at, &pending));
        }
        let calls = match message.get("tool_calls") {
            None | Some(Value::Null) => continue,
            Some(Value::Array(calls)) if role == "assistant" => calls,
            Some(_) => {
                return Err(invalid(
                    format!("Invalid 'messages[{i}].tool_calls': only assistant messages carry an array of tool calls."),
                    format!("messages.[{i}].tool_calls"),
                ))
            }
        };
        for (j, call) in calls.iter().enumerate() {
            let id = call.get("id").and_then(Value::as_str);
            let well_formed = call.get("type").and_then(Value::as_str) == Some("function")
                && call
                    .pointer("/function/name")
                    .and_then(Value::as_str)
                    .is_some()
                && call
                    .pointer("/function/arguments")
                    .is_some_and(Value::is_string);
            match id {
                Some(id) if well_formed => pending.push(id.to_owned()),
                _ => {
                    return Err(invalid(
                        format!("Invalid 'messages[{i}].tool_calls[{j}]': expected {{id, type: 'function', function: {{name, arguments}}}} with 'arguments' a string."),
                        format!("messages.[{i}].tool_calls.[{j}]"),
                    ))
                }
            }
        }
        asked_at = i;
    }
    if !pending.is_empty() {
        return Err(unanswered(asked_at, &pending));
    }

    let trailing = messages
        .iter()
        .rev()
        .take_while(|m| m.get("role").and_then(Value::as_str) == Some("tool"))
        .count();
    let results = (trailing > 0).then(|| {
        messages[messages.len() - trailing..]
            .iter()
            .map(|m| text_of(m.get("content").unwrap_or(&Value::Null)))
            .collect()
    });
    let first = || {
        tools
            .first()
            .and_then(|tool| tool.pointer("/function/name"))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    let forced = match choice {
        Some(Value::String(mode)) if mode == "required" => Some(Forced {
            name: first(),
            only: false,
        }),
        Some(named @ Value::Object(_)) => named
            .pointer("/function/name")
            .and_then(Value::as_str)
            .map(|name| Forced {
                name: name.to_owned(),
                only: true,
            }),
        _ => None,
    };
    Ok(ToolContext {
        may_call: !tools.is_empty() && choice.and_then(Value::as_str) != Some("none"),
        results,
        forced,
    })
}

/// Whether an Anthropic message is a user message of tool results.
pub(crate) fn is_tool_results(message: &Value) -> bool {
    message.get("role").and_then(Value::as_str) == Some("user")
        && blocks(message, "tool_result").next().is_some()
}

/// The content blocks of `kind` of a message, with their positions.
fn blocks<'a>(message: &'a Value, kind: &'a str) -> impl Iterator<Item = (usize, &'a Value)> {
    message
        .get("content")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .filter(move |(_, block)| block.get("type").and_then(Value::as_str) == Some(kind))
}

/// Checks the tools, tool choice and tool blocks of an Anthropic request and reads them.
pub(crate) fn anthropic(request: &Value, messages: &[Value]) -> Result<ToolContext, Invalid> {
    let tools = match request.get("tools") {
        None | Some(Value::Null) => &[][..],
        Some(Value::Array(tools)) => tools.as_slice(),
        Some(_) => return Err(invalid("tools: Input should be a valid list", "tools")),
    };
    for (i, tool) in tools.iter().enumerate() {
        let name = tool.get("name").and_then(Value::as_str);
        if !name.is_some_and(valid_tool_name) {
            return Err(invalid(
                format!(
                    "tools.{i}.custom.name: String should match pattern '^[a-zA-Z0-9_-]{{1,64}}$'"
                ),
                format!("tools.{i}.name"),
            ));
        }
        // Anthropic's own tools (`web_search_20250305`, ...) have a type and no schema.
        let custom = tool.get("type").is_none_or(|t| t == "custom");
        if custom && !tool.get("input_schema").is_some_and(Value::is_object) {
            return Err(invalid(
                format!("tools.{i}.custom.input_schema: Field required"),
                format!("tools.{i}.input_schema"),
            ));
        }
    }
    let choice = request.get("tool_choice").filter(|c| !c.is_null());
    if let Some(choice) = choice {
        let valid = match choice.get("type").and_then(Value::as_str) {
            Some("auto" | "any" | "none") => true,
            Some("tool") => choice.get("name").and_then(Value::as_str).is_some(),
            _ => false,
        };
        if !valid {
            return Err(invalid(
                "tool_choice: Input tag does not match any of the expected tags: 'auto', 'any', 'tool', 'none'",
                "tool_choice",
            ));
        }
    }

    for (i, message) in messages.iter().enumerate() {
        let asked: Vec<&str> = if message.get("role").and_then(Value::as_str) == Some("assistant") {
            let mut ids = Vec::new();
            for (j, block) in blocks(message, "tool_use") {
                let id = block.get("id").and_then(Value::as_str);
                let named = block.get("name").and_then(Value::as_str).is_some();
                match id {
                    Some(id) if named && block.get("input").is_some_and(Value::is_object) => {
                        ids.push(id)
                    }
                    _ => {
                        return Err(invalid(
                            format!("messages.{i}.content.{j}.tool_use: `id`, `name` and an object `input` are required"),
                            format!("messages.{i}.content.{j}"),
                        ))
                    }
                }
            }
            ids
        } else {
            Vec::new()
        };
        let answered: Vec<&str> = match messages.get(i + 1) {
            Some(next) if next.get("role").and_then(Value::as_str) == Some("user") => {
                blocks(next, "tool_result")
                    .filter_map(|(_, block)| block.get("tool_use_id").and_then(Value::as_str))
                    .collect()
            }
            _ => Vec::new(),
        };
        let missing: Vec<&str> = asked
            .iter()
            .copied()
            .filter(|id| !answered.contains(id))
            .collect();
        if !missing.is_empty() {
            return Err(invalid(
                format!("messages.{i}: `tool_use` ids were found without `tool_result` blocks immediately after: {}. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", missing.join(", ")),
                format!("messages.{i}"),
            ));
        }
        // The results of this message answer the calls of the one before.
        let before: Vec<&str> = match i.checked_sub(1).map(|b| &messages[b]) {
            Some(prev) if prev.get("role").and_then(Value::as_str) == Some("assistant") => {
                blocks(prev, "tool_use")
                    .filter_map(|(_, block)| block.get("id").and_then(Value::as_str))
                    .collect()
            }
            _ => Vec::new(),
        };
        for (j, block) in blocks(message, "tool_result") {
            let id = block.get("tool_use_id").and_then(Value::as_str);
            if message.get("role").and_then(Value::as_str) != Some("user")
                || !id.is_some_and(|id| before.contains(&id))
            {
                return Err(invalid(
                    format!("messages.{i}.content.{j}: unexpected `tool_use_id` found in `tool_result` blocks: {}. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", id.unwrap_or("")),
                    format!("messages.{i}.content.{j}"),
                ));
            }
            let content_ok = match block.get("content") {
                None | Some(Value::String(_)) => true,
                Some(Value::Array(parts)) => parts
                    .iter()
                    .all(|p| p.get("type").and_then(Value::as_str).is_some()),
                Some(_) => false,
            };
            let flag_ok = block.get("is_error").is_none_or(Value::is_boolean);
            if !content_ok || !flag_ok {
                return Err(invalid(
                    format!("messages.{i}.content.{j}.tool_result: `content` must be a string or a list of content blocks, `is_error` a boolean"),
                    format!("messages.{i}.content.{j}"),
                ));
            }
        }
    }

    let results = messages.last().filter(|m| is_tool_results(m)).map(|last| {
        blocks(last, "tool_result")
            .map(|(_, block)| text_of(block.get("content").unwrap_or(&Value::Null)))
            .collect()
    });
    let kind = choice.and_then(|c| c.get("type")).and_then(Value::as_str);
    let forced = match kind {
        Some("any") => tools
            .first()
            .and_then(|tool| tool.get("name"))
            .and_then(Value::as_str)
            .map(|name| Forced {
                name: name.to_owned(),
                only: false,
            }),
        Some("tool") => choice
            .and_then(|c| c.get("name"))
            .and_then(Value::as_str)
            .map(|name| Forced {
                name: name.to_owned(),
                only: true,
            }),
        _ => None,
    };
    Ok(ToolContext {
        may_call: !tools.is_empty() && kind != Some("none"),
        results,
        forced,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn openai_check(request: Value) -> Result<ToolContext, Invalid> {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        openai(&request, &messages)
    }

    fn anthropic_check(request: Value) -> Result<ToolContext, Invalid> {
        let messages = request["messages"].as_array().cloned().unwrap_or_default();
        anthropic(&request, &messages)
    }

    const TOOL: &str = "get_weather";

    fn openai_tools() -> Value {
        json!([{"type": "function", "function": {"name": TOOL, "parameters": {"type": "object"}}}])
    }

    #[test]
    fn openai_tool_messages_must_answer_the_calls_before_them() {
        let call = json!({"role": "assistant", "content": null, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": TOOL, "arguments": "{}"}},
            {"id": "call_2", "type": "function", "function": {"name": TOOL, "arguments": "{}"}},
        ]});
        let result =
            |id: &str, text: &str| json!({"role": "tool", "tool_call_id": id, "content": text});
        let user = json!({"role": "user", "content": "hi"});
        let context = openai_check(json!({"tools": openai_tools(), "messages": [
            user, call, result("call_2", "b"), result("call_1", "a"),
        ]}))
        .unwrap();
        assert!(context.may_call);
        assert_eq!(context.results, Some(vec!["b".to_owned(), "a".to_owned()]));

        let missing = openai_check(json!({"tools": openai_tools(), "messages": [
            user, call, result("call_1", "a"), user,
        ]}))
        .unwrap_err();
        assert!(
            missing
                .message
                .contains("did not have response messages: call_2"),
            "{missing:?}"
        );
        let stray = openai_check(json!({"messages": [user, result("call_9", "x")]})).unwrap_err();
        assert!(stray
            .message
            .contains("must be a response to a preceeding message"));
        let no_id =
            openai_check(json!({"messages": [user, call, {"role": "tool", "content": "a"}]}))
                .unwrap_err();
        assert_eq!(no_id.param.as_deref(), Some("messages.[2].tool_call_id"));
        let object_arguments = openai_check(
            json!({"messages": [user, {"role": "assistant", "tool_calls": [
                {"id": "c", "type": "function", "function": {"name": TOOL, "arguments": {}}},
            ]}]}),
        )
        .unwrap_err();
        assert!(object_arguments.message.contains("'arguments' a string"));
    }

    #[test]
    fn openai_tools_and_tool_choice_are_checked() {
        let user = json!([{"role": "user", "content": "hi"}]);
        assert!(openai_check(json!({"messages": user, "tools": []})).is_err());
        assert!(openai_check(json!({"messages": user, "tool_choice": "auto"})).is_err());
        assert!(openai_check(
            json!({"messages": user, "tools": openai_tools(), "tool_choice": "sometimes"})
        )
        .is_err());
        let bad_name = json!([{"type": "function", "function": {"name": "get weather"}}]);
        assert!(openai_check(json!({"messages": user, "tools": bad_name})).is_err());
        let named = json!({"type": "function", "function": {"name": TOOL}});
        assert!(
            openai_check(json!({"messages": user, "tools": openai_tools(), "tool_choice": named}))
                .unwrap()
                .may_call
        );
        let none =
            openai_check(json!({"messages": user, "tools": openai_tools(), "tool_choice": "none"}))
                .unwrap();
        assert!(!none.may_call && none.results.is_none());
        assert!(!openai_check(json!({"messages": user})).unwrap().may_call);
    }

    #[test]
    fn anthropic_tool_results_must_follow_their_tool_use() {
        let tools = json!([{"name": TOOL, "input_schema": {"type": "object"}}]);
        let user = json!({"role": "user", "content": "hi"});
        let call = json!({"role": "assistant", "content": [
            {"type": "text", "text": "Looking."},
            {"type": "tool_use", "id": "toolu_1", "name": TOOL, "input": {"city": "Paris"}},
            {"type": "tool_use", "id": "toolu_2", "name": TOOL, "input": {}},
        ]});
        let results = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"},
            {"type": "tool_result", "tool_use_id": "toolu_2", "is_error": true,
             "content": [{"type": "text", "text": "Error: no"}]},
        ]});
        let context =
            anthropic_check(json!({"tools": tools, "messages": [user, call, results]})).unwrap();
        assert!(context.may_call);
        assert_eq!(
            context.results,
            Some(vec!["18 C".to_owned(), "Error: no".to_owned()])
        );
        // Consecutive user messages are merged by the API: a question after the results is fine.
        let context =
            anthropic_check(json!({"tools": tools, "messages": [user, call, results, user]}))
                .unwrap();
        assert_eq!(context.results, None);

        let half = json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1", "content": "18 C"},
        ]});
        let missing =
            anthropic_check(json!({"tools": tools, "messages": [user, call, half]})).unwrap_err();
        assert!(
            missing
                .message
                .contains("without `tool_result` blocks immediately after: toolu_2"),
            "{missing:?}"
        );
        let stray = anthropic_check(json!({"tools": tools, "messages": [user, {"role": "assistant", "content": "ok"}, half]}))
            .unwrap_err();
        assert!(
            stray.message.contains("unexpected `tool_use_id`"),
            "{stray:?}"
        );
        let null_input = json!({"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_1", "name": TOOL, "input": null},
        ]});
        assert!(
            anthropic_check(json!({"tools": tools, "messages": [user, null_input, half]})).is_err()
        );
    }

    #[test]
    fn anthropic_tools_and_tool_choice_are_checked() {
        let user = json!([{"role": "user", "content": "hi"}]);
        let tools = json!([{"name": TOOL, "input_schema": {"type": "object"}}]);
        assert!(anthropic_check(json!({"messages": user, "tools": [{"name": TOOL}]})).is_err());
        assert!(anthropic_check(
            json!({"messages": user, "tools": tools, "tool_choice": {"type": "required"}})
        )
        .is_err());
        let choice =
            |c: Value| anthropic_check(json!({"messages": user, "tools": tools, "tool_choice": c}));
        assert!(choice(json!({"type": "any"})).unwrap().may_call);
        assert!(
            choice(json!({"type": "tool", "name": TOOL}))
                .unwrap()
                .may_call
        );
        assert!(!choice(json!({"type": "none"})).unwrap().may_call);
        assert!(!anthropic_check(json!({"messages": user})).unwrap().may_call);
    }
}
