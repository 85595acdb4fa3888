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

/// `agentchat serve` with only `vars` (and a data folder of its own) set from the
/// configuration variables; it is expected to refuse to start, so it is given 60 s.
fn serve_with(vars: &[(&str, &str)]) -> std::process::Output {
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentchat"));
    command
        .arg("serve")
        // No `.env` of a working directory is read.
        .current_dir(dir.path())
        .env("DATA_DIR", dir.path())
        .env("LEPTOS_SITE_ADDR", "127.0.0.1:0")
        .env("RUST_LOG", "warn");
    for name in [
        "DATABASE_URL",
        "JWT_SECRET",
        "ENCRYPTION_KEY",
        "PUBLIC_URL",
        "TRUSTED_PROXIES",
        "DATABASE_MAX_CONNECTIONS",
        "CHAT_SYNCHRONOUS_COMMIT",
        "AGENTCHAT_ROLE",
        "REDIS_URL",
        "EMBEDDING_MODEL",
        "EMBEDDING_MODEL_PATH",
        "EMBEDDING_THREADS",
    ] {
        command.env_remove(name);
    }
    command.envs(vars.iter().copied());
    let mut child = command
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("the binary runs");
    for _ in 0..600 {
        if child.try_wait().unwrap().is_some() {
            return child.wait_with_output().unwrap();
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    panic!(
        "agentchat serve did not exit: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn postgres_mode_refuses_to_start_without_its_shared_secrets() {
    let out = serve_with(&[
        ("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test"),
        (
            "ENCRYPTION_KEY",
            "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY=",
        ),
        ("PUBLIC_URL", "https://chat.example.com"),
    ]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("missing: JWT_SECRET"), "{stderr}");

    let out = serve_with(&[("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/test")]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("missing: JWT_SECRET, ENCRYPTION_KEY, PUBLIC_URL"),
        "{stderr}"
    );
}

/// Asserts that `agentchat serve` with `vars` exits with an error that contains `expected`.
fn assert_start_refused(vars: &[(&str, &str)], expected: &str) {
    let out = serve_with(vars);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(expected), "{stderr}");
}

#[test]
fn a_bad_trusted_proxy_or_pool_size_or_commit_mode_or_role_stops_the_start() {
    assert_start_refused(
        &[("TRUSTED_PROXIES", "10.0.0.0/8, 10.0.0.0/33")],
        "TRUSTED_PROXIES: `10.0.0.0/33` is not an IP address or CIDR range",
    );

    assert_start_refused(
        &[("DATABASE_MAX_CONNECTIONS", "0")],
        "DATABASE_MAX_CONNECTIONS must be a whole number from 1 to 10000",
    );

    assert_start_refused(
        &[("CHAT_SYNCHRONOUS_COMMIT", "sometimes")],
        "CHAT_SYNCHRONOUS_COMMIT must be on or off",
    );

    let out = serve_with(&[("AGENTCHAT_ROLE", "api")]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--role"), "{stderr}");
    assert!(stderr.contains("worker"), "the roles are listed: {stderr}");
}

#[test]
fn serve_takes_a_role() {
    let out = Command::new(env!("CARGO_BIN_EXE_agentchat"))
        .args(["serve", "--help"])
        .output()
        .expect("the binary runs");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    assert!(help.contains("--role <ROLE>"), "{help}");
    assert!(help.contains("AGENTCHAT_ROLE"), "{help}");
    assert!(help.contains("[default: all]"), "{help}");
}

#[tokio::test]
async fn commands_on_the_database_need_no_shared_secrets_in_postgres_mode() {
    let server = test_database_server()
        .unwrap_or_else(|| "postgres://postgres@127.0.0.1:5432/postgres".into());
    let db = test_support::scratch::ScratchDatabase::create(&server)
        .await
        .unwrap_or_else(|e| {
            panic!(
                "PostgreSQL at {server} must be running for this test (scripts/services.sh): {e}"
            )
        });
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agentchat"))
        .arg("migrate")
        .current_dir(dir.path())
        .env("DATA_DIR", dir.path())
        .env("DATABASE_URL", db.url())
        .env_remove("JWT_SECRET")
        .env_remove("ENCRYPTION_KEY")
        .env_remove("PUBLIC_URL")
        .env("RUST_LOG", "warn")
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        !dir.path().join("jwt_secret").exists() && !dir.path().join("encryption_key").exists(),
        "no secret is generated in PostgreSQL mode"
    );
}

/// The variables of README.md § Configuration: the backquoted names in the first column
/// of its table.
fn readme_configuration_variables() -> Vec<String> {
    let readme = include_str!("../../../README.md");
    let section = readme
        .split("\n## Configuration\n")
        .nth(1)
        .expect("README.md has a Configuration section");
    let section = section.split("\n## ").next().unwrap();
    let mut names = Vec::new();
    for row in section.lines().filter(|l| l.starts_with("| `")) {
        let first = row.split('|').nth(1).unwrap();
        for name in first.split('`').skip(1).step_by(2) {
            names.push(name.to_string());
        }
    }
    names
}

#[test]
fn serve_help_lists_every_configuration_variable_of_the_readme() {
    let out = Command::new(env!("CARGO_BIN_EXE_agentchat"))
        .args(["serve", "--help"])
        .env("JWT_SECRET", "secret-value-not-shown")
        .env("SMTP_URL", "smtps://mailer:smtp-password@smtp.example.com")
        .output()
        .expect("the binary runs");
    assert!(out.status.success());
    let help = String::from_utf8_lossy(&out.stdout);
    let names = readme_configuration_variables();
    assert!(names.len() > 50, "{names:?}");
    for name in &names {
        assert!(
            help.contains(name.as_str()),
            "{name} is not in serve --help"
        );
    }
    // And the other way: every variable serve reads is in the README's table.
    for declared in help.split("[env: ").skip(1) {
        let name: String = declared
            .chars()
            .take_while(|c| c.is_ascii_uppercase() || *c == '_')
            .collect();
        assert!(
            names.contains(&name),
            "{name} is not in README.md § Configuration"
        );
    }
    assert!(help.contains("[default: 16]"), "{help}");
    assert!(!help.contains("secret-value-not-shown"), "{help}");
    assert!(!help.contains("smtp-password"), "{help}");
}

#[test]
fn an_unusable_built_in_embedding_model_stops_the_start_in_one_line() {
    for (vars, expected) in [
        (
            vec![("EMBEDDING_MODEL", "local")],
            "Error: EMBEDDING_MODEL_PATH is not set: EMBEDDING_MODEL=local needs",
        ),
        (
            vec![
                ("EMBEDDING_MODEL", "local"),
                ("EMBEDDING_MODEL_PATH", "/nonexistent/minilm"),
            ],
            "Error: EMBEDDING_MODEL_PATH: /nonexistent/minilm is not a folder",
        ),
        (
            vec![("EMBEDDING_THREADS", "0")],
            "EMBEDDING_THREADS must be a whole number from 1 to 256",
        ),
    ] {
        let out = serve_with(&vars);
        assert!(!out.status.success());
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.contains(expected), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        if expected.starts_with("Error: ") {
            let line = stderr.lines().find(|l| l.starts_with("Error: ")).unwrap();
            assert!(
                line.len() > expected.len(),
                "the reason is on its line: {line}"
            );
        }
    }
}

#[test]
fn an_invalid_value_stops_the_start_naming_its_variable() {
    assert_start_refused(
        &[("MAX_TOOL_ROUNDS", "0")],
        "MAX_TOOL_ROUNDS must be a whole number from 1 to 50",
    );
    assert_start_refused(
        &[("LEPTOS_SITE_ADDR", "localhost")],
        "LEPTOS_SITE_ADDR must be host:port",
    );
}

#[test]
fn a_blank_variable_counts_as_unset() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_agentchat"))
        .arg("migrate")
        .current_dir(dir.path())
        .env("DATA_DIR", dir.path())
        .env("DATABASE_URL", " ")
        .env("JOB_WORKERS", "")
        .env("MAX_TOOL_ROUNDS", "  ")
        .env("RUST_LOG", "warn")
        .output()
        .expect("the binary runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(dir.path().join("agentchat.db").exists());
}
