//! JSON Schema checks of tools: the `parameters` a tool is configured with
//! ([`check_parameters`]) and the arguments a model calls it with ([`parse_arguments`],
//! [`ArgumentsValidator`]). Schemas must be self-contained: a remote `$ref` would make the
//! server fetch a URL of the tool owner's choosing (remote resolvers are off as well).

use std::fmt::Write as _;

use jsonschema::{Draft, Retrieve, Uri, ValidationError, Validator};
use serde_json::{Map, Value};

/// Longest `parameters` schema, in bytes of compact JSON (64 KiB).
pub const MAX_SCHEMA_BYTES: usize = 64 * 1024;

/// Deepest nesting of objects and arrays in a `parameters` schema (keeps the validator's
/// recursion far from the stack's end).
pub const MAX_SCHEMA_DEPTH: usize = 64;

const MAX_REPORTED_ERRORS: usize = 3;

/// Longest description of one failure, in characters.
const MAX_ERROR_CHARS: usize = 300;

/// Checks a tool's `parameters`: a JSON object with top-level `type: "object"` (OpenAI's and
/// Anthropic's rule), at most [`MAX_SCHEMA_BYTES`] and [`MAX_SCHEMA_DEPTH`], `$schema` (if
/// any) a known draft (4, 6, 7, 2019-09, 2020-12; default 2020-12), valid against its
/// meta-schema, every `$ref`/`$dynamicRef`/`$recursiveRef` starting with `#`, and compilable.
/// Errors: a sentence starting with `config.parameters`.
pub fn check_parameters(schema: &Value) -> Result<(), String> {
    ArgumentsValidator::new(schema).map(drop)
}

/// A tool call's arguments as the model wrote them: blank means `{}`, else a JSON object.
/// Errors: a sentence when the text is not a JSON object.
pub fn parse_arguments(text: &str) -> Result<Map<String, Value>, String> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "the arguments must be a JSON object, not {}",
            kind_of(&other)
        )),
        Err(e) => Err(format!("the arguments are not valid JSON: {e}")),
    }
}

/// A tool's `parameters` compiled once, to check each call's arguments against it.
#[derive(Debug)]
pub struct ArgumentsValidator {
    validator: Validator,
}

impl ArgumentsValidator {
    /// Checks `schema` as [`check_parameters`] does and compiles it.
    /// Errors: as [`check_parameters`].
    pub fn new(schema: &Value) -> Result<Self, String> {
        check_shape(schema)?;
        // The meta-schema check comes first: its errors point at the offending keyword,
        // while a compilation error may only say that something failed.
        jsonschema::meta::validate(schema).map_err(|e| {
            format!(
                "config.parameters is not a valid JSON Schema: {}",
                describe(&e)
            )
        })?;
        let validator = jsonschema::options()
            .with_retriever(NoRetrieval)
            .build(schema)
            .map_err(|e| {
                format!(
                    "config.parameters is not a valid JSON Schema: {}",
                    describe(&e)
                )
            })?;
        Ok(Self { validator })
    }

    /// Checks a call's arguments. Errors: `arguments do not match the tool's schema: ` and the
    /// first few failures with their JSON Pointer paths (`/city: 5 is not of type "string"`).
    pub fn check(&self, arguments: &Value) -> Result<(), String> {
        let mut errors = self.validator.iter_errors(arguments);
        let Some(first) = errors.next() else {
            return Ok(());
        };
        let mut message = format!(
            "arguments do not match the tool's schema: {}",
            describe(&first)
        );
        for (i, error) in errors.enumerate() {
            if i + 1 >= MAX_REPORTED_ERRORS {
                message.push_str("; and more");
                break;
            }
            let _ = write!(message, "; {}", describe(&error));
        }
        Err(message)
    }
}

