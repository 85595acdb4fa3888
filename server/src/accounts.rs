//! Accounts: sign-up, verification, password sign-in and reset, and how third-party
//! identities tie to accounts (docs/api.md § Auth); sessions are [`AuthService`]'s.

use std::{net::IpAddr, sync::Arc, time::Duration as StdDuration};

use chrono::Duration;

use crate::{
    auth::{
        keys,
        oauth::{OAuth, OAuthError, OAuthProvider, ProviderIdentity},
        AuthError, AuthService, IssuedSession,
    },
    clock::Clock,
    domain::{Email, Password, PASSWORD_MAX},
    ids::UserId,
    mail::{Mail, Mailer},
    store::{
        identity::{ExchangeCodeRecord, IdentityRecord, OAuthFlowRecord},
        AccountStore, IdentityStore, NewUser, StoreError, TokenPurpose, UserRecord,
    },
};

/// How long an email verification link works (24 hours; docs/api.md § Auth).
pub const VERIFY_TTL: Duration = Duration::hours(24);
/// How long a password reset link works (OWASP Forgot Password Cheat Sheet: short-lived).
pub const RESET_TTL: Duration = Duration::hours(1);
/// How long a started third-party sign-in may take (RFC 6749 § 10.12: short-lived states).
pub const FLOW_TTL: Duration = Duration::minutes(10);
/// How long a native client's one-time exchange code works.
pub const EXCHANGE_TTL: Duration = Duration::seconds(60);

