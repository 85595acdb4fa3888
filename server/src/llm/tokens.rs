//! Token counting with a real BPE tokenizer (OpenAI's `o200k_base`, through GitHub's
//! `bpe-openai`) and the context windows of well-known models.

/// Context window assumed for a model this table does not know (tokens).
pub const DEFAULT_CONTEXT_WINDOW: u32 = 8_192;
/// Context window of the built-in offline model (tokens).
pub const OFFLINE_CONTEXT_WINDOW: u32 = 8_192;

/// Tokens in `text` read as ordinary text (a special-token string counts as its characters'
/// tokens, as providers encode user content): tiktoken's `encode_ordinary` count.
pub fn count(text: &str) -> u32 {
    bpe_openai::o200k_base().count(text) as u32
}

/// Loads the tokenizer ahead of the first chat (it takes a moment).
pub fn warm_up() {
    let _ = bpe_openai::o200k_base();
}

/// The context window of `model` in tokens, from the providers' published figures.
pub fn context_window(model: &str) -> Option<u32> {
    let m = model
        .rsplit('/')
        .next()
        .unwrap_or(model)
        .to_ascii_lowercase();
    let known: &[(&str, u32)] = &[
        ("gpt-4.1", 1_047_576),
        ("gpt-4o", 128_000),
        ("gpt-4-turbo", 128_000),
        ("gpt-4", 8_192),
        ("gpt-3.5-turbo", 16_385),
        ("gpt-5", 400_000),
        ("o1", 200_000),
        ("o3", 200_000),
        ("o4", 200_000),
        ("claude", 200_000),
        ("llama3.1", 128_000),
        ("llama3.2", 128_000),
        ("llama3.3", 128_000),
        ("llama3", 8_192),
        ("mistral", 32_768),
        ("qwen2.5", 32_768),
        ("gemma", 8_192),
    ];
    known
        .iter()
        .find(|(prefix, _)| m.starts_with(prefix))
        .map(|(_, n)| *n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_real_tokens() {
        assert_eq!(count(""), 0);
        assert_eq!(count("hello world"), 2);
        assert!(
            count("<|endoftext|>") > 1,
            "special-token strings in text are ordinary text"
        );
        assert!(count(&"lorem ipsum ".repeat(100)) >= 200);
    }

    #[test]
    fn counts_exactly_as_tiktoken_does() {
        let tiktoken = tiktoken_rs::o200k_base().unwrap();
        let fixtures =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/knowledge");
        let mut texts: Vec<String> = vec![
            "Hello, world! 日本語 🚀 <|endoftext|>".into(),
            "  leading and trailing spaces  \n\n\tcode() { x += 1; }\r\n".into(),
            "Ünïcödé ﬁ ligatures, 12345678 numbers, CamelCaseWords and don't won't".into(),
        ];
        for entry in std::fs::read_dir(fixtures).unwrap() {
            let bytes = std::fs::read(entry.unwrap().path()).unwrap();
            texts.push(String::from_utf8_lossy(&bytes).into_owned());
        }
        for text in &texts {
            for piece in [text.as_str(), &text[..text.floor_char_boundary(2_000)]] {
                assert_eq!(
                    count(piece) as usize,
                    tiktoken.encode_ordinary(piece).len(),
                    "{:?}",
                    &piece[..piece.floor_char_boundary(80)]
                );
            }
        }
    }

    #[test]
    fn knows_common_context_windows() {
        assert_eq!(context_window("gpt-4o-mini"), Some(128_000));
        assert_eq!(context_window("claude-sonnet-4-5"), Some(200_000));
        assert_eq!(context_window("openai/gpt-4"), Some(8_192));
        assert_eq!(context_window("my-finetune"), None);
    }
}
