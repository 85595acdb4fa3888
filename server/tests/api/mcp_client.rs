//! The MCP client (docs/api.md § MCP server integrations): integrations of provider `mcp`,
//! their tools listed live, and agent tools of type `mcp` called in chat, against servers
//! made by others — the official reference server (`@modelcontextprotocol/server-everything`
//! in Streamable HTTP mode) and a server made with the official TypeScript SDK
//! (`fixtures/mcp_server.mjs`) that changes its tool list and forgets sessions on request.

use std::{path::PathBuf, process::Stdio, time::Duration};

use serde_json::{json, Value};
use tokio::{
    io::{AsyncBufReadExt, BufReader},
    process::{Child, Command},
};

use crate::{
    helpers::*,
    mcp::sdk_dir,
    providers::{agent_with, with_mock},
};

/// Where scripts/setup.sh installs the reference server (`MCP_EVERYTHING_DIR`).
fn everything_dir() -> PathBuf {
    let dir = std::env::var_os("MCP_EVERYTHING_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            PathBuf::from(std::env::var_os("HOME").unwrap_or_default())
                .join(".cache/agentchat/mcp-everything")
        });
    let entry = dir.join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.is_file(),
        "the MCP reference server is not installed at {}: run scripts/setup.sh (or set \
         MCP_EVERYTHING_DIR to where it is)",
        dir.display()
    );
    entry
}

