//! Test support for AgentChat, a dev-dependency of the server and a dependency of the
//! benchmarks, so that none of it ships in the `agentchat` library: [`conformance`], the
//! store rules every backend must keep, and [`scratch`] PostgreSQL databases.

pub mod conformance;
pub mod scratch;
