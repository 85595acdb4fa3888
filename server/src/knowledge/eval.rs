//! Retrieval quality on a question set (`agentchat eval-retrieval`): each line of the set is
//! `{"q": "...", "expect": ["page-file-name.html" or "document name", ...]}`; a hit is a
//! retrieved chunk whose page URL's last path segment, page URL, or document name equals
//! one of `expect`.

use serde::Deserialize;

use super::search::{retrieve, ChunkSearch};
use crate::{ids::AgentId, store::documents::ChunkHit};

/// Retrieved chunks considered per question (hit@5 is the headline figure).
pub const DEPTH: u32 = 5;

/// One question of a set.
#[derive(Debug, Clone, Deserialize)]
pub struct Question {
    pub q: String,
    /// Page file names (`ch04-01-what-is-ownership.html`), page URLs or document names that answer.
    pub expect: Vec<String>,
}

/// The outcome of one question: the 1-based rank of the first relevant chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub question: String,
    pub rank: Option<usize>,
}

/// Figures over a question set.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    pub questions: usize,
    /// Share of questions whose first chunk is relevant (0..=1).
    pub hit_at_1: f64,
    /// Share of questions with a relevant chunk among the first five (0..=1).
    pub hit_at_5: f64,
    /// Mean reciprocal rank of the first relevant chunk (0 when none in the first five).
    pub mrr: f64,
    pub outcomes: Vec<Outcome>,
}

/// Parses a JSON Lines question set (blank lines skipped). Errors: a malformed line, by number.
pub fn parse_questions(text: &str) -> anyhow::Result<Vec<Question>> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
        .map(|(n, l)| {
            serde_json::from_str(l)
                .map_err(|e| anyhow::anyhow!("line {}: not a question ({e})", n + 1))
        })
        .collect()
}

/// Whether `hit` is one of `expect`.
pub fn is_relevant(hit: &ChunkHit, expect: &[String]) -> bool {
    let page = hit.url.as_deref();
    let page_file = page.and_then(|u| url::Url::parse(u).ok()).and_then(|u| {
        u.path_segments()
            .and_then(|mut s| s.next_back().map(str::to_string))
    });
    expect.iter().any(|e| {
        Some(e.as_str()) == page
            || page_file.as_deref() == Some(e.as_str())
            || hit.document_name == *e
    })
}

/// Runs every question against the agent's knowledge base. Errors: the store's.
pub async fn evaluate(
    search: &ChunkSearch,
    agent_id: &AgentId,
    questions: &[Question],
) -> anyhow::Result<Report> {
    let mut outcomes = Vec::new();
    for q in questions {
        let hits = retrieve::search(search, agent_id, &q.q, DEPTH).await?;
        let rank = hits
            .iter()
            .position(|h| is_relevant(h, &q.expect))
            .map(|p| p + 1);
        outcomes.push(Outcome {
            question: q.q.clone(),
            rank,
        });
    }
    Ok(report(outcomes))
}

pub fn report(outcomes: Vec<Outcome>) -> Report {
    let n = outcomes.len();
    let share = |f: &dyn Fn(&Outcome) -> f64| {
        if n == 0 {
            0.0
        } else {
            outcomes.iter().map(f).sum::<f64>() / n as f64
        }
    };
    Report {
        questions: n,
        hit_at_1: share(&|o| f64::from(u8::from(o.rank == Some(1)))),
        hit_at_5: share(&|o| f64::from(u8::from(o.rank.is_some_and(|r| r <= 5)))),
        mrr: share(&|o| o.rank.map_or(0.0, |r| 1.0 / r as f64)),
        outcomes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hit(url: Option<&str>, name: &str) -> ChunkHit {
        ChunkHit {
            chunk_id: 1.into(),
            document_id: "d".into(),
            title: "t".into(),
            url: url.map(str::to_string),
            document_name: name.into(),
            heading_path: String::new(),
            text: String::new(),
            score: 1.0,
        }
    }

    #[test]
    fn relevance_matches_page_file_names_urls_and_document_names() {
        let h = hit(
            Some("http://127.0.0.1:9/book/ch04-01-what-is-ownership.html"),
            "http://127.0.0.1:9/book/",
        );
        assert!(is_relevant(&h, &["ch04-01-what-is-ownership.html".into()]));
        assert!(is_relevant(
            &h,
            &["http://127.0.0.1:9/book/ch04-01-what-is-ownership.html".into()]
        ));
        assert!(!is_relevant(
            &h,
            &["ch03-01-variables-and-mutability.html".into()]
        ));
        assert!(is_relevant(
            &hit(None, "Apache-2.0.txt"),
            &["Apache-2.0.txt".into()]
        ));
    }

    #[test]
    fn figures_are_hit_at_1_hit_at_5_and_mrr() {
        let o = |rank| Outcome {
            question: String::new(),
            rank,
        };
        let r = report(vec![o(Some(1)), o(Some(2)), o(None), o(Some(4))]);
        assert_eq!(r.questions, 4);
        assert_eq!(r.hit_at_1, 0.25);
        assert_eq!(r.hit_at_5, 0.75);
        assert!((r.mrr - (1.0 + 0.5 + 0.25) / 4.0).abs() < 1e-9);
    }

    #[test]
    fn question_sets_are_json_lines() {
        let qs = parse_questions(
            "{\"q\": \"How?\", \"expect\": [\"a.html\"]}\n\n{\"q\": \"Why?\", \"expect\": []}\n",
        )
        .unwrap();
        assert_eq!(qs.len(), 2);
        let err = parse_questions("{\"q\": 1}").unwrap_err().to_string();
        assert!(err.starts_with("line 1"), "{err}");
    }
}
