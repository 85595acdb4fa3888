//! The ids of stored rows, one type per kind (an agent id is not a user id). Each wraps the
//! stored text (a number for [`ChunkId`]) transparently for serde and sqlx. Ids are made at
//! the edges only (requests, rows, claims, [`From<String>`]) and read with `as_str()`.

use std::fmt;

/// A newtype over `String` for one kind of id; `generated` adds `new()`, a fresh UUIDv7 in
/// hyphenated lower case (RFC 9562 § 5.7).
macro_rules! string_id {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(
            Clone,
            Debug,
            PartialEq,
            Eq,
            Hash,
            PartialOrd,
            Ord,
            serde::Serialize,
            serde::Deserialize,
            sqlx::Type,
        )]
        #[serde(transparent)]
        #[sqlx(transparent)]
        pub struct $name(String);

        impl $name {
            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id's text, without copying it.
            pub fn into_string(self) -> String {
                self.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl From<String> for $name {
            fn from(id: String) -> Self {
                Self(id)
            }
        }

        impl From<&str> for $name {
            fn from(id: &str) -> Self {
                Self(id.to_string())
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> Self {
                id.0
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.0 == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.0 == *other
            }
        }

        impl PartialEq<String> for $name {
            fn eq(&self, other: &String) -> bool {
                &self.0 == other
            }
        }

        impl PartialEq<$name> for str {
            fn eq(&self, other: &$name) -> bool {
                self == other.0
            }
        }

        impl PartialEq<$name> for &str {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }

        impl PartialEq<$name> for String {
            fn eq(&self, other: &$name) -> bool {
                *self == other.0
            }
        }
    };
    ($(#[$doc:meta])* $name:ident, generated) => {
        string_id!($(#[$doc])* $name);

        impl $name {
            /// A new id: a UUIDv7 (time-ordered) in its hyphenated lower-case text form.
            #[allow(clippy::new_without_default)]
            pub fn new() -> Self {
                Self(uuid::Uuid::now_v7().to_string())
            }
        }
    };
}

string_id!(
    /// A user account (`users.id`, UUIDv7 text); also the `sub` claim of session tokens.
    UserId,
    generated
);

string_id!(
    /// A sign-in session (`sessions.id`): UUIDv7 text. Also the `sid` claim of its tokens.
    SessionId,
    generated
);

string_id!(
    /// An API key (`api_keys.id`): UUIDv7 text (not the key, which starts with `key_`).
    ApiKeyId,
    generated
);

string_id!(
    /// An agent (`agents.id`): UUIDv7 text.
    AgentId,
    generated
);

string_id!(
    /// A conversation thread of one user with one agent (`threads.id`): UUIDv7 text.
    ThreadId,
    generated
);

string_id!(
    /// A message of a thread (`messages.id`): UUIDv7 text.
    MessageId,
    generated
);

string_id!(
    /// A knowledge document, an upload or a crawled site (`documents.id`): UUIDv7 text.
    DocumentId,
    generated
);

string_id!(
    /// A knowledge job, ingestion or crawl (`jobs.id`): UUIDv7 text.
    JobId,
    generated
);

string_id!(
    /// A webhook subscription (`webhooks.id`): UUIDv7 text.
    WebhookId,
    generated
);

string_id!(
    /// An integration of a channel or provider (`integrations.id`): UUIDv7 text.
    IntegrationId,
    generated
);

string_id!(
    /// A tool of an agent (`agent_tools.id`): UUIDv7 text.
    ToolId,
    generated
);

string_id!(
    /// A tool call: the provider's call id (`call_…`, `toolu_…`), unique within its thread.
    ToolCallId
);

string_id!(
    /// A widget integration's public id (`integrations.public_id`): `pub_` + 22 base64url
    /// characters (16 random bytes). Public by design.
    PublicId
);

string_id!(
    /// A webhook delivery (`webhook_deliveries.id`), also its `webhook-id`: `msg_` + the 32 hex
    /// digits of a UUIDv7, stable across attempts.
    DeliveryId
);

impl DeliveryId {
    /// A new delivery id: `msg_` and a UUIDv7 as 32 lower-case hex digits.
    #[allow(clippy::new_without_default)]
    pub fn new() -> Self {
        Self(format!("msg_{}", uuid::Uuid::now_v7().simple()))
    }
}

/// A knowledge chunk (`chunks.id`): a positive, only growing integer the store assigns;
/// indexes keep plain `i64` and convert with [`ChunkId::get`] and [`From<i64>`].
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    Hash,
    PartialOrd,
    Ord,
    serde::Serialize,
    serde::Deserialize,
    sqlx::Type,
)]
#[serde(transparent)]
#[sqlx(transparent)]
pub struct ChunkId(i64);

impl ChunkId {
    /// The id as a number.
    pub const fn get(self) -> i64 {
        self.0
    }
}

impl From<i64> for ChunkId {
    fn from(id: i64) -> Self {
        Self(id)
    }
}

impl From<ChunkId> for i64 {
    fn from(id: ChunkId) -> Self {
        id.0
    }
}

impl fmt::Display for ChunkId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_keep_their_text_on_the_wire() {
        let id = AgentId::from("0190f5c2-7d1e-7b3a-9c4d-5e6f7a8b9c0d");
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(json, "\"0190f5c2-7d1e-7b3a-9c4d-5e6f7a8b9c0d\"");
        assert_eq!(serde_json::from_str::<AgentId>(&json).unwrap(), id);
        assert_eq!(id.to_string(), id.as_str());
        assert_eq!(id, "0190f5c2-7d1e-7b3a-9c4d-5e6f7a8b9c0d");
        assert_eq!(serde_json::to_string(&ChunkId::from(7)).unwrap(), "7");
    }

    #[test]
    fn new_ids_are_uuid_v7_text_and_deliveries_are_msg_hex() {
        let id = UserId::new();
        let parsed = uuid::Uuid::parse_str(id.as_str()).unwrap();
        assert_eq!(parsed.get_version_num(), 7);
        assert_eq!(parsed.to_string(), id.as_str());
        assert_ne!(UserId::new(), id);
        let delivery = DeliveryId::new();
        let hex = delivery.as_str().strip_prefix("msg_").unwrap();
        assert_eq!(hex.len(), 32);
        assert!(hex
            .chars()
            .all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    }

    #[tokio::test]
    async fn ids_bind_and_decode_as_their_inner_value() {
        let (_dir, store) = crate::store::sqlite::tests::store().await;
        let (text, number): (AgentId, ChunkId) = sqlx::query_as("SELECT ?, ? + 1")
            .bind(AgentId::from("a1"))
            .bind(ChunkId::from(41))
            .fetch_one(store.pool())
            .await
            .unwrap();
        assert_eq!((text.as_str(), number.get()), ("a1", 42));
    }
}