/// The reference server in Streamable HTTP mode on a free port: the process (killed when
/// dropped) and its endpoint's address `127.0.0.1:PORT`.
async fn everything() -> (Child, String) {
    let entry = everything_dir();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new("node")
        .arg(entry)
        .arg("streamableHttp")
        .env("PORT", port.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs (Node.js 20 or newer: scripts/setup.sh)");
    let addr = format!("127.0.0.1:{port}");
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(&addr).await.is_ok() {
            return (child, addr);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the MCP reference server did not listen on {addr}");
}

/// The TypeScript SDK fixture server requiring `Bearer {token}`: the process and its
/// address.
async fn fixture(token: &str) -> (Child, String) {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/mcp_server.mjs");
    let mut child = Command::new("node")
        .arg(script)
        .arg(token)
        .env("MCP_SDK_DIR", sdk_dir())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs (Node.js 20 or newer: scripts/setup.sh)");
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = tokio::time::timeout(Duration::from_secs(20), lines.next_line())
        .await
        .expect("the fixture server starts")
        .unwrap()
        .expect("the fixture server prints its port");
    let port = serde_json::from_str::<Value>(&first).unwrap()["port"]
        .as_u64()
        .unwrap();
    (child, format!("127.0.0.1:{port}"))
}

/// Creates an MCP server integration for `addr` and answers its id.
async fn integration(app: &TestApp, user: &TestUser, addr: &str, token: Option<&str>) -> String {
    let mut credentials = json!({"url": format!("http://{addr}/mcp")});
    if let Some(token) = token {
        credentials["authorization"] = json!(token);
    }
    let res = app
        .post(
            "/api/integrations",
            Some(&user.access),
            json!({"providerCode": "mcp", "name": "Test server", "credentials": credentials}),
        )
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    res.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// The integration's tools as `GET /api/integrations/{id}/tools` lists them.
async fn tool_names(app: &TestApp, user: &TestUser, id: &str) -> Vec<String> {
    let res = app
        .get(&format!("/api/integrations/{id}/tools"), Some(&user.access))
        .await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    let body: Value = res.json().await.unwrap();
    body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .collect()
}

/// Creates a tool on `agent` and answers it.
async fn create_tool(app: &TestApp, user: &TestUser, agent: &str, body: Value) -> Value {
    let res = app
        .post(
            &format!("/api/agents/{agent}/tools"),
            Some(&user.access),
            body,
        )
        .await;
    assert_eq!(res.status(), 201, "{}", res.text().await.unwrap());
    res.json::<Value>().await.unwrap()["tool"].clone()
}

/// Runs the tool `tool` once through the test endpoint.
async fn test_run(app: &TestApp, user: &TestUser, agent: &str, tool: &str, body: Value) -> Value {
    let res = app
        .post(
            &format!("/api/agents/{agent}/tools/{tool}/test"),
            Some(&user.access),
            body,
        )
        .await;
    assert_eq!(res.status(), 200, "{}", res.text().await.unwrap());
    res.json().await.unwrap()
}

#[tokio::test]
async fn the_reference_server_s_tools_are_listed_and_called_in_chat() {
    let (_server, addr) = everything().await;
    let allowed = addr.clone();
    let (app, mock) = with_mock(|c| c.outbound.allowed_private_hosts = vec![allowed]).await;
    let user = app.user().await;
    let id = integration(&app, &user, &addr, None).await;

    let res = app
        .get(&format!("/api/integrations/{id}/tools"), Some(&user.access))
        .await;
    assert_eq!(res.status(), 200);
    let listed: Value = res.json().await.unwrap();
    let sum = listed["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "get-sum")
        .expect("the reference server lists get-sum")
        .clone();
    assert!(!sum["description"].as_str().unwrap().is_empty());
    assert_eq!(sum["inputSchema"]["properties"]["a"]["type"], "number");
    assert!(tool_names(&app, &user, &id)
        .await
        .contains(&"echo".to_string()));

    let agent = agent_with(&app, &user, "gpt-4o-mini").await;
    let tool = create_tool(
        &app,
        &user,
        &agent,
        json!({"type": "mcp", "name": "everything",
               "config": {"integrationId": id, "allowedTools": ["get-sum", "echo"]}}),
    )
    .await;
    assert_eq!(tool["type"], "mcp");
    assert_eq!(
        tool["config"],
        json!({"integrationId": id, "allowedTools": ["get-sum", "echo"]})
    );

    let res = app
        .chat(
            &user.access,
            &agent,
            json!({"message": r#"Add them [[call:everything__get-sum:{"a":2,"b":3}]]"#}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let reply: Value = res.json().await.unwrap();
    let call = &reply["toolCalls"][0];
    assert_eq!(call["name"], "everything__get-sum", "{reply}");
    assert_eq!(call["type"], "mcp");
    assert_eq!(call["status"], "succeeded", "{reply}");
    assert!(call["output"].as_str().unwrap().contains('5'), "{reply}");

    // Only the allowed tools were offered, under their function names, with the server's
    // schemas.
    let first = mock
        .requests()
        .into_iter()
        .find(|r| r.method == "POST")
        .unwrap();
    let offered: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered.len(), 2, "{offered:?}");
    assert!(offered.contains(&"everything__echo"));
    assert!(offered.contains(&"everything__get-sum"));

    let tool_id = tool["id"].as_str().unwrap();
    let echoed = test_run(
        &app,
        &user,
        &agent,
        tool_id,
        json!({"toolName": "echo", "arguments": {"message": "hello MCP"}}),
    )
    .await;
    assert_eq!(echoed["status"], "succeeded", "{echoed}");
    assert_eq!(echoed["output"], "Echo: hello MCP");
    // With two tools the test run must say which one.
    let res = app
        .post(
            &format!("/api/agents/{agent}/tools/{tool_id}/test"),
            Some(&user.access),
            json!({"arguments": {}}),
        )
        .await;
    assert_eq!(res.status(), 400);
    assert!(res.text().await.unwrap().contains("toolName is required"));
}

#[tokio::test]
async fn a_changed_tool_list_and_an_expired_session_are_picked_up() {
    let (_server, addr) = fixture("fixture-token").await;
    let allowed = addr.clone();
    let (app, _mock) = with_mock(|c| c.outbound.allowed_private_hosts = vec![allowed]).await;
    let user = app.user().await;
    // A bare token is sent as a bearer token.
    let id = integration(&app, &user, &addr, Some("fixture-token")).await;
    let names = tool_names(&app, &user, &id).await;
    assert_eq!(
        names,
        ["echo", "add_tool", "forget_sessions", "stats", "fail"]
    );

    let agent = agent_with(&app, &user, "gpt-4o-mini").await;
    let tool = create_tool(
        &app,
        &user,
        &agent,
        json!({"type": "mcp", "config": {"integrationId": id}}),
    )
    .await;
    // Named after the integration when the request names nothing.
    assert_eq!(tool["name"], "Test_server");
    let tool_id = tool["id"].as_str().unwrap().to_string();
    let stats = || async {
        let run = test_run(&app, &user, &agent, &tool_id, json!({"toolName": "stats"})).await;
        serde_json::from_str::<Value>(run["output"].as_str().unwrap()).unwrap()
    };
    // One session served the listings and the run.
    let seen = stats().await;
    assert_eq!(seen["initializations"], 1, "{seen}");
    assert_eq!(seen["authorization"], "Bearer fixture-token");

    // The server adds a tool and says so: the next listing has it, without a new session.
    let added = test_run(
        &app,
        &user,
        &agent,
        &tool_id,
        json!({"toolName": "add_tool", "arguments": {"name": "late_tool"}}),
    )
    .await;
    assert_eq!(added["output"], "added late_tool");
    let mut listed = Vec::new();
    for _ in 0..100 {
        listed = tool_names(&app, &user, &id).await;
        if listed.contains(&"late_tool".to_string()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(listed.contains(&"late_tool".to_string()), "{listed:?}");
    assert_eq!(stats().await["initializations"], 1);

    // The server forgets the session: the next request opens a new one and succeeds.
    test_run(
        &app,
        &user,
        &agent,
        &tool_id,
        json!({"toolName": "forget_sessions"}),
    )
    .await;
    let ran = test_run(
        &app,
        &user,
        &agent,
        &tool_id,
        json!({"toolName": "late_tool"}),
    )
    .await;
    assert_eq!(ran["status"], "succeeded", "{ran}");
    assert_eq!(ran["output"], "ran late_tool");
    assert_eq!(stats().await["initializations"], 2);

    // A tool's error result reaches the model as the call's error; the chat still answers.
    let res = app
        .chat(
            &user.access,
            &agent,
            json!({"message": "[[call:Test_server__fail:{}]]"}),
        )
        .await;
    assert_eq!(res.status(), 200);
    let reply: Value = res.json().await.unwrap();
    assert_eq!(reply["toolCalls"][0]["status"], "failed", "{reply}");
    assert!(reply["toolCalls"][0]["error"]
        .as_str()
        .unwrap()
        .contains("failed on purpose"));
}

#[tokio::test]
async fn unreachable_servers_other_tenants_and_other_providers_are_clear_errors() {
    let (_server, addr) = fixture("right-token").await;
    // A port nothing listens on, which the policy allows.
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .to_string();
    let allowed = vec![addr.clone(), closed.clone()];
    let (app, _mock) = with_mock(|c| c.outbound.allowed_private_hosts = allowed).await;
    let user = app.user().await;
    let other = app.user().await;

    // The wrong token: the server refuses with 401, which is a 502 here.
    let wrong = integration(&app, &user, &addr, Some("wrong-token")).await;
    let res = app
        .get(
            &format!("/api/integrations/{wrong}/tools"),
            Some(&user.access),
        )
        .await;
    assert_eq!(res.status(), 502);
    let body: Value = res.json().await.unwrap();
    assert_eq!(
        body["message"],
        "The MCP server could not be reached: it refused the authorization (HTTP 401 or 403): \
         check the integration's authorization",
    );

    // Nothing listens: 502.
    let nowhere = integration(&app, &user, &closed, None).await;
    let res = app
        .get(
            &format!("/api/integrations/{nowhere}/tools"),
            Some(&user.access),
        )
        .await;
    assert_eq!(res.status(), 502);

    // A loopback address that ALLOWED_PRIVATE_HOSTS does not list: refused by the outbound
    // policy before any request.
    let (_other_server, private) = fixture("t").await;
    let refused = integration(&app, &user, &private, Some("t")).await;
    let res = app
        .get(
            &format!("/api/integrations/{refused}/tools"),
            Some(&user.access),
        )
        .await;
    assert_eq!(res.status(), 502);
    assert!(res.text().await.unwrap().contains("the URL is not allowed"));

    // Another account's integration is 404, for listing and for a tool.
    let mine = integration(&app, &user, &addr, Some("right-token")).await;
    let res = app
        .get(
            &format!("/api/integrations/{mine}/tools"),
            Some(&other.access),
        )
        .await;
    assert_eq!(res.status(), 404);
    let theirs = agent_with(&app, &other, "gpt-4o-mini").await;
    let res = app
        .post(
            &format!("/api/agents/{theirs}/tools"),
            Some(&other.access),
            json!({"type": "mcp", "name": "x", "config": {"integrationId": mine}}),
        )
        .await;
    assert_eq!(res.status(), 404);
    assert_eq!(
        res.json::<Value>().await.unwrap()["message"],
        "Integration not found"
    );

    // An integration of another provider is not an MCP server.
    let res = app
        .post(
            "/api/integrations",
            Some(&user.access),
            json!({"providerCode": "http", "name": "Hook", "credentials": {"url": "https://example.com/hook"}}),
        )
        .await;
    let hook = res.json::<Value>().await.unwrap()["id"]
        .as_str()
        .unwrap()
        .to_string();
    let res = app
        .get(
            &format!("/api/integrations/{hook}/tools"),
            Some(&user.access),
        )
        .await;
    assert_eq!(res.status(), 400);
    let agent = agent_with(&app, &user, "gpt-4o-mini").await;
    let res = app
        .post(
            &format!("/api/agents/{agent}/tools"),
            Some(&user.access),
            json!({"type": "mcp", "name": "x", "config": {"integrationId": hook}}),
        )
        .await;
    assert_eq!(res.status(), 400);
    assert!(res
        .text()
        .await
        .unwrap()
        .contains("config.integrationId must be an MCP server integration"));
    // A malformed config names the field.
    let res = app
        .post(
            &format!("/api/agents/{agent}/tools"),
            Some(&user.access),
            json!({"type": "mcp", "name": "x", "config": {"integrationId": mine, "allowedTools": "echo"}}),
        )
        .await;
    assert_eq!(res.status(), 400);
    // Allowed tool names are counted in characters, as the OpenAPI document states: 100
    // two-byte characters are accepted, 129 characters are not.
    let wide = agent_with(&app, &user, "gpt-4o-mini").await;
    create_tool(
        &app,
        &user,
        &wide,
        json!({"type": "mcp", "name": "wide", "config": {"integrationId": mine, "allowedTools": ["é".repeat(100)]}}),
    )
    .await;
    let res = app
        .post(
            &format!("/api/agents/{wide}/tools"),
            Some(&user.access),
            json!({"type": "mcp", "name": "long", "config": {"integrationId": mine, "allowedTools": ["a".repeat(129)]}}),
        )
        .await;
    assert_eq!(res.status(), 400);

    // A chat whose MCP server is unreachable still answers, without its tools.
    create_tool(
        &app,
        &user,
        &agent,
        json!({"type": "mcp", "name": "down", "config": {"integrationId": nowhere}}),
    )
    .await;
    let res = app
        .chat(&user.access, &agent, json!({"message": "Hello"}))
        .await;
    assert_eq!(res.status(), 200);
    let reply: Value = res.json().await.unwrap();
    assert_eq!(reply["toolCalls"], json!([]));
    // Reading the integration never shows its authorization.
    let res = app
        .get(&format!("/api/integrations/{mine}"), Some(&user.access))
        .await;
    assert!(!res.text().await.unwrap().contains("right-token"));
}
