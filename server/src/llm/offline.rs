//! The built-in offline model (no network, no key): quotes the passages retrieved for the
//! message with their sources, or says that no language model is configured and how to
//! configure one; streams word by word with real token counts.

use async_trait::async_trait;
use futures::StreamExt;

use super::{
    tokens, Event, EventStream, FinishReason, Prompt, Provider, ProviderError, Sampling, Usage,
    OFFLINE_MODEL,
};

/// The offline model.
pub struct OfflineModel;

/// What the offline model says when it has no passage to quote.
pub const NOT_CONFIGURED: &str = "No language model is configured on this AgentChat server, so I cannot compose \
an answer. I can only quote this agent's knowledge base, and nothing in it matches your message. To get real \
answers, set OPENAI_API_KEY (with OPENAI_BASE_URL for Ollama, vLLM, llama.cpp, LM Studio, OpenRouter or Groq) or \
ANTHROPIC_API_KEY, restart the server, and choose a model for this agent.";

/// The full reply of the offline model to `prompt`.
pub fn reply(prompt: &Prompt) -> String {
    if prompt.passages.is_empty() {
        return NOT_CONFIGURED.to_string();
    }
    let mut out = String::from(
        "No language model is configured, so here are the most relevant passages from this agent's knowledge base:\n",
    );
    for p in &prompt.passages {
        let source = p
            .url
            .as_deref()
            .map_or_else(|| p.title.clone(), |u| format!("{} ({u})", p.title));
        out.push_str(&format!(
            "\n{} {}\n> {}\n",
            p.marker,
            source,
            p.text.trim().replace('\n', "\n> ")
        ));
    }
    out
}

/// Splits `text` into word-sized fragments that concatenate back to `text`.
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        if c.is_whitespace() && !current.trim().is_empty() {
            out.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    if !current.is_empty() {
        out.push(current);
    }
    out
}

/// `text` cut before its first stop sequence, then to the words that fit `max_tokens` (each
/// with its leading whitespace), with why it ends ([`FinishReason::Length`] when cut).
pub fn limited(text: &str, sampling: &Sampling) -> (Vec<String>, FinishReason) {
    let end = sampling
        .stop
        .iter()
        .filter(|s| !s.is_empty())
        .filter_map(|s| text.find(s.as_str()))
        .min()
        .unwrap_or(text.len());
    let all = words(&text[..end]);
    let Some(max) = sampling.max_tokens else {
        return (all, FinishReason::Stop);
    };
    let mut used = 0u32;
    let mut kept = Vec::new();
    for word in all {
        let cost = tokens::count(&word);
        if used + cost > max {
            return (kept, FinishReason::Length);
        }
        used += cost;
        kept.push(word);
    }
    (kept, FinishReason::Stop)
}

/// Tokens of everything the prompt sends.
pub fn prompt_tokens(prompt: &Prompt) -> u32 {
    tokens::count(&prompt.system)
        + prompt
            .turns
            .iter()
            .map(|t| tokens::count(&t.content))
            .sum::<u32>()
        + prompt
            .passages
            .iter()
            .map(|p| tokens::count(&p.text))
            .sum::<u32>()
}

#[async_trait]
impl Provider for OfflineModel {
    fn code(&self) -> &'static str {
        "builtin"
    }

    fn name(&self) -> &'static str {
        "the built-in model"
    }

    async fn models(&self) -> Result<Vec<String>, ProviderError> {
        Ok(vec![OFFLINE_MODEL.into()])
    }

    async fn stream(&self, _model: &str, prompt: &Prompt) -> Result<EventStream, ProviderError> {
        let (words, finish) = limited(&reply(prompt), &prompt.sampling);
        let usage = Usage {
            prompt: prompt_tokens(prompt),
            completion: tokens::count(&words.concat()),
        };
        let events = words
            .into_iter()
            .map(|w| Ok(Event::Delta(w)))
            .chain(std::iter::once(Ok(Event::End(Some(usage), finish))));
        Ok(futures::stream::iter(events).boxed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::llm::{Passage, Role, Turn};

    #[test]
    fn words_concatenate_back() {
        let text = "Hello,  world!\nNew line";
        let parts = words(text);
        assert_eq!(parts.concat(), text);
        assert_eq!(parts.len(), 4);
    }

    #[tokio::test]
    async fn without_passages_it_says_how_to_configure_a_model() {
        let prompt = Prompt {
            system: "Be brief".into(),
            turns: vec![Turn::text(Role::User, "hi")],
            passages: vec![],
            ..Prompt::default()
        };
        let events: Vec<_> = OfflineModel
            .stream(OFFLINE_MODEL, &prompt)
            .await
            .unwrap()
            .collect()
            .await;
        let text: String = events
            .iter()
            .filter_map(|e| match e {
                Ok(Event::Delta(d)) => Some(d.as_str()),
                _ => None,
            })
            .collect();
        assert_eq!(text, NOT_CONFIGURED);
        assert!(events.len() > 10, "streamed word by word");
        let Some(Ok(Event::End(Some(usage), FinishReason::Stop))) = events.last() else {
            panic!("ends with usage")
        };
        assert_eq!(usage.completion, tokens::count(NOT_CONFIGURED));
        assert_eq!(
            usage.prompt,
            tokens::count("Be brief") + tokens::count("hi")
        );
    }

    #[test]
    fn stop_sequences_and_the_token_limit_cut_the_reply() {
        let text = "one two three END four";
        let stop = Sampling {
            stop: vec!["zzz".into(), "END".into()],
            ..Sampling::default()
        };
        let (kept, finish) = limited(text, &stop);
        assert_eq!(
            (kept.concat().as_str(), finish),
            ("one two three ", FinishReason::Stop)
        );
        let short = Sampling {
            max_tokens: Some(2),
            ..Sampling::default()
        };
        let (kept, finish) = limited(text, &short);
        assert_eq!(
            (kept.concat().as_str(), finish),
            ("one two", FinishReason::Length)
        );
        let (kept, finish) = limited(text, &Sampling::default());
        assert_eq!((kept.concat().as_str(), finish), (text, FinishReason::Stop));
    }

    #[test]
    fn with_passages_it_quotes_them_with_sources() {
        let prompt = Prompt {
            passages: vec![Passage {
                marker: "[1]".into(),
                title: "Guide".into(),
                url: Some("https://example.com/g".into()),
                text: "Use cargo new.".into(),
            }],
            ..Prompt::default()
        };
        let text = reply(&prompt);
        assert!(
            text.contains("[1] Guide (https://example.com/g)") && text.contains("> Use cargo new.")
        );
    }
}
