//! An account's conversations counted over time (docs/api.md § Analytics): per day or week,
//! conversations, messages, tokens, live-channel visitors, feedback, replies without
//! knowledge, failures and tool calls; and the period's most frequent questions.

use std::collections::HashMap;

use chrono::{Duration, NaiveDate};

use super::{ChatError, ChatService};
use crate::{
    ids::{AgentId, UserId},
    store::{AnalyticsBucket, AnalyticsQuery},
};

/// Longest period, in days.
pub const MAX_DAYS: i64 = 366;
/// Days covered when `from` is not given.
pub const DEFAULT_DAYS: i64 = 30;
/// User messages read for the top questions: the period's newest.
pub const QUESTIONS_READ: u32 = 20_000;
/// Replies with tool calls read for the tool counts: the period's newest.
pub const TOOL_REPLIES_READ: u32 = 20_000;
/// Entries of each top list.
pub const TOP: usize = 10;

/// The interval of a series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    Day,
    /// Monday to Sunday (ISO 8601 weeks).
    Week,
}

impl Interval {
    /// `day` or `week`.
    pub fn parse(name: &str) -> Option<Self> {
        match name {
            "day" => Some(Self::Day),
            "week" => Some(Self::Week),
            _ => None,
        }
    }

    /// Its length in days and the offset that makes interval 0 start on epoch day 0 or,
    /// for weeks, on the Monday before it (1970-01-01 was a Thursday).
    fn days_and_offset(self) -> (i64, i64) {
        match self {
            Self::Day => (1, 0),
            Self::Week => (7, 3),
        }
    }
}

/// One interval of the series, zeros included.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SeriesPoint {
    /// The interval's first day.
    pub start: NaiveDate,
    pub counts: AnalyticsBucket,
    pub tool_calls: u64,
    pub tool_calls_failed: u64,
}

/// What `GET /api/analytics` shows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Analytics {
    pub series: Vec<SeriesPoint>,
    /// The most frequent questions (normalised text, count), most frequent first.
    pub top_questions: Vec<(String, u64)>,
    /// The same of the questions whose reply used no knowledge.
    pub unanswered: Vec<(String, u64)>,
}

/// A question as it is counted: lower case, every run of characters other than letters and
/// digits one space, trimmed. "How do I reset my password?" and "how do i reset  my
/// password" are one question.
pub fn normalise_question(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for word in text
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
    {
        if !out.is_empty() {
            out.push(' ');
        }
        out.extend(word.chars().flat_map(char::to_lowercase));
    }
    out
}

/// The `TOP` most frequent of `texts` (normalised, empty ones left out), most frequent
/// first, ties in text order.
fn top(texts: impl Iterator<Item = String>) -> Vec<(String, u64)> {
    let mut counts: HashMap<String, u64> = HashMap::new();
    for text in texts
        .map(|t| normalise_question(&t))
        .filter(|t| !t.is_empty())
    {
        *counts.entry(text).or_default() += 1;
    }
    let mut ranked: Vec<(String, u64)> = counts.into_iter().collect();
    ranked.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    ranked.truncate(TOP);
    ranked
}

/// The period asked for: `from` and `to` days (UTC, both included), at most [`MAX_DAYS`].
/// Errors: [`ChatError::Invalid`].
pub fn period(
    from: Option<NaiveDate>,
    to: Option<NaiveDate>,
    today: NaiveDate,
) -> Result<(NaiveDate, NaiveDate), ChatError> {
    let to = to.unwrap_or(today);
    let from = from.unwrap_or(to - Duration::days(DEFAULT_DAYS - 1));
    if from > to {
        return Err(ChatError::Invalid("from must not be after to".into()));
    }
    if (to - from).num_days() >= MAX_DAYS {
        return Err(ChatError::Invalid(format!(
            "the period may cover at most {MAX_DAYS} days"
        )));
    }
    Ok((from, to))
}

