//! Shared pieces of the AgentChat benchmarks (the binaries in `src/bin`, described in
//! `BENCHMARKS.md` at the repository root).
//!
//! - [`backend`]: the backend the service runs on (SQLite, or PostgreSQL and Redis), chosen
//!   with `--database-url` and `--redis-url`.
//! - [`service`]: runs the release `agentchat` binary as a child process against a mock
//!   provider, and creates a verified account with an agent through the HTTP API.
//! - [`load`]: the load generator's parts: raw HTTP/1.1 keep-alive connections, request
//!   templates, a server-sent events parser, latency histograms and `/proc` readings
//!   (resident memory, CPU time).
//! - [`kb`]: the knowledge-base benchmarks' corpus (the Rust book), a deterministic
//!   generator, stores and the service built in process, driven over its HTTP API.

pub mod backend;
pub mod kb;
pub mod load;
pub mod service;
