//! The secrets part: the token signing key and the keys of stored credentials.

use std::{io::Write, path::Path};

use anyhow::Context;
use base64::{engine::general_purpose::STANDARD, Engine};
use rand::RngCore;
use secrecy::SecretString;

use super::Settings;

/// The token-signing key and the credential-sealing keys.
#[derive(Clone)]
pub struct SecretsConfig {
    /// `JWT_SECRET`, else generated once into `DATA_DIR/jwt_secret`.
    pub jwt_secret: SecretString,
    /// `ENCRYPTION_KEY` (base64 of 32 bytes), else generated once into `DATA_DIR/encryption_key`.
    pub encryption_key: SecretString,
    /// `ENCRYPTION_KEYS_PREVIOUS`: keys `ENCRYPTION_KEY` replaced; their values still open and are
    /// sealed again with the current key when written.
    pub encryption_keys_previous: Vec<SecretString>,
}

impl SecretsConfig {
    /// The secrets kept in `data_dir`, generated (mode 0600) when missing. Errors: an unwritable
    /// file, or an `encryption_key` not base64 of 32 bytes.
    pub fn load_or_generate(data_dir: &Path) -> anyhow::Result<Self> {
        let jwt_secret = load_or_generate(&data_dir.join("jwt_secret"), 64, "JWT secret")?;
        let encryption_key =
            load_or_generate(&data_dir.join("encryption_key"), 32, "encryption key")?;
        decode_key(&encryption_key).context("DATA_DIR/encryption_key is not base64 of 32 bytes")?;
        Ok(Self {
            jwt_secret: SecretString::from(jwt_secret),
            encryption_key: SecretString::from(encryption_key),
            encryption_keys_previous: Vec::new(),
        })
    }

    /// Random in-memory secrets for commands that sign and seal nothing
    /// ([`super::Config::from_env_for_tools`]).
    pub fn ephemeral() -> Self {
        let random = |len: usize| {
            let mut bytes = vec![0u8; len];
            rand::rngs::OsRng.fill_bytes(&mut bytes);
            SecretString::from(STANDARD.encode(&bytes))
        };
        Self {
            jwt_secret: random(64),
            encryption_key: random(32),
            encryption_keys_previous: Vec::new(),
        }
    }

    /// The secrets of an instance on a shared database: the [`SHARED_SETTINGS`] from `lookup`.
    /// Errors: each missing variable, named; an `ENCRYPTION_KEY` not base64 of 32 bytes.
    pub fn from_shared_settings(lookup: impl Fn(&str) -> Option<String>) -> anyhow::Result<Self> {
        require_shared_settings(&lookup)?;
        let (Some(jwt_secret), Some(encryption_key)) =
            (lookup("JWT_SECRET"), lookup("ENCRYPTION_KEY"))
        else {
            anyhow::bail!("JWT_SECRET and ENCRYPTION_KEY must be set");
        };
        decode_key(&encryption_key).context("ENCRYPTION_KEY must be base64 of exactly 32 bytes")?;
        Ok(Self {
            jwt_secret: SecretString::from(jwt_secret),
            encryption_key: SecretString::from(encryption_key),
            encryption_keys_previous: Vec::new(),
        })
    }

    /// Overrides the `DATA_DIR` secrets with those set. Errors: a key not base64 of 32 bytes.
    pub(super) fn apply(&mut self, settings: &Settings) -> anyhow::Result<()> {
        if let Some(secret) = &settings.jwt_secret {
            self.jwt_secret = SecretString::from(secret.clone());
        }
        if let Some(key) = &settings.encryption_key {
            decode_key(key).context("ENCRYPTION_KEY must be base64 of exactly 32 bytes")?;
            self.encryption_key = SecretString::from(key.clone());
        }
        if let Some(keys) = &settings.encryption_keys_previous {
            self.encryption_keys_previous = keys
                .split(',')
                .map(str::trim)
                .filter(|k| !k.is_empty())
                .map(|k| {
                    decode_key(k)
                        .context("ENCRYPTION_KEYS_PREVIOUS must list base64 keys of 32 bytes")
                        .map(|_| SecretString::from(k.to_string()))
                })
                .collect::<anyhow::Result<_>>()?;
        }
        Ok(())
    }

    /// The decoded current and previous encryption keys. Errors: a key not base64 of 32 bytes.
    pub fn encryption_keys(&self) -> anyhow::Result<([u8; 32], Vec<[u8; 32]>)> {
        use secrecy::ExposeSecret;
        let current = decode_key(self.encryption_key.expose_secret())?;
        let previous = self
            .encryption_keys_previous
            .iter()
            .map(|k| decode_key(k.expose_secret()))
            .collect::<anyhow::Result<Vec<_>>>()?;
        Ok((current, previous))
    }
}

/// What instances on a shared database must all be given alike, or each rejects the others'
/// tokens and sealed credentials (README.md § Running several instances).
pub const SHARED_SETTINGS: [&str; 3] = ["JWT_SECRET", "ENCRYPTION_KEY", "PUBLIC_URL"];

/// Checks that `lookup` has all [`SHARED_SETTINGS`] (blank is unset). Errors: names each missing.
pub fn require_shared_settings(lookup: impl Fn(&str) -> Option<String>) -> anyhow::Result<()> {
    let missing: Vec<&str> = SHARED_SETTINGS
        .into_iter()
        .filter(|name| lookup(name).is_none_or(|v| v.trim().is_empty()))
        .collect();
    anyhow::ensure!(
        missing.is_empty(),
        "DATABASE_URL is a PostgreSQL database, which needs JWT_SECRET, ENCRYPTION_KEY and \
         PUBLIC_URL set, the same on every instance; missing: {}",
        missing.join(", ")
    );
    Ok(())
}

/// Decodes a base64 32-byte key.
pub fn decode_key(b64: &str) -> anyhow::Result<[u8; 32]> {
    let bytes = STANDARD.decode(b64.trim())?;
    bytes
        .try_into()
        .map_err(|_| anyhow::anyhow!("the key must decode to exactly 32 bytes"))
}

/// Reads a secret file, or creates it with `len` random bytes in base64 and mode 0600.
fn load_or_generate(path: &Path, len: usize, what: &str) -> anyhow::Result<String> {
    if let Ok(existing) = std::fs::read_to_string(path) {
        let existing = existing.trim().to_string();
        if !existing.is_empty() {
            return Ok(existing);
        }
    }
    let mut bytes = vec![0u8; len];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let secret = STANDARD.encode(&bytes);
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    file.write_all(secret.as_bytes())?;
    tracing::info!(path = %path.display(), "generated a new {what}");
    Ok(secret)
}
