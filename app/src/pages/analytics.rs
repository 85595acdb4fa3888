//! `/dashboard/analytics`: the account's conversations counted per day or week over a
//! period — totals, three charts and the most frequent questions, answered or not
//! (`GET /api/analytics`, `GET /api/agents` for the agent select).
//!
//! Everything the page shows is in its URL, so a reload or a shared link shows the same:
//! `?agentId=<id>` (empty: all agents), `days=7|30|90` (a period ending today, UTC; 30 when
//! left out) or a custom `from=YYYY-MM-DD&to=YYYY-MM-DD` (either may be left out: `to` is
//! then today, `from` 29 days before `to`), and `interval=week` (`day` when left out).
//! Each change of a control is a navigation (a history entry), so the browser's back button
//! undoes it.
//!
//! The page always asks the API for explicit days, counted from the browser's date in UTC,
//! and checks them as the server would before asking.
//!
//! The charts are SVG whose geometry is in attributes (x in percent of the width, so the
//! text keeps its size at any width; colours from the stylesheet), as the dashboard's
//! Content Security Policy refuses `style` attributes. Every bar and point carries
//! `data-start`, `data-series` and `data-value`, and every chart has a data table.

use crate::{
    api::{Agent, AgentsResponse, AnalyticsPoint, AnalyticsResponse, ErrorBody, QuestionCount},
    client::{self, ApiError},
    components::{
        agent_options, agents_load_error, fetch_signed_in, load_error_view, loading_view,
        non_empty, thousands, Fetched,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::{
    hooks::{use_navigate, use_query_map},
    NavigateOptions,
};

/// The page's path, without a query.
pub const ANALYTICS_PATH: &str = "/dashboard/analytics";

/// Days of the period when the URL names none (the API's default too).
pub const DEFAULT_DAYS: i64 = 30;

/// The longest period the API accepts, in days.
pub const MAX_DAYS: i64 = 366;

/// The period presets of the period select: days ending today, and the words shown.
pub const PRESETS: [(i64, &str); 3] = [
    (7, "Last 7 days"),
    (30, "Last 30 days"),
    (90, "Last 90 days"),
];

/// The period select's value for from/to dates.
pub const CUSTOM: &str = "custom";

/// Milliseconds of a day.
const DAY_MS: f64 = 86_400_000.0;

/// Days since 1970-01-01 of a proleptic Gregorian date (`month` 1–12).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * (month + if month > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

/// The date (year, month 1–12, day) of a number of days since 1970-01-01.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let days = days + 719_468;
    let era = days.div_euclid(146_097);
    let day_of_era = days - era * 146_097;
    let year_of_era =
        (day_of_era - day_of_era / 1_460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let shifted_month = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * shifted_month + 2) / 5 + 1;
    let month = if shifted_month < 10 {
        shifted_month + 3
    } else {
        shifted_month - 9
    };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The day number (days since 1970-01-01) of `YYYY-MM-DD`; `None` for anything else,
/// including days the calendar does not have (`2026-02-30`).
pub fn parse_day(text: &str) -> Option<i64> {
    let shaped = text.len() == 10
        && text.bytes().enumerate().all(|(i, b)| match i {
            4 | 7 => b == b'-',
            _ => b.is_ascii_digit(),
        });
    if !shaped {
        return None;
    }
    let year = text[..4].parse::<i64>().ok()?;
    let month = text[5..7].parse::<i64>().ok()?;
    let day = text[8..].parse::<i64>().ok()?;
    if !(1..=12).contains(&month) || !(1..=31).contains(&day) {
        return None;
    }
    let number = days_from_civil(year, month, day);
    (civil_from_days(number) == (year, month, day)).then_some(number)
}

/// Day number `days` (since 1970-01-01) as `YYYY-MM-DD`.
pub fn day_text(days: i64) -> String {
    let (year, month, day) = civil_from_days(days);
    format!("{year:04}-{month:02}-{day:02}")
}

/// A day of a chart's x axis: `2026-11-20` is "20 Nov"; anything else as it is.
pub fn short_day(text: &str) -> String {
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    match parse_day(text).map(civil_from_days) {
        Some((_, month, day)) => format!("{day} {}", MONTHS[(month - 1) as usize]),
        None => text.to_owned(),
    }
}

/// Today's day number (days since 1970-01-01) in UTC, by the browser's clock. Browser only.
fn today_utc() -> i64 {
    (js_sys::Date::now() / DAY_MS).floor() as i64
}

/// The length of the intervals the API counts in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interval {
    /// One day.
    Day,
    /// Monday to Sunday.
    Week,
}

impl Interval {
    /// The API's name, also the word in titles ("per day"): `day` or `week`.
    pub fn name(self) -> &'static str {
        match self {
            Interval::Day => "day",
            Interval::Week => "week",
        }
    }

    /// The heading of the data tables' first column.
    pub fn column(self) -> &'static str {
        match self {
            Interval::Day => "Day",
            Interval::Week => "Week starting",
        }
    }
}

/// The days and interval a request covers, every part explicit.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Period {
    /// First day, `YYYY-MM-DD` (UTC).
    pub from: String,
    /// Last day, `YYYY-MM-DD` (UTC), included.
    pub to: String,
    /// Per day or per week.
    pub interval: Interval,
}

impl Period {
    /// `GET /api/analytics` of this period, of agent `agent_id` (empty: all agents).
    pub fn api_path(&self, agent_id: &str) -> String {
        format!(
            "/api/analytics{}",
            crate::query::query_string(&[
                ("from", &self.from),
                ("to", &self.to),
                ("agentId", agent_id),
                ("interval", self.interval.name()),
            ])
        )
    }

    /// "2026-11-01 to 2026-11-30", or the one day when they are the same.
    pub fn days_words(&self) -> String {
        if self.from == self.to {
            self.from.clone()
        } else {
            format!("{} to {}", self.from, self.to)
        }
    }
}

