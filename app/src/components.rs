//! Small building blocks shared by the dashboard pages: notices, form helpers and the
//! hydration flag that keeps forms inert until the WASM code can handle them.

use crate::client::ApiError;
use leptos::{html, prelude::*};

/// The tone of a [`Notice`]: it sets the colour and the ARIA role.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tone {
    /// A confirmation (`role="status"`).
    Success,
    /// Neutral information (`role="status"`).
    Info,
    /// A failure the user should act on (`role="alert"`, read out at once).
    Error,
}

impl Tone {
    fn class(self) -> &'static str {
        match self {
            Tone::Success => "notice notice-success",
            Tone::Info => "notice notice-info",
            Tone::Error => "notice notice-error",
        }
    }

    fn role(self) -> &'static str {
        match self {
            Tone::Error => "alert",
            Tone::Success | Tone::Info => "status",
        }
    }
}

/// A message box above or below a form; `testid` becomes `data-testid` for the tests.
#[component]
pub fn Notice(
    /// The colour and ARIA role.
    tone: Tone,
    /// The `data-testid` attribute.
    #[prop(into)]
    testid: String,
    /// The message.
    children: Children,
) -> impl IntoView {
    view! {
        <div class=tone.class() role=tone.role() data-testid=testid>
            {children()}
        </div>
    }
}

/// The message of the latest failed request of a form: `None` while there is none.
pub type FormError = RwSignal<Option<String>>;

/// Shows the form's current error, if any, as an alert.
#[component]
pub fn FormErrorNotice(
    /// The form's error signal.
    error: FormError,
) -> impl IntoView {
    move || {
        error.get().map(|message| {
            view! {
                <Notice tone=Tone::Error testid="form-error">
                    {message}
                </Notice>
            }
        })
    }
}

/// The answer of a `GET` of the signed-in user, loaded in the browser only: `None` while the
/// request is under way (and always during server rendering, where the page shows the
/// fallback of the `Suspense`/`Transition` around it), then the answer or the [`ApiError`].
pub type Fetched<T> = LocalResource<Result<T, ApiError>>;

/// A [`Fetched`] of `path()` for the signed-in user (`client::get_json_signed_in`), keeping
/// `pick` of the answer. It loads again when a signal read by `path` changes, and on
/// `refetch()`; while it reloads, `get()` keeps the previous answer.
pub fn fetch_signed_in<R, T>(path: impl Fn() -> String + 'static, pick: fn(R) -> T) -> Fetched<T>
where
    R: serde::de::DeserializeOwned + 'static,
    T: Send + Sync + 'static,
{
    LocalResource::new(move || {
        let path = path();
        async move {
            crate::client::get_json_signed_in::<R>(&path)
                .await
                .map(pick)
        }
    })
}

/// "Loading {what}…", the fallback of a section whose data has not arrived.
pub fn loading_view(what: &str) -> AnyView {
    view! { <p class="loading" role="status">{format!("Loading {what}…")}</p> }.into_any()
}

/// A failed load: the server's words in a notice with `data-testid="{testid}-error"`.
pub fn load_error_view(err: &ApiError, testid: &str) -> AnyView {
    let message = err.message().to_owned();
    view! { <Notice tone=Tone::Error testid=format!("{testid}-error")>{message}</Notice> }
        .into_any()
}

/// `false` during server rendering and hydration, `true` once the browser runs the
/// dashboard's code. Submit buttons stay disabled until then, so a form filled before
/// the WASM module loaded is never submitted natively (which would put the password into
/// the URL of a GET request).
pub fn use_hydrated() -> ReadSignal<bool> {
    let (hydrated, set_hydrated) = signal(false);
    Effect::new(move || set_hydrated.set(true));
    hydrated
}

/// The current value of a text input, trimmed; empty when the input is not mounted.
pub fn input_value(input: &NodeRef<html::Input>) -> String {
    input
        .get_untracked()
        .map(|el| el.value().trim().to_owned())
        .unwrap_or_default()
}

/// The current value of a password input, exactly as typed (spaces are significant).
pub fn password_value(input: &NodeRef<html::Input>) -> String {
    input
        .get_untracked()
        .map(|el| el.value())
        .unwrap_or_default()
}

/// The selected value of a `<select>`; empty when nothing is selected.
pub fn select_value(select: &NodeRef<html::Select>) -> String {
    select
        .get_untracked()
        .map(|el| el.value())
        .unwrap_or_default()
}

/// `None` for an empty string, so optional fields are omitted from request bodies.
pub fn non_empty(value: String) -> Option<String> {
    (!value.is_empty()).then_some(value)
}

/// A whole number with its thousands grouped by commas: `120000` is "120,000".
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (index, digit) in digits.chars().enumerate() {
        if index > 0 && (digits.len() - index).is_multiple_of(3) {
            out.push(',');
        }
        out.push(digit);
    }
    out
}

