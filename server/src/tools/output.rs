//! The cap on what one tool call gives back to the model: an answer is re-read at every
//! later step, so it is cut to [`MAX_OUTPUT_BYTES`] with a note saying so.

/// Longest tool output handed to the model, in bytes of UTF-8 (16 KiB), the note that says
/// how much was cut included.
pub const MAX_OUTPUT_BYTES: usize = 16 * 1024;

/// `text` within [`MAX_OUTPUT_BYTES`]: unchanged when it fits, else cut on a character
/// boundary and ended with `\n[output cut: N more bytes]`. Idempotent.
pub fn cap(mut text: String) -> String {
    if text.len() <= MAX_OUTPUT_BYTES {
        return text;
    }
    // The note is sized for the longest count it could hold (all of `text`), so the kept
    // part plus the actual note never passes the limit.
    let longest_note = note(text.len()).len();
    let mut end = MAX_OUTPUT_BYTES.saturating_sub(longest_note);
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let left_out = text.len() - end;
    text.truncate(end);
    text.push_str(&note(left_out));
    text
}

fn note(left_out: usize) -> String {
    format!("\n[output cut: {left_out} more bytes]")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn short_text_is_unchanged() {
        assert_eq!(cap(String::new()), "");
        assert_eq!(cap("hello".into()), "hello");
        let exact = "a".repeat(MAX_OUTPUT_BYTES);
        assert_eq!(cap(exact.clone()), exact);
    }

    #[test]
    fn long_text_is_cut_with_a_note() {
        let text = "a".repeat(MAX_OUTPUT_BYTES + 12_345);
        let capped = cap(text);
        assert_eq!(capped.len(), MAX_OUTPUT_BYTES);
        let (kept, note) = capped.split_once('\n').expect("a note");
        assert!(kept.bytes().all(|b| b == b'a'));
        assert_eq!(
            note,
            format!(
                "[output cut: {} more bytes]",
                MAX_OUTPUT_BYTES + 12_345 - kept.len()
            )
        );
        assert_eq!(cap(capped.clone()), capped, "capping twice changes nothing");
    }

    #[test]
    fn cuts_on_a_character_boundary() {
        // "é" is two bytes; an odd number of ASCII bytes first puts the even cut point
        // inside a "é", so the cut must step back one byte.
        for prefix in ["", "x"] {
            let text = format!("{prefix}{}", "é".repeat(MAX_OUTPUT_BYTES));
            let total = text.len();
            let capped = cap(text);
            // At most one byte short of the limit: the half of a "é" that was stepped over.
            assert!((MAX_OUTPUT_BYTES - 1..=MAX_OUTPUT_BYTES).contains(&capped.len()));
            let (kept, note) = capped.split_once("\n[output cut: ").expect("a note");
            assert!(kept.ends_with('é'));
            assert_eq!(note, format!("{} more bytes]", total - kept.len()));
        }
    }
}
