//! `/dashboard/account`: the profile, the plan with its limits, the sign-in methods
//! (connect and disconnect Google, GitHub or Microsoft), the usage of this month with the
//! plan's monthly token quota and a chart of chats per day (`GET /api/usage`), and the live
//! sessions with "Sign out" for each (`GET /api/auth/me`, `GET /api/auth/identities`,
//! `POST`/`DELETE /api/auth/oauth/{provider}/link`, `GET /api/auth/sessions`,
//! `DELETE /api/auth/sessions/{id}`).

use super::{
    agents::ConfirmButton,
    dashboard::{short_time, use_session},
};
use crate::{
    api::{
        AuthProvidersResponse, IdentitiesResponse, MeResponse, OAuthLinkResponse, QuotaInfo,
        SessionInfo, SessionsResponse, SuccessResponse, UsageDayInfo, UsageResponse,
    },
    client::{self, ApiError},
    components::{
        counted, fetch_signed_in, load_error_view, loading_view, percent_of, thousands, Notice,
        Tone, UsageMeter,
    },
    countries::country_name,
};
use leptos::prelude::*;
use leptos_meta::Title;
use leptos_router::hooks::use_query_map;

/// The account page.
#[component]
pub fn AccountPage() -> impl IntoView {
    let session = use_session();
    view! {
        <Title text="Account"/>
        <div class="stack">
            <section class="card">
                <h1>"Account"</h1>
                {move || match session.me.get() {
                    Some(me) => view! { <Profile me/> }.into_any(),
                    None => view! { <p class="loading" role="status">"Loading your account…"</p> }.into_any(),
                }}
            </section>
            <Usage/>
            <SignInMethods/>
            <Sessions/>
        </div>
    }
    .into_any()
}

/// Name, email, company, country, phone, plan and its limits.
#[component]
fn Profile(me: MeResponse) -> impl IntoView {
    let user = me.user;
    let optional = |value: Option<String>| value.unwrap_or_else(|| "—".to_owned());
    let item = |label: &'static str, value: String, testid: &'static str| {
        view! {
            <div>
                <dt>{label}</dt>
                <dd data-testid=testid>{value}</dd>
            </div>
        }
    };
    view! {
        <dl class="profile">
            {item("Name", user.name.clone(), "profile-name")}
            {item("Email", user.email.clone(), "profile-email")}
            {item("Company", optional(user.company.clone()), "profile-company")}
            {item(
                "Country",
                optional(user.country.clone().map(|code| country_name(&code).map_or(code, ToOwned::to_owned))),
                "profile-country",
            )}
            {item("Phone", optional(user.phone.clone()), "profile-phone")}
            {item("Member since", user.created_at.get(..10).unwrap_or(&user.created_at).to_owned(), "profile-since")}
        </dl>
        <h2>"Plan"</h2>
        <dl class="profile">
            {item("Plan", user.plan.clone(), "account-plan")}
            {item("Rate limit", format!("{} requests per minute", me.limits.requests_per_minute), "rate-limit")}
            {item("Agents", format!("up to {}", me.limits.agents), "plan-agent-limit")}
            {item(
                "Monthly tokens",
                me.limits.monthly_tokens.map_or_else(|| "Unlimited".to_owned(), thousands),
                "plan-token-quota",
            )}
        </dl>
        <p class="muted small">
            "API keys count toward your account's rate limit. An administrator changes plans with "
            <code>"agentchat admin set-plan"</code>
            "."
        </p>
    }
    .into_any()
}

/// The English months, for dates in words.
const MONTHS: [&str; 12] = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
];

/// The year, month (1–12) and day of a date or timestamp starting `YYYY-MM-DD`.
fn ymd(iso: &str) -> Option<(&str, usize, u32)> {
    let year = iso.get(..4)?;
    let month = iso.get(5..7)?.parse::<usize>().ok()?;
    let day = iso.get(8..10)?.parse::<u32>().ok()?;
    ((1..=12).contains(&month)
        && (1..=31).contains(&day)
        && year.bytes().all(|b| b.is_ascii_digit()))
    .then_some((year, month, day))
}