/// The page's controls as its URL holds them (see the module documentation); empty fields
/// are the defaults. [`AnalyticsQuery::resolve`] turns them into a [`Period`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct AnalyticsQuery {
    /// `agentId`: one agent's conversations; empty: every agent's.
    pub agent_id: String,
    /// `days`: a period of so many days ending today (1–366); ignored with `from` or `to`.
    pub days: String,
    /// `from`: first day of a custom period, `YYYY-MM-DD`.
    pub from: String,
    /// `to`: last day of a custom period, `YYYY-MM-DD`.
    pub to: String,
    /// `interval`: `day` or `week`.
    pub interval: String,
}

impl AnalyticsQuery {
    /// The controls named by a query, read with `get` (e.g. from `use_query_map`); values
    /// are trimmed.
    pub fn from_query(get: impl Fn(&str) -> Option<String>) -> Self {
        let read = |name: &str| get(name).map(|v| v.trim().to_owned()).unwrap_or_default();
        Self {
            agent_id: read("agentId"),
            days: read("days"),
            from: read("from"),
            to: read("to"),
            interval: read("interval"),
        }
    }

    /// Whether the period is custom days (`from` or `to`) rather than a number of days.
    pub fn is_custom(&self) -> bool {
        !self.from.is_empty() || !self.to.is_empty()
    }

    /// The page's URL with these controls; defaults and an ignored `days` are left out.
    pub fn href(&self) -> String {
        let days = if self.is_custom() { "" } else { &self.days };
        let interval = if self.interval == "day" {
            ""
        } else {
            &self.interval
        };
        let pairs = [
            ("agentId", self.agent_id.as_str()),
            ("days", days),
            ("from", &self.from),
            ("to", &self.to),
            ("interval", interval),
        ];
        format!("{ANALYTICS_PATH}{}", crate::query::query_string(&pairs))
    }

    /// The period select's value: [`CUSTOM`] for from/to days, else the number of days.
    pub fn period_choice(&self) -> String {
        if self.is_custom() {
            CUSTOM.to_owned()
        } else if self.days.is_empty() {
            DEFAULT_DAYS.to_string()
        } else {
            self.days.clone()
        }
    }

    /// These controls with the period select's `choice`: a number of days, or [`CUSTOM`],
    /// which starts from the period shown (the default one when these do not resolve) on
    /// day `today`.
    pub fn with_period_choice(&self, choice: &str, today: i64) -> Self {
        let mut next = self.clone();
        next.days.clear();
        next.from.clear();
        next.to.clear();
        if choice == CUSTOM {
            let shown = self.resolve(today).unwrap_or_else(|_| Period {
                from: day_text(today - (DEFAULT_DAYS - 1)),
                to: day_text(today),
                interval: Interval::Day,
            });
            next.from = shown.from;
            next.to = shown.to;
        } else if choice != DEFAULT_DAYS.to_string() {
            next.days = choice.to_owned();
        }
        next
    }

    /// The period these controls show on day `today` (a day number, UTC), checked as the
    /// server checks it (docs/api.md § Analytics).
    ///
    /// # Errors
    /// The first rule broken, in words.
    pub fn resolve(&self, today: i64) -> Result<Period, String> {
        let interval = match self.interval.as_str() {
            "" | "day" => Interval::Day,
            "week" => Interval::Week,
            other => {
                return Err(format!(
                    "There is no interval “{other}”: choose day or week."
                ))
            }
        };
        let (from, to) = if self.is_custom() {
            let to = if self.to.is_empty() {
                today
            } else {
                parse_day(&self.to).ok_or("The last day must be a date (YYYY-MM-DD).")?
            };
            let from = if self.from.is_empty() {
                to - (DEFAULT_DAYS - 1)
            } else {
                parse_day(&self.from).ok_or("The first day must be a date (YYYY-MM-DD).")?
            };
            if from > to {
                return Err("The first day must not be after the last day.".to_owned());
            }
            if to - from >= MAX_DAYS {
                return Err(format!("The period may cover at most {MAX_DAYS} days."));
            }
            (from, to)
        } else {
            let days = if self.days.is_empty() {
                DEFAULT_DAYS
            } else {
                self.days
                    .parse::<i64>()
                    .ok()
                    .filter(|d| (1..=MAX_DAYS).contains(d))
                    .ok_or_else(|| format!("The period must be 1 to {MAX_DAYS} days."))?
            };
            (today - (days - 1), today)
        };
        Ok(Period {
            from: day_text(from),
            to: day_text(to),
            interval,
        })
    }
}

/// The sums of a period's intervals.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Totals {
    /// Conversations started.
    pub conversations: u64,
    /// Messages users sent.
    pub user_messages: u64,
    /// Replies of the agents.
    pub replies: u64,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
    /// Live-channel visitors, summed over the intervals: someone who writes in two
    /// intervals counts twice.
    pub visitors: u64,
    /// Replies rated helpful.
    pub helpful: u64,
    /// Replies rated not helpful.
    pub not_helpful: u64,
    /// Complete replies that found no knowledge.
    pub unanswered: u64,
    /// Replies that failed or broke off.
    pub failed: u64,
    /// Tool calls.
    pub tool_calls: u64,
    /// Tool calls that failed.
    pub failed_tool_calls: u64,
}

impl Totals {
    /// The sums of `series` (saturating).
    pub fn of(series: &[AnalyticsPoint]) -> Self {
        series.iter().fold(Self::default(), |t, p| Self {
            conversations: t.conversations.saturating_add(p.conversations),
            user_messages: t.user_messages.saturating_add(p.user_messages),
            replies: t.replies.saturating_add(p.replies),
            prompt_tokens: t.prompt_tokens.saturating_add(p.tokens.prompt),
            completion_tokens: t.completion_tokens.saturating_add(p.tokens.completion),
            visitors: t.visitors.saturating_add(p.visitors),
            helpful: t.helpful.saturating_add(u64::from(p.feedback.up)),
            not_helpful: t.not_helpful.saturating_add(u64::from(p.feedback.down)),
            unanswered: t.unanswered.saturating_add(p.unanswered),
            failed: t.failed.saturating_add(p.failed),
            tool_calls: t.tool_calls.saturating_add(p.tool_calls.total),
            failed_tool_calls: t.failed_tool_calls.saturating_add(p.tool_calls.failed),
        })
    }

