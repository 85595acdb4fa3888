//! Encryption of stored credentials: AES-256-GCM (NIST SP 800-38D, RustCrypto `aes-gcm`)
//! under `ENCRYPTION_KEY`, with associated data naming the row, so a ciphertext moved to
//! another row fails to open. Sealed form: `[key id: 8][nonce: 12][ciphertext + 16-byte tag]`;
//! the key id (first 8 bytes of the key's SHA-256) lets rows sealed before a rotation open
//! with `ENCRYPTION_KEYS_PREVIOUS`. Random 96-bit nonces stay far below SP 800-38D § 8.3's
//! 2^32 messages per key. Also [`sha256_hex`].

use aes_gcm::{
    aead::{Aead, KeyInit, Payload},
    Aes256Gcm, Nonce,
};
use rand::RngCore;
use sha2::{Digest, Sha256};

use crate::ids::{IntegrationId, UserId};

/// Bytes of the key id at the start of a sealed value.
const KEY_ID_LEN: usize = 8;
/// Bytes of the random nonce.
const NONCE_LEN: usize = 12;

/// Why a sealed value did not open.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum CryptoError {
    /// Shorter than a key id, a nonce and a tag.
    #[error("the sealed value is truncated")]
    Truncated,
    /// Sealed under a key this server does not have.
    #[error("the sealed value was encrypted with a key this server does not have")]
    UnknownKey,
    /// Tampered, or sealed for another row (associated data differs).
    #[error("the sealed value failed authentication")]
    Authentication,
}

/// An identified AES-256 key.
#[derive(Clone)]
struct VersionedKey {
    id: [u8; KEY_ID_LEN],
    cipher: Aes256Gcm,
}

impl VersionedKey {
    fn new(key: &[u8; 32]) -> Self {
        let digest = Sha256::digest(key);
        let mut id = [0u8; KEY_ID_LEN];
        id.copy_from_slice(&digest[..KEY_ID_LEN]);
        Self {
            id,
            cipher: Aes256Gcm::new(key.into()),
        }
    }
}

/// Seals with the current key; opens with it or any previous key.
#[derive(Clone)]
pub struct SecretBox {
    current: VersionedKey,
    previous: Vec<VersionedKey>,
}

impl SecretBox {
    /// A box over the current key and the keys it replaced.
    pub fn new(current: &[u8; 32], previous: &[[u8; 32]]) -> Self {
        Self {
            current: VersionedKey::new(current),
            previous: previous.iter().map(VersionedKey::new).collect(),
        }
    }

    /// Hex id of the current key (stored next to sealed values, for rotation).
    pub fn current_key_id(&self) -> String {
        hex::encode(self.current.id)
    }

    /// Encrypts `plaintext`, binding it to `aad` (e.g. `owner id | row id`).
    pub fn seal(&self, plaintext: &[u8], aad: &[u8]) -> Vec<u8> {
        let mut nonce = [0u8; NONCE_LEN];
        rand::rngs::OsRng.fill_bytes(&mut nonce);
        let ciphertext = self
            .current
            .cipher
            .encrypt(
                Nonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad,
                },
            )
            .expect("AES-GCM encryption of an in-memory buffer cannot fail");
        let mut out = Vec::with_capacity(KEY_ID_LEN + NONCE_LEN + ciphertext.len());
        out.extend_from_slice(&self.current.id);
        out.extend_from_slice(&nonce);
        out.extend_from_slice(&ciphertext);
        out
    }

    /// Decrypts a value [`SecretBox::seal`] made with the same `aad`. Errors: [`CryptoError`]
    /// (truncated, tampered, moved, or an unknown key).
    pub fn open(&self, sealed: &[u8], aad: &[u8]) -> Result<Vec<u8>, CryptoError> {
        if sealed.len() < KEY_ID_LEN + NONCE_LEN + 16 {
            return Err(CryptoError::Truncated);
        }
        let (id, rest) = sealed.split_at(KEY_ID_LEN);
        let (nonce, ciphertext) = rest.split_at(NONCE_LEN);
        let key = std::iter::once(&self.current)
            .chain(&self.previous)
            .find(|k| k.id == id)
            .ok_or(CryptoError::UnknownKey)?;
        key.cipher
            .decrypt(
                Nonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad,
                },
            )
            .map_err(|_| CryptoError::Authentication)
    }

    /// Whether `sealed` was made with an older key (and should be sealed again).
    pub fn is_stale(&self, sealed: &[u8]) -> bool {
        sealed.get(..KEY_ID_LEN) != Some(&self.current.id[..])
    }
}

