//! API key material (docs/api.md § API key, § API keys): `key_` + base64url of 32
//! random bytes, shown once; only its SHA-256 is stored and compared in constant time.

use base64::{engine::general_purpose::URL_SAFE_NO_PAD, Engine};
use rand::RngCore;
use subtle::ConstantTimeEq;

/// The prefix every API key starts with.
pub const KEY_PREFIX: &str = "key_";
/// How many leading characters of a key are listed (docs/api.md: the first 12).
pub const LISTED_PREFIX_LEN: usize = 12;

/// A freshly generated key: the secret (shown once), its listed prefix and its hash.
pub struct GeneratedKey {
    pub key: String,
    pub prefix: String,
    pub hash: String,
}

/// Generates a key from 32 bytes of the OS random source.
pub fn generate() -> GeneratedKey {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    let key = format!("{KEY_PREFIX}{}", URL_SAFE_NO_PAD.encode(bytes));
    GeneratedKey {
        prefix: key[..LISTED_PREFIX_LEN].to_string(),
        hash: sha256_hex(&key),
        key,
    }
}

/// Lower-case hex SHA-256 of a key ([`crate::crypto::sha256_hex`]); also used for email
/// tokens and sign-in flow secrets.
pub use crate::crypto::sha256_hex;

/// Constant-time equality of two hashes (or any strings of secret-derived bytes).
pub fn constant_time_eq(a: &str, b: &str) -> bool {
    a.as_bytes().ct_eq(b.as_bytes()).into()
}

/// Whether `value` has the shape of an API key (so it is not tried as a JWT).
pub fn looks_like_key(value: &str) -> bool {
    value.starts_with(KEY_PREFIX) && value.len() == KEY_PREFIX.len() + 43
}

/// A random URL-safe token of 32 bytes, for email links and CSRF.
pub fn random_token() -> String {
    let mut bytes = [0u8; 32];
    rand::rngs::OsRng.fill_bytes(&mut bytes);
    URL_SAFE_NO_PAD.encode(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_have_the_contract_format() {
        let k = generate();
        assert!(k.key.starts_with("key_"));
        assert_eq!(k.key.len(), 47);
        let raw = URL_SAFE_NO_PAD.decode(&k.key[4..]).unwrap();
        assert_eq!(raw.len(), 32);
        assert_eq!(k.prefix, &k.key[..12]);
        assert_eq!(k.hash, sha256_hex(&k.key));
        assert!(looks_like_key(&k.key));
        assert_ne!(generate().key, k.key);
        assert!(constant_time_eq(&k.hash, &sha256_hex(&k.key)));
        assert!(!constant_time_eq(&k.hash, &sha256_hex("key_other")));
    }

    #[test]
    fn hashes_are_lowercase_hex_sha256() {
        // FIPS 180-2 test vector for "abc"; stored key and link hashes depend on this form.
        assert_eq!(
            sha256_hex("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
