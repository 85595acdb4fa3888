//! Cases of accounts, email tokens, sessions and API keys.

use std::{collections::HashSet, sync::Arc};

use chrono::{Duration, Utc};

use super::{in_parallel, new_user, user};
use agentchat::{
    domain::OAuthProvider,
    ids::{ApiKeyId, SessionId, UserId},
    store::{
        identity::IdentityRecord, ApiKeyRecord, Conflict, SessionRecord, Store, StoreError,
        TokenPurpose,
    },
};

/// [`agentchat::store::AccountStore::create_user`]: of eight creations with one email at
/// once, exactly one succeeds and the others answer `Conflict(Email)`; so does a later one.
pub async fn an_email_is_taken_once(store: Arc<dyn Store>) {
    let results = in_parallel(8, |i| {
        let store = store.clone();
        async move {
            store
                .create_user(new_user(&format!("u{i}"), "same@example.com"))
                .await
        }
    })
    .await;
    let mut created = Vec::new();
    for result in results {
        match result {
            Ok(user) => created.push(user.id),
            Err(StoreError::Conflict(Conflict::Email)) => {}
            Err(err) => panic!("a creation failed otherwise: {err}"),
        }
    }
    assert_eq!(created.len(), 1, "one account per email");
    let again = store
        .create_user(new_user("late", "same@example.com"))
        .await;
    assert!(
        matches!(again, Err(StoreError::Conflict(Conflict::Email))),
        "{again:?}"
    );
    let found = store
        .user_by_email(&agentchat::domain::Email::parse("same@example.com").unwrap())
        .await
        .unwrap()
        .expect("the account is found by its email");
    assert_eq!(found.id, created[0]);
}

/// [`agentchat::store::AccountStore::consume_email_token`]: a token works once, for its own
/// purpose, before it expires; of eight uses of one token at once, one succeeds.
pub async fn an_email_token_works_once(store: Arc<dyn Store>) {
    let now = Utc::now();
    let u1 = &user(store.as_ref(), "u1").await.id;
    let hour = now + Duration::hours(1);
    let reset = TokenPurpose::ResetPassword;
    store
        .create_email_token(u1, reset, "reset", hour, now)
        .await
        .unwrap();
    store
        .create_email_token(u1, TokenPurpose::VerifyEmail, "verify", hour, now)
        .await
        .unwrap();
    store
        .create_email_token(u1, TokenPurpose::VerifyEmail, "old", now, now)
        .await
        .unwrap();
    let consume = |purpose, hash: &'static str| {
        let store = store.clone();
        async move { store.consume_email_token(purpose, hash, now).await.unwrap() }
    };
    assert_eq!(consume(TokenPurpose::VerifyEmail, "reset").await, None);
    assert_eq!(consume(reset, "unknown").await, None);
    assert_eq!(
        consume(TokenPurpose::VerifyEmail, "old").await,
        None,
        "expired"
    );
    let uses = in_parallel(8, |_| consume(reset, "reset")).await;
    assert_eq!(
        uses.iter().flatten().collect::<Vec<_>>(),
        ["u1"],
        "exactly one use succeeds"
    );
    assert_eq!(consume(reset, "reset").await, None, "used");
    assert_eq!(
        consume(TokenPurpose::VerifyEmail, "verify").await.as_ref(),
        Some(u1)
    );
}

/// [`agentchat::store::AccountStore::consume_email_token`]: consuming one of an account's
/// reset links voids the others, even when they are all used at once.
pub async fn of_an_accounts_outstanding_links_only_one_is_ever_consumed(store: Arc<dyn Store>) {
    let now = Utc::now();
    let u1 = &user(store.as_ref(), "u1").await.id;
    let hashes: Vec<String> = (0..8).map(|i| format!("reset-{i}")).collect();
    for hash in &hashes {
        store
            .create_email_token(
                u1,
                TokenPurpose::ResetPassword,
                hash,
                now + Duration::hours(1),
                now,
            )
            .await
            .unwrap();
    }
    // A verification link of the same account is another purpose: untouched.
    store
        .create_email_token(
            u1,
            TokenPurpose::VerifyEmail,
            "verify",
            now + Duration::hours(1),
            now,
        )
        .await
        .unwrap();
    let used = in_parallel(hashes.len(), |i| {
        let (store, hash) = (store.clone(), hashes[i].clone());
        async move {
            store
                .consume_email_token(TokenPurpose::ResetPassword, &hash, now)
                .await
                .unwrap()
        }
    })
    .await;
    let consumed: Vec<_> = used.into_iter().flatten().collect();
    assert_eq!(consumed, ["u1"], "the first use voids the others");
    for hash in &hashes {
        assert_eq!(
            store
                .consume_email_token(TokenPurpose::ResetPassword, hash, now)
                .await
                .unwrap(),
            None
        );
    }
    assert_eq!(
        store
            .consume_email_token(TokenPurpose::VerifyEmail, "verify", now)
            .await
            .unwrap()
            .as_ref(),
        Some(u1)
    );
}

