//! AgentChat: a self-hostable service that hosts configurable AI agents.
//!
//! The binary `agentchat` (see `main.rs`) serves the REST API under `/api` and the Leptos
//! dashboard. This library holds the service so that tests and benchmarks can build it.

pub mod accounts;
pub mod agents;
pub mod auth;
pub mod channels;
pub mod chat;
pub mod clock;
pub mod cluster;
pub mod config;
pub mod connection;
pub mod crypto;
pub mod domain;
pub mod foreground;
pub mod forwarded;
pub mod http;
pub mod idle;
pub mod ids;
pub mod integrations;
pub mod jobs;
pub mod knowledge;
pub mod llm;
pub mod mail;
pub mod metrics;
pub mod outbound;
pub mod public_url;
pub mod ratelimit;
pub mod readiness;
pub mod redis_ping;
pub mod services;
pub mod site;
pub mod startup;
pub mod store;
pub mod telemetry;
pub mod tools;
pub mod views;
pub mod webhooks;
