//! Background work taken from the database: knowledge jobs ([`crate::knowledge::worker`]) and
//! webhook deliveries ([`crate::webhooks::worker`]), both lease queues served by [`lease`].
//! Both keep: one holder at a time (atomic claims), at least once (a dead taker's item is
//! taken again after its lease), only the holder ends an item (fenced writes), leases that
//! outlast the work or are renewed, and one clock ([`crate::clock::Clock`]). The rules in
//! full: docs/architecture.md § Background jobs.

pub mod lease;
