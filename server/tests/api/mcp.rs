//! `/api/mcp`, the MCP server (docs/api.md § MCP server): the Streamable HTTP lifecycle
//! spoken by hand (initialize, `Mcp-Session-Id`, `notifications/initialized`, tools/list,
//! tools/call, DELETE), the tools filtered by scopes, the three tools' results and errors,
//! and the official TypeScript SDK's client against it.

use futures::StreamExt;
use serde_json::{json, Value};

use crate::{
    helpers::*,
    knowledge,
    providers::{agent_with, with_mock},
};

const ACCEPT: &str = "application/json, text/event-stream";
const PROTOCOL: &str = "2025-06-18";

/// A hand-driven MCP session over Streamable HTTP.
struct Session<'a> {
    app: &'a TestApp,
    token: String,
    id: Option<String>,
    next: u64,
}

impl<'a> Session<'a> {
    /// `POST /api/mcp` with `body` and the session's headers.
    async fn post(&self, body: &Value) -> reqwest::Response {
        let mut req = self
            .app
            .client
            .post(self.app.url("/api/mcp"))
            .bearer_auth(&self.token)
            .header("Accept", ACCEPT)
            .json(body);
        if let Some(id) = &self.id {
            req = req
                .header("Mcp-Session-Id", id)
                .header("MCP-Protocol-Version", PROTOCOL);
        }
        req.send().await.unwrap()
    }

    /// Initializes a session (initialize, then `notifications/initialized`); returns the
    /// session and the initialize result.
    async fn open(app: &'a TestApp, token: &str) -> (Session<'a>, Value) {
        let mut session = Session {
            app,
            token: token.to_string(),
            id: None,
            next: 1,
        };
        let res = session
            .post(
                &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
                "protocolVersion": PROTOCOL, "capabilities": {},
                "clientInfo": {"name": "raw-test", "version": "1.0.0"}}}),
            )
            .await;
        assert_eq!(res.status(), 200);
        assert!(res.headers().contains_key("x-ratelimit-limit"));
        let id = res.headers()["mcp-session-id"]
            .to_str()
            .unwrap()
            .to_string();
        assert!(!id.is_empty());
        let init = response_of(res, 0).await;
        session.id = Some(id);
        let res = session
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(res.status(), 202);
        (session, init["result"].clone())
    }

    /// Sends a request; returns the JSON-RPC response (with `result` or `error`).
    async fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        let res = self
            .post(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        assert_eq!(res.status(), 200);
        response_of(res, id).await
    }

    /// The names of `tools/list`.
    async fn tool_names(&mut self) -> Vec<String> {
        let list = self.request("tools/list", json!({})).await;
        list["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("{list}"))
            .iter()
            .map(|t| t["name"].as_str().unwrap().to_string())
            .collect()
    }

    /// `tools/call` of `name`; returns the JSON-RPC response.
    async fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
            .await
    }
}

/// The JSON-RPC response with `id` of an answer: a JSON body, or the first matching
/// `data:` event of a server-sent event stream (read only until it arrives: the stream
/// may stay open).
async fn response_of(res: reqwest::Response, id: u64) -> Value {
    let is_json = res.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("application/json");
    if is_json {
        return res.json().await.unwrap();
    }
    let mut stream = res.bytes_stream();
    let mut buffer = String::new();
    while let Some(chunk) = stream.next().await {
        buffer.push_str(&String::from_utf8_lossy(&chunk.unwrap()));
        for line in buffer.lines() {
            let Some(data) = line.strip_prefix("data:") else {
                continue;
            };
            if let Ok(message) = serde_json::from_str::<Value>(data.trim()) {
                if message["id"] == id {
                    return message;
                }
            }
        }
    }
    panic!("no response {id} in the stream: {buffer}");
}

/// A tool result's `result`, asserting it is not a JSON-RPC error.
fn result(response: &Value) -> &Value {
    assert!(response.get("error").is_none(), "{response}");
    &response["result"]
}

/// A JSON-RPC error's `error`.
fn error(response: &Value) -> &Value {
    assert!(response.get("result").is_none(), "{response}");
    &response["error"]
}

