//! Agents recently read, kept by the agents service ([`super::AgentService`]) and
//! invalidated by it on every change that affects them, on this instance and (through the
//! cluster bus, [`crate::cluster`]) on every other.

use std::{sync::Arc, time::Duration};

use crate::{
    cluster::{Bus, Invalidation, LocalCache},
    ids::AgentId,
    store::AgentRecord,
};

/// How long an agent read by [`super::AgentService::owned`] is reused. Changes through this
/// instance apply at once; through another, when the cluster bus tells this one, at the
/// latest after this (as [`crate::auth::AUTH_CACHE_TTL`] for sessions).
pub const AGENT_CACHE_TTL: Duration = Duration::from_secs(2);

/// Agents recently read, by id, so that a busy agent's chats do not each read it again.
#[derive(Clone)]
pub struct AgentCache {
    entries: Entries,
    /// Where forgotten agents are published ([`AgentCache::with_bus`]; local by default).
    bus: Bus,
}

/// The cached agents as the cluster bus reaches them (forgetting through this never publishes).
#[derive(Clone)]
struct Entries(moka::sync::Cache<AgentId, Arc<AgentRecord>>);

impl LocalCache for Entries {
    fn forget(&self, what: &Invalidation) {
        if let Invalidation::Agent { id } = what {
            self.0.invalidate(id);
        }
    }

    fn forget_all(&self) {
        self.0.invalidate_all();
    }
}

impl Default for AgentCache {
    fn default() -> Self {
        Self {
            entries: Entries(
                moka::sync::Cache::builder()
                    .max_capacity(10_000)
                    .time_to_live(AGENT_CACHE_TTL)
                    .build(),
            ),
            bus: Bus::local(),
        }
    }
}

impl AgentCache {
    pub(super) fn with_bus(mut self, bus: &Bus) -> Self {
        bus.add_cache(Arc::new(self.entries.clone()));
        self.bus = bus.clone();
        self
    }

    /// The agent `id` when it was read within [`AGENT_CACHE_TTL`] and not changed since.
    pub(super) fn get(&self, id: &AgentId) -> Option<Arc<AgentRecord>> {
        self.entries.0.get(id)
    }

    /// Remembers `agent` as just read.
    pub(super) fn insert(&self, agent: Arc<AgentRecord>) {
        self.entries.0.insert(agent.id.clone(), agent);
    }

    /// Drops the agent `id` here and on every other instance.
    pub(super) fn forget(&self, id: &AgentId) {
        self.entries.0.invalidate(id);
        self.bus.publish(Invalidation::Agent { id: id.clone() });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        cluster::tests::{bus, eventually, scratch},
        store::agents::AgentStatus,
    };

    fn agent(id: &str) -> Arc<AgentRecord> {
        let now = chrono::Utc::now();
        Arc::new(AgentRecord {
            id: id.into(),
            user_id: "u1".into(),
            name: "Support".into(),
            description: String::new(),
            system_prompt: String::new(),
            model: String::new(),
            status: AgentStatus::Active,
            created_at: now,
            updated_at: now,
            has_knowledge: false,
            has_tools: false,
        })
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn an_agent_forgotten_on_one_instance_is_forgotten_on_the_other() {
        let database = scratch().await;
        let a = AgentCache::default().with_bus(&bus(&database).await);
        let b = AgentCache::default().with_bus(&bus(&database).await);
        for cache in [&a, &b] {
            cache.insert(agent("a1"));
            cache.insert(agent("a2"));
        }
        a.forget(&"a1".into());
        assert!(a.get(&"a1".into()).is_none(), "forgotten here at once");
        let took = eventually(Duration::from_secs(1), "B forgets a1", || {
            b.get(&"a1".into()).is_none()
        })
        .await;
        assert!(took < AGENT_CACHE_TTL);
        assert!(b.get(&"a2".into()).is_some(), "only the agent named");
        assert!(a.get(&"a2".into()).is_some());
    }

    #[test]
    fn the_bus_can_drop_every_agent() {
        let cache = AgentCache::default();
        cache.insert(agent("a1"));
        cache
            .entries
            .forget(&Invalidation::Session { id: "a1".into() });
        assert!(cache.get(&"a1".into()).is_some(), "another kind of change");
        cache.entries.forget_all();
        assert!(cache.get(&"a1".into()).is_none());
    }
}