fn check_shape(schema: &Value) -> Result<(), String> {
    let Some(object) = schema.as_object() else {
        return Err(format!(
            "config.parameters must be a JSON Schema object, not {}",
            kind_of(schema)
        ));
    };
    let size = serde_json::to_vec(schema).map_or(usize::MAX, |bytes| bytes.len());
    if size > MAX_SCHEMA_BYTES {
        return Err(format!(
            "config.parameters is {size} bytes long; the limit is {MAX_SCHEMA_BYTES} bytes"
        ));
    }
    check_nodes(schema, &mut String::new(), 0)?;
    if object.get("type").and_then(Value::as_str) != Some("object") {
        return Err(r#"config.parameters must have "type": "object" at the top level"#.to_owned());
    }
    Ok(())
}

/// Walks the schema: depth, `$schema` and reference keywords. Reference-like values inside
/// `enum`, `const`, `default` or `examples` are refused too (the safe side).
fn check_nodes(value: &Value, pointer: &mut String, depth: usize) -> Result<(), String> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(format!(
            "config.parameters nests deeper than {MAX_SCHEMA_DEPTH} levels"
        ));
    }
    match value {
        Value::Object(map) => {
            for (key, child) in map {
                let len = pointer.len();
                pointer.push('/');
                pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
                match (key.as_str(), child) {
                    ("$ref" | "$dynamicRef" | "$recursiveRef", Value::String(target))
                        if !target.starts_with('#') =>
                    {
                        return Err(format!(
                            "config.parameters{pointer} must point inside the schema \
                             (start with #): references to other documents are not \
                             fetched"
                        ));
                    }
                    ("$schema", Value::String(uri))
                        if Draft::from_schema_uri(uri) == Draft::Unknown =>
                    {
                        return Err(format!(
                            "config.parameters{pointer} must name a JSON Schema draft \
                             (4, 6, 7, 2019-09 or 2020-12), e.g. \
                             https://json-schema.org/draft/2020-12/schema"
                        ));
                    }
                    _ => check_nodes(child, pointer, depth + 1)?,
                }
                pointer.truncate(len);
            }
        }
        Value::Array(items) => {
            for (i, child) in items.iter().enumerate() {
                let len = pointer.len();
                let _ = write!(pointer, "/{i}");
                check_nodes(child, pointer, depth + 1)?;
                pointer.truncate(len);
            }
        }
        _ => {}
    }
    Ok(())
}

fn describe(error: &ValidationError<'_>) -> String {
    let mut message = error.to_string();
    if let Some((cut, _)) = message.char_indices().nth(MAX_ERROR_CHARS) {
        message.truncate(cut);
        message.push('…');
    }
    let path = error.instance_path().as_str();
    if path.is_empty() {
        message
    } else {
        format!("{path}: {message}")
    }
}

fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A retriever that refuses every document, in case the crate's resolver features are ever on.
struct NoRetrieval;

