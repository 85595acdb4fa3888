//! Agents recently read, kept by the agents service ([`super::AgentService`]) and
//! invalidated by it on every change that affects them.

use std::{sync::Arc, time::Duration};

use crate::{ids::AgentId, store::AgentRecord};

/// How long an agent read by [`super::AgentService::owned`] is reused without asking the
/// store. Changes made through this instance take effect at once (the service drops the
/// entry); made through another instance of the service, within this time (the same bound
/// as [`crate::auth::AUTH_CACHE_TTL`] for sessions).
pub const AGENT_CACHE_TTL: Duration = Duration::from_secs(2);

/// Agents recently read, by id, so that a busy agent's chats do not each read it again.
#[derive(Clone)]
pub struct AgentCache(moka::sync::Cache<AgentId, Arc<AgentRecord>>);

impl Default for AgentCache {
    fn default() -> Self {
        Self(
            moka::sync::Cache::builder()
                .max_capacity(10_000)
                .time_to_live(AGENT_CACHE_TTL)
                .build(),
        )
    }
}

impl AgentCache {
    /// The agent `id` when it was read within [`AGENT_CACHE_TTL`] and not changed since.
    pub(super) fn get(&self, id: &AgentId) -> Option<Arc<AgentRecord>> {
        self.0.get(id)
    }

    /// Remembers `agent` as just read.
    pub(super) fn insert(&self, agent: Arc<AgentRecord>) {
        self.0.insert(agent.id.clone(), agent);
    }

    /// Drops the agent `id` (after a change to it or to what it derives from its
    /// knowledge, such as `has_knowledge`).
    pub(super) fn forget(&self, id: &AgentId) {
        self.0.invalidate(id);
    }
}
