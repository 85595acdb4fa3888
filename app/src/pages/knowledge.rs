//! `/dashboard/agents/{id}/knowledge`: the agent's knowledge base — uploads with progress,
//! crawls of a site, and the documents with their indexing state, updated live (the list is
//! reloaded every few seconds while a document is pending or processing)
//! (`POST .../knowledge/file`, `POST .../knowledge/url`, `GET .../knowledge`,
//! `POST .../knowledge/{documentId}/refresh`, `PATCH .../knowledge/{documentId}` for a
//! site's refresh schedule, `DELETE .../knowledge/{documentId}`, `GET /api/jobs/{jobId}`).

use super::{agent::use_agent, agents::ConfirmButton, dashboard::short_time};
use crate::{
    api::{
        limits::REFRESH_HOURS_MAX, AddUrlRequest, AddUrlResponse, CrawlOptions,
        DocumentRefreshResponse, DocumentResponse, DocumentSettings, DocumentsResponse,
        JobProgress, JobResponse, KnowledgeDocument, Refresh, RefreshCounts, SuccessResponse,
        UpdateDocumentRequest,
    },
    client,
    components::{
        load_error_view, loading_view, use_hydrated, FormError, FormErrorNotice, Notice, Tone,
    },
};
use leptos::prelude::*;
use leptos_meta::Title;
use std::{collections::HashMap, time::Duration};

/// How long after a list showing a document still being indexed the list is reloaded.
const POLL_EVERY: Duration = Duration::from_millis(2_500);

/// One file on its way to the server.
#[derive(Debug, Clone, Copy)]
struct Upload {
    key: u64,
    name: StoredValue<String>,
    /// Fraction sent, 0.0 to 1.0.
    progress: RwSignal<f64>,
    /// `None` while sending; then the outcome in words.
    outcome: RwSignal<Option<Result<String, String>>>,
}

/// Whether a document is still being worked on (not yet `indexed` or `failed`).
fn in_progress(status: &str) -> bool {
    matches!(status, "pending" | "processing")
}

/// Whether the list must be reloaded to follow it: some document is still being worked on.
pub fn needs_polling(documents: &[KnowledgeDocument]) -> bool {
    documents.iter().any(|d| in_progress(&d.status))
}

/// Splits a text area into its non-empty lines (one glob per line).
pub fn lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .map(ToOwned::to_owned)
        .collect()
}

/// Checks the add-URL form as the server would (README § Knowledge base).
///
/// # Errors
/// The first rule broken, in words.
pub fn validate_crawl(url: &str, depth: &str, max_pages: &str) -> Result<(u8, u32), String> {
    let lower = url.trim().to_ascii_lowercase();
    if !(lower.starts_with("http://") || lower.starts_with("https://")) || lower.len() < 10 {
        return Err("Enter a web address that starts with http:// or https://.".into());
    }
    let depth = depth
        .trim()
        .parse::<u8>()
        .ok()
        .filter(|d| *d <= 5)
        .ok_or("Crawl depth is a whole number from 0 (that page only) to 5.")?;
    let max_pages = max_pages
        .trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (1..=1000).contains(n))
        .ok_or("Maximum pages is a whole number from 1 to 1,000.")?;
    Ok((depth, max_pages))
}

/// The schedule picked in a form: `kind` is `off`, `daily`, `weekly` or `hours` (then
/// `hours` is the number typed), checked as the server checks it.
///
/// # Errors
/// The rule broken, in words.
pub fn refresh_choice(kind: &str, hours: &str) -> Result<Refresh, String> {
    match kind {
        "off" | "daily" | "weekly" => Ok(Refresh(kind.into())),
        _ => hours
            .trim()
            .parse::<u32>()
            .ok()
            .filter(|h| (1..=REFRESH_HOURS_MAX).contains(h))
            .map(|h| Refresh(h.into()))
            .ok_or_else(|| "Refresh every 1 to 8,760 hours (a year).".to_owned()),
    }
}

/// The form's choice (kind, hours) showing `refresh`: `("hours", "6")` for every 6 hours.
pub fn refresh_fields(refresh: Option<&Refresh>) -> (String, String) {
    match refresh.map(|r| &r.0) {
        Some(serde_json::Value::String(s)) if s == "daily" || s == "weekly" => {
            (s.clone(), "12".to_owned())
        }
        Some(serde_json::Value::Number(n)) => ("hours".to_owned(), n.to_string()),
        _ => ("off".to_owned(), "12".to_owned()),
    }
}