/// A date or timestamp as "1 December 2026" (its date as written, UTC for the API's
/// timestamps); anything else as it is.
pub fn long_date(iso: &str) -> String {
    ymd(iso).map_or_else(
        || iso.to_owned(),
        |(year, month, day)| format!("{day} {} {year}", MONTHS[month - 1]),
    )
}

/// A day of the chart's axis: "20 Nov"; anything else as it is.
pub fn axis_day(iso: &str) -> String {
    ymd(iso).map_or_else(
        || iso.to_owned(),
        |(_, month, day)| format!("{day} {}", &MONTHS[month - 1][..3]),
    )
}

/// The plan's quota in words: "12,345 of 200,000 tokens used this month".
pub fn quota_used_words(quota: &QuotaInfo) -> String {
    format!(
        "{} of {} tokens used this month",
        thousands(quota.used),
        thousands(quota.limit)
    )
}

/// Height of the chart in pixels; the bars stand between `PLOT_TOP` and `PLOT_BOTTOM`, the
/// dates below.
const CHART_HEIGHT: u32 = 190;
/// The y of the highest tick, in pixels.
const PLOT_TOP: u32 = 10;
/// The y of the x axis (0 chats), in pixels.
const PLOT_BOTTOM: u32 = 160;
/// Dates the x axis shows at most (about one a week for 30 days).
const DATE_LABELS: usize = 6;

/// The y of value `v` on an axis running from 0 to `top`, in pixels.
fn chart_y(v: u64, top: u64) -> f64 {
    let span = f64::from(PLOT_BOTTOM - PLOT_TOP);
    f64::from(PLOT_BOTTOM) - span * (v as f64) / (top.max(1) as f64)
}

/// The plan's monthly token quota: used, left, a bar and the reset date; "Unlimited" when the
/// plan has none.
#[component]
fn TokenQuota(
    /// `quota` of `GET /api/usage`.
    quota: Option<QuotaInfo>,
) -> impl IntoView {
    let limited = quota.is_some();
    view! {
        <div class="quota" data-testid="token-quota" data-limited=limited.to_string()>
            <h3>"Monthly token quota"</h3>
            {match quota {
                None => view! {
                    <p class="quota-used">
                        <strong data-testid="token-quota-used">"Unlimited"</strong>
                        <span class="muted">" Your plan has no monthly token quota."</span>
                    </p>
                }
                .into_any(),
                Some(q) => {
                    let spent = q.remaining == 0;
                    view! {
                        <p class="quota-used">
                            <strong data-testid="token-quota-used">{quota_used_words(&q)}</strong>
                            <span class="muted">{format!(" ({} %)", percent_of(q.used, q.limit))}</span>
                        </p>
                        <UsageMeter used=q.used limit=q.limit label="Tokens used of the monthly quota"/>
                        <p class="muted small">
                            <span data-testid="token-quota-remaining">{format!("{} tokens left", thousands(q.remaining))}</span>
                            " · resets on "
                            <time datetime=q.reset_at.clone() data-testid="token-quota-reset">{long_date(&q.reset_at)}</time>
                            " (UTC)"
                        </p>
                        {spent.then(|| view! {
                            <Notice tone=Tone::Error testid="token-quota-spent">
                                {format!("The quota is used up: chats are refused until {}.", long_date(&q.reset_at))}
                            </Notice>
                        })}
                    }
                    .into_any()
                }
            }}
        </div>
    }
}