    /// Prompt and completion tokens together.
    pub fn tokens(&self) -> u64 {
        self.prompt_tokens.saturating_add(self.completion_tokens)
    }

    /// Whether nothing at all happened.
    pub fn is_empty(&self) -> bool {
        *self == Self::default()
    }
}

/// Height of a chart in pixels: the plot between `PLOT_TOP` and `PLOT_BOTTOM`, the dates
/// below.
const CHART_HEIGHT: u32 = 196;
/// The y of the highest tick, in pixels.
const PLOT_TOP: u32 = 10;
/// The y of the x axis (0), in pixels.
const PLOT_BOTTOM: u32 = 166;
/// Width of the y axis' labels, in pixels.
const AXIS_WIDTH: u32 = 64;
/// Dates an x axis shows at most.
const X_LABELS: usize = 6;

/// The y in pixels of `value` on an axis running from 0 (at `PLOT_BOTTOM`) to `top` (at
/// `PLOT_TOP`).
pub fn y_of(value: u64, top: u64) -> f64 {
    let span = f64::from(PLOT_BOTTOM - PLOT_TOP);
    f64::from(PLOT_BOTTOM) - span * (value as f64) / (top.max(1) as f64)
}

/// A y axis label: grouped digits below 10,000, else thousands ("15k") or millions
/// ("2.5M"), chosen by the axis' `top` so one axis has one unit.
pub fn tick_label(value: u64, top: u64) -> String {
    let scaled = |unit: u64, suffix: &str| {
        if value == 0 {
            "0".to_owned()
        } else if value.is_multiple_of(unit) {
            format!("{}{suffix}", value / unit)
        } else {
            let text = format!("{:.1}", value as f64 / unit as f64);
            format!("{}{suffix}", text.trim_end_matches(".0"))
        }
    };
    match top {
        10_000_000.. => scaled(1_000_000, "M"),
        10_000.. => scaled(1_000, "k"),
        _ => thousands(value),
    }
}

/// The x of the middle of slot `index` of `slots` equal slots, in percent of the width.
pub fn slot_centre(index: usize, slots: usize) -> f64 {
    100.0 / slots.max(1) as f64 * (index as f64 + 0.5)
}

/// The x and width, in percent of the width, of bar `member` of `members` side by side in
/// slot `index` of `slots`; the bars fill the middle 80 % of the slot.
pub fn bar_span(index: usize, slots: usize, member: usize, members: usize) -> (f64, f64) {
    let slot = 100.0 / slots.max(1) as f64;
    let width = slot * 0.8 / members.max(1) as f64;
    (slot * (index as f64 + 0.1) + width * member as f64, width)
}

/// "a", "a and b", "a, b and c".
fn and_list(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// A chart's accessible summary: "Conversations and replies per day, 2026-11-01 to
/// 2026-11-30: 42 conversations and 97 replies in total."
pub fn chart_summary(title: &str, period: &Period, totals: &[(u64, &str)]) -> String {
    let parts: Vec<String> = totals
        .iter()
        .map(|(n, what)| format!("{} {what}", thousands(*n)))
        .collect();
    format!(
        "{title}, {}: {} in total.",
        period.days_words(),
        and_list(&parts)
    )
}

/// How a series is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mark {
    /// Points joined by a line.
    Line,
    /// A bar per interval.
    Bar,
}

/// How a chart's bar series share a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Bars {
    /// On top of each other: the slot's bar is their sum.
    Stacked,
    /// Side by side.
    Grouped,
}

/// One series of a chart: a value per interval.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Series {
    /// `data-series` of its marks, and its colour class `series-{key}`.
    pub key: &'static str,
    /// Its name in the legend and the data table.
    pub label: &'static str,
    /// Line or bars.
    pub mark: Mark,
    /// A value per interval, oldest first.
    pub values: Vec<u64>,
}

/// The largest value a chart must fit: the highest stack of its bars (or highest bar) and
/// the highest point of its lines.
pub fn chart_max(series: &[Series], bars: Bars) -> u64 {
    let slots = series.iter().map(|s| s.values.len()).max().unwrap_or(0);
    (0..slots)
        .map(|i| {
            let at = |s: &Series| s.values.get(i).copied().unwrap_or(0);
            let bar_values = series.iter().filter(|s| s.mark == Mark::Bar).map(at);
            let bar_top = match bars {
                Bars::Stacked => bar_values.fold(0_u64, u64::saturating_add),
                Bars::Grouped => bar_values.max().unwrap_or(0),
            };
            series
                .iter()
                .filter(|s| s.mark == Mark::Line)
                .map(at)
                .fold(bar_top, u64::max)
        })
        .max()
        .unwrap_or(0)
}

/// A refusal of the controls before any request, shaped as the server's 400.
fn refused(message: String) -> ApiError {
    ApiError {
        status: 400,
        body: ErrorBody {
            error: "Bad Request".to_owned(),
            message,
        },
    }
}

/// The analytics page: the controls, then the period's totals, charts and questions (see
/// the module documentation).
#[component]
pub fn AnalyticsPage() -> impl IntoView {
    let navigate = use_navigate();
    let query_map = use_query_map();
    let query = Memo::new(move |_| {
        let map = query_map.read();
        AnalyticsQuery::from_query(|name| map.get(name))
    });
    let agents = fetch_signed_in(|| "/api/agents".to_owned(), |a: AgentsResponse| a.agents);
    // The period's analytics; controls the server would refuse are explained without
    // asking it.
    let data: Fetched<(Period, AnalyticsResponse)> = LocalResource::new(move || {
        let current = query.get();
        async move {
            let period = current.resolve(today_utc()).map_err(refused)?;
            let answer = client::get_json_signed_in::<AnalyticsResponse>(
                &period.api_path(&current.agent_id),
            )
            .await?;
            Ok((period, answer))
        }
    });
    let apply = Callback::new(move |next: AnalyticsQuery| {
        if next != query.get_untracked() {
            navigate(
                &next.href(),
                NavigateOptions {
                    scroll: false,
                    ..NavigateOptions::default()
                },
            );
        }
    });

    view! {
        <Title text="Analytics"/>
        <div class="stack analytics">
            <section class="card" aria-labelledby="analytics-title">
                <div class="section-head">
                    <h1 id="analytics-title">"Analytics"</h1>
                </div>
                <p class="muted">
                    "How your agents are used: conversations, messages, tokens, ratings and the questions people ask, counted per day or per week. Days are UTC."
                </p>
                <Controls query agents apply/>
            </section>
            <Transition fallback=|| loading_view("analytics")>
            {move || Suspend::new(async move { match data.await {
                Err(err) => load_error_view(&err, "analytics"),
                Ok((period, answer)) => view! { <Report period answer/> }.into_any(),
            }})}
            </Transition>
        </div>
    }
    .into_any()
}

