//! The errors of the persistence boundary: what went wrong, for the caller to decide, with
//! no driver types (backends convert to [`StoreError::Unavailable`] or [`StoreError::Other`]).

/// Errors of the persistence layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A write was refused because something it needs is taken, or must remain; the
    /// [`Conflict`] says what.
    #[error("conflict: {0}")]
    Conflict(Conflict),
    /// The row does not exist (or belongs to someone else).
    #[error("not found")]
    NotFound,
    /// The database could not be reached or answer in time; nothing was written, and the
    /// call may succeed later.
    #[error("database unavailable: {0}")]
    Unavailable(anyhow::Error),
    /// Anything else: a statement the database refused, a stored value that does not
    /// parse, a failed migration.
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// What a [`StoreError::Conflict`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Conflict {
    /// Another account has the email address (emails are unique, compared as stored:
    /// [`crate::domain::Email`] is lower-cased).
    #[error("the email is taken")]
    Email,
    /// The provider identity is linked to an account already, or the account already has
    /// an identity at that provider.
    #[error("the identity is linked")]
    LinkedIdentity,
    /// The identity is the account's last way to sign in (no password, no other identity),
    /// so it stays linked.
    #[error("the last way to sign in")]
    LastSignIn,
    /// The agent has a tool of that name already (names are unique per agent).
    #[error("the tool name is taken")]
    ToolName,
}

/// Result alias of the store.
pub type StoreResult<T> = Result<T, StoreError>;