/// A schedule in words: "Refresh off", "Refreshed daily", "Refreshed every 6 hours".
pub fn refresh_words(refresh: Option<&Refresh>) -> String {
    match refresh.map(|r| &r.0) {
        Some(serde_json::Value::String(s)) if s == "daily" || s == "weekly" => {
            format!("Refreshed {s}")
        }
        Some(serde_json::Value::Number(n)) if n.as_u64() == Some(1) => {
            "Refreshed every hour".to_owned()
        }
        Some(serde_json::Value::Number(n)) => format!("Refreshed every {n} hours"),
        _ => "Refresh off".to_owned(),
    }
}

/// A refresh's counts in words: "1 added, 2 changed, 0 removed, 38 unchanged".
pub fn counts_words(c: &RefreshCounts) -> String {
    format!(
        "{} added, {} changed, {} removed, {} unchanged",
        c.added, c.changed, c.removed, c.unchanged
    )
}

/// The schedule picker: off, daily, weekly or every N hours (the number field shown only
/// for the last). `prefix` makes the ids unique on the page.
#[component]
fn RefreshPicker(prefix: String, kind: RwSignal<String>, hours: RwSignal<String>) -> impl IntoView {
    let select_id = format!("{prefix}-refresh");
    let hours_id = format!("{prefix}-refresh-hours");
    view! {
        <div class="field-row">
            <div class="field">
                <label for=select_id.clone()>"Refresh"</label>
                <select
                    id=select_id
                    data-testid="refresh-select"
                    prop:value=move || kind.get()
                    on:change=move |ev| kind.set(event_target_value(&ev))
                >
                    <option value="off">"Off"</option>
                    <option value="daily">"Daily"</option>
                    <option value="weekly">"Weekly"</option>
                    <option value="hours">"Every N hours"</option>
                </select>
            </div>
            <Show when=move || kind.get() == "hours">
                <div class="field">
                    <label for=hours_id.clone()>"Hours between refreshes"</label>
                    <input
                        id=hours_id.clone()
                        type="number"
                        min="1"
                        max=REFRESH_HOURS_MAX.to_string()
                        data-testid="refresh-hours"
                        prop:value=move || hours.get()
                        on:input=move |ev| hours.set(event_target_value(&ev))
                    />
                </div>
            </Show>
        </div>
    }
}