/// `n` of `what` in words, grouped and in the plural unless one: "1 chat", "1,200 chats".
pub fn counted(n: u64, what: &str) -> String {
    let s = if n == 1 { "" } else { "s" };
    format!("{} {what}{s}", thousands(n))
}

/// The whole percentage `used` is of `limit` (0 for a limit of 0; above 100 when over it).
pub fn percent_of(used: u64, limit: u64) -> u64 {
    if limit == 0 {
        return 0;
    }
    let percent = u128::from(used) * 100 / u128::from(limit);
    u64::try_from(percent).unwrap_or(u64::MAX)
}

/// How full a quota is, for its colour: `ok` below 80 %, `high` from 80 %, `full` at 100 %
/// (the thresholds at which the owner is alerted).
pub fn quota_level(used: u64, limit: u64) -> &'static str {
    match percent_of(used, limit) {
        100.. => "full",
        80.. => "high",
        _ => "ok",
    }
}

/// A bar showing `used` of `limit` tokens (a monthly quota or an API key's budget); its
/// `data-level` is [`quota_level`].
#[component]
pub fn UsageMeter(
    /// Tokens used.
    used: u64,
    /// Tokens allowed.
    limit: u64,
    /// The bar's accessible name, e.g. "Tokens used of the monthly quota".
    #[prop(into)]
    label: String,
) -> impl IntoView {
    // Progress values are doubles; precision beyond 2^53 tokens does not show in a bar.
    let (value, max) = (used.min(limit) as f64, limit.max(1) as f64);
    view! {
        <progress
            class="meter"
            data-level=quota_level(used, limit)
            max=max.to_string()
            value=value.to_string()
            aria-label=label
            aria-valuetext=format!("{} %", percent_of(used, limit))
        ></progress>
    }
}

#[cfg(test)]
mod tests {
    use super::{counted, non_empty, percent_of, quota_level, thousands};

    #[test]
    fn empty_optional_fields_are_omitted() {
        assert_eq!(non_empty(String::new()), None);
        assert_eq!(non_empty("DE".to_owned()), Some("DE".to_owned()));
    }

    #[test]
    fn numbers_are_grouped_by_thousands() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(120_000), "120,000");
        assert_eq!(thousands(1_234_567), "1,234,567");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
        assert_eq!(counted(1, "chat"), "1 chat");
        assert_eq!(counted(0, "chat"), "0 chats");
        assert_eq!(counted(1_200, "token"), "1,200 tokens");
    }

    #[test]
    fn quotas_fill_up_in_levels() {
        assert_eq!(percent_of(1, 3), 33);
        assert_eq!(percent_of(5, 0), 0);
        assert_eq!(percent_of(u64::MAX, 1), u64::MAX);
        assert_eq!(quota_level(79, 100), "ok");
        assert_eq!(quota_level(80, 100), "high");
        assert_eq!(quota_level(100, 100), "full");
        assert_eq!(quota_level(250, 100), "full");
    }
}

/// A one-field form that posts `{email}` to `endpoint` and shows the server's answer. Used
/// for links the server answers neutrally about (password reset, verification resend), so
/// it never reveals whether an address has an account.
#[component]
pub fn EmailRequestForm(
    /// The API path, e.g. `/api/auth/forgot-password`.
    endpoint: &'static str,
    /// The input's id (unique on the page).
    input_id: &'static str,
    /// `data-testid` of the success notice.
    testid: &'static str,
    /// The submit button's label.
    button: &'static str,
) -> impl IntoView {
    let hydrated = use_hydrated();
    let error: FormError = RwSignal::new(None);
    let sent = RwSignal::new(None::<String>);
    let email = NodeRef::<html::Input>::new();
    let send = Action::new_local(move |body: &crate::api::EmailRequest| {
        let body = body.clone();
        async move {
            match crate::client::post_json::<_, crate::api::MessageResponse>(endpoint, &body).await
            {
                Ok(answer) => sent.set(Some(answer.message)),
                Err(err) => error.set(Some(err.message().to_owned())),
            }
        }
    });
    let pending = send.pending();

    let on_submit = move |ev: leptos::ev::SubmitEvent| {
        ev.prevent_default();
        if pending.get_untracked() {
            return;
        }
        let body = crate::api::EmailRequest {
            email: input_value(&email),
        };
        error.set(None);
        sent.set(None);
        send.dispatch(body);
    };

    view! {
        <form class="form" on:submit=on_submit>
            <div class="field">
                <label for=input_id>"Email"</label>
                <input id=input_id name="email" type="email" autocomplete="email" required node_ref=email/>
            </div>
            <FormErrorNotice error/>
            {move || {
                sent.get()
                    .map(|message| {
                        view! { <Notice tone=Tone::Success testid=testid>{message}</Notice> }
                    })
            }}
            <button
                type="submit"
                class="button button-block"
                disabled=move || !hydrated.get() || pending.get()
                aria-busy=move || pending.get().to_string()
            >
                {move || if pending.get() { "Sending…" } else { button }}
            </button>
        </form>
        <p class="muted">
            <a href="/login">"Back to sign in"</a>
        </p>
    }
}