#[tokio::test]
async fn mcp_needs_a_credential_and_is_rate_limited_like_the_api() {
    let app = spawn_app().await;
    let res = app
        .client
        .post(app.url("/api/mcp"))
        .header("Accept", ACCEPT)
        .json(
            &json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "raw-test", "version": "1.0.0"}}}),
        )
        .send()
        .await
        .unwrap();
    assert!(res.headers().contains_key("x-ratelimit-limit"));
    assert_unauthorized(res).await;
    let res = app
        .client
        .post(app.url("/api/mcp"))
        .bearer_auth("key_not-a-real-key")
        .header("Accept", ACCEPT)
        .json(&json!({"jsonrpc": "2.0", "id": 0, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_unauthorized(res).await;
    let res = app.get("/api/mcp", None).await;
    assert_unauthorized(res).await;
}

#[tokio::test]
async fn the_lifecycle_and_the_tools_follow_the_callers_scopes() {
    let app = spawn_app().await;
    let user = app.user().await;
    let agent = knowledge::agent(&app, &user.access).await;

    // A user session holds every scope: every tool.
    let (mut session, init) = Session::open(&app, &user.access).await;
    assert_eq!(init["protocolVersion"], PROTOCOL, "{init}");
    assert_eq!(init["serverInfo"]["name"], "agentchat", "{init}");
    assert!(init["capabilities"]["tools"].is_object(), "{init}");
    assert_eq!(
        session.tool_names().await,
        ["list_agents", "ask_agent", "search_knowledge"]
    );
    let list = session.request("tools/list", json!({})).await;
    for tool in list["result"]["tools"].as_array().unwrap() {
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool}");
        assert_eq!(tool["outputSchema"]["type"], "object", "{tool}");
    }

    // A key with agents:read only: list_agents alone, and ask_agent is a JSON-RPC error
    // that names the scope.
    let (_, key) = app.api_key(&user, &["agents:read"]).await;
    let (mut session, _) = Session::open(&app, &key).await;
    assert_eq!(session.tool_names().await, ["list_agents"]);
    let listed = session.call("list_agents", json!({})).await;
    let listed = result(&listed);
    assert_eq!(listed["isError"], false, "{listed}");
    let agents = listed["structuredContent"]["agents"].as_array().unwrap();
    assert_eq!(agents.len(), 1);
    assert_eq!(agents[0]["id"], agent.as_str());
    assert_eq!(agents[0]["name"], "Librarian");
    let text: Value = serde_json::from_str(listed["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text, listed["structuredContent"]);
    let forbidden = session
        .call("ask_agent", json!({"agentId": agent, "message": "hi"}))
        .await;
    let forbidden = error(&forbidden);
    assert_eq!(forbidden["code"], -32602, "{forbidden}");
    assert!(
        forbidden["message"]
            .as_str()
            .unwrap()
            .contains("chat:write"),
        "{forbidden}"
    );
    let unknown = session.call("no_such_tool", json!({})).await;
    assert_eq!(error(&unknown)["code"], -32602);

    // Ending the session: its id is then unknown (404, in the contract's error shape).
    let id = session.id.clone().unwrap();
    let res = app
        .client
        .delete(app.url("/api/mcp"))
        .bearer_auth(&key)
        .header("Mcp-Session-Id", &id)
        .send()
        .await
        .unwrap();
    assert!(res.status().is_success(), "{}", res.status());
    let res = session
        .post(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"}))
        .await;
    assert_error(res, 404, "Not Found", Some("Session not found")).await;

    // A request without the session id is refused with the contract's body.
    let res = app
        .client
        .post(app.url("/api/mcp"))
        .bearer_auth(&key)
        .header("Accept", ACCEPT)
        .json(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 400);
    let body: Value = res.json().await.unwrap();
    assert_eq!(body["error"], "Bad Request", "{body}");
}

#[tokio::test]
async fn ask_agent_is_a_chat_turn_stored_with_its_conversation() {
    let (app, _mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let other = app.user().await;
    let agent = agent_with(&app, &user, "gpt-4o-mini").await;
    let foreign = agent_with(&app, &other, "gpt-4o-mini").await;
    let (_, key) = app.api_key(&user, &["chat:write", "chat:read"]).await;
    let (mut session, _) = Session::open(&app, &key).await;
    assert_eq!(session.tool_names().await, ["ask_agent"]);

    let asked = session
        .call(
            "ask_agent",
            json!({"agentId": agent, "message": "hello over mcp"}),
        )
        .await;
    let asked = result(&asked);
    assert_eq!(asked["isError"], false, "{asked}");
    assert_eq!(asked["content"][0]["type"], "text");
    assert_eq!(
        asked["content"][0]["text"], "Echo: hello over mcp",
        "{asked}"
    );
    let structured = &asked["structuredContent"];
    assert_eq!(structured["message"], "Echo: hello over mcp");
    assert_eq!(structured["sources"], json!([]));
    let thread = structured["threadId"].as_str().unwrap().to_string();

    let res = app
        .get(&format!("/api/agents/{agent}/conversations"), Some(&key))
        .await;
    assert_eq!(res.status(), 200);
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        body["conversations"][0]["threadId"],
        thread.as_str(),
        "{body}"
    );
    let res = app.get("/api/conversations?channel=mcp", Some(&key)).await;
    let inbox: Value = res.json().await.unwrap();
    assert_eq!(
        inbox["conversations"][0]["threadId"],
        thread.as_str(),
        "{inbox}"
    );

    // The thread continues.
    let again = session
        .call(
            "ask_agent",
            json!({"agentId": agent, "message": "second", "threadId": thread}),
        )
        .await;
    assert_eq!(
        result(&again)["structuredContent"]["threadId"],
        thread.as_str()
    );
    assert_eq!(app.messages(&key, &agent, &thread).await.len(), 4);

    // Another account's agent, an unknown thread and a blank message: failed executions.
    for (arguments, message) in [
        (
            json!({"agentId": foreign, "message": "hi"}),
            "Agent not found",
        ),
        (
            json!({"agentId": agent, "message": "hi", "threadId": "nope"}),
            "Thread not found",
        ),
        (
            json!({"agentId": agent, "message": "  "}),
            "message must not be empty",
        ),
    ] {
        let failed = session.call("ask_agent", arguments).await;
        let failed = result(&failed);
        assert_eq!(failed["isError"], true, "{failed}");
        assert_eq!(failed["content"][0]["text"], message, "{failed}");
        assert!(failed.get("structuredContent").is_none(), "{failed}");
    }

    // Arguments that break the input schema: JSON-RPC invalid params naming the field.
    for (arguments, field) in [
        (json!({"agentId": agent}), "message"),
        (json!({"agentId": agent, "message": 5}), "message"),
        (json!({"message": "hi"}), "agentId"),
        (
            json!({"agentId": agent, "message": "hi", "extra": 1}),
            "extra",
        ),
    ] {
        let refused = session.call("ask_agent", arguments).await;
        let refused = error(&refused);
        assert_eq!(refused["code"], -32602, "{refused}");
        assert_eq!(refused["data"]["field"], field, "{refused}");
        assert!(
            refused["message"].as_str().unwrap().contains(field),
            "{refused}"
        );
    }
}

#[tokio::test]
async fn search_knowledge_returns_the_chunks_of_an_uploaded_document() {
    let app = spawn_app().await;
    let user = app.user().await;
    let other = app.user().await;
    let agent = knowledge::agent(&app, &user.access).await;
    let foreign = knowledge::agent(&app, &other.access).await;
    let text = "The lighthouse keeper polishes the brass lamp every Tuesday at dawn.";
    let doc = app
        .uploaded(
            &user.access,
            &agent,
            "lighthouse.txt",
            text.as_bytes().to_vec(),
        )
        .await;
    assert_eq!(
        app.settled(&user.access, &agent, &doc).await["status"],
        "indexed"
    );
    let (_, key) = app.api_key(&user, &["knowledge:read"]).await;
    let (mut session, _) = Session::open(&app, &key).await;
    assert_eq!(session.tool_names().await, ["search_knowledge"]);

    let found = session
        .call(
            "search_knowledge",
            json!({"agentId": agent, "query": "brass lamp lighthouse", "limit": 3}),
        )
        .await;
    let found = result(&found);
    assert_eq!(found["isError"], false, "{found}");
    let results = found["structuredContent"]["results"].as_array().unwrap();
    assert_eq!(results.len(), 1, "{found}");
    assert!(results[0]["title"].is_string(), "{found}");
    assert!(
        results[0]["text"].as_str().unwrap().contains("brass lamp"),
        "{found}"
    );
    assert!(results[0]["chunkId"].is_string());
    assert!(results[0]["score"].as_f64().unwrap() > 0.0);

    let nothing = session
        .call(
            "search_knowledge",
            json!({"agentId": agent, "query": "submarine"}),
        )
        .await;
    assert_eq!(
        result(&nothing)["structuredContent"],
        json!({"results": []})
    );
    let foreign = session
        .call(
            "search_knowledge",
            json!({"agentId": foreign, "query": "brass lamp"}),
        )
        .await;
    let foreign = result(&foreign);
    assert_eq!(foreign["isError"], true);
    assert_eq!(foreign["content"][0]["text"], "Agent not found");
    for limit in [json!(0), json!(21), json!("5")] {
        let refused = session
            .call(
                "search_knowledge",
                json!({"agentId": agent, "query": "lamp", "limit": limit}),
            )
            .await;
        assert_eq!(error(&refused)["data"]["field"], "limit", "{refused}");
    }
}

/// Where scripts/setup.sh installs the TypeScript SDK (`MCP_SDK_DIR`).
pub fn sdk_dir() -> std::path::PathBuf {
    let dir = std::env::var_os("MCP_SDK_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| {
            std::path::PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/agentchat/mcp-sdk")
        });
    let package = dir.join("node_modules/@modelcontextprotocol/sdk/package.json");
    assert!(
        package.is_file(),
        "the MCP TypeScript SDK is not installed at {}: run scripts/setup.sh (or set \
         MCP_SDK_DIR to where it is)",
        dir.display()
    );
    dir
}

#[tokio::test]
async fn the_official_typescript_sdk_client_lists_and_calls_the_tools() {
    let sdk = sdk_dir();
    let (app, _mock) = with_mock(|_| {}).await;
    let user = app.user().await;
    let agent = agent_with(&app, &user, "gpt-4o-mini").await;
    let (_, key) = app
        .api_key(&user, &["agents:read", "chat:write", "knowledge:read"])
        .await;
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mcp_client.mjs");
    let out = tokio::process::Command::new("node")
        .arg(script)
        .arg(app.url("/api/mcp"))
        .arg(&key)
        .arg(&agent)
        .env("MCP_SDK_DIR", &sdk)
        .output()
        .await
        .expect("node runs (Node.js 20 or newer: scripts/setup.sh)");
    assert!(
        out.status.success(),
        "the SDK client failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stdout));
    });
    assert_eq!(seen["serverVersion"]["name"], "agentchat", "{seen}");
    assert_eq!(seen["protocolVersion"], PROTOCOL, "{seen}");
    assert!(seen["sessionId"].as_str().is_some_and(|s| !s.is_empty()));
    let names: Vec<&str> = seen["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["list_agents", "ask_agent", "search_knowledge"]);
    assert_eq!(seen["asked"]["content"][0]["text"], "Echo: Hello over MCP");
    assert_eq!(
        seen["asked"]["structuredContent"]["message"],
        "Echo: Hello over MCP"
    );
    let thread = seen["asked"]["structuredContent"]["threadId"].clone();
    assert!(thread.is_string());
    assert_eq!(seen["again"]["structuredContent"]["threadId"], thread);
    assert_eq!(seen["again"]["content"][0]["text"], "Echo: And again");
    assert_eq!(seen["missing"]["isError"], true, "{seen}");
    assert_eq!(seen["missing"]["content"][0]["text"], "Agent not found");
    assert_eq!(seen["unknown"]["code"], -32602, "{seen}");
    let messages = app
        .messages(&user.access, &agent, thread.as_str().unwrap())
        .await;
    assert_eq!(messages.len(), 4);
}
