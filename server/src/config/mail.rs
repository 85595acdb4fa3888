//! The mail part: how the service's emails leave.

use std::path::Path;

use secrecy::SecretString;

use super::Settings;

/// What [`crate::mail::Mailer`] is built from.
#[derive(Clone)]
pub struct MailConfig {
    /// `SMTP_URL`, a lettre SMTP transport URL (`smtp://host:port`, `smtps://user:pass@host`).
    /// Unset: mail is written to [`MailConfig::outbox`] and its link logged.
    pub smtp_url: Option<SecretString>,
    /// `MAIL_FROM`, default `AgentChat <no-reply@localhost>`.
    pub from: String,
    /// `DATA_DIR/mail`: the folder mail is written to while `SMTP_URL` is unset.
    pub outbox: std::path::PathBuf,
}

impl MailConfig {
    /// The defaults for a service keeping its files in `data_dir`, with no environment
    /// read: no SMTP server, mail written to `data_dir/mail`.
    pub fn new(data_dir: &Path) -> Self {
        Self {
            smtp_url: None,
            from: "AgentChat <no-reply@localhost>".into(),
            outbox: data_dir.join("mail"),
        }
    }

    /// Takes `SMTP_URL` and `MAIL_FROM` from `settings`.
    pub(super) fn apply(&mut self, settings: &Settings) {
        self.smtp_url = settings.smtp_url.clone().map(SecretString::from);
        self.from = settings.mail_from.clone();
    }
}
