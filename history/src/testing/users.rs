//! Users and tokens made straight in a test database: the admin every
//! test world and benchmark cluster calls the API as, and the users of
//! the role tests. Every user gets [`TEST_PASSWORD`].

use std::sync::LazyLock;

use rondo_core::auth::{self, Role};
use rondo_core::clock;
use sqlx::MySqlPool;

use crate::History;
use crate::auth::{NewToken, UserRow};

/// The password of every user made here.
pub const TEST_PASSWORD: &str = "testkit password 1";

/// Its Argon2id hash, made once per process.
static TEST_PASSWORD_HASH: LazyLock<String> =
    LazyLock::new(|| auth::hash_password(TEST_PASSWORD).expect("hashing the test password"));

/// Makes user `name` with `role` and `groups` (panics if it exists).
pub async fn create_user(pool: &MySqlPool, name: &str, role: Role, groups: &[&str]) {
    let hash = tokio::task::spawn_blocking(|| TEST_PASSWORD_HASH.clone())
        .await
        .expect("the test password hash");
    let now = clock::now_ms();
    let user = UserRow {
        username: name.into(),
        role,
        groups: groups.iter().map(|g| (*g).to_owned()).collect(),
        enabled: true,
        must_change_password: false,
        created_ms: now,
        updated_ms: now,
    };
    let created = History::from_pool(pool.clone())
        .create_user(&user, &hash)
        .await
        .expect("create a user");
    assert!(created, "user {name} exists");
}

/// A new API token of user `name` (no expiry).
pub async fn create_token(pool: &MySqlPool, name: &str, read_only: bool) -> String {
    let (token, hash) = auth::new_token();
    History::from_pool(pool.clone())
        .create_token(&NewToken {
            username: name,
            name: "testkit",
            hash: &hash,
            prefix: &token[..auth::TOKEN_PREFIX.len() + 6],
            read_only,
            parent_id: None,
            created_ms: clock::now_ms(),
            expires_ms: None,
        })
        .await
        .expect("create a token");
    token
}

/// Makes admin `name` and returns an API token of theirs.
pub async fn admin_token(pool: &MySqlPool, name: &str) -> String {
    create_user(pool, name, Role::Admin, &[]).await;
    create_token(pool, name, false).await
}
