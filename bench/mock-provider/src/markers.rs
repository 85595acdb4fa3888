//! Control markers (`[[name:value]]`) found in the last user message.

use std::time::Duration;

/// The largest word count a `[[tokens:N]]` marker asks for; larger values are capped.
pub const MAX_TOKENS_MARKER: usize = 1_000_000;

/// A `[[status:CODE]]` or `[[status:CODExTIMES]]` marker.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct StatusMarker {
    /// The status to answer, 400 to 599.
    pub code: u16,
    /// How many requests carrying this marker fail; `None` for all of them.
    pub times: Option<u32>,
    /// The marker text, which counts the requests carrying it.
    pub key: String,
}

/// A `[[call:NAME:ARGS]]` or `[[call-always:NAME:ARGS]]` marker: a tool call to answer
/// with when the request offers tools.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ScriptedCall {
    /// The tool's name (`^[a-zA-Z0-9_-]{1,64}$`).
    pub name: String,
    /// The arguments, JSON object text as written in the marker.
    pub arguments: String,
    /// `call-always`: made on every request that offers tools, even after tool results.
    pub always: bool,
}

/// The markers of one request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Markers {
    pub status: Option<StatusMarker>,
    pub cut: Option<usize>,
    pub pause: Option<Duration>,
    pub delay: Option<Duration>,
    pub tokens: Option<usize>,
    /// `[[usage:none]]`: the reply reports no token usage.
    pub no_usage: bool,
    /// The scripted tool calls, in the order of their markers.
    pub calls: Vec<ScriptedCall>,
}

/// Extracts the markers of `text` and returns them with the text stripped of them.
///
/// Text between `[[` and `]]` that is not a known marker with a valid value is kept as is.
/// The whitespace around a removed marker is collapsed and the result is trimmed.
pub(crate) fn parse(text: &str) -> (Markers, String) {
    let mut markers = Markers::default();
    let mut cleaned = String::with_capacity(text.len());
    let mut rest = text;
    let mut skip_space = false;

    while let Some(start) = rest.find("[[") {
        let Some(len) = rest[start + 2..].find("]]") else {
            break;
        };
        let end = start + 2 + len + 2;
        let whole = &rest[..end];
        let marker = &rest[start..end];
        let inner = &rest[start + 2..end - 2];

        let before = &whole[..start];
        push_text(&mut cleaned, before, skip_space);
        if apply(&mut markers, marker, inner) {
            skip_space = cleaned.is_empty() || cleaned.ends_with(char::is_whitespace);
        } else {
            // Not a marker: keep `[[` and look for a marker after it.
            cleaned.push_str("[[");
            skip_space = false;
            rest = &rest[start + 2..];
            continue;
        }
        rest = &rest[end..];
    }
    push_text(&mut cleaned, rest, skip_space);
    (markers, cleaned.trim().to_owned())
}

fn push_text(out: &mut String, text: &str, skip_leading_space: bool) {
    if skip_leading_space {
        out.push_str(text.trim_start());
    } else {
        out.push_str(text);
    }
}

/// Records the marker `[[inner]]` in `markers`; false when it is not a valid marker.
fn apply(markers: &mut Markers, marker: &str, inner: &str) -> bool {
    let Some((name, value)) = inner.split_once(':') else {
        return false;
    };
    let value = value.trim();
    match name.trim() {
        "status" => {
            let (code, times) = match value.split_once(['x', 'X']) {
                Some((code, times)) => match times.trim().parse::<u32>() {
                    Ok(times) => (code.trim(), Some(times)),
                    Err(_) => return false,
                },
                None => (value, None),
            };
            match code.parse::<u16>() {
                Ok(code @ 400..=599) => {
                    markers.status = Some(StatusMarker {
                        code,
                        times,
                        key: marker.to_owned(),
                    });
                    true
                }
                _ => false,
            }
        }
        "cut" => set(&mut markers.cut, value.parse().ok()),
        "pause" => set(
            &mut markers.pause,
            value.parse().ok().map(Duration::from_millis),
        ),
        "delay" => set(
            &mut markers.delay,
            value.parse().ok().map(Duration::from_millis),
        ),
        "tokens" => set(
            &mut markers.tokens,
            value
                .parse::<usize>()
                .ok()
                .map(|n| n.min(MAX_TOKENS_MARKER)),
        ),
        "usage" if value == "none" => {
            markers.no_usage = true;
            true
        }
        kind @ ("call" | "call-always") => match scripted_call(value, kind == "call-always") {
            Some(call) => {
                markers.calls.push(call);
                true
            }
            None => false,
        },
        _ => false,
    }
}

