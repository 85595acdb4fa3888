//! Outgoing mail through lettre: SMTP when `SMTP_URL` is set, otherwise `.eml` files in
//! `DATA_DIR/mail` with the link logged, so the default run needs no mail server.

use std::path::PathBuf;

use anyhow::Context;
use lettre::{
    message::{header::ContentType, Mailbox},
    AsyncFileTransport, AsyncSmtpTransport, AsyncTransport, Message, Tokio1Executor,
};
use secrecy::ExposeSecret;

use crate::config::MailConfig;

#[derive(Clone)]
enum Transport {
    Smtp(AsyncSmtpTransport<Tokio1Executor>),
    File(AsyncFileTransport<Tokio1Executor>, PathBuf),
}

/// Sends the service's emails.
#[derive(Clone)]
pub struct Mailer {
    transport: Transport,
    from: Mailbox,
}

/// One email to send.
pub struct Mail {
    /// Recipient address.
    pub to: String,
    /// Subject line.
    pub subject: String,
    /// Plain-text body.
    pub body: String,
    /// The action link inside, logged when mail goes to files (development mode).
    pub link: Option<String>,
}

impl Mailer {
    /// A mailer for `config`. Errors: an invalid `SMTP_URL` or `MAIL_FROM`, or an
    /// uncreatable mail folder.
    pub fn new(config: &MailConfig) -> anyhow::Result<Self> {
        let from: Mailbox = config
            .from
            .parse()
            .context("MAIL_FROM is not a valid mailbox")?;
        let transport = match &config.smtp_url {
            Some(url) => Transport::Smtp(
                AsyncSmtpTransport::<Tokio1Executor>::from_url(url.expose_secret())
                    .context("SMTP_URL is not a valid SMTP transport URL")?
                    .build(),
            ),
            None => {
                let dir = config.outbox.clone();
                std::fs::create_dir_all(&dir)
                    .with_context(|| format!("cannot create {}", dir.display()))?;
                Transport::File(AsyncFileTransport::new(&dir), dir)
            }
        };
        Ok(Self { transport, from })
    }

    /// Sends `mail`. Errors: an invalid recipient or a transport failure.
    pub async fn send(&self, mail: Mail) -> anyhow::Result<()> {
        let message = Message::builder()
            .from(self.from.clone())
            .to(mail.to.parse().context("invalid recipient")?)
            .subject(&mail.subject)
            .header(ContentType::TEXT_PLAIN)
            .body(mail.body)?;
        match &self.transport {
            Transport::Smtp(smtp) => {
                smtp.send(message).await.context("SMTP delivery failed")?;
            }
            Transport::File(files, dir) => {
                let id = files
                    .send(message)
                    .await
                    .context("writing the mail file failed")?;
                // Development mode only: no SMTP server, so the operator needs the link.
                tracing::info!(
                    file = %dir.join(format!("{id}.eml")).display(),
                    link = mail.link.as_deref().unwrap_or(""),
                    "mail written to file (SMTP_URL is not set)"
                );
            }
        }
        Ok(())
    }

    /// Sends `mail` in the background so the request's timing does not depend on it;
    /// failures are logged.
    pub fn send_later(&self, mail: Mail) {
        let mailer = self.clone();
        tokio::spawn(async move {
            if let Err(err) = mailer.send(mail).await {
                tracing::error!(error = %err, "sending mail failed");
            }
        });
    }
}
