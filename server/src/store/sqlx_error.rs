//! How an error of sqlx, the driver every backend is built on, becomes a [`StoreError`]:
//! failures to reach the database or to get an answer in time are
//! [`StoreError::Unavailable`], the rest [`StoreError::Other`]. Uniqueness violations a
//! caller must tell apart are turned into [`StoreError::Conflict`] by the backend at the
//! statement concerned, before this conversion.

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

/// Whether `err` says the database could not be reached or did not answer in time: the
/// pool timed out or was closed, the connection failed (I/O, TLS, its worker thread), or
/// SQLite gave up waiting for a lock (`SQLITE_BUSY`, `SQLITE_LOCKED` and their extended
/// codes, whose low byte is 5 or 6: <https://www.sqlite.org/rescode.html>).
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
