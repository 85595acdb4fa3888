//! Scratch databases for tests on a database server: each test gets a database of its own,
//! created empty on the server `AGENTCHAT_TEST_DATABASE_URL` names and dropped when the
//! test is done, so tests run in parallel without seeing each other's rows (the way
//! `server/tests/store.rs` and the HTTP suite run on PostgreSQL).

use std::str::FromStr;

use sqlx::{
    postgres::{PgConnectOptions, PgPoolOptions},
    ConnectOptions, Executor,
};

/// A database created for one test; dropped (with any connection still open to it) when
/// this value is dropped.
#[derive(Debug)]
pub struct ScratchDatabase {
    /// The URL of the new database.
    url: String,
    /// Where it was created from (the server's URL, with its original database).
    admin_url: String,
    name: String,
}

impl ScratchDatabase {
    /// Creates an empty database `t_<uuid>` on the PostgreSQL server of `server_url` (any
    /// database of that server the user may connect to; the scratch database gets the same
    /// user and options).
    ///
    /// Errors: the server cannot be reached, or the user may not create databases.
    pub async fn create(server_url: &str) -> anyhow::Result<Self> {
        let name = format!("t_{}", uuid::Uuid::new_v4().simple());
        let admin = PgConnectOptions::from_str(server_url)?;
        let mut conn = admin.connect().await?;
        conn.execute(format!("CREATE DATABASE {name}").as_str())
            .await?;
        let mut url = url::Url::parse(server_url)?;
        url.set_path(&name);
        Ok(Self {
            url: url.to_string(),
            admin_url: server_url.to_string(),
            name,
        })
    }

    /// The URL of the scratch database.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The database's name (`t_` and 32 hex digits), unique to this test.
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Drop for ScratchDatabase {
    fn drop(&mut self) {
        let admin_url = self.admin_url.clone();
        let name = self.name.clone();
        // Drop runs inside the test's runtime, which cannot be blocked on; the database is
        // dropped from a thread of its own with a runtime of its own.
        let dropped = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            runtime.block_on(async {
                let pool = PgPoolOptions::new()
                    .max_connections(1)
                    .connect(&admin_url)
                    .await?;
                pool.execute(format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)").as_str())
                    .await?;
                anyhow::Ok(())
            })
        })
        .join();
        if let Ok(Err(e)) = dropped {
            eprintln!("dropping the scratch database {}: {e}", self.name);
        }
    }
}