impl Retrieve for NoRetrieval {
    fn retrieve(
        &self,
        uri: &Uri<String>,
    ) -> Result<Value, Box<dyn std::error::Error + Send + Sync>> {
        Err(format!("{} is another document; it is not fetched", uri.as_str()).into())
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn weather() -> Value {
        json!({
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1, "maximum": 7}
            },
            "required": ["city"],
            "additionalProperties": false
        })
    }

    #[test]
    fn accepts_object_schemas() {
        assert_eq!(check_parameters(&weather()), Ok(()));
        assert_eq!(check_parameters(&json!({"type": "object"})), Ok(()));
        let with_defs = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "type": "object",
            "properties": {"where": {"$ref": "#/$defs/place"}},
            "$defs": {"place": {"type": "string"}}
        });
        assert_eq!(check_parameters(&with_defs), Ok(()));
    }

    #[test]
    fn refuses_invalid_schemas_naming_the_keyword() {
        let bad = json!({"type": "object", "properties": {"city": {"type": "strng"}}});
        assert_eq!(
            check_parameters(&bad),
            Err(
                "config.parameters is not a valid JSON Schema: /properties/city/type: \
                 \"strng\" is not valid under any of the schemas listed in the 'anyOf' keyword"
                    .to_owned()
            )
        );
        let bad_pattern = json!({"type": "object", "properties": {"x": {"pattern": "(["}}});
        let err = check_parameters(&bad_pattern).expect_err("bad regex");
        assert!(
            err.starts_with("config.parameters is not a valid JSON Schema: "),
            "{err}"
        );
        let dangling = json!({"type": "object", "properties": {"x": {"$ref": "#/$defs/none"}}});
        let err = check_parameters(&dangling).expect_err("dangling reference");
        assert!(
            err.starts_with("config.parameters is not a valid JSON Schema: "),
            "{err}"
        );
    }

    #[test]
    fn requires_an_object_type_at_the_top() {
        let expected =
            Err(r#"config.parameters must have "type": "object" at the top level"#.to_owned());
        assert_eq!(check_parameters(&json!({"type": "string"})), expected);
        assert_eq!(check_parameters(&json!({"properties": {}})), expected);
        assert_eq!(
            check_parameters(&json!({"type": ["object", "null"]})),
            expected
        );
        assert_eq!(
            check_parameters(&json!("object")),
            Err("config.parameters must be a JSON Schema object, not a string".to_owned())
        );
    }

    #[test]
    fn refuses_references_to_other_documents() {
        let remote = json!({
            "type": "object",
            "properties": {"city": {"$ref": "https://schemas.example/city.json"}}
        });
        assert_eq!(
            check_parameters(&remote),
            Err(
                "config.parameters/properties/city/$ref must point inside the schema \
                 (start with #): references to other documents are not fetched"
                    .to_owned()
            )
        );
        let relative = json!({"type": "object", "items": {"$dynamicRef": "other.json#x"}});
        let err = check_parameters(&relative).expect_err("relative reference");
        assert!(
            err.starts_with("config.parameters/items/$dynamicRef"),
            "{err}"
        );
        let custom_meta = json!({"$schema": "https://evil.example/meta", "type": "object"});
        let err = check_parameters(&custom_meta).expect_err("unknown meta-schema");
        assert!(
            err.starts_with("config.parameters/$schema must name"),
            "{err}"
        );
    }

    #[test]
    fn refuses_oversized_and_deep_schemas() {
        let big = json!({"type": "object", "description": "x".repeat(MAX_SCHEMA_BYTES)});
        let err = check_parameters(&big).expect_err("too long");
        assert!(err.contains("the limit is 65536 bytes"), "{err}");

        let mut deep = json!({"type": "string"});
        for _ in 0..MAX_SCHEMA_DEPTH {
            deep = json!({"type": "object", "properties": {"x": deep}});
        }
        let err = check_parameters(&deep).expect_err("too deep");
        assert_eq!(err, "config.parameters nests deeper than 64 levels");
    }

    #[test]
    fn arguments_are_checked_with_their_paths() {
        let validator = ArgumentsValidator::new(&weather()).expect("compiles");
        assert_eq!(validator.check(&json!({"city": "Oslo", "days": 3})), Ok(()));
        assert_eq!(
            validator.check(&json!({"city": 5})),
            Err(
                r#"arguments do not match the tool's schema: /city: 5 is not of type "string""#
                    .to_owned()
            )
        );
        assert_eq!(
            validator.check(&json!({})),
            Err(
                r#"arguments do not match the tool's schema: "city" is a required property"#
                    .to_owned()
            )
        );
        let many = validator
            .check(&json!({"city": 1, "days": 0.5, "x": 1}))
            .expect_err("four failures");
        assert!(
            many.contains("/city: 1 is not of type \"string\""),
            "{many}"
        );
        assert!(many.contains("/days: "), "{many}");
        assert_eq!(
            many.matches("; ").count(),
            3,
            "three named, then more: {many}"
        );
        assert!(many.ends_with("; and more"), "{many}");
    }

    #[test]
    fn argument_text_is_parsed() {
        assert_eq!(parse_arguments(""), Ok(Map::new()));
        assert_eq!(parse_arguments("  \n"), Ok(Map::new()));
        let parsed = parse_arguments(r#"{"city": "Oslo"}"#).expect("object");
        assert_eq!(parsed.get("city"), Some(&json!("Oslo")));
        assert_eq!(
            parse_arguments("[1, 2]"),
            Err("the arguments must be a JSON object, not an array".to_owned())
        );
        let err = parse_arguments("{city: Oslo}").expect_err("not JSON");
        assert!(
            err.starts_with("the arguments are not valid JSON: "),
            "{err}"
        );
    }
}
