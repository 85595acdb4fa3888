//! Password hashing with argon2id (m = 19 MiB, t = 2, p = 1, OWASP Password Storage Cheat
//! Sheet) on the blocking pool behind a semaphore, so a login storm queues.

use std::sync::Arc;

use anyhow::Context;
use argon2::{
    password_hash::{PasswordHash, PasswordHasher as _, PasswordVerifier, SaltString},
    Algorithm, Argon2, Params, Version,
};
use tokio::sync::Semaphore;

/// Hashes and verifies passwords.
#[derive(Clone)]
pub struct PasswordHasher {
    permits: Arc<Semaphore>,
    /// A real hash of a random password, verified when the account does not exist so that
    /// unknown emails take as long as wrong passwords (OWASP ASVS 2.2.x, user enumeration).
    dummy_hash: Arc<String>,
}

fn argon2() -> Argon2<'static> {
    let params = Params::new(19 * 1024, 2, 1, None).expect("static argon2 parameters are valid");
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params)
}

fn hash_blocking(password: &str) -> anyhow::Result<String> {
    let salt = SaltString::generate(&mut rand::rngs::OsRng);
    Ok(argon2()
        .hash_password(password.as_bytes(), &salt)
        .map_err(|e| anyhow::anyhow!("argon2 hashing failed: {e}"))?
        .to_string())
}

fn verify_blocking(hash: &str, password: &str) -> bool {
    PasswordHash::new(hash)
        .map(|parsed| {
            argon2()
                .verify_password(password.as_bytes(), &parsed)
                .is_ok()
        })
        .unwrap_or(false)
}

impl PasswordHasher {
    /// A hasher allowing `concurrency` hashes at once (each uses 19 MiB while it runs).
    pub fn new(concurrency: usize) -> anyhow::Result<Self> {
        let dummy = hash_blocking(&uuid::Uuid::new_v4().to_string())?;
        Ok(Self {
            permits: Arc::new(Semaphore::new(concurrency.max(1))),
            dummy_hash: Arc::new(dummy),
        })
    }

    /// The PHC string of a fresh argon2id hash of `password`.
    pub async fn hash(&self, password: &str) -> anyhow::Result<String> {
        let _permit = self.permits.acquire().await.context("hasher closed")?;
        let password = password.to_string();
        tokio::task::spawn_blocking(move || hash_blocking(&password)).await?
    }

    /// Whether `password` matches `hash`; with no hash, verifies against the dummy hash and
    /// answers false, taking the same time.
    pub async fn verify(&self, hash: Option<&str>, password: &str) -> anyhow::Result<bool> {
        let _permit = self.permits.acquire().await.context("hasher closed")?;
        let known = hash.is_some();
        let hash = hash
            .map(str::to_string)
            .unwrap_or_else(|| self.dummy_hash.to_string());
        let password = password.to_string();
        let ok = tokio::task::spawn_blocking(move || verify_blocking(&hash, &password)).await?;
        Ok(known && ok)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn hashes_verify_and_use_argon2id_with_owasp_parameters() {
        let hasher = PasswordHasher::new(2).unwrap();
        let hash = hasher.hash("correct horse").await.unwrap();
        assert!(
            hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"),
            "{hash}"
        );
        assert!(hasher.verify(Some(&hash), "correct horse").await.unwrap());
        assert!(!hasher.verify(Some(&hash), "wrong horse").await.unwrap());
        assert!(!hasher.verify(None, "anything").await.unwrap());
    }
}