/// Copies its input to the clipboard (`client::copy_text`); its `value()` is the outcome of
/// the latest copy (`Err` with the browser's words), `None` before the first.
pub fn copy_to_clipboard() -> Action<String, Result<(), String>> {
    Action::new_local(|text: &String| {
        let text = text.clone();
        async move {
            crate::client::copy_text(&text)
                .await
                .map_err(|err| err.message().to_owned())
        }
    })
}

/// A secret shown once (a new API key, a webhook signing secret): a warning, the value in a
/// read-only field that selects itself on focus, "Copy", and a button that closes it.
/// `testid` names the card; its parts are `{testid}-warning`, `{testid}-value` and
/// `{testid}-copied`.
#[component]
pub fn ShownOnce(
    /// The `data-testid` of the card.
    testid: &'static str,
    /// The card's heading.
    title: String,
    /// Why to copy it now.
    warning: &'static str,
    /// The field's (visually hidden) label.
    label: &'static str,
    /// The secret.
    value: String,
    /// Runs on "I have saved it".
    on_close: Callback<()>,
) -> impl IntoView {
    let copy_action = copy_to_clipboard();
    let copied = copy_action.value();
    let copy = {
        let value = value.clone();
        move |_| {
            copy_action.dispatch(value.clone());
        }
    };
    let field_id = format!("{testid}-value");
    let title_id = format!("{testid}-title");
    let labelled_by = title_id.clone();
    let label_for = field_id.clone();
    let input_id = field_id.clone();
    view! {
        <section class="card new-key" data-testid=testid aria-labelledby=labelled_by>
            <h2 id=title_id class="first">{title}</h2>
            <Notice tone=Tone::Info testid=format!("{testid}-warning")>{warning}</Notice>
            <div class="secret">
                <label for=label_for class="visually-hidden">{label}</label>
                <input
                    id=input_id
                    type="text"
                    readonly
                    value=value
                    data-testid=field_id
                    on:focus=move |ev| {
                        event_target::<web_sys::HtmlInputElement>(&ev).select();
                    }
                />
                <button type="button" class="button" on:click=copy>"Copy"</button>
            </div>
            {move || match copied.get() {
                Some(Ok(())) => {
                    Some(view! { <p class="success-text" role="status" data-testid=format!("{testid}-copied")>"Copied to the clipboard."</p> }.into_any())
                }
                Some(Err(message)) => Some(view! { <p class="error-text" role="alert">{message}</p> }.into_any()),
                None => None,
            }}
            <button type="button" class="button button-secondary button-small" on:click=move |_| on_close.run(())>
                "I have saved it"
            </button>
        </section>
    }
}

/// The `<option>`s of an agent filter: "All agents" (value empty), then the account's
/// `agents` with `current` (an agent id, empty for all) selected. While the list loads, or
/// when `current` is not one of them, `current` keeps an option of its own.
pub fn agent_options(agents: Fetched<Vec<crate::api::Agent>>, current: String) -> AnyView {
    let loaded = agents
        .map(|answer| answer.clone())
        .map(|answer| answer.ok());
    let listed = loaded.clone().flatten().unwrap_or_default();
    let extra = (!current.is_empty() && !listed.iter().any(|a| a.id == current)).then(|| {
        let label = match loaded {
            None => "Loading agents…",
            Some(_) => "Unknown agent",
        };
        view! { <option value=current.clone() selected=true>{label}</option> }
    });
    view! {
        <option value="" selected=current.is_empty()>"All agents"</option>
        {extra}
        {listed
            .into_iter()
            .map(|agent| {
                let chosen = agent.id == current;
                view! { <option value=agent.id selected=chosen>{agent.name}</option> }
            })
            .collect_view()}
    }
    .into_any()
}

/// Under an agent filter: why the account's agents could not be loaded, if they could not.
pub fn agents_load_error(agents: Fetched<Vec<crate::api::Agent>>) -> Option<AnyView> {
    let message = agents
        .map(|answer| answer.as_ref().err().map(|err| err.message().to_owned()))
        .flatten()?;
    Some(
        view! { <p class="hint error-text">{format!("The agents could not be loaded: {message}")}</p> }
            .into_any(),
    )
}