/// The session `id` of `user_id`, created and last seen at `at`, with refresh jti `j-{id}`.
fn session(id: &str, user_id: &UserId, at: chrono::DateTime<Utc>) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        user_id: user_id.clone(),
        refresh_jti: format!("j-{id}"),
        user_agent: None,
        ip: None,
        created_at: at,
        last_seen_at: at,
        revoked_at: None,
    }
}

/// [`agentchat::store::SessionStore::create_session`]: ten sign-ins of one user at once,
/// capped at five live sessions, leave exactly the five newest live, and every other one
/// is reported ended once.
pub async fn ten_parallel_sign_ins_leave_at_most_five_live_sessions(store: Arc<dyn Store>) {
    let now = Utc::now();
    let cutoff = now - Duration::days(1);
    let u1 = &user(store.as_ref(), "u1").await.id;
    let ended = in_parallel(10, |i| {
        let store = store.clone();
        let record = session(&format!("s{i}"), u1, now + Duration::milliseconds(i as i64));
        async move { store.create_session(record, 5, cutoff).await.unwrap() }
    })
    .await;
    let live: HashSet<SessionId> = store
        .live_sessions(u1, cutoff)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    let newest: HashSet<SessionId> = (5..10).map(|i| SessionId::from(format!("s{i}"))).collect();
    assert_eq!(live, newest, "at most five live sessions: the newest");
    let ended: Vec<SessionId> = ended.into_iter().flatten().collect();
    let distinct: HashSet<&SessionId> = ended.iter().collect();
    assert_eq!(ended.len(), 5, "{ended:?}");
    assert_eq!(distinct.len(), 5, "each ended once: {ended:?}");
    assert!(ended.iter().all(|id| !newest.contains(id)));
}

/// [`agentchat::store::SessionStore`]: a sixth session ends the oldest; a session idle since
/// before the cutoff does not count; revoking, touching and listing keep their rules.
pub async fn the_oldest_sessions_beyond_the_cap_are_ended(store: Arc<dyn Store>) {
    let t0 = Utc::now();
    let cutoff = t0 - Duration::days(1);
    let u1 = &user(store.as_ref(), "u1").await.id;
    // Idle since before the cutoff: not live, so not counted.
    let idle = session("idle", u1, t0 - Duration::days(2));
    assert!(store
        .create_session(idle, 5, cutoff)
        .await
        .unwrap()
        .is_empty());
    for i in 0..5 {
        let record = session(&format!("s{i}"), u1, t0 + Duration::seconds(i));
        assert!(store
            .create_session(record, 5, cutoff)
            .await
            .unwrap()
            .is_empty());
    }
    let sixth = session("s5", u1, t0 + Duration::seconds(5));
    assert_eq!(
        store.create_session(sixth, 5, cutoff).await.unwrap(),
        ["s0"]
    );
    let live: Vec<SessionId> = store
        .live_sessions(u1, cutoff)
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(live, ["s5", "s4", "s3", "s2", "s1"], "newest first");
    let ended = store.session_auth(&"s0".into()).await.unwrap().unwrap();
    assert!(ended.session.revoked_at.is_some());
    // Activity never moves a session's last sight back.
    store.touch_session(&"s1".into(), t0).await.unwrap();
    let s1 = store
        .session_auth(&"s1".into())
        .await
        .unwrap()
        .unwrap()
        .session;
    assert_eq!(
        s1.last_seen_at.timestamp_millis(),
        (t0 + Duration::seconds(1)).timestamp_millis()
    );
    assert!(store
        .revoke_session(u1, &"s1".into(), "signed_out", t0)
        .await
        .unwrap());
    assert!(!store
        .revoke_session(u1, &"s1".into(), "signed_out", t0)
        .await
        .unwrap());
    let all = store
        .revoke_all_sessions(u1, "password_changed", t0)
        .await
        .unwrap();
    let all: HashSet<SessionId> = all.into_iter().collect();
    let expected: HashSet<SessionId> = ["s2", "s3", "s4", "s5", "idle"]
        .into_iter()
        .map(SessionId::from)
        .collect();
    assert_eq!(all, expected, "every session not yet revoked");
    assert!(store.live_sessions(u1, cutoff).await.unwrap().is_empty());
}

/// [`agentchat::store::SessionStore::rotate_refresh`]: of ten rotations from one jti at once,
/// exactly one wins; a replay or a revoked session loses.
pub async fn refresh_rotation_is_compare_and_set(store: Arc<dyn Store>) {
    let now = Utc::now();
    let u1 = &user(store.as_ref(), "u1").await.id;
    store
        .create_session(session("s1", u1, now), 5, now - Duration::days(1))
        .await
        .unwrap();
    let won = in_parallel(10, |i| {
        let store = store.clone();
        async move {
            let new = format!("new-{i}");
            let won = store
                .rotate_refresh(&SessionId::from("s1"), "j-s1", &new, now)
                .await
                .unwrap();
            won.then_some(new)
        }
    })
    .await;
    let winners: Vec<String> = won.into_iter().flatten().collect();
    assert_eq!(winners.len(), 1, "{winners:?}");
    let stored = store.session_auth(&"s1".into()).await.unwrap().unwrap();
    assert_eq!(stored.session.refresh_jti, winners[0]);
    assert!(
        !store
            .rotate_refresh(&"s1".into(), "j-s1", "replayed", now)
            .await
            .unwrap(),
        "a replay of the old jti"
    );
    store
        .revoke_session(u1, &"s1".into(), "signed_out", now)
        .await
        .unwrap();
    assert!(
        !store
            .rotate_refresh(&"s1".into(), &winners[0], "after", now)
            .await
            .unwrap(),
        "a revoked session"
    );
}

