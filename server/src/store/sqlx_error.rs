//! How a sqlx error becomes a [`StoreError`]: unreachable or timed out is
//! [`StoreError::Unavailable`], the rest [`StoreError::Other`]. Backends map the uniqueness
//! violations callers need to [`StoreError::Conflict`] before this.

use super::StoreError;

impl From<sqlx::Error> for StoreError {
    fn from(err: sqlx::Error) -> Self {
        if is_unavailable(&err) {
            Self::Unavailable(err.into())
        } else {
            Self::Other(err.into())
        }
    }
}

/// Whether `err` means the database could not be reached or answer in time: pool timeout or
/// closed, connection failure, or SQLite busy/locked (<https://www.sqlite.org/rescode.html>).
fn is_unavailable(err: &sqlx::Error) -> bool {
    match err {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => true,
        sqlx::Error::Database(db) => db
            .try_downcast_ref::<sqlx::sqlite::SqliteError>()
            .and_then(sqlx::error::DatabaseError::code)
            .and_then(|code| code.parse::<i32>().ok())
            .is_some_and(|code| matches!(code & 0xff, 5 | 6)),
        _ => false,
    }
}

/// Whether `err` is a violation of a UNIQUE constraint or primary key (either backend).
pub(crate) fn is_unique_violation(err: &sqlx::Error) -> bool {
    matches!(err, sqlx::Error::Database(db) if db.is_unique_violation())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unreachable_databases_are_unavailable_and_other_failures_are_not() {
        assert!(matches!(
            StoreError::from(sqlx::Error::PoolTimedOut),
            StoreError::Unavailable(_)
        ));
        assert!(matches!(
            StoreError::from(sqlx::Error::RowNotFound),
            StoreError::Other(_)
        ));
    }
}