/// Uploads, crawls and the document list of the agent.
#[component]
pub fn KnowledgePage() -> impl IntoView {
    let agent = use_agent();
    // Jobs started from this page, by document: their progress shows pages done / found.
    let jobs = RwSignal::new(HashMap::<String, (String, Option<JobProgress>)>::new());
    let list_error = RwSignal::new(None::<String>);
    // The list on screen, kept when a later reload fails.
    let shown = StoredValue::new(None::<Vec<KnowledgeDocument>>);

    // The documents of the agent, then the progress of the crawls started here that are
    // still running.
    let documents = LocalResource::new(move || {
        let id = agent.id.get();
        async move {
            let answer = client::get_json_signed_in::<DocumentsResponse>(&format!(
                "/api/agents/{id}/knowledge"
            ))
            .await;
            let listed = match answer {
                Ok(answer) => {
                    list_error.set(None);
                    shown.set_value(Some(answer.documents.clone()));
                    Ok(answer.documents)
                }
                // Keep the last list on screen when a poll fails; say so above it.
                Err(err) => match shown.get_value() {
                    Some(docs) => {
                        list_error.set(Some(err.message().to_owned()));
                        Ok(docs)
                    }
                    None => Err(err),
                },
            };
            let running: Vec<(String, String)> = jobs.with_untracked(|jobs| {
                listed
                    .iter()
                    .flatten()
                    .filter(|d| in_progress(&d.status))
                    .filter_map(|d| {
                        jobs.get(&d.document_id)
                            .map(|(job, _)| (d.document_id.clone(), job.clone()))
                    })
                    .collect()
            });
            for (document, job) in running {
                if let Ok(answer) =
                    client::get_json_signed_in::<JobResponse>(&format!("/api/jobs/{job}")).await
                {
                    jobs.update(|jobs| {
                        jobs.insert(document, (job, Some(answer.job.progress)));
                    });
                }
            }
            listed
        }
    });
    let refresh_list = move || documents.refetch();

    // Keeps the list current while any document is pending or processing: each list that
    // shows one schedules the next reload, so polling stops by itself once every document
    // is indexed or failed. A new list (from a poll or an action) or leaving the page
    // clears the timer still pending. Effects run in the browser only.
    Effect::new(move || {
        let busy = documents
            .map(|docs| docs.as_ref().is_ok_and(|docs| needs_polling(docs)))
            .unwrap_or(false);
        if !busy || !cfg!(feature = "hydrate") {
            return;
        }
        if let Ok(timer) = set_timeout_with_handle(refresh_list, POLL_EVERY) {
            on_cleanup(move || timer.clear());
        }
    });

    view! {
        <Title text="Knowledge"/>
        <div class="stack">
            <UploadSection on_uploaded=Callback::new(move |()| refresh_list())/>
            <CrawlSection on_added=Callback::new(move |(document, job): (String, String)| {
                jobs.update(|jobs| {
                    jobs.insert(document, (job, None));
                });
                refresh_list();
            })/>
            <section class="card">
                <div class="section-head">
                    <h2 class="first">"Documents"</h2>
                    // The list follows indexing by itself; this picks up changes made
                    // elsewhere (the API, scheduled refreshes, another tab).
                    <button
                        type="button"
                        class="button button-secondary button-small"
                        data-testid="documents-refresh"
                        on:click=move |_| refresh_list()
                    >
                        "Refresh"
                    </button>
                </div>
                {move || {
                    list_error
                        .get()
                        .map(|message| {
                            view! { <Notice tone=Tone::Error testid="documents-poll-error">{message}</Notice> }
                        })
                }}
                <Transition fallback=|| loading_view("documents")>
                {move || Suspend::new(async move { match documents.await {
                    Err(err) => load_error_view(&err, "documents"),
                    Ok(list) if list.is_empty() => {
                        view! {
                            <p class="empty" data-testid="documents-empty">
                                "No documents yet. Upload a file or add a site above; the agent quotes them in its replies."
                            </p>
                        }
                            .into_any()
                    }
                    Ok(list) => {
                        view! {
                            <ul class="documents" data-testid="documents">
                                <For
                                    each=move || list.clone()
                                    key=|d| (d.document_id.clone(), d.updated_at.clone(), d.status.clone())
                                    let(document)
                                >
                                    <DocumentRow
                                        document
                                        jobs
                                        on_changed=Callback::new(move |()| refresh_list())
                                    />
                                </For>
                            </ul>
                        }
                            .into_any()
                    }
                }})}
                </Transition>
            </section>
        </div>
    }
    .into_any()
}

