//! Token counting with a real BPE tokenizer (tiktoken's `o200k_base`, bundled in the
//! `tiktoken-rs` crate) and the context windows of well-known models.

use std::sync::OnceLock;

use tiktoken_rs::CoreBPE;

/// Context window assumed for a model this table does not know (tokens).
pub const DEFAULT_CONTEXT_WINDOW: u32 = 8_192;
/// Context window of the built-in offline model (tokens).
pub const OFFLINE_CONTEXT_WINDOW: u32 = 8_192;

fn bpe() -> &'static CoreBPE {
    static BPE: OnceLock<CoreBPE> = OnceLock::new();
    BPE.get_or_init(|| tiktoken_rs::o200k_base().expect("the bundled o200k_base tokenizer loads"))
}

/// Number of tokens in `text`, read as ordinary text: a special-token string such as
/// `<|endoftext|>` inside a message or a document counts as the several tokens of its
/// characters, as the providers' APIs encode user content. (Ordinary encoding also skips
/// the special-token scan, which makes chunk sizing, the most frequent caller, cheaper.)
pub fn count(text: &str) -> u32 {
    bpe().encode_ordinary(text).len() as u32
}

/// Loads the tokenizer ahead of the first chat (it takes a moment).
pub fn warm_up() {
    let _ = bpe();
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
    fn knows_common_context_windows() {
        assert_eq!(context_window("gpt-4o-mini"), Some(128_000));
        assert_eq!(context_window("claude-sonnet-4-5"), Some(200_000));
        assert_eq!(context_window("openai/gpt-4"), Some(8_192));
        assert_eq!(context_window("my-finetune"), None);
    }
}
