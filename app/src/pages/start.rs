//! `/dashboard/agents/{id}/start`: copy-paste `curl` examples for the agent's chat
//! endpoint, JSON and streamed, with the agent's own id and this server's address, and the
//! settings of the OpenAI-compatible API (its base URL and the agent's id as the model).

use super::agent::use_agent;
use crate::components::copy_to_clipboard;
use leptos::prelude::*;
use leptos_meta::Title;

/// The `curl` command for one JSON reply from agent `agent_id` on `origin`.
pub fn curl_json(origin: &str, agent_id: &str) -> String {
    format!(
        "curl -s {origin}/api/agents/{agent_id}/chat \\\n  -H \"Authorization: Bearer $AGENTCHAT_KEY\" \\\n  -H 'Content-Type: application/json' \\\n  -d '{{\"message\": \"What can you do?\"}}'"
    )
}

/// The `curl` command for a streamed reply (server-sent events) with token usage.
pub fn curl_stream(origin: &str, agent_id: &str) -> String {
    format!(
        "curl -sN {origin}/api/agents/{agent_id}/chat \\\n  -H \"Authorization: Bearer $AGENTCHAT_KEY\" \\\n  -H 'Content-Type: application/json' \\\n  -d '{{\"message\": \"Tell me more\", \"stream\": true, \"streamOptions\": {{\"includeUsage\": true}}}}'"
    )
}

/// The base URL of the OpenAI-compatible API on `origin` (docs/api.md § OpenAI-compatible
/// API).
pub fn openai_base_url(origin: &str) -> String {
    format!("{origin}/api/openai/v1")
}

/// A Python example with OpenAI's SDK, pointed at the agent `agent_id` on `origin`.
pub fn openai_python(origin: &str, agent_id: &str) -> String {
    format!(
        "from openai import OpenAI\n\nclient = OpenAI(base_url=\"{}\", api_key=\"key_...\")\nreply = client.chat.completions.create(\n    model=\"{agent_id}\",\n    messages=[{{\"role\": \"user\", \"content\": \"What can you do?\"}}],\n)\nprint(reply.choices[0].message.content)",
        openai_base_url(origin)
    )
}

/// The getting-started panel.
#[component]
pub fn GettingStarted() -> impl IntoView {
    let agent = use_agent();
    // The server does not know the address the browser used; the browser fills it in.
    let origin = RwSignal::new("http://127.0.0.1:3000".to_owned());
    Effect::new(move || {
        if let Some(found) = web_sys::window().and_then(|w| w.location().origin().ok()) {
            origin.set(found);
        }
    });
    view! {
        <Title text="Get started"/>
        <section class="card">
            <h2 class="first">"Call this agent from your code"</h2>
            <ol class="steps">
                <li>
                    "Create an API key with the " <code>"chat:write"</code> " scope on the "
                    <a href="/dashboard/api-keys">"API keys"</a> " page and put it in "
                    <code>"AGENTCHAT_KEY"</code> ":"
                    <Snippet testid="snippet-key" text=Signal::derive(|| "export AGENTCHAT_KEY=key_...".to_owned())/>
                </li>
                <li>
                    "Ask for one JSON reply (" <code>"message"</code> ", " <code>"model"</code> ", "
                    <code>"tokensUsed"</code> ", " <code>"threadId"</code> ", " <code>"sources"</code> "):"
                    <Snippet testid="snippet-json" text=Signal::derive(move || curl_json(&origin.get(), &agent.id.get()))/>
                </li>
                <li>
                    "Or stream it: " <code>"data: {\"chunk\": ...}"</code> " frames, a usage frame, then "
                    <code>"data: [DONE]"</code> ". Pass the " <code>"threadId"</code>
                    " of a reply (or the " <code>"X-Thread-Id"</code> " header) to continue the conversation."
                    <Snippet testid="snippet-stream" text=Signal::derive(move || curl_stream(&origin.get(), &agent.id.get()))/>
                </li>
            </ol>
            <p class="muted">
                "The full reference is at " <a href="/api/docs" rel="external">"/api/docs"</a> "."
            </p>
        </section>
        <section class="card" data-testid="openai-panel">
            <h2 class="first">"OpenAI-compatible API"</h2>
            <p>
                "Programs that speak OpenAI's API (its SDKs, LangChain, LlamaIndex, chat front ends) "
                "reach this agent with two settings and an API key with the " <code>"chat:write"</code>
                " scope as their key:"
            </p>
            <ol class="steps">
                <li>
                    "Base URL:"
                    <Snippet testid="openai-base-url" text=Signal::derive(move || openai_base_url(&origin.get()))/>
                </li>
                <li>
                    "Model: this agent's id."
                    <Snippet testid="openai-model" text=Signal::derive(move || agent.id.get())/>
                </li>
                <li>
                    "For example with OpenAI's Python SDK:"
                    <Snippet testid="openai-python" text=Signal::derive(move || openai_python(&origin.get(), &agent.id.get()))/>
                </li>
            </ol>
        </section>
    }
    .into_any()
}

/// A block of code with "Copy".
#[component]
fn Snippet(testid: &'static str, text: Signal<String>) -> impl IntoView {
    let copy_action = copy_to_clipboard();
    let copied = copy_action.value();
    let copy = move |_| {
        copy_action.dispatch(text.get_untracked());
    };
    view! {
        <div class="snippet">
            <pre data-testid=testid><code>{move || text.get()}</code></pre>
            <button type="button" class="button button-secondary button-small" on:click=copy>"Copy"</button>
            {move || match copied.get() {
                Some(Ok(())) => Some(view! { <span class="muted small" role="status">"Copied"</span> }.into_any()),
                Some(Err(message)) => Some(view! { <span class="error-text small" role="alert">{message}</span> }.into_any()),
                None => None,
            }}
        </div>
    }
    .into_any()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples_use_the_agent_and_the_server() {
        let json = curl_json("https://chat.example.com", "agt_1");
        assert!(json.contains("https://chat.example.com/api/agents/agt_1/chat"));
        assert!(json.contains("Bearer $AGENTCHAT_KEY"));
        let stream = curl_stream("https://chat.example.com", "agt_1");
        assert!(stream.contains("\"stream\": true") && stream.contains("curl -sN"));
    }

    #[test]
    fn the_openai_settings_name_the_base_url_and_the_agent() {
        assert_eq!(
            openai_base_url("https://chat.example.com"),
            "https://chat.example.com/api/openai/v1"
        );
        let python = openai_python("https://chat.example.com", "agt_1");
        assert!(python.contains("base_url=\"https://chat.example.com/api/openai/v1\""));
        assert!(python.contains("model=\"agt_1\""));
    }
}