/// One document: name, kind, state (with progress or the failure's reason), size, and
/// its actions.
#[component]
fn DocumentRow(
    document: KnowledgeDocument,
    jobs: RwSignal<HashMap<String, (String, Option<JobProgress>)>>,
    on_changed: Callback<()>,
) -> impl IntoView {
    let agent = use_agent();
    let error = RwSignal::new(None::<String>);
    let id = document.document_id.clone();
    let refresh_action = Action::new_local(move |id: &String| {
        let id = id.clone();
        let path = format!(
            "/api/agents/{}/knowledge/{id}/refresh",
            agent.id.get_untracked()
        );
        async move {
            match client::post_signed_in::<_, DocumentRefreshResponse>(
                &path,
                &serde_json::Map::new(),
            )
            .await
            {
                Ok(answer) => {
                    jobs.update(|jobs| {
                        jobs.insert(id, (answer.job_id, None));
                    });
                    on_changed.run(());
                }
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let delete_action = Action::new_local(move |id: &String| {
        let path = format!("/api/agents/{}/knowledge/{id}", agent.id.get_untracked());
        async move {
            match client::delete_signed_in::<SuccessResponse>(&path).await {
                Ok(_) => on_changed.run(()),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let (refreshing, deleting) = (refresh_action.pending(), delete_action.pending());
    let busy = Signal::derive(move || refreshing.get() || deleting.get());
    let progress = {
        let id = id.clone();
        move || jobs.with(|jobs| jobs.get(&id).and_then(|(_, p)| *p))
    };
    let working = in_progress(&document.status);
    let status = document.status.clone();
    let refresh = {
        let id = id.clone();
        move |_| {
            error.set(None);
            refresh_action.dispatch(id.clone());
        }
    };
    let delete = Callback::new({
        let id = id.clone();
        move |()| {
            error.set(None);
            delete_action.dispatch(id.clone());
        }
    });
    let details = {
        let mut parts = vec![if document.kind == "url" {
            "Site"
        } else {
            "File"
        }
        .to_owned()];
        if let Some(pages) = document.pages {
            parts.push(format!("{pages} pages"));
        }
        parts.push(format!("{} chunks", document.chunks));
        parts.push(format!("{} KB", document.bytes.div_ceil(1024)));
        parts.push(format!("updated {}", short_time(&document.updated_at)));
        parts.join(" · ")
    };
    let site = document.kind == "url";
    // A site's schedule: in words, with the last refresh's counts and the next due time.
    let schedule = site.then(|| {
        let mut parts = vec![refresh_words(document.refresh.as_ref())];
        if let Some(last) = &document.last_refreshed_at {
            let mut text = format!("last {}", short_time(last));
            if let Some(counts) = &document.refresh_counts {
                text.push_str(&format!(" ({})", counts_words(counts)));
            }
            parts.push(text);
        }
        if let Some(next) = &document.next_refresh_at {
            parts.push(format!("next {}", short_time(next)));
        }
        parts.join(" · ")
    });
    let (kind, hours) = refresh_fields(document.refresh.as_ref());
    let refresh_kind = RwSignal::new(kind);
    let refresh_hours = RwSignal::new(hours);
    let editing = RwSignal::new(false);
    let schedule_action = Action::new_local(move |(id, refresh): &(String, Refresh)| {
        let path = format!("/api/agents/{}/knowledge/{id}", agent.id.get_untracked());
        let body = UpdateDocumentRequest {
            config: DocumentSettings {
                refresh: Some(refresh.clone()),
            },
        };
        async move {
            match client::patch_signed_in::<_, DocumentResponse>(&path, &body).await {
                Ok(_) => {
                    editing.set(false);
                    on_changed.run(());
                }
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let saving = schedule_action.pending();
    let save_schedule = {
        let id = id.clone();
        move |ev: leptos::ev::SubmitEvent| {
            ev.prevent_default();
            match refresh_choice(
                &refresh_kind.get_untracked(),
                &refresh_hours.get_untracked(),
            ) {
                Ok(refresh) => {
                    error.set(None);
                    schedule_action.dispatch((id.clone(), refresh));
                }
                Err(message) => error.set(Some(message)),
            }
        }
    };
    let picker_prefix = format!("document-{id}");
    view! {
        <li class="document" data-testid="document" data-status=status.clone()>
            <div class="document-main">
                <span class="document-name">{document.name.clone()}</span>
                <span class=format!("status status-{status}") data-testid="document-status">
                    {status.clone()}
                </span>
                {move || {
                    progress()
                        .filter(|_| working)
                        .map(|p| {
                            view! {
                                <span class="muted small" data-testid="document-progress">
                                    {format!("{} of {} pages", p.done, p.total)}
                                </span>
                            }
                        })
                }}
            </div>
            <p class="muted small">{details}</p>
            {schedule
                .map(|text| view! { <p class="muted small" data-testid="document-schedule">{text}</p> })}
            <Show when=move || editing.get()>
                <form class="form form-wide" on:submit=save_schedule.clone() novalidate>
                    <RefreshPicker
                        prefix=picker_prefix.clone()
                        kind=refresh_kind
                        hours=refresh_hours
                    />
                    <div class="form-actions">
                        <button
                            type="submit"
                            class="button button-small"
                            disabled=move || saving.get()
                        >
                            {move || if saving.get() { "Saving…" } else { "Save schedule" }}
                        </button>
                        <button
                            type="button"
                            class="button button-secondary button-small"
                            on:click=move |_| editing.set(false)
                        >
                            "Cancel"
                        </button>
                    </div>
                </form>
            </Show>
            {document
                .error
                .clone()
                .map(|reason| {
                    view! { <p class="error-text" data-testid="document-error">{reason}</p> }
                })}
            <div class="row-actions">
                <button
                    type="button"
                    class="button button-secondary button-small"
                    on:click=refresh
                    disabled=move || busy.get() || working
                >
                    {if document.kind == "url" { "Re-crawl" } else { "Re-index" }}
                </button>
                {site
                    .then(|| {
                        view! {
                            <button
                                type="button"
                                class="button button-secondary button-small"
                                data-testid="document-schedule-edit"
                                on:click=move |_| editing.update(|e| *e = !*e)
                            >
                                "Schedule"
                            </button>
                        }
                    })}
                <ConfirmButton
                    label="Delete"
                    question=format!("Delete “{}”?", document.name)
                    confirm="Yes, delete"
                    busy
                    on_confirm=delete
                />
            </div>
            {move || {
                error
                    .get()
                    .map(|message| {
                        view! { <Notice tone=Tone::Error testid="document-action-error">{message}</Notice> }
                    })
            }}
        </li>
    }
    .into_any()
}

/// Drag-and-drop (or chosen) files, each uploaded with its own progress bar and outcome.
#[component]
fn UploadSection(on_uploaded: Callback<()>) -> impl IntoView {
    let hydrated = use_hydrated();
    let agent = use_agent();
    let uploads = RwSignal::new(Vec::<Upload>::new());
    let over = RwSignal::new(false);
    let next_key = StoredValue::new(0_u64);
    // Sends one file, showing its progress and outcome on its entry.
    let upload_action = Action::new_local(
        move |(upload, file, path): &(Upload, web_sys::File, String)| {
            let (upload, file, path) = (*upload, file.clone(), path.clone());
            async move {
                let on_progress = move |fraction: f64| upload.progress.set(fraction);
                let outcome = client::upload_file(&path, &file, on_progress).await;
                upload.outcome.set(Some(match outcome {
                    Ok(_) => {
                        upload.progress.set(1.0);
                        on_uploaded.run(());
                        Ok("Uploaded; indexing starts shortly.".to_owned())
                    }
                    Err(err) => Err(err.message().to_owned()),
                }));
            }
        },
    );

    let start = move |files: web_sys::FileList| {
        for index in 0..files.length() {
            let Some(file) = files.item(index) else {
                continue;
            };
            next_key.update_value(|k| *k += 1);
            let upload = Upload {
                key: next_key.get_value(),
                name: StoredValue::new(file.name()),
                progress: RwSignal::new(0.0),
                outcome: RwSignal::new(None),
            };
            uploads.update(|list| list.insert(0, upload));
            let path = format!("/api/agents/{}/knowledge/file", agent.id.get_untracked());
            upload_action.dispatch_local((upload, file, path));
        }
    };

    view! {
        <section class="card">
            <h2 class="first">"Upload documents"</h2>
            <div
                class="dropzone"
                class:dropzone-over=move || over.get()
                data-testid="dropzone"
                on:dragover=move |ev: leptos::ev::DragEvent| {
                    ev.prevent_default();
                    over.set(true);
                }
                on:dragleave=move |_| over.set(false)
                on:drop=move |ev: leptos::ev::DragEvent| {
                    ev.prevent_default();
                    over.set(false);
                    if let Some(files) = ev.data_transfer().and_then(|d| d.files()) {
                        start(files);
                    }
                }
            >
                <p>"Drop PDF, Word (DOCX), Markdown or text files here, or"</p>
                <label class="button button-secondary" for="knowledge-files">
                    "Choose files"
                </label>
                <input
                    id="knowledge-files"
                    class="visually-hidden"
                    type="file"
                    multiple
                    accept=".pdf,.docx,.md,.markdown,.txt,application/pdf,text/plain,text/markdown"
                    disabled=move || !hydrated.get()
                    on:change=move |ev| {
                        let input = event_target::<web_sys::HtmlInputElement>(&ev);
                        if let Some(files) = input.files() {
                            start(files);
                        }
                        input.set_value("");
                    }
                />
            </div>
            <ul class="uploads" aria-live="polite">
                <For each=move || uploads.get() key=|u| u.key let(upload)>
                    <li class="upload" data-testid="upload">
                        <span class="upload-name">{upload.name.get_value()}</span>
                        <progress
                            max="1"
                            value=move || upload.progress.get().to_string()
                            aria-label=format!("Upload of {}", upload.name.get_value())
                        ></progress>
                        {move || match upload.outcome.get() {
                            None => {
                                view! {
                                    <span class="muted small">
                                        {format!("{:.0} %", upload.progress.get() * 100.0)}
                                    </span>
                                }
                                    .into_any()
                            }
                            Some(Ok(message)) => {
                                view! { <span class="success-text small" data-testid="upload-done">{message}</span> }
                                    .into_any()
                            }
                            Some(Err(message)) => {
                                view! { <span class="error-text small" role="alert" data-testid="upload-error">{message}</span> }
                                    .into_any()
                            }
                        }}
                    </li>
                </For>
            </ul>
        </section>
    }
    .into_any()
}

/// The add-URL form with the crawl options. `on_added` receives the document and job ids.
#[component]
fn CrawlSection(on_added: Callback<(String, String)>) -> impl IntoView {
    let hydrated = use_hydrated();
    let agent = use_agent();
    let url = RwSignal::new(String::new());
    let depth = RwSignal::new("2".to_owned());
    let max_pages = RwSignal::new("50".to_owned());
    let include = RwSignal::new(String::new());
    let exclude = RwSignal::new(String::new());
    let same_domain = RwSignal::new(true);
    let use_sitemap = RwSignal::new(false);
    let respect_robots = RwSignal::new(true);
    let refresh_kind = RwSignal::new("off".to_owned());
    let refresh_hours = RwSignal::new("12".to_owned());
    let error: FormError = RwSignal::new(None);
    let added = RwSignal::new(false);
    let add = Action::new_local(move |(path, body): &(String, AddUrlRequest)| {
        let (path, body) = (path.clone(), body.clone());
        async move {
            match client::post_signed_in::<_, AddUrlResponse>(&path, &body).await {
                Ok(answer) => {
                    added.set(true);
                    url.set(String::new());
                    on_added.run((answer.document_id, answer.job_id));
                }
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let pending = add.pending();

    let submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if pending.get_untracked() {
            return;
        }
        added.set(false);
        let (crawl_depth, pages) = match validate_crawl(
            &url.get_untracked(),
            &depth.get_untracked(),
            &max_pages.get_untracked(),
        ) {
            Ok(valid) => valid,
            Err(message) => {
                error.set(Some(message));
                return;
            }
        };
        let refresh = match refresh_choice(
            &refresh_kind.get_untracked(),
            &refresh_hours.get_untracked(),
        ) {
            Ok(refresh) => refresh,
            Err(message) => {
                error.set(Some(message));
                return;
            }
        };
        error.set(None);
        let body = AddUrlRequest {
            url: url.get_untracked().trim().to_owned(),
            config: Some(CrawlOptions {
                crawl_depth: Some(crawl_depth),
                max_pages: Some(pages),
                include_patterns: Some(lines(&include.get_untracked())),
                exclude_patterns: Some(lines(&exclude.get_untracked())),
                same_domain: Some(same_domain.get_untracked()),
                use_sitemap: Some(use_sitemap.get_untracked()),
                respect_robots: Some(respect_robots.get_untracked()),
                refresh: Some(refresh),
            }),
        };
        let path = format!("/api/agents/{}/knowledge/url", agent.id.get_untracked());
        add.dispatch((path, body));
    };

    let checkbox = move |id: &'static str, label: &'static str, value: RwSignal<bool>| {
        view! {
            <label class="check" for=id>
                <input
                    id=id
                    type="checkbox"
                    prop:checked=move || value.get()
                    on:change=move |ev| value.set(event_target_checked(&ev))
                />
                {label}
            </label>
        }
    };

    view! {
        <section class="card">
            <h2 class="first">"Add a website"</h2>
            <form class="form form-wide" on:submit=submit novalidate>
                <div class="field">
                    <label for="crawl-url">"Start URL"</label>
                    <input
                        id="crawl-url"
                        type="url"
                        placeholder="https://docs.example.com/"
                        required
                        prop:value=move || url.get()
                        on:input=move |ev| url.set(event_target_value(&ev))
                    />
                </div>
                <div class="field-row">
                    <div class="field">
                        <label for="crawl-depth">"Crawl depth"</label>
                        <input
                            id="crawl-depth"
                            type="number"
                            min="0"
                            max="5"
                            aria-describedby="crawl-depth-hint"
                            prop:value=move || depth.get()
                            on:input=move |ev| depth.set(event_target_value(&ev))
                        />
                        <p id="crawl-depth-hint" class="hint">"0 is that page only; at most 5."</p>
                    </div>
                    <div class="field">
                        <label for="crawl-max-pages">"Maximum pages"</label>
                        <input
                            id="crawl-max-pages"
                            type="number"
                            min="1"
                            max="1000"
                            prop:value=move || max_pages.get()
                            on:input=move |ev| max_pages.set(event_target_value(&ev))
                        />
                    </div>
                </div>
                <RefreshPicker prefix="crawl".to_owned() kind=refresh_kind hours=refresh_hours/>
                <p class="hint">
                    "A refresh crawls the site again; unchanged pages cost one request and are not indexed again."
                </p>
                <details class="options">
                    <summary>"More crawl options"</summary>
                    <div class="field-row">
                        <div class="field">
                            <label for="crawl-include">"Include paths (one glob per line)"</label>
                            <textarea
                                id="crawl-include"
                                rows="3"
                                placeholder="/docs/**"
                                prop:value=move || include.get()
                                on:input=move |ev| include.set(event_target_value(&ev))
                            ></textarea>
                        </div>
                        <div class="field">
                            <label for="crawl-exclude">"Exclude paths (one glob per line)"</label>
                            <textarea
                                id="crawl-exclude"
                                rows="3"
                                placeholder="/blog/**"
                                prop:value=move || exclude.get()
                                on:input=move |ev| exclude.set(event_target_value(&ev))
                            ></textarea>
                        </div>
                    </div>
                    <div class="checks">
                        {checkbox("crawl-same-domain", "Stay on this host", same_domain)}
                        {checkbox("crawl-sitemap", "Start from the sitemap", use_sitemap)}
                        {checkbox("crawl-robots", "Respect robots.txt", respect_robots)}
                    </div>
                </details>
                <FormErrorNotice error/>
                <Show when=move || added.get()>
                    <Notice tone=Tone::Success testid="crawl-added">
                        "Crawl started; the site appears below and fills in as pages are read."
                    </Notice>
                </Show>
                <div class="form-actions">
                    <button
                        type="submit"
                        class="button"
                        disabled=move || !hydrated.get() || pending.get()
                    >
                        {move || if pending.get() { "Adding…" } else { "Add website" }}
                    </button>
                </div>
            </form>
        </section>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crawl_options_are_checked_before_sending() {
        assert_eq!(
            validate_crawl("https://example.com/", "2", "50"),
            Ok((2, 50))
        );
        assert!(validate_crawl("ftp://example.com/", "2", "50").is_err());
        assert!(validate_crawl("https://example.com/", "6", "50").is_err());
        assert!(validate_crawl("https://example.com/", "2", "0").is_err());
        assert!(validate_crawl("https://example.com/", "x", "50").is_err());
    }

    #[test]
    fn the_refresh_schedule_is_checked_and_shown() {
        assert_eq!(refresh_choice("daily", ""), Ok(Refresh("daily".into())));
        assert_eq!(refresh_choice("off", "x"), Ok(Refresh("off".into())));
        assert_eq!(refresh_choice("hours", " 6 "), Ok(Refresh(6.into())));
        assert!(refresh_choice("hours", "0").is_err());
        assert!(refresh_choice("hours", "8761").is_err());
        assert!(refresh_choice("hours", "1.5").is_err());
        assert_eq!(
            refresh_fields(Some(&Refresh(6.into()))),
            ("hours".to_owned(), "6".to_owned())
        );
        assert_eq!(refresh_fields(Some(&Refresh("weekly".into()))).0, "weekly");
        assert_eq!(refresh_fields(None).0, "off");
        assert_eq!(
            refresh_words(Some(&Refresh(6.into()))),
            "Refreshed every 6 hours"
        );
        assert_eq!(
            refresh_words(Some(&Refresh("daily".into()))),
            "Refreshed daily"
        );
        let counts = RefreshCounts {
            added: 1,
            changed: 2,
            removed: 3,
            unchanged: 4,
        };
        assert_eq!(
            counts_words(&counts),
            "1 added, 2 changed, 3 removed, 4 unchanged"
        );
    }

    #[test]
    fn the_list_is_polled_only_while_a_document_is_being_indexed() {
        let document = |status: &str| -> KnowledgeDocument {
            serde_json::from_value(serde_json::json!({
                "documentId": "d1",
                "kind": "file",
                "name": "guide.pdf",
                "status": status,
                "chunks": 0,
                "bytes": 10,
                "createdAt": "2026-11-20T10:00:00Z",
                "updatedAt": "2026-11-20T10:00:00Z",
            }))
            .unwrap()
        };
        assert!(!needs_polling(&[]));
        assert!(!needs_polling(&[document("indexed"), document("failed")]));
        assert!(needs_polling(&[document("indexed"), document("pending")]));
        assert!(needs_polling(&[document("processing")]));
    }

    #[test]
    fn patterns_are_one_per_line() {
        assert_eq!(lines(" /docs/**\n\n/api/*  \n"), vec!["/docs/**", "/api/*"]);
    }
}