impl ChatService {
    /// The analytics of the user's conversations (of `agent_id`, or of `within`, or all)
    /// from day `from` to day `to` (UTC, both included) per `interval`.
    /// Errors: the store's.
    pub async fn analytics(
        &self,
        user_id: &UserId,
        (agent_id, within): (Option<AgentId>, Option<Vec<AgentId>>),
        (from, to): (NaiveDate, NaiveDate),
        interval: Interval,
    ) -> Result<Analytics, ChatError> {
        let (days, offset) = interval.days_and_offset();
        let epoch_day = |d: NaiveDate| (d - NaiveDate::default()).num_days();
        let millis = |d: NaiveDate| epoch_day(d) * 86_400_000;
        let query = AnalyticsQuery {
            user_id: user_id.clone(),
            agent_id,
            within,
            from: millis(from),
            until: millis(to) + 86_400_000,
            days,
            offset,
        };
        let (counts, calls, questions) = tokio::try_join!(
            self.store.analytics(&query),
            self.store.analytics_tool_calls(&query, TOOL_REPLIES_READ),
            self.store.analytics_questions(&query, QUESTIONS_READ),
        )?;
        let first = (epoch_day(from) + offset).div_euclid(days);
        let last = (epoch_day(to) + offset).div_euclid(days);
        let mut series: Vec<SeriesPoint> = (first..=last)
            .map(|b| SeriesPoint {
                start: NaiveDate::default() + Duration::days(b * days - offset),
                counts: AnalyticsBucket {
                    bucket: b,
                    ..AnalyticsBucket::default()
                },
                tool_calls: 0,
                tool_calls_failed: 0,
            })
            .collect();
        let len = series.len();
        let index = |b: i64| usize::try_from(b - first).ok().filter(|i| *i < len);
        for c in counts {
            if let Some(i) = index(c.bucket) {
                series[i].counts = c;
            }
        }
        for (b, json) in calls {
            let Some(i) = index(b) else { continue };
            let made: Vec<app::api::ToolCallView> = serde_json::from_str(&json).unwrap_or_default();
            series[i].tool_calls += made.len() as u64;
            series[i].tool_calls_failed +=
                made.iter().filter(|c| c.status == "failed").count() as u64;
        }
        let unanswered = top(questions
            .iter()
            .filter(|q| q.unanswered)
            .map(|q| q.text.clone()));
        let top_questions = top(questions.into_iter().map(|q| q.text));
        Ok(Analytics {
            series,
            top_questions,
            unanswered,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_counted_without_case_spacing_or_punctuation() {
        assert_eq!(
            normalise_question("  How do I RESET my password?? "),
            "how do i reset my password"
        );
        assert_eq!(normalise_question("¿Dónde está?"), "dónde está");
        assert_eq!(normalise_question("?!"), "");
        let ranked = top([
            "Hi!",
            "hi",
            "Where is my parcel?",
            "where is my  parcel",
            "WHERE IS MY PARCEL",
            "...",
            "Bye",
        ]
        .into_iter()
        .map(String::from));
        assert_eq!(
            ranked,
            [
                ("where is my parcel".to_string(), 3),
                ("hi".to_string(), 2),
                ("bye".to_string(), 1)
            ]
        );
    }

    #[test]
    fn a_period_defaults_to_thirty_days_and_is_bounded() {
        let day = |d| NaiveDate::from_ymd_opt(2026, 11, d).unwrap();
        assert_eq!(period(None, None, day(30)).unwrap(), (day(1), day(30)));
        assert_eq!(
            period(Some(day(5)), Some(day(5)), day(30)).unwrap(),
            (day(5), day(5))
        );
        assert!(period(Some(day(6)), Some(day(5)), day(30)).is_err());
        // 2025-11-29 to 2026-11-29 is 366 days, both ends counted.
        let longest = NaiveDate::from_ymd_opt(2025, 11, 29).unwrap();
        assert!(period(Some(longest), Some(day(29)), day(30)).is_ok());
        let longer = NaiveDate::from_ymd_opt(2025, 11, 28).unwrap();
        assert!(period(Some(longer), Some(day(29)), day(30)).is_err());
    }

    #[test]
    fn weeks_start_on_mondays() {
        let (days, offset) = Interval::Week.days_and_offset();
        // 2026-11-30 is a Monday; 2026-12-06 the Sunday of its week.
        let epoch_day = |d: NaiveDate| (d - NaiveDate::default()).num_days();
        let monday = NaiveDate::from_ymd_opt(2026, 11, 30).unwrap();
        let sunday = NaiveDate::from_ymd_opt(2026, 12, 6).unwrap();
        let bucket = |d| (epoch_day(d) + offset).div_euclid(days);
        assert_eq!(bucket(monday), bucket(sunday));
        assert_eq!(bucket(monday) - 1, bucket(monday - Duration::days(1)));
        assert_eq!(
            NaiveDate::default() + Duration::days(bucket(sunday) * days - offset),
            monday
        );
    }
}