/// The controls: agent, period (a preset or custom days) and interval, each applied when
/// it changes. Each control shows the URL's value; `apply` receives the controls chosen.
#[component]
fn Controls(
    /// The controls of the URL.
    query: Memo<AnalyticsQuery>,
    /// The account's agents, for the agent select.
    agents: Fetched<Vec<Agent>>,
    /// Shows the page with other controls.
    apply: Callback<AnalyticsQuery>,
) -> impl IntoView {
    // A handler that applies the URL's controls with one field changed to the control's
    // value.
    let set = move |field: fn(&mut AnalyticsQuery, String)| {
        move |ev: leptos::ev::Event| {
            let mut next = query.get_untracked();
            field(&mut next, event_target_value(&ev));
            apply.run(next);
        }
    };
    let on_period = move |ev: leptos::ev::Event| {
        let choice = event_target_value(&ev);
        apply.run(
            query
                .get_untracked()
                .with_period_choice(&choice, today_utc()),
        );
    };
    // A number of days from the URL that is not a preset keeps an option of its own.
    let other_days = move || {
        let choice = query.read().period_choice();
        let preset = choice == CUSTOM || PRESETS.iter().any(|(d, _)| d.to_string() == choice);
        (!preset).then(|| {
            let label = format!("Last {choice} days");
            view! { <option value=choice selected=true>{label}</option> }
        })
    };
    view! {
        <form
            class="inbox-filters analytics-filters"
            data-testid="analytics-filters"
            aria-label="Analytics period and agent"
            on:submit=|ev: leptos::ev::SubmitEvent| ev.prevent_default()
        >
            <div class="field">
                <label for="analytics-agent">"Agent"</label>
                <select
                    id="analytics-agent"
                    prop:value=move || query.read().agent_id.clone()
                    on:change=set(|q, v| q.agent_id = v)
                >
                    {move || agent_options(agents, query.read().agent_id.clone())}
                </select>
                {move || agents_load_error(agents)}
            </div>
            <div class="field">
                <label for="analytics-period">"Period"</label>
                <select
                    id="analytics-period"
                    prop:value=move || query.read().period_choice()
                    on:change=on_period
                >
                    {PRESETS
                        .iter()
                        .map(|&(days, label)| {
                            let value = days.to_string();
                            let chosen = value.clone();
                            view! {
                                <option value=value selected=move || query.read().period_choice() == chosen>
                                    {label}
                                </option>
                            }
                        })
                        .collect_view()}
                    {other_days}
                    <option value=CUSTOM selected=move || query.read().is_custom()>"Custom dates"</option>
                </select>
            </div>
            <Show when=move || query.read().is_custom()>
                <div class="field">
                    <label for="analytics-from">"From"</label>
                    <input
                        id="analytics-from"
                        type="date"
                        max=move || non_empty(query.read().to.clone())
                        value=move || query.read().from.clone()
                        prop:value=move || query.read().from.clone()
                        on:change=set(|q, v| q.from = v)
                    />
                </div>
                <div class="field">
                    <label for="analytics-to">"To"</label>
                    <input
                        id="analytics-to"
                        type="date"
                        min=move || non_empty(query.read().from.clone())
                        value=move || query.read().to.clone()
                        prop:value=move || query.read().to.clone()
                        on:change=set(|q, v| q.to = v)
                    />
                </div>
            </Show>
            <div class="field">
                <label for="analytics-interval">"Interval"</label>
                <select
                    id="analytics-interval"
                    prop:value=move || if query.read().interval == "week" { "week" } else { "day" }
                    on:change=set(|q, v| q.interval = if v == "day" { String::new() } else { v })
                >
                    <option value="day" selected=move || query.read().interval != "week">"Daily"</option>
                    <option value="week" selected=move || query.read().interval == "week">"Weekly"</option>
                </select>
            </div>
        </form>
    }
    .into_any()
}