/// SHA-256 (FIPS 180-4) as 64 lower-case hex digits: the form of every stored SHA-256 (API
/// keys, email tokens, sign-in secrets, crawled pages' content hashes).
pub fn sha256_hex(bytes: impl AsRef<[u8]>) -> String {
    hex::encode(Sha256::digest(bytes.as_ref()))
}

/// Associated data binding an integration's sealed credentials to their row, so that a
/// ciphertext moved to another row does not open.
pub fn credentials_aad(user_id: &UserId, integration_id: &IntegrationId) -> Vec<u8> {
    format!("integration-credentials|{user_id}|{integration_id}").into_bytes()
}

impl SecretBox {
    /// The sealed credentials of integration `integration_id` of `user_id`, in clear: a JSON
    /// object. Errors: tampered, moved from another row, not an object, or sealed with a key
    /// this server does not have.
    pub fn open_credentials(
        &self,
        user_id: &UserId,
        integration_id: &IntegrationId,
        sealed: &[u8],
    ) -> Result<serde_json::Map<String, serde_json::Value>, CryptoError> {
        let plaintext = self.open(sealed, &credentials_aad(user_id, integration_id))?;
        match serde_json::from_slice(&plaintext) {
            Ok(serde_json::Value::Object(map)) => Ok(map),
            _ => Err(CryptoError::Authentication),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_hex_gives_the_fips_180_4_digest_in_lower_case_hex() {
        // FIPS 180-4 example: the one-block message "abc".
        let abc = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";
        assert_eq!(sha256_hex("abc"), abc);
        assert_eq!(sha256_hex(b"abc"), abc);
        assert_eq!(sha256_hex(String::from("abc")), abc);
        assert_eq!(
            sha256_hex(""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }

    #[test]
    fn a_sealed_value_opens_only_with_its_associated_data() {
        let sb = SecretBox::new(&[7u8; 32], &[]);
        let sealed = sb.seal(b"xoxb-secret", b"user-1|int-1");
        assert!(!sealed.windows(11).any(|w| w == b"xoxb-secret"));
        assert_eq!(sb.open(&sealed, b"user-1|int-1").unwrap(), b"xoxb-secret");
        assert_eq!(
            sb.open(&sealed, b"user-1|int-2"),
            Err(CryptoError::Authentication)
        );
        assert_eq!(
            sb.open(&sealed, b"user-2|int-1"),
            Err(CryptoError::Authentication)
        );
    }

    #[test]
    fn tampering_and_truncation_are_detected() {
        let sb = SecretBox::new(&[7u8; 32], &[]);
        let mut sealed = sb.seal(b"value", b"aad");
        let last = sealed.len() - 1;
        sealed[last] ^= 1;
        assert_eq!(sb.open(&sealed, b"aad"), Err(CryptoError::Authentication));
        assert_eq!(sb.open(&sealed[..20], b"aad"), Err(CryptoError::Truncated));
    }

    #[test]
    fn rotation_keeps_old_values_readable() {
        let old = SecretBox::new(&[1u8; 32], &[]);
        let sealed = old.seal(b"value", b"aad");
        let rotated = SecretBox::new(&[2u8; 32], &[[1u8; 32]]);
        assert!(rotated.is_stale(&sealed));
        assert_eq!(rotated.open(&sealed, b"aad").unwrap(), b"value");
        assert!(!rotated.is_stale(&rotated.seal(b"value", b"aad")));
        let without_old = SecretBox::new(&[2u8; 32], &[]);
        assert_eq!(
            without_old.open(&sealed, b"aad"),
            Err(CryptoError::UnknownKey)
        );
        assert_ne!(old.current_key_id(), rotated.current_key_id());
        assert_eq!(rotated.current_key_id().len(), 16);
    }
}