/// Chats per day as a bar chart with labelled axes: the y axis in chats, the x axis with
/// about one date a week, and a summary for screen readers. Drawn in SVG whose geometry is
/// in attributes (x in percent of the width, so the text keeps its size at any width), as
/// the dashboard's Content Security Policy refuses `style` attributes.
#[component]
fn UsageChart(
    /// Every day of the window, oldest first.
    days: Vec<UsageDayInfo>,
) -> impl IntoView {
    let busiest = days.iter().max_by_key(|d| d.chats).cloned();
    let ticks = crate::chart::axis_ticks(busiest.as_ref().map_or(0, |d| d.chats));
    let top = ticks.last().copied().unwrap_or(1);
    let total: u64 = days.iter().map(|d| d.chats).sum();
    let (first, last) = (
        days.first().map(|d| axis_day(&d.date)).unwrap_or_default(),
        days.last().map(|d| long_date(&d.date)).unwrap_or_default(),
    );
    let summary = match &busiest {
        Some(b) if b.chats > 0 => format!(
            "Bar chart of chats per day from {first} to {last}: {total} in all, at most {} on {}; {} today.",
            b.chats,
            axis_day(&b.date),
            days.last().map_or(0, |d| d.chats),
        ),
        _ => format!("Bar chart of chats per day from {first} to {last}: no chats."),
    };
    let title = format!("Chats per day, last {} days (UTC)", days.len());
    // Each day gets an equal slot of the width; its bar fills the middle 70 %.
    let slot = 100.0 / days.len().max(1) as f64;
    let labelled = crate::chart::labelled_indices(days.len(), DATE_LABELS);
    let grid = ticks
        .iter()
        .map(|tick| {
            let y = format!("{:.1}", chart_y(*tick, top));
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
                <text class="chart-label" x="50" y=format!("{:.1}", chart_y(*tick, top) + 4.0) text-anchor="end">
                    {thousands(*tick)}
                </text>
            }
        })
        .collect_view();
    let bars = days
        .iter()
        .enumerate()
        .map(|(index, day)| {
            let y = chart_y(day.chats, top);
            let tip = format!(
                "{}: {}, {}",
                day.date,
                counted(day.chats, "chat"),
                counted(day.tokens.total, "token")
            );
            view! {
                <rect
                    class="usage-bar"
                    x=format!("{:.3}%", slot * (index as f64 + 0.15))
                    width=format!("{:.3}%", slot * 0.7)
                    y=format!("{y:.1}")
                    height=format!("{:.1}", f64::from(PLOT_BOTTOM) - y)
                    data-date=day.date.clone()
                    data-chats=day.chats.to_string()
                >
                    <title>{tip}</title>
                </rect>
            }
        })
        .collect_view();
    // Every other date, counted back from today, gives way on narrow screens (the
    // stylesheet hides those marked minor).
    let dates = labelled
        .into_iter()
        .rev()
        .enumerate()
        .map(|(rank, index)| {
            view! {
                <text
                    class="chart-label chart-date"
                    x=format!("{:.3}%", slot * (index as f64 + 0.5))
                    y=(PLOT_BOTTOM + 20).to_string()
                    text-anchor="middle"
                    data-minor=(rank % 2 == 1).then_some("true")
                >
                    {axis_day(&days[index].date)}
                </text>
            }
        })
        .collect_view();
    let height = CHART_HEIGHT.to_string();
    let axis_middle = f64::from(PLOT_TOP + PLOT_BOTTOM) / 2.0;
    view! {
        <figure class="chart">
            <figcaption class="chart-title">{title}</figcaption>
            <div class="usage-chart" role="img" aria-label=summary data-testid="usage-chart">
                <svg class="chart-y" width="56" height=height.clone() aria-hidden="true">
                    <text
                        class="chart-unit"
                        x="12"
                        y=format!("{axis_middle:.1}")
                        text-anchor="middle"
                        transform=format!("rotate(-90 12 {axis_middle:.1})")
                    >
                        "Chats"
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
                    {bars}
                    {dates}
                </svg>
            </div>
        </figure>
    }
}

/// Replies and tokens this month, the plan's token quota, and a bar chart of chats per day
/// over the last 30 days.
#[component]
fn Usage() -> impl IntoView {
    let usage = fetch_signed_in(|| "/api/usage?days=30".to_owned(), |u: UsageResponse| u);
    view! {
        <section class="card">
            <h2 class="first">"Usage"</h2>
            <Suspense fallback=|| loading_view("usage")>
            {move || Suspend::new(async move { match usage.await {
                Err(err) => load_error_view(&err, "usage"),
                Ok(u) => {
                    view! {
                        <dl class="profile">
                            <div>
                                <dt>{format!("Tokens in {}", u.month)}</dt>
                                <dd data-testid="usage-tokens">{format!(
                                    "{} ({} prompt, {} completion)",
                                    u.tokens_this_month.total,
                                    u.tokens_this_month.prompt,
                                    u.tokens_this_month.completion,
                                )}</dd>
                            </div>
                            <div>
                                <dt>{format!("Chats in {}", u.month)}</dt>
                                <dd data-testid="usage-chats">{u.chats_this_month.to_string()}</dd>
                            </div>
                        </dl>
                        <TokenQuota quota=u.quota/>
                        <UsageChart days=u.days/>
                    }.into_any()
                }
            }})}
            </Suspense>
        </section>
    }
    .into_any()
}

