//! The Anthropic Messages flavour: `POST /v1/messages`.

use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::{json, Value};

use crate::common::{argument_fragments, next_call_number, optional_u64, preflight, text_of, Plan};
use crate::server::Shared;
use crate::stream::{ConnectionKiller, Steps};
use crate::tools;

/// An error answer: `{"type": "error", "error": {"type", "message"}}`.
pub(crate) fn error(status: u16, kind: &str, message: &str) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let body = json!({"type": "error", "error": {"type": kind, "message": message}});
    (status, Json(body)).into_response()
}

/// The answer to a `[[status:CODE]]` marker.
fn status_error(code: u16) -> Response {
    let kind = match code {
        401 => "authentication_error",
        402 => "billing_error",
        403 => "permission_error",
        404 => "not_found_error",
        413 => "request_too_large",
        429 => "rate_limit_error",
        504 => "timeout_error",
        529 => "overloaded_error",
        500..=599 => "api_error",
        _ => "invalid_request_error",
    };
    error(code, kind, &format!("mock failure {code}"))
}

/// Checks the `x-api-key` header against the configured key; the 401 answer when it fails.
pub(crate) fn auth_failure(shared: &Shared, headers: &HeaderMap) -> Option<Response> {
    let expected = shared.config.api_key.as_ref()?;
    match headers.get("x-api-key").map(|value| value.as_bytes()) {
        Some(key) if key == expected.as_bytes() => None,
        Some(_) => Some(error(401, "authentication_error", "invalid x-api-key")),
        None => Some(error(
            401,
            "authentication_error",
            "x-api-key header is required",
        )),
    }
}

fn invalid(message: &str) -> Response {
    error(400, "invalid_request_error", message)
}

/// `POST /v1/messages`.
pub(crate) async fn messages(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    killer: Option<Extension<ConnectionKiller>>,
    body: Bytes,
) -> Response {
    if let Some(response) = auth_failure(&shared, &headers) {
        return response;
    }
    if !headers.contains_key("anthropic-version") {
        return invalid("anthropic-version: header is required");
    }
    let request = match serde_json::from_slice::<Value>(&body) {
        Ok(request @ Value::Object(_)) => request,
        Ok(_) => return invalid("The request body must be a JSON object."),
        Err(parse_error) => {
            return invalid(&format!(
                "There was an issue with your request body: {parse_error}"
            ))
        }
    };
    let Some(model) = request.get("model").and_then(Value::as_str) else {
        return invalid("model: Field required");
    };
    let Some(messages) = request.get("messages").and_then(Value::as_array) else {
        return invalid("messages: Field required");
    };
    if messages.is_empty() {
        return invalid("messages: at least one message is required");
    }
    let Some(max_tokens) = optional_u64(&request, "max_tokens") else {
        return invalid("max_tokens: Field required");
    };
    let stream = request.get("stream").and_then(Value::as_bool) == Some(true);
    let tool_context = match tools::anthropic(&request, messages) {
        Ok(context) => context,
        Err(refused) => return invalid(&refused.message),
    };

    let content = |message: &Value| text_of(message.get("content").unwrap_or(&Value::Null));
    let mut inputs = vec![text_of(request.get("system").unwrap_or(&Value::Null))];
    inputs.extend(messages.iter().map(content));
    // The person's last message: tool results are user messages too.
    let last_user = messages
        .iter()
        .rev()
        .find(|message| {
            message.get("role").and_then(Value::as_str) == Some("user")
                && !tools::is_tool_results(message)
        })
        .map(content)
        .unwrap_or_default();
    let plan = Plan::new(
        &shared,
        model.to_owned(),
        &inputs,
        &last_user,
        Some(max_tokens),
        &tool_context,
    );

    let killer = killer.map(|Extension(killer)| killer);
    if let Some(response) = preflight(&shared, &plan, stream, killer.clone(), status_error).await {
        return response;
    }

    let id = format!("msg_mock{:012}", shared.next_id());
    let stop_reason = if !plan.calls.is_empty() {
        "tool_use"
    } else if plan.truncated {
        "max_tokens"
    } else {
        "end_turn"
    };
    // The calls of the reply with their ids: `(id, name, arguments)`.
    let calls: Vec<(String, &str, &str)> = plan
        .calls
        .iter()
        .map(|call| {
            (
                format!("toolu_{}", next_call_number()),
                call.name.as_str(),
                call.arguments.as_str(),
            )
        })
        .collect();

    if !stream {
        let content: Vec<Value> = if calls.is_empty() {
            vec![json!({"type": "text", "text": plan.text()})]
        } else {
            calls
                .iter()
                .map(|(id, name, arguments)| {
                    let input: Value = serde_json::from_str(arguments).unwrap_or_default();
                    json!({"type": "tool_use", "id": id, "name": name, "input": input})
                })
                .collect()
        };
        let body = json!({
            "id": id,
            "type": "message",
            "role": "assistant",
            "model": plan.model,
            "content": content,
            "stop_reason": stop_reason,
            "stop_sequence": null,
            "usage": {"input_tokens": plan.prompt_tokens, "output_tokens": plan.completion_tokens()},
        });
        return Json(body).into_response();
    }

    let event = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let mut steps = Steps::default();
    steps.send(event(
        "message_start",
        json!({
            "type": "message_start",
            "message": {
                "id": id,
                "type": "message",
                "role": "assistant",
                "model": plan.model,
                "content": [],
                "stop_reason": null,
                "stop_sequence": null,
                "usage": {"input_tokens": plan.prompt_tokens, "output_tokens": 1},
            },
        }),
    ));
    let complete = if calls.is_empty() {
        steps.send(event(
            "content_block_start",
            json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        ));
        steps.send(event("ping", json!({"type": "ping"})));
        let complete = steps.tokens(
            &plan.tokens,
            shared.config.token_interval,
            plan.markers.pause,
            plan.markers.cut,
            |token| {
                event(
                    "content_block_delta",
                    json!({
                        "type": "content_block_delta",
                        "index": 0,
                        "delta": {"type": "text_delta", "text": token},
                    }),
                )
            },
        );
        if complete {
            steps.send(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ));
        }
        complete
    } else {
        // As Anthropic streams calls: a `tool_use` block per call, its input in
        // `input_json_delta` pieces.
        steps.send(event("ping", json!({"type": "ping"})));
        let mut frames = Vec::new();
        for (index, (id, name, arguments)) in calls.iter().enumerate() {
            frames.push(event(
                "content_block_start",
                json!({"type": "content_block_start", "index": index, "content_block":
                       {"type": "tool_use", "id": id, "name": name, "input": {}}}),
            ));
            for piece in argument_fragments(arguments) {
                frames.push(event(
                    "content_block_delta",
                    json!({"type": "content_block_delta", "index": index,
                           "delta": {"type": "input_json_delta", "partial_json": piece}}),
                ));
            }
            frames.push(event(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": index}),
            ));
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
        steps.send(event(
            "message_delta",
            json!({
                "type": "message_delta",
                "delta": {"stop_reason": stop_reason, "stop_sequence": null},
                "usage": {"output_tokens": plan.completion_tokens()},
            }),
        ));
        steps.send(event("message_stop", json!({"type": "message_stop"})));
    }
    steps.into_response(&shared, killer)
}