/// The call of a `NAME:ARGS` marker value: a valid tool name, then a JSON object.
fn scripted_call(value: &str, always: bool) -> Option<ScriptedCall> {
    let (name, arguments) = value.split_once(':')?;
    let (name, arguments) = (name.trim(), arguments.trim());
    if !valid_tool_name(name) {
        return None;
    }
    match serde_json::from_str::<serde_json::Value>(arguments) {
        Ok(serde_json::Value::Object(_)) => Some(ScriptedCall {
            name: name.to_owned(),
            arguments: arguments.to_owned(),
            always,
        }),
        _ => None,
    }
}

/// Whether `name` is a tool name both APIs accept: 1 to 64 ASCII letters, digits, `_`
/// or `-`.
pub(crate) fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

fn set<T>(slot: &mut Option<T>, value: Option<T>) -> bool {
    match value {
        Some(value) => {
            *slot = Some(value);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn usage_none_asks_for_a_reply_without_usage() {
        let (markers, text) = parse("hi [[usage:none]] there");
        assert!(markers.no_usage);
        assert_eq!(text, "hi there");
        let (markers, text) = parse("[[usage:all]]");
        assert!(!markers.no_usage);
        assert_eq!(text, "[[usage:all]]");
    }

    #[test]
    fn call_markers_script_tool_calls_in_order() {
        let (markers, text) = parse(
            r#"weather? [[call:get_weather:{"city":"Paris"}]] [[call-always:now: {} ]] [[call:bad name:{}]] [[call:x:[1]]] [[call:y:{oops]]"#,
        );
        assert_eq!(
            markers.calls,
            [
                ScriptedCall {
                    name: "get_weather".into(),
                    arguments: r#"{"city":"Paris"}"#.into(),
                    always: false,
                },
                ScriptedCall {
                    name: "now".into(),
                    arguments: "{}".into(),
                    always: true,
                },
            ]
        );
        // Invalid ones are text.
        assert_eq!(
            text,
            "weather? [[call:bad name:{}]] [[call:x:[1]]] [[call:y:{oops]]"
        );
        assert!(valid_tool_name("a-b_C9") && !valid_tool_name("") && !valid_tool_name("a.b"));
        assert!(!valid_tool_name(&"x".repeat(65)));
    }

    #[test]
    fn text_without_markers_is_kept() {
        let (markers, text) = parse("hello [world] [[not a marker]] [[cut:x]]");
        assert_eq!(markers, Markers::default());
        assert_eq!(text, "hello [world] [[not a marker]] [[cut:x]]");
    }

    #[test]
    fn markers_are_parsed_and_stripped() {
        let (markers, text) =
            parse("[[delay:20]] hello [[cut:3]] world [[pause:150]][[tokens:5]] [[status:503x2]]");
        assert_eq!(text, "hello world");
        assert_eq!(markers.cut, Some(3));
        assert_eq!(markers.delay, Some(Duration::from_millis(20)));
        assert_eq!(markers.pause, Some(Duration::from_millis(150)));
        assert_eq!(markers.tokens, Some(5));
        assert_eq!(
            markers.status,
            Some(StatusMarker {
                code: 503,
                times: Some(2),
                key: "[[status:503x2]]".to_owned()
            })
        );
    }

    #[test]
    fn invalid_status_codes_are_not_markers() {
        for text in [
            "[[status:200]]",
            "[[status:600]]",
            "[[status:50x]]",
            "[[status:]]",
        ] {
            let (markers, cleaned) = parse(text);
            assert_eq!(markers.status, None, "{text}");
            assert_eq!(cleaned, text);
        }
        let (markers, _) = parse("[[status:429]]");
        assert_eq!(markers.status.map(|s| (s.code, s.times)), Some((429, None)));
    }

    #[test]
    fn tokens_are_capped_and_unicode_survives() {
        let (markers, text) = parse("héllo [[tokens:99999999999]] wörld [[");
        assert_eq!(markers.tokens, Some(MAX_TOKENS_MARKER));
        assert_eq!(text, "héllo wörld [[");
    }
}
