//! The OpenAI Embeddings flavour: `POST /v1/embeddings`, with deterministic vectors.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use axum::extract::State;
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::openai;
use crate::server::Shared;

/// Dimensions of every mock embedding.
pub const EMBEDDING_DIMENSIONS: usize = 256;

/// Words left out of a mock embedding, as embedding models give them little weight.
const STOPWORDS: &[&str] = &[
    "a", "an", "and", "are", "at", "be", "by", "do", "does", "for", "how", "i", "in", "is", "it",
    "my", "of", "on", "or", "should", "that", "the", "this", "to", "was", "what", "when", "why",
    "with", "you",
];

/// Groups of words that get one vector component, so that a text can be near a query it
/// shares no word with — what embeddings find and BM25 does not.
const SYNONYMS: &[&[&str]] = &[
    &[
        "car",
        "cars",
        "automobile",
        "automobiles",
        "vehicle",
        "vehicles",
    ],
    &["maintenance", "service", "servicing", "upkeep"],
    &["doctor", "doctors", "physician", "physicians"],
    &["buy", "buying", "purchase", "purchasing"],
];

/// The mock embedding of `text`: a bag of its lower-cased words (split at anything not
/// alphanumeric), stopwords left out and the words of a synonym group folded onto the
/// group's first, each hashed (FNV-1a) into one of [`EMBEDDING_DIMENSIONS`] components
/// and counted; then scaled to unit length. A text without a counted word is the unit
/// vector of component 0.
pub fn embedding(text: &str) -> Vec<f32> {
    let mut v = vec![0.0f32; EMBEDDING_DIMENSIONS];
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        let word = word.to_lowercase();
        if STOPWORDS.contains(&word.as_str()) {
            continue;
        }
        let word = SYNONYMS
            .iter()
            .find(|group| group.contains(&word.as_str()))
            .map_or(word.as_str(), |group| group[0]);
        v[(fnv1a(word.as_bytes()) % EMBEDDING_DIMENSIONS as u64) as usize] += 1.0;
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    if norm == 0.0 {
        v[0] = 1.0;
    } else {
        v.iter_mut().for_each(|x| *x /= norm);
    }
    v
}

fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// `POST /v1/embeddings`: `{input: string | [string], model}` answered with
/// `{object: "list", data: [{object: "embedding", index, embedding}], model, usage}`.
/// Fails with the status set by [`crate::MockProvider::set_embeddings_status`] when one
/// is set.
pub(crate) async fn embeddings(
    State(shared): State<Arc<Shared>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    shared.embedding_requests.fetch_add(1, Ordering::SeqCst);
    if let Some(response) = openai::auth_failure(&shared, &headers) {
        return response;
    }
    let status = shared.embeddings_status.load(Ordering::SeqCst);
    if status != 0 {
        return openai::status_error(status);
    }
    let Some(model) = body.get("model").and_then(Value::as_str) else {
        return openai::error(
            400,
            "you must provide a model parameter",
            "invalid_request_error",
            None,
        );
    };
    let inputs: Vec<String> = match body.get("input") {
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(items)) if !items.is_empty() => {
            let texts: Option<Vec<String>> = items
                .iter()
                .map(|i| i.as_str().map(str::to_owned))
                .collect();
            match texts {
                Some(texts) => texts,
                None => {
                    return openai::error(
                        400,
                        "'input' must be a string or an array of strings",
                        "invalid_request_error",
                        Some("input"),
                    )
                }
            }
        }
        _ => {
            return openai::error(
                400,
                "'input' must be a non-empty string or array of strings",
                "invalid_request_error",
                Some("input"),
            )
        }
    };
    let tokens: usize = inputs.iter().map(|t| t.split_whitespace().count()).sum();
    let data: Vec<Value> = inputs
        .iter()
        .enumerate()
        .map(|(index, text)| json!({"object": "embedding", "index": index, "embedding": embedding(text)}))
        .collect();
    Json(json!({
        "object": "list",
        "data": data,
        "model": model,
        "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
    }))
    .into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cosine(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn embeddings_are_unit_length_and_deterministic() {
        let a = embedding("Engines need fresh oil");
        assert_eq!(a.len(), EMBEDDING_DIMENSIONS);
        assert!((cosine(&a, &a) - 1.0).abs() < 1e-6);
        assert_eq!(a, embedding("engines NEED fresh oil!"));
        assert_eq!(embedding("the a is")[0], 1.0, "no counted word");
    }

    #[test]
    fn synonyms_meet_and_unrelated_texts_do_not() {
        let query = embedding("car service");
        assert!((cosine(&query, &embedding("automobile maintenance")) - 1.0).abs() < 1e-6);
        assert!(cosine(&query, &embedding("photosynthesis sunlight")) < 0.01);
    }
}
