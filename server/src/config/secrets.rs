//! The secrets part: the token signing key and the keys of stored credentials.

use std::{io::Write, path::Path};

use anyhow::Context;
use base64::{engine::general_purpose::STANDARD, Engine};
use rand::RngCore;
use secrecy::SecretString;

use super::Settings;

/// The service's own keys: the one that signs tokens and the ones that seal stored
/// credentials. Start-up makes the token keys (`auth::tokens::JwtKeys`) and the
/// [`crate::crypto::SecretBox`] from them; no component takes this part itself.
#[derive(Clone)]
pub struct SecretsConfig {
    /// `JWT_SECRET`, else generated once into `DATA_DIR/jwt_secret`.
    pub jwt_secret: SecretString,
    /// `ENCRYPTION_KEY` (base64 of 32 bytes), else generated once into
    /// `DATA_DIR/encryption_key`.
    pub encryption_key: SecretString,
    /// `ENCRYPTION_KEYS_PREVIOUS`: comma-separated keys `ENCRYPTION_KEY` replaced; values
    /// sealed with them still open, and are sealed again with the current key when written.
    pub encryption_keys_previous: Vec<SecretString>,
}

impl SecretsConfig {
    /// The secrets kept in `data_dir` (`jwt_secret`, `encryption_key`), each generated
    /// there with mode 0600 when missing; no environment read.
    ///
    /// Errors: a secret file that cannot be written, or an `encryption_key` file that is
    /// not base64 of 32 bytes.
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

    /// Random secrets kept in memory only, for a command that reads the configuration but
    /// signs nothing and seals nothing (see [`super::Config::from_env_for_tools`]).
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

    /// The secrets of an instance on a shared database (PostgreSQL mode), from `lookup`
    /// (the environment, in [`super::Config::from_env`]): `JWT_SECRET` and
    /// `ENCRYPTION_KEY` must be set, and `PUBLIC_URL` too ([`require_shared_settings`]);
    /// nothing is generated or written.
    ///
    /// Errors: a missing variable (each one is named), or an `ENCRYPTION_KEY` that is not
    /// base64 of 32 bytes.
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

    /// Replaces the secrets of `DATA_DIR` with `JWT_SECRET` and `ENCRYPTION_KEY`, and adds
    /// `ENCRYPTION_KEYS_PREVIOUS`, where set in `settings`.
    ///
    /// Errors: a key that is not base64 of 32 bytes (the key is not quoted).
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

    /// The decoded `ENCRYPTION_KEY` and `ENCRYPTION_KEYS_PREVIOUS`, the keys of
    /// [`crate::crypto::SecretBox::new`].
    ///
    /// Errors: a key that is not base64 of 32 bytes.
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

/// The variables an instance on a shared database (PostgreSQL mode) must be given rather
/// than generate: every instance must sign and check tokens with the same `JWT_SECRET`,
/// seal and open credentials with the same `ENCRYPTION_KEY`, and name the same issuer and
/// links (`PUBLIC_URL`); keys generated into each instance's `DATA_DIR` would make every
/// instance reject the others' tokens (README.md § Running several instances).
pub const SHARED_SETTINGS: [&str; 3] = ["JWT_SECRET", "ENCRYPTION_KEY", "PUBLIC_URL"];

/// Checks that `lookup` has every one of [`SHARED_SETTINGS`] (a value of only spaces
/// counts as unset, as everywhere in the configuration).
///
/// Errors: names each missing variable, e.g. "DATABASE_URL is a PostgreSQL database,
/// which needs JWT_SECRET, ENCRYPTION_KEY and PUBLIC_URL set, the same on every instance;
/// missing: JWT_SECRET, PUBLIC_URL".
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
