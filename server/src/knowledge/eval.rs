//! Retrieval quality on a question set (`agentchat eval-retrieval`): each line of the set is
//! `{"q": "...", "expect": ["page-file-name.html" or "document name", ...], "kind": "keyword"
//! | "paraphrase"}`; a hit is a retrieved chunk whose page URL's last path segment, page URL,
//! or document name equals one of `expect`. Figures are hit@1, hit@5 and the mean
//! reciprocal rank (MRR), per ranking ([`Mode`]) and per kind of question.

use serde::Deserialize;

use super::search::retrieve::{Mode, Retriever};
use crate::{ids::AgentId, store::documents::ChunkHit};

/// Retrieved chunks considered per question (hit@5 is the headline figure).
pub const DEPTH: u32 = 5;

/// One question of a set.
#[derive(Debug, Clone, Deserialize)]
pub struct Question {
    pub q: String,
    /// Page file names (`ch04-01-what-is-ownership.html`), page URLs or document names that answer.
    pub expect: Vec<String>,
    /// `keyword` (worded like the page) or `paraphrase` (sharing few words with it); none
    /// given: `keyword`.
    #[serde(default)]
    pub kind: Kind,
}

/// How a question is worded against the page that answers it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Kind {
    /// Shares its key words with the page.
    #[default]
    Keyword,
    /// Shares few words with the page.
    Paraphrase,
}

/// The outcome of one question: the 1-based rank of the first relevant chunk.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    pub question: String,
    pub kind: Kind,
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

/// Runs every question against the agent's knowledge base, ranked by `mode`. Errors: the store's.
pub async fn evaluate(
    retriever: &Retriever<'_>,
    agent_id: &AgentId,
    questions: &[Question],
    mode: Mode,
) -> anyhow::Result<Report> {
    let mut outcomes = Vec::new();
    for q in questions {
        let hits = retriever.retrieve(agent_id, &q.q, DEPTH, mode).await?;
        let rank = hits
            .iter()
            .position(|h| is_relevant(h, &q.expect))
            .map(|p| p + 1);
        outcomes.push(Outcome {
            question: q.q.clone(),
            kind: q.kind,
            rank,
        });
    }
    Ok(report(outcomes))
}

/// The figures over `outcomes`.
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

impl Report {
    /// The figures over the questions of one kind.
    pub fn of_kind(&self, kind: Kind) -> Report {
        report(
            self.outcomes
                .iter()
                .filter(|o| o.kind == kind)
                .cloned()
                .collect(),
        )
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
        let o = |rank, kind| Outcome {
            question: String::new(),
            kind,
            rank,
        };
        let r = report(vec![
            o(Some(1), Kind::Keyword),
            o(Some(2), Kind::Paraphrase),
            o(None, Kind::Paraphrase),
            o(Some(4), Kind::Keyword),
        ]);
        assert_eq!(r.questions, 4);
        assert_eq!(r.hit_at_1, 0.25);
        assert_eq!(r.hit_at_5, 0.75);
        assert!((r.mrr - (1.0 + 0.5 + 0.25) / 4.0).abs() < 1e-9);
        let p = r.of_kind(Kind::Paraphrase);
        assert_eq!((p.questions, p.hit_at_1, p.hit_at_5), (2, 0.0, 0.5));
        assert_eq!(r.of_kind(Kind::Keyword).hit_at_1, 0.5);
    }

    #[test]
    fn question_sets_are_json_lines() {
        let qs = parse_questions(
            "{\"q\": \"How?\", \"expect\": [\"a.html\"]}\n\n{\"q\": \"Why?\", \"expect\": [], \"kind\": \"paraphrase\"}\n",
        )
        .unwrap();
        assert_eq!(qs.len(), 2);
        assert_eq!((qs[0].kind, qs[1].kind), (Kind::Keyword, Kind::Paraphrase));
        assert!(parse_questions("{\"q\": \"x\", \"expect\": [], \"kind\": \"other\"}").is_err());
        let err = parse_questions("{\"q\": 1}").unwrap_err().to_string();
        assert!(err.starts_with("line 1"), "{err}");
    }
}