/// The configured sign-in providers, each connected (with its email and "Disconnect") or
/// not (with "Connect", which goes through the provider and comes back here with
/// `?linked=code` or `?oauthError=message`).
#[component]
fn SignInMethods() -> impl IntoView {
    let query = use_query_map();
    let state = LocalResource::new(|| async {
        let providers = client::get_json::<AuthProvidersResponse>("/api/auth/providers").await;
        let identities =
            client::get_json_signed_in::<IdentitiesResponse>("/api/auth/identities").await;
        Ok::<_, ApiError>((providers?.providers, identities?))
    });
    let error = RwSignal::new(None::<String>);
    // Set once the browser is on its way to the provider, so the buttons stay disabled.
    let leaving = RwSignal::new(false);
    let connect_action = Action::new_local(move |code: &String| {
        let path = format!("/api/auth/oauth/{code}/link");
        async move {
            match client::post_signed_in::<_, OAuthLinkResponse>(&path, &()).await {
                Ok(answer) => {
                    leaving.set(true);
                    client::go_to(&answer.url);
                }
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let disconnect_action = Action::new_local(move |code: &String| {
        let path = format!("/api/auth/oauth/{code}/link");
        async move {
            match client::delete_signed_in::<SuccessResponse>(&path).await {
                Ok(_) => state.refetch(),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let (connecting, disconnecting) = (connect_action.pending(), disconnect_action.pending());
    let busy = Signal::derive(move || leaving.get() || connecting.get() || disconnecting.get());
    let connect = move |code: String| {
        error.set(None);
        connect_action.dispatch(code);
    };
    let disconnect = move |code: String| {
        error.set(None);
        disconnect_action.dispatch(code);
    };
    view! {
        <section class="card">
            <h2 class="first">"Sign-in methods"</h2>
            {move || query.read().get("linked").map(|code| view! {
                <Notice tone=Tone::Success testid="linked-banner">{format!("Connected {code}. You can now sign in with it.")}</Notice>
            })}
            {move || query.read().get("oauthError").map(|message| view! {
                <Notice tone=Tone::Error testid="link-error">{message}</Notice>
            })}
            {move || error.get().map(|message| view! { <Notice tone=Tone::Error testid="methods-error">{message}</Notice> })}
            <Transition fallback=|| loading_view("sign-in methods")>
            {move || Suspend::new(async move { match state.await {
                Err(err) => load_error_view(&err, "methods"),
                Ok((providers, identities)) => {
                    let password = if identities.has_password { "Password: set" } else { "Password: not set (use “Forgot your password?” on the sign-in page to set one)" };
                    view! {
                        <p class="muted" data-testid="password-method">{password}</p>
                        {providers.is_empty().then(|| view! { <p class="empty">"No sign-in providers are configured on this server."</p> })}
                        <ul class="sessions" data-testid="sign-in-methods">
                            {providers.into_iter().map(|provider| {
                                let linked = identities.identities.iter().find(|i| i.provider == provider.code).cloned();
                                let code = provider.code.clone();
                                view! {
                                    <li class="session" data-testid=format!("method-{}", provider.code)>
                                        <div>
                                            <strong>{provider.name.clone()}</strong>
                                            <p class="muted small">{linked.as_ref().map_or_else(
                                                || "Not connected".to_owned(),
                                                |i| format!("Connected as {} since {}", i.email, short_time(&i.created_at)),
                                            )}</p>
                                        </div>
                                        {if linked.is_some() {
                                            view! {
                                                <ConfirmButton
                                                    label="Disconnect"
                                                    question=format!("Disconnect {}?", provider.name)
                                                    confirm="Yes, disconnect"
                                                    busy
                                                    on_confirm=Callback::new(move |()| disconnect(code.clone()))
                                                />
                                            }.into_any()
                                        } else {
                                            view! {
                                                <button type="button" class="button button-secondary" disabled=move || busy.get()
                                                    on:click=move |_| connect(code.clone())>
                                                    {format!("Connect {}", provider.name)}
                                                </button>
                                            }.into_any()
                                        }}
                                    </li>
                                }
                            }).collect_view()}
                        </ul>
                    }.into_any()
                }
            }})}
            </Transition>
        </section>
    }
    .into_any()
}

/// The live sessions (at most five), newest first, each with "Sign out".
#[component]
fn Sessions() -> impl IntoView {
    let sessions = fetch_signed_in(
        || "/api/auth/sessions".to_owned(),
        |answer: SessionsResponse| answer.sessions,
    );
    let load = move || sessions.refetch();
    view! {
        <section class="card">
            <h2 class="first">"Active sessions"</h2>
            <p class="muted">"Every browser or device signed in to your account. A session unused for 24 hours ends by itself."</p>
            <Transition fallback=|| loading_view("sessions")>
            {move || Suspend::new(async move { match sessions.await {
                Err(err) => load_error_view(&err, "sessions"),
                Ok(list) if list.is_empty() => {
                    view! { <p class="empty">"No active sessions."</p> }.into_any()
                }
                Ok(list) => {
                    view! {
                        <ul class="sessions" data-testid="sessions">
                            {list
                                .into_iter()
                                .map(|s| view! { <SessionRow session=s on_ended=Callback::new(move |()| load())/> })
                                .collect_view()}
                        </ul>
                    }
                        .into_any()
                }
            }})}
            </Transition>
        </section>
    }
    .into_any()
}

/// One session: browser, address, when it started and was last used.
#[component]
fn SessionRow(session: SessionInfo, on_ended: Callback<()>) -> impl IntoView {
    let error = RwSignal::new(None::<String>);
    let current = session.current;
    let end_action = Action::new_local(move |id: &String| {
        let path = format!("/api/auth/sessions/{id}");
        async move {
            match client::delete_signed_in::<SuccessResponse>(&path).await {
                Ok(_) if current => client::to_sign_in(),
                Ok(_) => on_ended.run(()),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let busy = end_action.pending();
    let end = Callback::new({
        let id = session.id.clone();
        move |()| {
            error.set(None);
            end_action.dispatch(id.clone());
        }
    });
    view! {
        <li class="session" data-testid="session" data-current=current.to_string()>
            <div>
                <strong title=session.user_agent.clone().unwrap_or_default()>
                    {match &session.client {
                        Some(c) => format!("{} on {} · {}", c.browser, c.os, c.device),
                        None => "Unknown browser".to_owned(),
                    }}
                </strong>
                {current.then(|| view! { <span class="pill">"this browser"</span> })}
                <p class="muted small">
                    {format!(
                        "{} · signed in {} · last used {}",
                        session.ip.clone().unwrap_or_else(|| "unknown address".to_owned()),
                        short_time(&session.created_at),
                        short_time(&session.last_seen_at),
                    )}
                </p>
            </div>
            <ConfirmButton
                label="Sign out"
                question=if current { "Sign out of this browser?".to_owned() } else { "End this session?".to_owned() }
                confirm="Yes, sign out"
                busy
                on_confirm=end
            />
            {move || error.get().map(|message| view! { <Notice tone=Tone::Error testid="session-error">{message}</Notice> })}
        </li>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_told_in_words() {
        assert_eq!(long_date("2026-12-01T00:00:00Z"), "1 December 2026");
        assert_eq!(long_date("2027-01-31"), "31 January 2027");
        assert_eq!(long_date("soon"), "soon");
        assert_eq!(long_date("2026-13-01"), "2026-13-01");
        assert_eq!(axis_day("2026-11-20"), "20 Nov");
        assert_eq!(axis_day("2026-05-02"), "2 May");
    }

    #[test]
    fn the_quota_is_told_in_words() {
        let quota = QuotaInfo {
            limit: 200_000,
            used: 12_345,
            remaining: 187_655,
            reset_at: "2026-12-01T00:00:00Z".to_owned(),
        };
        assert_eq!(
            quota_used_words(&quota),
            "12,345 of 200,000 tokens used this month"
        );
    }
}
