//! Background work the service takes from its database: knowledge jobs (the `jobs` table,
//! [`crate::knowledge::worker`]) and webhook deliveries (the `webhook_deliveries` table,
//! [`crate::webhooks::worker`]). Both are lease queues served by the one loop of
//! [`lease`].
//!
//! The rules both queues keep:
//!
//! - **One holder at a time.** An item is taken ("claimed") together with a lease: it
//!   belongs to its taker until the lease's end. The claim is one atomic step of the store
//!   (`KnowledgeStore::claim_job`, `WebhookStore::claim_deliveries`), so two loops, in one
//!   instance or in several, never take the same item while its lease runs.
//! - **At least once.** A taker that dies (crash, kill, restart) never records its result;
//!   once the lease has passed, any loop takes the item again and counts another attempt.
//!   An item may therefore be worked on twice: a knowledge job rebuilds its document's
//!   chunks from scratch, and a webhook receiver sees the same `webhook-id` again
//!   (Standard Webhooks v1 asks receivers to deduplicate on it).
//! - **Only the holder ends an item.** A knowledge job's end is written only while the job
//!   is still `running` under the attempt that holds it (`JobQueue::complete_job`), and so
//!   is each renewal of its lease (`JobQueue::job_progress`): a renewal refused because
//!   another worker has taken the job stops the work at once, and its end is never
//!   recorded. A recorded attempt moves its delivery on only while the delivery is still
//!   `sending` under the attempt that claimed it, so neither a later claim (after the lease
//!   ran out) nor a redelivery requested meanwhile is overwritten
//!   (`WebhookStore::record_attempt`).
//! - **Leases outlast the work, or are renewed.** A delivery's lease (60 s) is longer than
//!   an attempt may take (`webhooks::ATTEMPT_TIMEOUT`, 10 s), so it is never renewed. A
//!   knowledge job may crawl for many minutes, so it renews its 60 s lease every 15 s
//!   while it runs (and on each crawl progress report); a job started
//!   `knowledge::worker::MAX_ATTEMPTS` times without finishing fails its document.
//! - **One clock.** Claims, lease ends, due times and recorded times are read from the
//!   service's [`crate::clock::Clock`], the one handlers and sessions read, so a test that
//!   advances it makes leases run out and retries fall due without waiting.

pub mod lease;
