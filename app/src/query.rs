//! Query strings of the dashboard's own URLs and API calls.

/// `text` percent-encoded for a URL's query or path segment: everything but ASCII letters,
/// digits and `-._~` becomes `%XX` of its UTF-8 bytes (a space is `%20`, never `+`).
pub fn encode_component(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'.' | b'_' | b'~') {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}

/// `?name=value&…` of the pairs whose value is not empty, encoded; `""` when none is left.
pub fn query_string(pairs: &[(&str, &str)]) -> String {
    let parts: Vec<String> = pairs
        .iter()
        .filter(|(_, value)| !value.is_empty())
        .map(|(name, value)| format!("{name}={}", encode_component(value)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("?{}", parts.join("&"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_are_percent_encoded() {
        assert_eq!(encode_component("abc-._~XYZ09"), "abc-._~XYZ09");
        assert_eq!(encode_component("ship nor"), "ship%20nor");
        assert_eq!(encode_component("a&b=c+d?/#%"), "a%26b%3Dc%2Bd%3F%2F%23%25");
        assert_eq!(encode_component("Grüße"), "Gr%C3%BC%C3%9Fe");
    }

    #[test]
    fn query_strings_leave_out_empty_values() {
        assert_eq!(query_string(&[]), "");
        assert_eq!(query_string(&[("a", ""), ("b", "")]), "");
        assert_eq!(query_string(&[("a", ""), ("b", "x y")]), "?b=x%20y");
    }
}