/// The live API key `id` of `user_id` (scope `agents:read`), as a store would be handed it.
pub(super) fn api_key(id: &str, user_id: &UserId) -> ApiKeyRecord {
    ApiKeyRecord {
        id: ApiKeyId::from(id),
        user_id: user_id.clone(),
        name: format!("key {id}"),
        prefix: format!("ak_{id}"),
        key_hash: format!("hash-{id}"),
        scopes: vec!["agents:read".into()],
        agent_ids: None,
        monthly_token_budget: None,
        expires_at: None,
        created_at: Utc::now(),
        last_used_at: None,
        revoked_at: None,
    }
}

/// [`agentchat::store::ApiKeyStore::create_api_key`]: ten creations at once under a cap of
/// three leave three live keys; a revoked key frees its place, a rotation takes none.
pub async fn parallel_api_key_creates_stop_at_the_cap(store: Arc<dyn Store>) {
    let u1 = &user(store.as_ref(), "u1").await.id;
    let created = in_parallel(10, |i| {
        let store = store.clone();
        let u1 = u1.clone();
        async move {
            store
                .create_api_key(api_key(&format!("k{i}"), &u1), 3)
                .await
                .unwrap()
        }
    })
    .await;
    assert_eq!(created.iter().filter(|c| **c).count(), 3, "{created:?}");
    let live = store.list_api_keys(u1).await.unwrap();
    assert_eq!(live.len(), 3);
    let now = Utc::now();
    assert!(!store.create_api_key(api_key("late", u1), 3).await.unwrap());
    assert!(store
        .rotate_api_key(u1, &live[0].id, api_key("rotated", u1), now)
        .await
        .unwrap());
    assert!(
        !store
            .rotate_api_key(u1, &live[0].id, api_key("again", u1), now)
            .await
            .unwrap(),
        "the old key is revoked"
    );
    assert_eq!(store.list_api_keys(u1).await.unwrap().len(), 3);
    assert!(store.revoke_api_key(u1, &live[1].id, now).await.unwrap());
    assert!(store.create_api_key(api_key("freed", u1), 3).await.unwrap());
    let found = store.api_key_by_hash("hash-freed").await.unwrap().unwrap();
    assert_eq!(found.key.id, "freed");
}

/// [`agentchat::store::IdentityStore::unlink_identity`]: eight accounts without a password,
/// each with two identities, whose two identities are unlinked at once: of each account's
/// two unlinks, one succeeds and the other answers `Conflict(LastSignIn)`, and the account
/// keeps one identity. Unlinking a provider that is not linked is `NotFound`.
pub async fn two_unlinks_at_once_leave_a_way_to_sign_in(store: Arc<dyn Store>) {
    let now = Utc::now();
    const ACCOUNTS: usize = 8;
    let providers = [OAuthProvider::Github, OAuthProvider::Google];
    for i in 0..ACCOUNTS {
        let id = user(store.as_ref(), &format!("u{i}")).await.id;
        for provider in providers {
            let identity = IdentityRecord {
                provider,
                subject: format!("{provider:?}-{i}"),
                user_id: id.clone(),
                email: format!("u{i}@example.com"),
                created_at: now,
            };
            store.link_identity(&identity).await.unwrap();
        }
    }
    let unlinked = in_parallel(ACCOUNTS * providers.len(), |n| {
        let store = store.clone();
        let (account, provider) = (UserId::from(format!("u{}", n / 2)), providers[n % 2]);
        async move { store.unlink_identity(&account, provider).await }
    })
    .await;
    for (i, pair) in unlinked.chunks(providers.len()).enumerate() {
        let ok = pair.iter().filter(|r| r.is_ok()).count();
        let last = pair
            .iter()
            .filter(|r| matches!(r, Err(StoreError::Conflict(Conflict::LastSignIn))))
            .count();
        assert_eq!((ok, last), (1, 1), "account u{i}: {pair:?}");
        let left = store
            .identities(&UserId::from(format!("u{i}")))
            .await
            .unwrap();
        assert_eq!(left.len(), 1, "account u{i} keeps a way to sign in");
    }
    let unknown = store
        .unlink_identity(&UserId::from("u0"), OAuthProvider::Microsoft)
        .await;
    assert!(matches!(unknown, Err(StoreError::NotFound)), "{unknown:?}");
}
