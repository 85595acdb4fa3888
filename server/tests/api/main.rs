//! HTTP-level tests of the service: every rule of docs/api.md that the
//! service implements, against the real router on port 0.

mod agents;
mod api_keys;
mod auth;
mod channels;
mod chat;
mod cli;
mod cluster;
mod connections;
mod copy_data;
mod embeddings;
mod errors;
mod helpers;
mod hostile;
mod integrations;
mod knowledge;
mod local_embeddings;
mod mcp;
mod mcp_client;
mod metrics;
mod oauth;
mod openai;
mod openapi;
mod ops;
mod providers;
mod proxies;
mod rate_limits;
mod ratelimit_redis;
mod refresh;
mod roles;
mod security;
mod sessions;
mod tools;
mod turns;
mod usage;
mod webhooks;
