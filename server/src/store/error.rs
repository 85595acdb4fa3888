//! The errors of the persistence boundary, free of driver types.

/// Errors of the persistence layer.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// A write was refused; the [`Conflict`] says why.
    #[error("conflict: {0}")]
    Conflict(Conflict),
    /// The row does not exist (or belongs to someone else).
    #[error("not found")]
    NotFound,
    /// The database could not be reached in time; nothing was written.
    #[error("database unavailable: {0}")]
    Unavailable(anyhow::Error),
    /// Anything else (a refused statement, an unreadable value, a failed migration).
    #[error(transparent)]
    Other(#[from] anyhow::Error),
}

/// What a [`StoreError::Conflict`] is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Conflict {
    /// Another account has the email address.
    #[error("the email is taken")]
    Email,
    /// The identity, or the account's identity at that provider, is linked already.
    #[error("the identity is linked")]
    LinkedIdentity,
    /// The identity is the account's last way to sign in.
    #[error("the last way to sign in")]
    LastSignIn,
    /// The agent has a tool of that name already (names are unique per agent).
    #[error("the tool name is taken")]
    ToolName,
}

/// Result alias of the store.
pub type StoreResult<T> = Result<T, StoreError>;