/// The period's totals, charts and questions.
#[component]
fn Report(
    /// The days and interval asked for.
    period: Period,
    /// The API's answer for them.
    answer: AnalyticsResponse,
) -> impl IntoView {
    let totals = Totals::of(&answer.series);
    let per = format!("per {}", period.interval.name());
    let starts: Vec<String> = answer.series.iter().map(|p| p.start.clone()).collect();
    let column = |pick: fn(&AnalyticsPoint) -> u64| answer.series.iter().map(pick).collect();

    let activity_title = format!("Conversations and replies {per}");
    let activity = vec![
        Series {
            key: "conversations",
            label: "Conversations",
            mark: Mark::Line,
            values: column(|p| p.conversations),
        },
        Series {
            key: "replies",
            label: "Replies",
            mark: Mark::Line,
            values: column(|p| p.replies),
        },
    ];
    let activity_summary = chart_summary(
        &activity_title,
        &period,
        &[
            (totals.conversations, "conversations"),
            (totals.replies, "replies"),
        ],
    );
    let tokens_title = format!("Tokens {per}");
    let tokens = vec![
        Series {
            key: "prompt",
            label: "Prompt",
            mark: Mark::Bar,
            values: column(|p| p.tokens.prompt),
        },
        Series {
            key: "completion",
            label: "Completion",
            mark: Mark::Bar,
            values: column(|p| p.tokens.completion),
        },
    ];
    let tokens_summary = chart_summary(
        &tokens_title,
        &period,
        &[
            (totals.prompt_tokens, "prompt tokens"),
            (totals.completion_tokens, "completion tokens"),
        ],
    );
    let feedback_title = format!("Ratings and unanswered replies {per}");
    let feedback = vec![
        Series {
            key: "up",
            label: "Rated helpful",
            mark: Mark::Bar,
            values: column(|p| u64::from(p.feedback.up)),
        },
        Series {
            key: "down",
            label: "Rated not helpful",
            mark: Mark::Bar,
            values: column(|p| u64::from(p.feedback.down)),
        },
        Series {
            key: "unanswered",
            label: "Unanswered",
            mark: Mark::Line,
            values: column(|p| p.unanswered),
        },
    ];
    let feedback_summary = chart_summary(
        &feedback_title,
        &period,
        &[
            (totals.helpful, "rated helpful"),
            (totals.not_helpful, "rated not helpful"),
            (totals.unanswered, "unanswered"),
        ],
    );

    view! {
        <section class="card" aria-labelledby="analytics-totals-title" data-testid="analytics-report">
            <h2 id="analytics-totals-title" class="first">"Totals"</h2>
            <p class="muted small" data-testid="analytics-period">
                {format!("{}, counted {per} (UTC).", period.days_words())}
            </p>
            {totals.is_empty().then(|| view! {
                <p class="empty" data-testid="analytics-empty">
                    "Nothing happened in this period: no conversations, messages or ratings."
                </p>
            })}
            {tiles(totals, period.interval)}
        </section>
        <section class="card" aria-labelledby="analytics-charts-title">
            <h2 id="analytics-charts-title" class="first">"Charts"</h2>
            <Chart
                testid="analytics-chart-conversations"
                title=activity_title
                unit="Count"
                summary=activity_summary
                starts=starts.clone()
                series=activity
                bars=Bars::Grouped
                interval=period.interval
            />
            <Chart
                testid="analytics-chart-tokens"
                title=tokens_title
                unit="Tokens"
                summary=tokens_summary
                starts=starts.clone()
                series=tokens
                bars=Bars::Stacked
                interval=period.interval
            />
            <Chart
                testid="analytics-chart-feedback"
                title=feedback_title
                unit="Replies"
                summary=feedback_summary
                starts=starts
                series=feedback
                bars=Bars::Grouped
                interval=period.interval
            />
        </section>
        <section class="card" aria-label="Questions">
            <div class="analytics-questions">
                {question_list(
                    "analytics-top-questions",
                    "Top questions",
                    "The most frequent messages people sent in this period.",
                    "No questions in this period.",
                    answer.top_questions,
                )}
                {question_list(
                    "analytics-unanswered",
                    "Unanswered questions",
                    "The most frequent messages whose reply found nothing in the agent's knowledge base: topics to add.",
                    "No unanswered questions in this period.",
                    answer.unanswered,
                )}
            </div>
        </section>
    }
    .into_any()
}

/// The totals as tiles, each value with `data-testid="analytics-total-<name>"` and its
/// number in `data-value`.
fn tiles(totals: Totals, interval: Interval) -> impl IntoView {
    let tile = |name: &'static str, label: &'static str, value: u64, hint: Option<AnyView>| {
        view! {
            <div class="analytics-tile">
                <dt>{label}</dt>
                <dd class="analytics-value" data-testid=format!("analytics-total-{name}") data-value=value.to_string()>
                    {thousands(value)}
                </dd>
                {hint.map(|hint| view! { <dd class="hint">{hint}</dd> })}
            </div>
        }
    };
    let words = |text: String| Some(view! { <span>{text}</span> }.into_any());
    let failed_calls = totals.failed_tool_calls;
    view! {
        <dl class="profile analytics-tiles" data-testid="analytics-totals">
            {tile("conversations", "Conversations", totals.conversations, words("started".to_owned()))}
            {tile("user-messages", "User messages", totals.user_messages, None)}
            {tile("replies", "Replies", totals.replies, None)}
            {tile(
                "tokens",
                "Tokens",
                totals.tokens(),
                words(format!(
                    "{} prompt, {} completion",
                    thousands(totals.prompt_tokens),
                    thousands(totals.completion_tokens),
                )),
            )}
            {tile(
                "visitors",
                "Visitors",
                totals.visitors,
                words(format!("on live channels, counted once per {}", interval.name())),
            )}
            {tile("feedback-up", "Rated helpful", totals.helpful, None)}
            {tile("feedback-down", "Rated not helpful", totals.not_helpful, None)}
            {tile(
                "unanswered",
                "Unanswered",
                totals.unanswered,
                words("replies that found no knowledge".to_owned()),
            )}
            {tile("failed", "Failed replies", totals.failed, None)}
            {tile(
                "tool-calls",
                "Tool calls",
                totals.tool_calls,
                Some(view! {
                    <span data-testid="analytics-total-tool-calls-failed" data-value=failed_calls.to_string()>
                        {thousands(failed_calls)}
                    </span>
                    " failed"
                }.into_any()),
            )}
        </dl>
    }
}

/// A list of questions with their counts under a heading, or `empty` when there are none;
/// the section has `data-testid=testid`, each item `analytics-question`.
fn question_list(
    testid: &'static str,
    title: &'static str,
    about: &'static str,
    empty: &'static str,
    items: Vec<QuestionCount>,
) -> impl IntoView {
    let heading_id = format!("{testid}-title");
    let labelled_by = heading_id.clone();
    let body = if items.is_empty() {
        view! { <p class="empty" data-testid=format!("{testid}-empty")>{empty}</p> }.into_any()
    } else {
        view! {
            <ol class="question-list">
                {items
                    .into_iter()
                    .map(|item| {
                        let times = if item.count == 1 { "time" } else { "times" };
                        view! {
                            <li data-testid="analytics-question">
                                <span class="question-text">{item.text}</span>
                                <span class="tag question-count" data-value=item.count.to_string()>
                                    {thousands(item.count)}
                                    <span class="visually-hidden">{format!(" {times}")}</span>
                                </span>
                            </li>
                        }
                    })
                    .collect_view()}
            </ol>
        }
        .into_any()
    };
    view! {
        <section data-testid=testid aria-labelledby=labelled_by>
            <h2 id=heading_id class="first">{title}</h2>
            <p class="hint">{about}</p>
            {body}
        </section>
    }
}

