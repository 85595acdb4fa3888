//! Integrations with third-party providers: the catalogue ([`catalog`]), the rules for
//! storing one — fields checked against its provider, credentials sealed with AES-256-GCM
//! bound to the owner and the integration ([`crate::crypto`]), only masked hints shown —
//! and the owner's use cases over them ([`service`]).

pub mod catalog;
pub mod service;

pub use self::service::{IntegrationError, Integrations};

use serde_json::{Map, Value};

use crate::{
    crypto::{credentials_aad, SecretBox},
    ids::{IntegrationId, UserId},
};

use self::catalog::{check_fields, mask, ProviderSpec};

/// Integrations one account may have.
pub const MAX_INTEGRATIONS: u32 = 50;
/// Longest integration name, in characters.
pub const MAX_NAME_CHARS: usize = app::api::limits::INTEGRATION_NAME_MAX;

/// Checked credentials and config of `provider`, sealed, with their hints.
pub struct Prepared {
    pub config: String,
    pub credentials_sealed: Vec<u8>,
    pub key_id: String,
    pub credential_hints: String,
}

/// Checks `credentials` and `config` against `provider` and seals the credentials for
/// `(user_id, integration_id)`. Errors: a 400 message (not objects, missing, unknown or
/// malformed field).
pub fn prepare(
    secrets: &SecretBox,
    provider: &ProviderSpec,
    user_id: &UserId,
    integration_id: &IntegrationId,
    credentials: &Value,
    config: Option<&Value>,
) -> Result<Prepared, String> {
    let credentials = credentials
        .as_object()
        .ok_or("credentials must be an object of the provider's credential fields")?;
    let empty = Map::new();
    let config = match config {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(map)) => map,
        Some(_) => return Err("config must be an object of the provider's config fields".into()),
    };
    let credentials = check_fields("credentials", provider.credential_fields, credentials)?;
    let config = check_fields("config", provider.config_fields, config)?;
    let hints: Map<String, Value> = credentials
        .iter()
        .map(|(name, value)| {
            let text = value
                .as_str()
                .map_or_else(|| value.to_string(), str::to_string);
            (name.clone(), Value::from(mask(&text)))
        })
        .collect();
    let plaintext = serde_json::to_vec(&credentials).map_err(|e| e.to_string())?;
    Ok(Prepared {
        config: Value::Object(config).to_string(),
        credentials_sealed: secrets.seal(&plaintext, &credentials_aad(user_id, integration_id)),
        key_id: secrets.current_key_id(),
        credential_hints: Value::Object(hints).to_string(),
    })
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::crypto::CryptoError;
    use crate::{
        domain::ProviderCode,
        store::integrations::{IntegrationRecord, IntegrationStatus},
    };

    #[test]
    fn credentials_are_sealed_for_their_row_and_hinted() {
        let secrets = SecretBox::new(&[9u8; 32], &[]);
        let slack = catalog::provider(ProviderCode::Slack);
        let credentials = json!({"botToken": "xoxb-1111-2222-secretvalue", "signingSecret": "0123456789abcdef0123456789abcdef"});
        let (u1, i1) = (UserId::from("u1"), IntegrationId::from("i1"));
        let p = prepare(&secrets, slack, &u1, &i1, &credentials, None).unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&p.credential_hints).unwrap(),
            json!({"botToken": "••••alue", "signingSecret": "••••cdef"})
        );
        let record = IntegrationRecord {
            id: i1,
            user_id: u1,
            provider_code: ProviderCode::Slack,
            name: "n".into(),
            agent_id: None,
            config: p.config,
            credentials_sealed: p.credentials_sealed,
            key_id: p.key_id,
            credential_hints: p.credential_hints,
            status: IntegrationStatus::Active,
            status_detail: None,
            public_id: None,
            inbound_secret_hash: None,
            created_at: chrono::Utc::now(),
            updated_at: chrono::Utc::now(),
        };
        assert_eq!(
            Value::Object(
                secrets
                    .open_credentials(&record.user_id, &record.id, &record.credentials_sealed)
                    .unwrap()
            ),
            credentials
        );
        let moved = IntegrationRecord {
            id: "i2".into(),
            ..record
        };
        assert_eq!(
            secrets.open_credentials(&moved.user_id, &moved.id, &moved.credentials_sealed),
            Err(CryptoError::Authentication)
        );
    }

    #[test]
    fn shapes_are_checked() {
        let secrets = SecretBox::new(&[9u8; 32], &[]);
        let web = catalog::provider(ProviderCode::Website);
        let (u, i) = (UserId::from("u"), IntegrationId::from("i"));
        assert!(prepare(&secrets, web, &u, &i, &json!([]), None).is_err());
        assert!(prepare(&secrets, web, &u, &i, &json!({}), Some(&json!(3))).is_err());
        let e = prepare(&secrets, web, &u, &i, &json!({}), None)
            .err()
            .unwrap();
        assert!(e.contains("config.allowedOrigins is required"), "{e}");
    }
}
