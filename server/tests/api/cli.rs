//! The `agentchat` command line against a running service's data folder.

use std::process::Command;

use serde_json::Value;

use crate::helpers::*;

fn agentchat(app: &TestApp, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_agentchat"))
        .args(args)
        .env("DATA_DIR", app.dir.path())
        .env("DATABASE_URL", &app.database_url)
        .env("RUST_LOG", "warn")
        .output()
        .expect("the binary runs")
}

#[tokio::test]
async fn admin_verify_email_and_set_plan() {
    let app = spawn_app().await;
    let email = unique_email();
    assert_eq!(app.signup(&email, "password123").await.status(), 201);
    assert_eq!(app.login(&email, "password123").await.status(), 403);
    let out = agentchat(&app, &["admin", "verify-email", &email.to_uppercase()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let (access, _) = app.tokens(&email, "password123").await;

    let out = agentchat(&app, &["admin", "set-plan", &email, "pro"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    tokio::time::sleep(std::time::Duration::from_millis(2100)).await;
    let me: Value = app
        .get("/api/auth/me", Some(&access))
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(me["user"]["plan"], "pro");

    let bad_plan = agentchat(&app, &["admin", "set-plan", &email, "gold"]);
    assert!(!bad_plan.status.success());
    assert!(String::from_utf8_lossy(&bad_plan.stderr).contains("unknown plan"));
    let nobody = agentchat(&app, &["admin", "verify-email", "nobody@example.com"]);
    assert!(!nobody.status.success());
}

#[tokio::test]
async fn help_and_migrate() {
    let app = spawn_app().await;
    for args in [
        &["--help"][..],
        &["serve", "--help"],
        &["admin", "set-plan", "--help"],
        &["admin", "verify-email", "--help"],
        &["migrate", "--help"],
    ] {
        let out = agentchat(&app, args);
        assert!(out.status.success(), "{args:?}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("Usage"),
            "{args:?}"
        );
    }
    let out = agentchat(&app, &["migrate"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