/// A chart of a value per interval: its title, legend, the plot with labelled axes (an
/// image for assistive technology, named by `summary`) and a data table.
#[component]
fn Chart(
    /// `data-testid` of the plot.
    testid: &'static str,
    /// The title above it.
    title: String,
    /// The y axis' unit.
    unit: &'static str,
    /// The plot's accessible name.
    summary: String,
    /// The first day of each interval, oldest first.
    starts: Vec<String>,
    /// The series, each with a value per interval.
    series: Vec<Series>,
    /// How bar series share a slot.
    bars: Bars,
    /// Per day or per week (the data table's first column).
    interval: Interval,
) -> impl IntoView {
    let slots = starts.len();
    let ticks = crate::chart::axis_ticks(chart_max(&series, bars));
    let top = ticks.last().copied().unwrap_or(1);
    let bar_series: Vec<&Series> = series.iter().filter(|s| s.mark == Mark::Bar).collect();
    let tip =
        |start: &str, value: u64, label: &str| format!("{start} · {label}: {}", thousands(value));

    let grid = ticks
        .iter()
        .map(|tick| {
            let y = format!("{:.1}", y_of(*tick, top));
            let class = if *tick == 0 {
                "chart-axis"
            } else {
                "chart-grid"
            };
            view! { <line class=class x1="0" x2="100%" y1=y.clone() y2=y></line> }
        })
        .collect_view();
    let labels = ticks
        .iter()
        .map(|tick| {
            view! {
                <text
                    class="chart-label"
                    x=(AXIS_WIDTH - 8).to_string()
                    y=format!("{:.1}", y_of(*tick, top) + 4.0)
                    text-anchor="end"
                >
                    {tick_label(*tick, top)}
                </text>
            }
        })
        .collect_view();

    let mut rects = Vec::new();
    for (index, start) in starts.iter().enumerate() {
        let mut base = 0_u64;
        for (member, s) in bar_series.iter().enumerate() {
            let value = s.values.get(index).copied().unwrap_or(0);
            let (x, width) = match bars {
                Bars::Stacked => bar_span(index, slots, 0, 1),
                Bars::Grouped => bar_span(index, slots, member, bar_series.len()),
            };
            let (low, high) = match bars {
                Bars::Stacked => (base, base.saturating_add(value)),
                Bars::Grouped => (0, value),
            };
            base = high;
            let (y_high, y_low) = (y_of(high, top), y_of(low, top));
            rects.push(view! {
                <rect
                    class=format!("chart-bar series-{}", s.key)
                    x=format!("{x:.3}%")
                    width=format!("{width:.3}%")
                    y=format!("{y_high:.1}")
                    height=format!("{:.1}", y_low - y_high)
                    data-start=start.clone()
                    data-series=s.key
                    data-value=value.to_string()
                >
                    <title>{tip(start, value, s.label)}</title>
                </rect>
            });
        }
    }

    let radius = if slots > 60 { "2" } else { "3" };
    let lines = series
        .iter()
        .filter(|s| s.mark == Mark::Line)
        .map(|s| {
            let point = |index: usize| {
                let value = s.values.get(index).copied().unwrap_or(0);
                (slot_centre(index, slots), y_of(value, top), value)
            };
            let segments = (1..slots)
                .map(|index| {
                    let (x1, y1, _) = point(index - 1);
                    let (x2, y2, _) = point(index);
                    view! {
                        <line
                            class=format!("chart-line series-{}", s.key)
                            x1=format!("{x1:.3}%")
                            y1=format!("{y1:.1}")
                            x2=format!("{x2:.3}%")
                            y2=format!("{y2:.1}")
                        ></line>
                    }
                })
                .collect_view();
            let points = (0..slots)
                .map(|index| {
                    let (x, y, value) = point(index);
                    let start = starts[index].clone();
                    view! {
                        <circle
                            class=format!("chart-point series-{}", s.key)
                            cx=format!("{x:.3}%")
                            cy=format!("{y:.1}")
                            r=radius
                            data-start=start.clone()
                            data-series=s.key
                            data-value=value.to_string()
                        >
                            <title>{tip(&start, value, s.label)}</title>
                        </circle>
                    }
                })
                .collect_view();
            view! { {segments} {points} }
        })
        .collect_view();

    // Every other date, counted back from the last, gives way on narrow screens (the
    // stylesheet hides those marked minor).
    let dates = crate::chart::labelled_indices(slots, X_LABELS)
        .into_iter()
        .rev()
        .enumerate()
        .map(|(rank, index)| {
            view! {
                <text
                    class="chart-label chart-date"
                    x=format!("{:.3}%", slot_centre(index, slots))
                    y=(PLOT_BOTTOM + 20).to_string()
                    text-anchor="middle"
                    data-minor=(rank % 2 == 1).then_some("true")
                >
                    {short_day(&starts[index])}
                </text>
            }
        })
        .collect_view();

    let legend = series
        .iter()
        .map(|s| {
            let mark = match s.mark {
                Mark::Line => "line",
                Mark::Bar => "bar",
            };
            view! {
                <li>
                    <span class=format!("swatch swatch-{mark} series-{}", s.key) aria-hidden="true"></span>
                    {s.label}
                </li>
            }
        })
        .collect_view();

    let head = series
        .iter()
        .map(|s| view! { <th scope="col" class="num">{s.label}</th> })
        .collect_view();
    let rows = starts
        .iter()
        .enumerate()
        .map(|(index, start)| {
            let cells = series
                .iter()
                .map(|s| {
                    let value = s.values.get(index).copied().unwrap_or(0);
                    view! { <td class="num">{thousands(value)}</td> }
                })
                .collect_view();
            view! {
                <tr>
                    <th scope="row">{start.clone()}</th>
                    {cells}
                </tr>
            }
        })
        .collect_view();

    let height = CHART_HEIGHT.to_string();
    let axis_middle = f64::from(PLOT_TOP + PLOT_BOTTOM) / 2.0;
    view! {
        <figure class="chart analytics-chart">
            <figcaption class="chart-title">{title.clone()}</figcaption>
            <ul class="chart-legend">{legend}</ul>
            <div class="analytics-plot" role="img" aria-label=summary data-testid=testid>
                <svg class="chart-y" width=AXIS_WIDTH.to_string() height=height.clone() aria-hidden="true">
                    <text
                        class="chart-unit"
                        x="12"
                        y=format!("{axis_middle:.1}")
                        text-anchor="middle"
                        transform=format!("rotate(-90 12 {axis_middle:.1})")
                    >
                        {unit}
                    </text>
                    {labels}
                </svg>
                <svg class="chart-plot" width="100%" height=height overflow="visible" aria-hidden="true">
                    {grid}
                    <line
                        class="chart-axis"
                        x1="0"
                        x2="0"
                        y1=PLOT_TOP.to_string()
                        y2=PLOT_BOTTOM.to_string()
                    ></line>
                    {rects}
                    {lines}
                    {dates}
                </svg>
            </div>
            <details class="chart-data">
                <summary>"Data table"</summary>
                <div class="table-wrap">
                    <table class="table">
                        <caption class="visually-hidden">{title}</caption>
                        <thead>
                            <tr>
                                <th scope="col">{interval.column()}</th>
                                {head}
                            </tr>
                        </thead>
                        <tbody>{rows}</tbody>
                    </table>
                </div>
            </details>
        </figure>
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::{FeedbackCounts, TokenCounts, ToolCallCounts};

    fn query(pairs: &[(&str, &str)]) -> AnalyticsQuery {
        AnalyticsQuery::from_query(|name| {
            pairs
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, v)| (*v).to_owned())
        })
    }

    fn day(text: &str) -> i64 {
        parse_day(text).expect("a day")
    }

    fn point(start: &str, n: u64) -> AnalyticsPoint {
        AnalyticsPoint {
            start: start.to_owned(),
            conversations: n,
            user_messages: 2 * n,
            replies: 2 * n,
            tokens: TokenCounts {
                prompt: 100 * n,
                completion: 10 * n,
            },
            visitors: n,
            feedback: FeedbackCounts {
                up: u32::try_from(n).unwrap(),
                down: 1,
            },
            unanswered: n / 2,
            failed: 1,
            tool_calls: ToolCallCounts {
                total: 3 * n,
                failed: n,
            },
        }
    }

    #[test]
    fn days_are_numbered_and_written_back() {
        assert_eq!(parse_day("1970-01-01"), Some(0));
        assert_eq!(parse_day("2000-03-01"), Some(11_017));
        assert_eq!(day("2026-11-30") - day("2026-11-01"), 29);
        assert_eq!(day("2025-01-01") - day("2024-01-01"), 366);
        assert_eq!(
            parse_day("2024-02-29").map(day_text).as_deref(),
            Some("2024-02-29")
        );
        assert_eq!(parse_day("2026-02-29"), None);
        assert_eq!(parse_day("2026-13-01"), None);
        assert_eq!(parse_day("2026-1-01"), None);
        assert_eq!(parse_day("2026/11/01"), None);
        assert_eq!(parse_day(""), None);
        for n in day("1900-01-01")..day("2200-01-01") {
            assert_eq!(parse_day(&day_text(n)), Some(n), "{n}");
        }
        assert_eq!(day_text(day("2026-12-31") + 1), "2027-01-01");
        assert_eq!(short_day("2026-11-20"), "20 Nov");
        assert_eq!(short_day("2027-01-05"), "5 Jan");
        assert_eq!(short_day("soon"), "soon");
    }

    #[test]
    fn page_urls_keep_the_controls_and_leave_out_defaults() {
        assert_eq!(AnalyticsQuery::default().href(), "/dashboard/analytics");
        let q = query(&[("agentId", " a 1 "), ("days", "7"), ("interval", "week")]);
        assert_eq!(q.agent_id, "a 1");
        assert_eq!(
            q.href(),
            "/dashboard/analytics?agentId=a%201&days=7&interval=week"
        );
        // Custom days drop `days`; `interval=day` is the default.
        let q = query(&[
            ("days", "7"),
            ("from", "2026-11-01"),
            ("to", "2026-11-30"),
            ("interval", "day"),
        ]);
        assert_eq!(
            q.href(),
            "/dashboard/analytics?from=2026-11-01&to=2026-11-30"
        );
    }

    #[test]
    fn presets_end_today_and_custom_days_are_explicit() {
        let today = day("2026-11-30");
        let period = AnalyticsQuery::default().resolve(today).unwrap();
        assert_eq!(
            period,
            Period {
                from: "2026-11-01".to_owned(),
                to: "2026-11-30".to_owned(),
                interval: Interval::Day,
            }
        );
        assert_eq!(
            period.api_path(""),
            "/api/analytics?from=2026-11-01&to=2026-11-30&interval=day"
        );
        let period = query(&[("days", "7"), ("interval", "week"), ("agentId", "a/1")])
            .resolve(today)
            .unwrap();
        assert_eq!(
            (period.from.as_str(), period.to.as_str()),
            ("2026-11-24", "2026-11-30")
        );
        assert_eq!(
            period.api_path("a/1"),
            "/api/analytics?from=2026-11-24&to=2026-11-30&agentId=a%2F1&interval=week"
        );
        let period = query(&[("days", "1")]).resolve(today).unwrap();
        assert_eq!(period.days_words(), "2026-11-30");
        // A custom period's missing end is today, its missing start 29 days before its end.
        let period = query(&[("from", "2026-10-01")]).resolve(today).unwrap();
        assert_eq!(period.days_words(), "2026-10-01 to 2026-11-30");
        let period = query(&[("to", "2026-02-10")]).resolve(today).unwrap();
        assert_eq!(period.days_words(), "2026-01-12 to 2026-02-10");
    }

    #[test]
    fn controls_are_checked_as_the_server_does() {
        let today = day("2026-11-30");
        let refused = |pairs: &[(&str, &str)]| query(pairs).resolve(today).is_err();
        assert!(refused(&[("interval", "month")]));
        assert!(refused(&[("days", "0")]));
        assert!(refused(&[("days", "367")]));
        assert!(refused(&[("days", "seven")]));
        assert!(!refused(&[("days", "366")]));
        assert!(refused(&[("from", "2026-11-31")]));
        assert!(refused(&[("to", "tomorrow")]));
        assert!(refused(&[("from", "2026-11-02"), ("to", "2026-11-01")]));
        assert!(!refused(&[("from", "2026-11-01"), ("to", "2026-11-01")]));
        assert!(!refused(&[("from", "2025-12-01"), ("to", "2026-12-01")]));
        assert!(refused(&[("from", "2025-11-30"), ("to", "2026-12-01")]));
    }

    #[test]
    fn the_period_select_switches_between_presets_and_dates() {
        let today = day("2026-11-30");
        let q = query(&[("agentId", "a1"), ("interval", "week")]);
        assert_eq!(q.period_choice(), "30");
        let seven = q.with_period_choice("7", today);
        assert_eq!(seven.period_choice(), "7");
        assert_eq!(
            seven.href(),
            "/dashboard/analytics?agentId=a1&days=7&interval=week"
        );
        assert_eq!(
            seven.with_period_choice("30", today).href(),
            "/dashboard/analytics?agentId=a1&interval=week"
        );
        let custom = seven.with_period_choice(CUSTOM, today);
        assert_eq!(custom.period_choice(), CUSTOM);
        assert_eq!(
            custom.href(),
            "/dashboard/analytics?agentId=a1&from=2026-11-24&to=2026-11-30&interval=week"
        );
        assert_eq!(
            custom.with_period_choice("90", today).href(),
            "/dashboard/analytics?agentId=a1&days=90&interval=week"
        );
        // Controls that do not resolve start the custom days from the default period.
        let custom = query(&[("days", "0")]).with_period_choice(CUSTOM, today);
        assert_eq!(
            (custom.from.as_str(), custom.to.as_str()),
            ("2026-11-01", "2026-11-30")
        );
    }

    #[test]
    fn totals_sum_every_interval() {
        let series = [point("2026-11-29", 2), point("2026-11-30", 3)];
        let totals = Totals::of(&series);
        assert_eq!(
            totals,
            Totals {
                conversations: 5,
                user_messages: 10,
                replies: 10,
                prompt_tokens: 500,
                completion_tokens: 50,
                visitors: 5,
                helpful: 5,
                not_helpful: 2,
                unanswered: 2,
                failed: 2,
                tool_calls: 15,
                failed_tool_calls: 5,
            }
        );
        assert_eq!(totals.tokens(), 550);
        assert!(!totals.is_empty());
        assert!(Totals::of(&[]).is_empty());
        let mut big = point("2026-11-30", 1);
        big.tokens.prompt = u64::MAX;
        assert_eq!(Totals::of(&[big]).tokens(), u64::MAX);
    }

    #[test]
    fn tick_labels_use_one_unit_per_axis() {
        assert_eq!(tick_label(0, 8), "0");
        assert_eq!(tick_label(5_000, 5_000), "5,000");
        assert_eq!(tick_label(5_000, 15_000), "5k");
        assert_eq!(tick_label(2_500, 10_000), "2.5k");
        assert_eq!(tick_label(0, 60_000), "0");
        assert_eq!(tick_label(500_000, 1_500_000), "500k");
        assert_eq!(tick_label(2_500_000, 10_000_000), "2.5M");
        assert_eq!(tick_label(20_000_000, 40_000_000), "20M");
    }

    #[test]
    fn values_are_scaled_to_the_plot() {
        assert_eq!(y_of(0, 40), f64::from(PLOT_BOTTOM));
        assert_eq!(y_of(40, 40), f64::from(PLOT_TOP));
        assert_eq!(y_of(20, 40), f64::from(PLOT_TOP + PLOT_BOTTOM) / 2.0);
        // An empty axis does not divide by zero.
        assert_eq!(y_of(0, 0), f64::from(PLOT_BOTTOM));
        assert_eq!(slot_centre(0, 10), 5.0);
        assert_eq!(slot_centre(9, 10), 95.0);
        let close = |(x, w): (f64, f64), (ex, ew): (f64, f64)| {
            assert!((x - ex).abs() < 1e-9 && (w - ew).abs() < 1e-9, "{x} {w}");
        };
        close(bar_span(0, 10, 0, 1), (1.0, 8.0));
        close(bar_span(1, 10, 0, 2), (11.0, 4.0));
        close(bar_span(1, 10, 1, 2), (15.0, 4.0));
        close(bar_span(0, 1, 2, 3), (10.0 + 2.0 * 80.0 / 3.0, 80.0 / 3.0));
    }

    #[test]
    fn charts_fit_their_highest_stack_bar_or_point() {
        let series = vec![
            Series {
                key: "up",
                label: "Up",
                mark: Mark::Bar,
                values: vec![1, 5, 2],
            },
            Series {
                key: "down",
                label: "Down",
                mark: Mark::Bar,
                values: vec![4, 1, 2],
            },
            Series {
                key: "unanswered",
                label: "Unanswered",
                mark: Mark::Line,
                values: vec![0, 0, 5],
            },
        ];
        assert_eq!(chart_max(&series, Bars::Stacked), 6);
        assert_eq!(chart_max(&series, Bars::Grouped), 5);
        assert_eq!(chart_max(&series[2..], Bars::Grouped), 5);
        assert_eq!(chart_max(&[], Bars::Stacked), 0);
    }

    #[test]
    fn summaries_name_the_period_and_the_totals() {
        let period = Period {
            from: "2026-11-01".to_owned(),
            to: "2026-11-30".to_owned(),
            interval: Interval::Day,
        };
        assert_eq!(
            chart_summary("Conversations per day", &period, &[(42, "conversations")]),
            "Conversations per day, 2026-11-01 to 2026-11-30: 42 conversations in total."
        );
        assert_eq!(
            chart_summary(
                "Ratings per day",
                &period,
                &[(1_200, "up"), (3, "down"), (0, "unanswered")]
            ),
            "Ratings per day, 2026-11-01 to 2026-11-30: 1,200 up, 3 down and 0 unanswered in total."
        );
    }
}