/// Why an account operation was refused. The texts are the messages clients are shown.
#[derive(Debug, thiserror::Error)]
pub enum AccountError {
    #[error("An account with this email already exists")]
    EmailTaken,
    #[error("This verification link is invalid, already used or expired; request a new one")]
    InvalidVerification,
    #[error("This reset link is invalid, already used or expired; request a new one")]
    InvalidReset,
    #[error("This sign-in code is invalid, already used or expired; sign in again")]
    InvalidExchangeCode,
    /// An exchange code whose account was deleted meanwhile.
    #[error("This account no longer exists")]
    AccountGone,
    #[error("Invalid email or password")]
    WrongCredentials,
    #[error("Email address not verified. Open the link we emailed you, or request a new one.")]
    EmailNotVerified,
    /// Too many failed sign-ins ([`crate::auth::throttle`]); try again after `retry_after`.
    #[error("too many failed sign-ins")]
    Throttled { retry_after: StdDuration },
    /// The signed-in account does not exist (it was deleted).
    #[error("the signed-in account does not exist")]
    UnknownUser,
    #[error("{} is not connected to this account", .0.name())]
    NotConnected(OAuthProvider),
    #[error(
        "{} is this account's only way to sign in: set a password (forgot password) or connect another provider first",
        .0.name()
    )]
    LastSignIn(OAuthProvider),
    #[error(transparent)]
    Auth(#[from] AuthError),
    #[error(transparent)]
    Store(#[from] StoreError),
    /// Anything else (hashing failed); not shown to clients.
    #[error(transparent)]
    Internal(#[from] anyhow::Error),
}

/// The fields of a new account, parsed and bounded by the caller.
#[derive(Debug)]
pub struct SignUp {
    pub name: String,
    pub email: Email,
    pub password: Password,
    pub company: Option<String>,
    pub country: Option<String>,
    pub phone: Option<String>,
}

/// Who is signing in, for the session record and the failed sign-in throttle.
#[derive(Debug, Clone)]
pub struct Client {
    pub ip: IpAddr,
    pub user_agent: Option<String>,
}

/// What the provider's redirect back brought, as the callback received it.
#[derive(Debug)]
pub struct Callback<'a> {
    pub provider: OAuthProvider,
    pub state: Option<&'a str>,
    pub code: Option<&'a str>,
    pub error: Option<&'a str>,
    /// The browser-binding cookie's value, when the browser sent it.
    pub browser_binding: Option<String>,
    pub client: Client,
}

/// A third-party sign-in that succeeded.
pub enum CallbackOutcome {
    /// The identity is now connected to the signed-in account that started the flow.
    Connected(OAuthProvider),
    /// A browser sign-in: the new session.
    SignedIn(IssuedSession),
    /// A native client's sign-in: `code` for its loopback `redirect_uri` ([`Accounts::exchange`]).
    ExchangeCode { redirect_uri: String, code: String },
}

/// A failed third-party sign-in (nothing created): the message and the flow's origin, if known.
#[derive(Debug)]
pub struct CallbackRefusal {
    pub message: String,
    pub client_redirect: Option<String>,
    pub connecting: bool,
}

/// The accounts service: one per process, cheap to clone.
#[derive(Clone)]
pub struct Accounts {
    users: Arc<dyn AccountStore>,
    identities: Arc<dyn IdentityStore>,
    auth: AuthService,
    oauth: OAuth,
    mailer: Mailer,
    clock: Clock,
    /// `PUBLIC_URL`, the base of emailed links.
    public_url: String,
}

type Result<T> = std::result::Result<T, AccountError>;

impl Accounts {
    pub fn new(
        users: Arc<dyn AccountStore>,
        identities: Arc<dyn IdentityStore>,
        auth: AuthService,
        oauth: OAuth,
        mailer: Mailer,
        public_url: &str,
    ) -> Self {
        Self {
            users,
            identities,
            clock: auth.clock.clone(),
            auth,
            oauth,
            mailer,
            public_url: public_url.to_string(),
        }
    }

    /// Creates an unverified account and mails its link. Errors: [`AccountError::EmailTaken`].
    pub async fn sign_up(&self, input: SignUp) -> Result<UserRecord> {
        if self.users.user_by_email(&input.email).await?.is_some() {
            return Err(AccountError::EmailTaken);
        }
        let password_hash = self.auth.hasher.hash(input.password.expose()).await?;
        let user = self
            .users
            .create_user(NewUser {
                id: UserId::new(),
                email: input.email,
                name: input.name,
                password_hash: Some(password_hash),
                company: input.company,
                country: input.country,
                phone: input.phone,
                email_verified: false,
                now: self.clock.now(),
            })
            .await
            .map_err(|e| match e {
                StoreError::Conflict(_) => AccountError::EmailTaken,
                e => e.into(),
            })?;
        self.send_link(&user, TokenPurpose::VerifyEmail).await?;
        Ok(user)
    }

    /// Verifies the emailed `token`'s address; false if unknown, used, expired or voided.
    pub async fn verify_email(&self, token: &str) -> Result<bool> {
        let now = self.clock.now();
        let Some(user_id) = self
            .users
            .consume_email_token(TokenPurpose::VerifyEmail, &keys::sha256_hex(token), now)
            .await?
        else {
            return Ok(false);
        };
        self.users.mark_email_verified(&user_id, now).await?;
        Ok(true)
    }

    /// Mails a new verification link to `email`'s unverified account, at most once a minute; the
    /// caller answers the same either way.
    pub async fn resend_verification(&self, email: &Email) -> Result<()> {
        if let Some(user) = self.users.user_by_email(email).await? {
            if user.email_verified_at.is_none()
                && !self.cooling_down(TokenPurpose::VerifyEmail, email).await
            {
                self.send_link(&user, TokenPurpose::VerifyEmail).await?;
            }
        }
        Ok(())
    }

    /// Checks a password sign-in and starts a session; failures are throttled. Errors:
    /// [`AccountError::Throttled`], [`AccountError::WrongCredentials`] (also unknown email or no
    /// password), [`AccountError::EmailNotVerified`].
    pub async fn sign_in(
        &self,
        email: &Email,
        password: &str,
        client: Client,
    ) -> Result<(UserRecord, IssuedSession)> {
        let user = self.users.user_by_email(email).await?;
        let throttle = &self.auth.throttle;
        if let Some(wait) = throttle
            .blocked(email.as_str(), client.ip, user.as_ref().map(|u| &u.id))
            .await
        {
            crate::metrics::refused(crate::metrics::Refusal::SignIn);
            return Err(AccountError::Throttled { retry_after: wait });
        }
        let hash = user.as_ref().and_then(|u| u.password_hash.as_deref());
        // An implausibly long password is still hashed (with an empty one), so that its
        // answer takes as long as any other.
        let plausible = password.chars().count() <= PASSWORD_MAX;
        let matches = self
            .auth
            .hasher
            .verify(hash, if plausible { password } else { "" })
            .await?
            && plausible;
        let Some(user) = user.filter(|_| matches) else {
            throttle.failed(email.as_str(), client.ip).await;
            return Err(AccountError::WrongCredentials);
        };
        tracing::Span::current().record("user.id", user.id.as_str());
        if user.email_verified_at.is_none() {
            return Err(AccountError::EmailNotVerified);
        }
        throttle
            .succeeded(email.as_str(), client.ip, &user.id)
            .await;
        let issued = self
            .auth
            .start_session(&user.id, client.user_agent, Some(client.ip))
            .await?;
        Ok((user, issued))
    }

    /// Mails a reset link to `email`'s account, at most once a minute; the caller answers the same.
    pub async fn forgot_password(&self, email: &Email) -> Result<()> {
        if let Some(user) = self.users.user_by_email(email).await? {
            if !self.cooling_down(TokenPurpose::ResetPassword, email).await {
                self.send_link(&user, TokenPurpose::ResetPassword).await?;
            }
        }
        Ok(())
    }

    /// Sets a new password with a reset `token`, verifies the address, ends every session and voids
    /// other links; answers the account id. Errors: [`AccountError::InvalidReset`].
    pub async fn reset_password(&self, token: &str, password: Password) -> Result<UserId> {
        let now = self.clock.now();
        let user_id = self
            .users
            .consume_email_token(TokenPurpose::ResetPassword, &keys::sha256_hex(token), now)
            .await?
            .ok_or(AccountError::InvalidReset)?;
        let hash = self.auth.hasher.hash(password.expose()).await?;
        self.users.set_password_hash(&user_id, &hash, now).await?;
        self.users.mark_email_verified(&user_id, now).await?;
        self.auth
            .end_all_sessions(&user_id, "password_reset")
            .await?;
        Ok(user_id)
    }

    /// The signed-in account. Errors: [`AccountError::UnknownUser`].
    pub async fn user(&self, user_id: &UserId) -> Result<UserRecord> {
        self.users
            .user_by_id(user_id)
            .await?
            .ok_or(AccountError::UnknownUser)
    }

    /// The account's identities, oldest first, and whether it has a password.
    /// Errors: [`AccountError::UnknownUser`].
    pub async fn sign_in_methods(&self, user_id: &UserId) -> Result<(Vec<IdentityRecord>, bool)> {
        let user = self.user(user_id).await?;
        let identities = self.identities.identities(user_id).await?;
        Ok((identities, user.password_hash.is_some()))
    }

    /// Disconnects `provider` while another way to sign in remains.
    /// Errors: [`AccountError::NotConnected`], [`AccountError::LastSignIn`].
    pub async fn disconnect(&self, user_id: &UserId, provider: OAuthProvider) -> Result<()> {
        match self.identities.unlink_identity(user_id, provider).await {
            Ok(()) => Ok(()),
            Err(StoreError::NotFound) => Err(AccountError::NotConnected(provider)),
            Err(StoreError::Conflict(_)) => Err(AccountError::LastSignIn(provider)),
            Err(e) => Err(e.into()),
        }
    }

    /// Starts a third-party sign-in (or connection, `connect_to`) bound to `browser_binding`, valid
    /// once for [`FLOW_TTL`]; answers the provider URL. Errors: provider or store unreachable.
    pub async fn begin_flow(
        &self,
        provider: OAuthProvider,
        browser_binding: &str,
        connect_to: Option<UserId>,
        client_redirect: Option<String>,
    ) -> std::result::Result<String, OAuthError> {
        let request = self.oauth.authorization_request(provider).await?;
        let now = self.clock.now();
        let flow = OAuthFlowRecord {
            state_hash: keys::sha256_hex(&request.state),
            provider,
            browser_hash: keys::sha256_hex(browser_binding),
            pkce_verifier: request.pkce_verifier,
            nonce: request.nonce,
            link_user_id: connect_to,
            client_redirect,
            expires_at: now + FLOW_TTL,
            created_at: now,
        };
        if let Err(e) = self.identities.create_oauth_flow(&flow).await {
            tracing::error!(error = %e, "cannot store a sign-in flow");
            return Err(OAuthError::Unreachable("AgentChat"));
        }
        Ok(request.url)
    }

    /// Finishes a third-party sign-in: takes the flow once, checks provider, expiry and browser,
    /// then signs in, creates a verified account or refuses (docs/security.md § Third-party
    /// sign-in).
    /// Errors (the outer `Result`): the store or the session start failed.
    pub async fn finish_flow(
        &self,
        callback: Callback<'_>,
    ) -> Result<std::result::Result<CallbackOutcome, CallbackRefusal>> {
        let refuse = |message: String, client_redirect: Option<String>, connecting: bool| {
            Ok(Err(CallbackRefusal {
                message,
                client_redirect,
                connecting,
            }))
        };
        let Some(state) = callback.state.filter(|s| !s.is_empty()) else {
            return refuse(
                "The sign-in answer had no state; start again".into(),
                None,
                false,
            );
        };
        let Some(flow) = self
            .identities
            .take_oauth_flow(&keys::sha256_hex(state))
            .await?
        else {
            return refuse(
                "This sign-in link has expired or was already used; start again".into(),
                None,
                false,
            );
        };
        let connecting = flow.link_user_id.is_some();
        let fail = |message: String| refuse(message, flow.client_redirect.clone(), connecting);
        let now = self.clock.now();
        let same_browser = callback
            .browser_binding
            .is_some_and(|b| keys::constant_time_eq(&keys::sha256_hex(&b), &flow.browser_hash));
        let provider = callback.provider;
        if flow.provider != provider || flow.expires_at <= now || !same_browser {
            return fail(
                "This sign-in was started in another browser or has expired; start again".into(),
            );
        }
        if let Some(error) = callback.error {
            return fail(if error == "access_denied" {
                format!("Sign-in with {} was cancelled", provider.name())
            } else {
                format!(
                    "{} reported an error ({}); start again",
                    provider.name(),
                    crate::auth::oauth::safe_text(error)
                )
            });
        }
        let Some(code) = callback.code.filter(|c| !c.is_empty()) else {
            return fail("The sign-in answer had no code; start again".into());
        };
        let identity = match self
            .oauth
            .identity(provider, code, &flow.pkce_verifier, flow.nonce.as_deref())
            .await
        {
            Ok(identity) => identity,
            Err(e) => {
                tracing::info!(error = %e, "third-party sign-in failed");
                return fail(e.to_string());
            }
        };
        if let Some(user_id) = &flow.link_user_id {
            return match self.connect(provider, &identity, user_id).await? {
                Ok(()) => Ok(Ok(CallbackOutcome::Connected(provider))),
                Err(message) => fail(message),
            };
        }
        let user = match self.account_for(provider, &identity).await? {
            Ok(user) => user,
            Err(message) => return fail(message),
        };
        tracing::Span::current().record("user.id", user.id.as_str());
        if let Some(redirect_uri) = flow.client_redirect.clone() {
            let code = keys::random_token();
            self.identities
                .create_exchange_code(&ExchangeCodeRecord {
                    code_hash: keys::sha256_hex(&code),
                    user_id: user.id.clone(),
                    expires_at: now + EXCHANGE_TTL,
                    created_at: now,
                })
                .await?;
            return Ok(Ok(CallbackOutcome::ExchangeCode { redirect_uri, code }));
        }
        let issued = self
            .auth
            .start_session(
                &user.id,
                callback.client.user_agent,
                Some(callback.client.ip),
            )
            .await?;
        Ok(Ok(CallbackOutcome::SignedIn(issued)))
    }

    /// Trades a native client's one-time code ([`EXCHANGE_TTL`]) for a session.
    /// Errors: [`AccountError::InvalidExchangeCode`], [`AccountError::AccountGone`].
    pub async fn exchange(
        &self,
        code: &str,
        client: Client,
    ) -> Result<(UserRecord, IssuedSession)> {
        let user_id = self
            .identities
            .take_exchange_code(&keys::sha256_hex(code), self.clock.now())
            .await?
            .ok_or(AccountError::InvalidExchangeCode)?;
        let user = self
            .users
            .user_by_id(&user_id)
            .await?
            .ok_or(AccountError::AccountGone)?;
        let issued = self
            .auth
            .start_session(&user.id, client.user_agent, Some(client.ip))
            .await?;
        Ok((user, issued))
    }

    /// The account `identity` signs into, existing or new verified; `Err(message)` to refuse.
    async fn account_for(
        &self,
        provider: OAuthProvider,
        identity: &ProviderIdentity,
    ) -> Result<std::result::Result<UserRecord, String>> {
        if let Some(linked) = self
            .identities
            .identity(provider, &identity.subject)
            .await?
        {
            return Ok(self
                .users
                .user_by_id(&linked.user_id)
                .await?
                .ok_or_else(|| "This account no longer exists".to_string()));
        }
        if !identity.email_verified {
            return Ok(Err(format!(
                "Your {} email address is not verified. Verify it with {} first, or sign up with email and password",
                provider.name(),
                provider.name()
            )));
        }
        let Ok(email) = Email::parse(&identity.email) else {
            return Ok(Err(format!(
                "{} gave an email address AgentChat cannot use",
                provider.name()
            )));
        };
        if self.users.user_by_email(&email).await?.is_some() {
            return Ok(Err(existing_account_message(provider)));
        }
        let now = self.clock.now();
        let user_id = UserId::new();
        let name: String = identity
            .name
            .trim()
            .chars()
            .take(app::api::limits::USER_NAME_MAX)
            .collect();
        let created = self
            .identities
            .create_user_with_identity(
                NewUser {
                    id: user_id.clone(),
                    email: email.clone(),
                    name: if name.is_empty() {
                        email.as_str().into()
                    } else {
                        name
                    },
                    password_hash: None,
                    company: None,
                    country: None,
                    phone: None,
                    email_verified: true,
                    now,
                },
                &IdentityRecord {
                    provider,
                    subject: identity.subject.clone(),
                    user_id,
                    email: email.as_str().into(),
                    created_at: now,
                },
            )
            .await;
        match created {
            Ok(user) => Ok(Ok(user)),
            // A concurrent sign-in or signup took the email or the identity.
            Err(StoreError::Conflict(_)) => Ok(Err(existing_account_message(provider))),
            Err(e) => Err(e.into()),
        }
    }

    /// Connects `identity` to `user_id`. `Err(message)` when it cannot be.
    async fn connect(
        &self,
        provider: OAuthProvider,
        identity: &ProviderIdentity,
        user_id: &UserId,
    ) -> Result<std::result::Result<(), String>> {
        if let Some(linked) = self
            .identities
            .identity(provider, &identity.subject)
            .await?
        {
            return Ok(if &linked.user_id == user_id {
                Ok(())
            } else {
                Err(format!(
                    "This {} account is already connected to another AgentChat account",
                    provider.name()
                ))
            });
        }
        if !identity.email_verified {
            return Ok(Err(format!(
                "Your {} email address is not verified. Verify it with {} first",
                provider.name(),
                provider.name()
            )));
        }
        let linked = self
            .identities
            .link_identity(&IdentityRecord {
                provider,
                subject: identity.subject.clone(),
                user_id: user_id.clone(),
                email: identity.email.clone(),
                created_at: self.clock.now(),
            })
            .await;
        match linked {
            Ok(()) => Ok(Ok(())),
            Err(StoreError::Conflict(_)) => Ok(Err(format!(
                "Another {} account is already connected; disconnect it first",
                provider.name()
            ))),
            Err(e) => Err(e.into()),
        }
    }

    /// Whether a `purpose` mail to `email` went out in the last minute (mail-bombing guard).
    async fn cooling_down(&self, purpose: TokenPurpose, email: &Email) -> bool {
        let key = format!("{}|{}", purpose.as_str(), email);
        self.auth.mail_cooldown.cooling_down(&key).await
    }

    /// Creates and mails a single-use link for `user`.
    async fn send_link(&self, user: &UserRecord, purpose: TokenPurpose) -> Result<()> {
        let now = self.clock.now();
        let token = keys::random_token();
        let ttl = match purpose {
            TokenPurpose::VerifyEmail => VERIFY_TTL,
            TokenPurpose::ResetPassword => RESET_TTL,
        };
        self.users
            .create_email_token(&user.id, purpose, &keys::sha256_hex(&token), now + ttl, now)
            .await?;
        let base = &self.public_url;
        let (subject, link, body) = match purpose {
            TokenPurpose::VerifyEmail => {
                let link = format!("{base}/api/auth/verify-email?token={token}");
                let body = format!(
                    "Hello {},\n\nWelcome to AgentChat. Confirm your email address by opening this link:\n\n{link}\n\n\
                     The link works once and expires in 24 hours. If you did not sign up, ignore this email.\n",
                    user.name
                );
                ("Verify your AgentChat email address", link, body)
            }
            TokenPurpose::ResetPassword => {
                let link = format!("{base}/reset-password?token={token}");
                let body = format!(
                    "Hello {},\n\nSomeone asked to reset the password of your AgentChat account. To choose a new \
                     password, open this link:\n\n{link}\n\nThe link works once and expires in 1 hour. Resetting \
                     signs you out everywhere. If you did not ask for this, ignore this email.\n",
                    user.name
                );
                ("Reset your AgentChat password", link, body)
            }
        };
        self.mailer.send_later(Mail {
            to: user.email.clone(),
            subject: subject.into(),
            body,
            link: Some(link),
        });
        Ok(())
    }
}

fn existing_account_message(provider: OAuthProvider) -> String {
    format!(
        "An account with this email address already exists. Sign in with your password, then connect {} from your account page",
        provider.name()
    )
}
