//! The OpenAI Chat Completions flavour: `POST /v1/chat/completions`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Value};

use crate::common::{
    argument_fragments, next_call_number, optional_u64, preflight, text_of, unix_now, Plan,
};
use crate::server::Shared;
use crate::stream::{ConnectionKiller, Steps};
use crate::tools;

/// An error answer: `{"error": {"message", "type", "param", "code"}}`.
pub(crate) fn error(status: u16, message: &str, kind: &str, code: Option<&str>) -> Response {
    error_with_param(status, message, kind, code, None)
}

fn error_with_param(
    status: u16,
    message: &str,
    kind: &str,
    code: Option<&str>,
    param: Option<&str>,
) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({
        "error": {"message": message, "type": kind, "param": param, "code": code}
    });
    (status, Json(body)).into_response()
}

/// The answer to a `[[status:CODE]]` marker.
pub(crate) fn status_error(code: u16) -> Response {
    let message = format!("mock failure {code}");
    match code {
        401 => error(
            code,
            &message,
            "invalid_request_error",
            Some("invalid_api_key"),
        ),
        429 => error(code, &message, "requests", Some("rate_limit_exceeded")),
        500..=599 => error(code, &message, "server_error", None),
        _ => error(code, &message, "invalid_request_error", None),
    }
}

/// Checks the `Authorization: Bearer KEY` header against the configured key; the 401 answer
/// when it fails.
pub(crate) fn auth_failure(shared: &Shared, headers: &HeaderMap) -> Option<Response> {
    let expected = shared.config.api_key.as_ref()?;
    let presented = headers
        .get("authorization")
        .and_then(|value| value.to_str().ok())
        .and_then(|value| {
            value
                .get(..7)
                .filter(|scheme| scheme.eq_ignore_ascii_case("bearer "))
                .map(|_| value[7..].trim())
        });
    match presented {
        Some(key) if key == expected => None,
        Some(_) => Some(error(
            401,
            "Incorrect API key provided.",
            "invalid_request_error",
            Some("invalid_api_key"),
        )),
        None => Some(error(
            401,
            "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).",
            "invalid_request_error",
            Some("invalid_api_key"),
        )),
    }
}

/// `POST /v1/chat/completions`.
pub(crate) async fn chat_completions(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    killer: Option<Extension<ConnectionKiller>>,
    body: Bytes,
) -> Response {
    if let Some(response) = auth_failure(&shared, &headers) {
        return response;
    }
    let request = match serde_json::from_slice::<Value>(&body) {
        Ok(request @ Value::Object(_)) => request,
        _ => {
            return error(
                400,
                "We could not parse the JSON body of your request. The API expects a JSON object as the request body.",
                "invalid_request_error",
                None,
            )
        }
    };
    let Some(model) = request.get("model").and_then(Value::as_str) else {
        return error_with_param(
            400,
            "you must provide a model parameter",
            "invalid_request_error",
            None,
            Some("model"),
        );
    };
    let Some(messages) = request
        .get("messages")
        .and_then(Value::as_array)
        .filter(|messages| !messages.is_empty())
    else {
        return error_with_param(
            400,
            "'messages' must be a non-empty array of messages.",
            "invalid_request_error",
            None,
            Some("messages"),
        );
    };
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    let tool_context = match tools::openai(&request, messages) {
        Ok(context) => context,
        Err(invalid) => {
            return error_with_param(
                400,
                &invalid.message,
                "invalid_request_error",
                None,
                invalid.param.as_deref(),
            )
        }
    };

    let content = |message: &Value| text_of(message.get("content").unwrap_or(&Value::Null));
    let inputs: Vec<String> = messages.iter().map(content).collect();
    let last_user = messages
        .iter()
        .rev()
        .find(|message| message.get("role").and_then(Value::as_str) == Some("user"))
        .map(content)
        .unwrap_or_default();
    let max_tokens = optional_u64(&request, "max_completion_tokens")
        .or_else(|| optional_u64(&request, "max_tokens"));
    let plan = Plan::new(
        &shared,
        model.to_owned(),
        &inputs,
        &last_user,
        max_tokens,
        &tool_context,
    );
    let include_usage = stream
        && !plan.markers.no_usage
        && request
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            == Some(true);

    let killer = killer.map(|Extension(killer)| killer);
    if let Some(response) = preflight(&shared, &plan, stream, killer.clone(), status_error).await {
        return response;
    }

    let id = format!("chatcmpl-mock{:012}", shared.next_id());
    let created = unix_now();
    let finish_reason = if !plan.calls.is_empty() {
        "tool_calls"
    } else if plan.truncated {
        "length"
    } else {
        "stop"
    };
    // The calls of the reply with their ids: `(id, name, arguments)`.
    let calls: Vec<(String, &str, &str)> = plan
        .calls
        .iter()
        .map(|call| {
            (
                format!("call_{}", next_call_number()),
                call.name.as_str(),
                call.arguments.as_str(),
            )
        })
        .collect();
    let usage = json!({
        "prompt_tokens": plan.prompt_tokens,
        "completion_tokens": plan.completion_tokens(),
        "total_tokens": plan.prompt_tokens + plan.completion_tokens(),
    });

    if !stream {
        let message = if calls.is_empty() {
            json!({"role": "assistant", "content": plan.text(), "refusal": null})
        } else {
            let tool_calls: Vec<Value> = calls
                .iter()
                .map(|(id, name, arguments)| {
                    json!({"id": id, "type": "function", "function": {"name": name, "arguments": arguments}})
                })
                .collect();
            json!({"role": "assistant", "content": null, "refusal": null, "tool_calls": tool_calls})
        };
        let mut body = json!({
            "id": id,
            "object": "chat.completion",
            "created": created,
            "model": plan.model,
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": null,
                "finish_reason": finish_reason,
            }],
            "usage": usage,
        });
        if let (true, Some(fields)) = (plan.markers.no_usage, body.as_object_mut()) {
            fields.remove("usage");
        }
        return Json(body).into_response();
    }

    let chunk = |choices: Value, usage: Option<&Value>| {
        let mut chunk = json!({
            "id": id,
            "object": "chat.completion.chunk",
            "created": created,
            "model": plan.model,
            "choices": choices,
        });
        if include_usage {
            chunk["usage"] = usage.cloned().unwrap_or(Value::Null);
        }
        format!("data: {chunk}\n\n")
    };
    let delta = |delta: Value, finish_reason: Option<&str>| json!([{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}]);

    let mut steps = Steps::default();
    let complete = if calls.is_empty() {
        steps.send(chunk(
            delta(json!({"role": "assistant", "content": ""}), None),
            None,
        ));
        steps.tokens(
            &plan.tokens,
            shared.config.token_interval,
            plan.markers.pause,
            plan.markers.cut,
            |token| chunk(delta(json!({"content": token}), None), None),
        )
    } else {
        // As OpenAI streams calls: the first fragment of each carries its index, id, type
        // and name with empty arguments, the next ones pieces of the arguments.
        steps.send(chunk(
            delta(json!({"role": "assistant", "content": null}), None),
            None,
        ));
        let mut frames = Vec::new();
        for (index, (id, name, arguments)) in calls.iter().enumerate() {
            let fragment = |call: Value| delta(json!({"tool_calls": [call]}), None);
            frames.push(chunk(
                fragment(json!({"index": index, "id": id, "type": "function",
                                "function": {"name": name, "arguments": ""}})),
                None,
            ));
            for piece in argument_fragments(arguments) {
                frames.push(chunk(
                    fragment(json!({"index": index, "function": {"arguments": piece}})),
                    None,
                ));
            }
        }
        steps.tokens(
            &frames,
            shared.config.token_interval,
            plan.markers.pause,
            plan.markers.cut,
            str::to_owned,
        )
    };
    if complete {
        steps.send(chunk(delta(json!({}), Some(finish_reason)), None));
        if include_usage {
            steps.send(chunk(json!([]), Some(&usage)));
        }
        steps.send("data: [DONE]\n\n".to_owned());
    }
    steps.into_response(&shared, killer)
}
