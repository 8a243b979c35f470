//! Who is calling: every route but `/healthz` and sign-in goes through the
//! gate (`api/gate.rs`), which finds the [`Caller`] from an API token or a
//! browser session here, or answers 401 / 403.
//!
//! * **API token**: `Authorization: Bearer rondo_pat_…`. Looked up by its
//!   SHA-256 in MySQL (`rondo_history::auth`), valid while neither revoked
//!   nor expired and its user enabled; it acts with its user's rights as
//!   they are now (only the reading ones for a read-only token).
//! * **Session**: the `rondo_session` cookie (HttpOnly, SameSite=Strict)
//!   set by `POST /api/v1/auth/login`. Stored in Redis under the SHA-256 of
//!   its id with the idle time as TTL (renewed by each request) and ended
//!   at `auth.session_max_s` after sign-in whatever its use. A write (any
//!   method but GET and HEAD) must also send the session's CSRF token in
//!   `X-CSRF-Token`: a forged cross-site form cannot read it.
//!
//! What a node read about a token or a user is trusted for `auth.cache_ms`
//! (5 s): a revocation, a disabled user or a role change takes effect at
//! once on the node that made it and within that time on the others.
//!
//! Why one file of ~570 lines: finding the caller from a token or a session
//! and the sign-in routes share the throttles (one script over three
//! counters) and the session keys; the routes of users and tokens are in
//! their own files.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use rondo_core::auth::{self, Access, Principal, Role};
use rondo_core::config::AuthConfig;
use rondo_core::event::AuditRecord;
use rondo_core::names::Names;
use rondo_core::redis::Pool;
use rondo_core::{Error, Event, clock};
use rondo_history::History;
use rondo_history::auth::UserRow;

/// The session cookie's name.
pub const SESSION_COOKIE: &str = "rondo_session";
/// Its name with `auth.cookie_secure`: a `__Host-` cookie is sent only
/// over https, only by the host that set it (no `Domain`), for every path,
/// so neither a plain-http page nor a sibling subdomain can plant or
/// overwrite it.
pub const SECURE_SESSION_COOKIE: &str = "__Host-rondo_session";

/// The session cookie's name under `auth.cookie_secure = secure`.
pub fn session_cookie_name(secure: bool) -> &'static str {
    if secure {
        SECURE_SESSION_COOKIE
    } else {
        SESSION_COOKIE
    }
}
/// The header a cookie-authenticated write carries its CSRF token in.
pub const CSRF_HEADER: &str = "x-csrf-token";
/// The header of a request no one asked for just now (the console's
/// polling): it does not renew its session's idle time.
pub const BACKGROUND_HEADER: &str = "x-rondo-background";
/// Entries a node keeps about tokens and users before it starts afresh.
const CACHE_LIMIT: usize = 10_000;
/// A token's `last_used_ms` is written at most this often.
const TOUCH_EVERY: Duration = Duration::from_secs(60);

/// Who a request acts as, how it proved it, and where it comes from.
#[derive(Debug, Clone)]
pub struct Caller {
    pub principal: Principal,
    pub address: String,
    pub via: Via,
}

/// How a caller proved who it is.
#[derive(Clone)]
pub enum Via {
    /// An API token, with its end (tokens it makes end no later).
    Token {
        id: u64,
        expires_ms: Option<i64>,
    },
    Session {
        id_hash: String,
        csrf: String,
    },
}

/// Never prints the session's CSRF token.
impl std::fmt::Debug for Via {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Via::Token { id, expires_ms } => f
                .debug_struct("Token")
                .field("id", id)
                .field("expires_ms", expires_ms)
                .finish(),
            Via::Session { id_hash, .. } => f
                .debug_struct("Session")
                .field("id_hash", id_hash)
                .finish_non_exhaustive(),
        }
    }
}

impl Caller {
    pub fn username(&self) -> &str {
        &self.principal.username
    }

    /// `Ok` when the caller may do `access`; otherwise a 403 naming
    /// `field`.
    pub fn require(&self, access: Access<'_>, field: &str) -> Result<(), Error> {
        if self.principal.may(access) {
            return Ok(());
        }
        let p = &self.principal;
        let ro = if p.read_only {
            " through a read-only token"
        } else {
            ""
        };
        let what = match access {
            Access::ReadGroup(g) => format!("read group {g:?}"),
            Access::OperateGroup(g) => format!("change or run what is in group {g:?}"),
            Access::ReadAny => "read this".into(),
            Access::Admin => "do this (admins only)".into(),
            Access::ReadAdmin => "read this (admins only)".into(),
        };
        Err(Error::forbidden(
            field,
            format!("{} ({}{ro}) may not {what}", p.username, p.role),
        ))
    }

    /// The groups the caller may read; `None` for all of them.
    pub fn readable_groups(&self) -> Option<&BTreeSet<String>> {
        (!self.principal.sees_every_group()).then_some(&self.principal.groups)
    }

    /// An audit record of something this caller did.
    pub fn audit(
        &self,
        action: &str,
        target: String,
        group: Option<&str>,
        detail: Option<String>,
    ) -> Event {
        let p = &self.principal;
        audit_event(&p.username, &self.address, action, target, group, detail)
    }
}

/// An audit record of something `username` did (or tried) from `address`.
pub fn audit_event(
    username: &str,
    address: &str,
    action: &str,
    target: String,
    group: Option<&str>,
    detail: Option<String>,
) -> Event {
    let id: [u8; 12] = rand::random();
    Event::Audit(AuditRecord {
        id: id.iter().map(|b| format!("{b:02x}")).collect(),
        at_ms: clock::now_ms(),
        username: username.to_owned(),
        action: action.to_owned(),
        target,
        group: group.map(str::to_owned),
        address: address.to_owned(),
        detail,
    })
}

/// The client's address, set on every request by [`client_address`].
#[derive(Debug, Clone)]
pub struct ClientAddress(pub String);

/// Sign-in state shared by a node's handlers: the token and user caches,
/// sessions and throttling in Redis.
pub struct Auth {
    pub config: AuthConfig,
    history: History,
    redis: Pool,
    names: Names,
    tokens: Mutex<HashMap<String, CachedToken>>,
    users: Mutex<HashMap<String, (Instant, Option<UserRow>)>>,
}

#[derive(Clone)]
struct CachedToken {
    read: Instant,
    touched: Instant,
    id: u64,
    principal: Principal,
    expires_ms: Option<i64>,
}

/// A live session: whose, and its CSRF token (its start, kept in Redis,
/// is only read to end it on time).
#[derive(Clone)]
pub struct Session {
    pub username: String,
    pub csrf: String,
}

impl Auth {
    pub fn new(config: AuthConfig, history: History, redis: Pool, names: Names) -> Auth {
        Auth {
            config,
            history,
            redis,
            names,
            tokens: Mutex::new(HashMap::new()),
            users: Mutex::new(HashMap::new()),
        }
    }

    fn cache_for(&self) -> Duration {
        Duration::from_millis(self.config.cache_ms)
    }

    /// Forgets everything cached (after a revocation or a user change on
    /// this node).
    pub fn forget(&self) {
        self.tokens.lock().expect("token cache").clear();
        self.users.lock().expect("user cache").clear();
    }

    /// A bearer token's id, end and principal, or 401.
    pub(super) async fn token(&self, token: &str) -> Result<(Via, Principal), Error> {
        let invalid = || {
            Error::unauthenticated(
                "authorization",
                "the token is not valid: unknown, revoked or expired, or its user is disabled",
            )
        };
        if !token.starts_with(auth::TOKEN_PREFIX) {
            return Err(invalid());
        }
        let hash = auth::token_hash(token);
        let now = Instant::now();
        let now_ms = clock::now_ms();
        let cached = self.tokens.lock().expect("token cache").get(&hash).cloned();
        if let Some(c) = cached
            && now.duration_since(c.read) < self.cache_for()
            && c.expires_ms.is_none_or(|e| e > now_ms)
        {
            let via = Via::Token {
                id: c.id,
                expires_ms: c.expires_ms,
            };
            return Ok((via, c.principal));
        }
        let Some((row, user)) = self.history.valid_token(&hash, now_ms).await? else {
            self.tokens.lock().expect("token cache").remove(&hash);
            return Err(invalid());
        };
        let principal = Principal {
            username: user.username.clone(),
            role: user.role,
            groups: user.groups.into_iter().collect(),
            read_only: row.read_only,
        };
        let touched = {
            let mut cache = self.tokens.lock().expect("token cache");
            if cache.len() >= CACHE_LIMIT {
                cache.clear();
            }
            let touched = cache
                .get(&hash)
                .map(|c| c.touched)
                .filter(|t| now.duration_since(*t) < TOUCH_EVERY);
            cache.insert(
                hash,
                CachedToken {
                    read: now,
                    touched: touched.unwrap_or(now),
                    id: row.id,
                    principal: principal.clone(),
                    expires_ms: row.expires_ms,
                },
            );
            touched.is_some()
        };
        if !touched {
            let history = self.history.clone();
            tokio::spawn(async move {
                if let Err(e) = history.touch_token(row.id, now_ms).await {
                    tracing::debug!(error = %e, "a token's last use not recorded");
                }
            });
        }
        let via = Via::Token {
            id: row.id,
            expires_ms: row.expires_ms,
        };
        Ok((via, principal))
    }

    /// A user as stored (cached), if it exists.
    pub async fn user(&self, username: &str) -> Result<Option<UserRow>, Error> {
        let now = Instant::now();
        if let Some((read, user)) = self.users.lock().expect("user cache").get(username)
            && now.duration_since(*read) < self.cache_for()
        {
            return Ok(user.clone());
        }
        let user = self.history.user(username).await?.map(|(u, _)| u);
        let mut cache = self.users.lock().expect("user cache");
        if cache.len() >= CACHE_LIMIT {
            cache.clear();
        }
        cache.insert(username.to_owned(), (now, user.clone()));
        Ok(user)
    }

    // ---- sessions ----

    /// Starts a session for `username`; returns its id (for the cookie)
    /// and its CSRF token.
    pub async fn open_session(&self, username: &str) -> Result<(String, String), Error> {
        let id = auth::new_secret();
        let csrf = auth::new_secret();
        let key = self.names.session(&auth::token_hash(&id));
        let index = self.names.user_sessions(username);
        let mut conn = self.redis.get().await?;
        // The user's index first, then the session (two keys, two slots on
        // a Redis Cluster): a session is never live without its index entry,
        // so "sign out everywhere" finds it; an entry left without a session
        // by a crash in between only names a session that does not exist.
        redis::pipe()
            .sadd(&index, auth::token_hash(&id))
            .ignore()
            .expire(&index, self.config.session_max_s as i64)
            .ignore()
            .query_async::<()>(&mut conn)
            .await?;
        redis::pipe()
            .atomic()
            .hset_multiple(
                &key,
                &[
                    ("user", username.to_owned()),
                    ("csrf", csrf.clone()),
                    ("created_ms", clock::now_ms().to_string()),
                ],
            )
            .ignore()
            .expire(&key, self.config.session_idle_s as i64)
            .ignore()
            .query_async::<()>(&mut conn)
            .await?;
        Ok((id, csrf))
    }

    /// The live session of a cookie value, its idle time renewed unless
    /// `renew` is false (a background request: the console's polling);
    /// `None` when unknown, idle too long or past its absolute end.
    pub(super) async fn session(
        &self,
        id: &str,
        renew: bool,
    ) -> Result<Option<(String, Session)>, Error> {
        let id_hash = auth::token_hash(id);
        let key = self.names.session(&id_hash);
        let mut conn = self.redis.get().await?;
        let fields: HashMap<String, String> = conn.hgetall(&key).await?;
        let (Some(user), Some(csrf), Some(created)) = (
            fields.get("user"),
            fields.get("csrf"),
            fields.get("created_ms").and_then(|c| c.parse::<i64>().ok()),
        ) else {
            return Ok(None);
        };
        let age_ms = clock::now_ms() - created;
        if age_ms >= self.config.session_max_s as i64 * 1000 {
            let _: () = conn.del(&key).await?;
            return Ok(None);
        }
        if renew {
            let _: () = conn.expire(&key, self.config.session_idle_s as i64).await?;
        }
        Ok(Some((
            id_hash,
            Session {
                username: user.clone(),
                csrf: csrf.clone(),
            },
        )))
    }

    /// Ends one session.
    pub async fn close_session(&self, id_hash: &str, username: &str) -> Result<(), Error> {
        let mut conn = self.redis.get().await?;
        // The session first, then its index entry (see `open_session`).
        let _: () = conn.del(self.names.session(id_hash)).await?;
        let _: () = conn
            .srem(self.names.user_sessions(username), id_hash)
            .await?;
        Ok(())
    }

    /// Ends every session of `username` but `keep` (a password change
    /// keeps the one it was made from).
    pub async fn close_sessions_of(&self, username: &str, keep: Option<&str>) -> Result<(), Error> {
        let index = self.names.user_sessions(username);
        let mut conn = self.redis.get().await?;
        let hashes: Vec<String> = conn.smembers(&index).await?;
        if hashes.iter().all(|h| Some(h.as_str()) == keep) {
            return Ok(());
        }
        let mut pipe = redis::pipe();
        for hash in hashes.iter().filter(|h| Some(h.as_str()) != keep) {
            pipe.del(self.names.session(hash))
                .ignore()
                .srem(&index, hash)
                .ignore();
        }
        pipe.query_async::<()>(&mut conn).await?;
        Ok(())
    }

    // ---- throttling ----

    /// Counts a sign-in attempt (a password to check) against `username`
    /// and `address`, atomically, before the password is checked; `Err`
    /// (429, not counted) when it is throttled (see [`ATTEMPT`]).
    /// [`Auth::succeeded`] takes a good attempt back.
    pub async fn attempt(&self, username: &str, address: &str) -> Result<(), Error> {
        let mut conn = self.redis.get().await?;
        let (over, ttl): (u8, i64) = ATTEMPT
            .key(self.names.login_failures("user", username))
            .key(self.names.login_failures("addr", address))
            .key(self.pair_key(username, address))
            .arg(self.config.login_window_s)
            .arg(self.config.login_max_per_user)
            .arg(self.config.login_max_per_address)
            .invoke_async(&mut conn)
            .await?;
        let what = match over {
            0 => return Ok(()),
            2 => "address",
            _ => "username",
        };
        let wait = ttl.max(1);
        Err(Error {
            kind: rondo_core::ErrorKind::TooManyRequests,
            field: Some(what.to_owned()),
            message: format!("too many failed sign-ins for this {what}; try again in {wait} s"),
        })
    }

    /// A good password: the username's count and this address's failures
    /// for it start afresh, and the attempt does not count against the
    /// address.
    pub async fn succeeded(&self, username: &str, address: &str) -> Result<(), Error> {
        let mut conn = self.redis.get().await?;
        redis::pipe()
            .del(self.pair_key(username, address))
            .ignore()
            .del(self.names.login_failures("user", username))
            .ignore()
            .decr(self.names.login_failures("addr", address), 1)
            .ignore()
            .query_async::<()>(&mut conn)
            .await?;
        Ok(())
    }

    /// The failures of `username` from `address` (hashed: both are the
    /// caller's input).
    fn pair_key(&self, username: &str, address: &str) -> String {
        let digest = rondo_core::auth::token_hash(&format!("{username}\n{address}"));
        self.names.login_failures("pair", &digest)
    }
}

/// One sign-in attempt, refused (and not counted) when:
/// * its address failed `login_max_per_address` times in the window
///   (answer 2), or
/// * this address failed this username `login_max_per_user` times
///   (answer 3), or
/// * the username failed `login_max_per_user` times from anywhere and
///   this address has failed it before (answer 1).
///
/// So a guessed username is slowed to one guess per address and window,
/// while its user, from an address that has not failed, still signs in
/// with the right password. Otherwise each count goes up, in a window
/// that starts at its first attempt. The answer is `{which, seconds left}`.
static ATTEMPT: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        r"
local user = tonumber(redis.call('GET', KEYS[1]) or '0')
local addr = tonumber(redis.call('GET', KEYS[2]) or '0')
local pair = tonumber(redis.call('GET', KEYS[3]) or '0')
local max_user, max_addr = tonumber(ARGV[2]), tonumber(ARGV[3])
if addr >= max_addr then return {2, redis.call('TTL', KEYS[2])} end
if pair >= max_user then return {3, redis.call('TTL', KEYS[3])} end
if user >= max_user and pair > 0 then return {1, redis.call('TTL', KEYS[1])} end
for i = 1, 3 do
  redis.call('INCR', KEYS[i])
  if redis.call('TTL', KEYS[i]) < 0 then redis.call('EXPIRE', KEYS[i], ARGV[1]) end
end
return {0, 0}
",
    )
});

/// A user row as the principal it acts as.
pub(super) fn principal_of(user: &UserRow) -> Principal {
    Principal {
        username: user.username.clone(),
        role: user.role,
        groups: user.groups.iter().cloned().collect(),
        read_only: false,
    }
}

/// Creates the first admin from `auth.admin_user` / `auth.admin_password`
/// when there is no user at all (a fresh install), once in the database's
/// life: a user table emptied later never brings it back
/// (`History::create_first_admin`). Returns whether it did.
pub async fn bootstrap_admin(history: &History, config: &AuthConfig) -> Result<bool, Error> {
    if config.admin_user.is_empty() {
        return Ok(false);
    }
    let password = config.admin_password.clone();
    let hash = tokio::task::spawn_blocking(move || auth::hash_password(&password))
        .await
        .map_err(|e| Error::internal(format!("hashing the admin password: {e}")))??;
    let now = clock::now_ms();
    let user = UserRow {
        username: config.admin_user.clone(),
        role: Role::Admin,
        groups: Vec::new(),
        enabled: true,
        created_ms: now,
        updated_ms: now,
    };
    Ok(history.create_first_admin(&user, &hash, now).await?)
}

/// Keeps retrying [`bootstrap_admin`] (after the schema is migrated) until
/// it has run once, so a node that starts before MySQL still makes the
/// first admin.
pub fn spawn_bootstrap(
    history: History,
    config: AuthConfig,
    shutdown: tokio_util::sync::CancellationToken,
) {
    tokio::spawn(async move {
        let mut wait = Duration::from_millis(200);
        loop {
            let done = async {
                history.migrate().await?;
                bootstrap_admin(&history, &config).await
            };
            match done.await {
                Ok(true) => {
                    tracing::info!(user = %config.admin_user, "first admin created");
                    return;
                }
                Ok(false) => return,
                Err(e) => tracing::warn!(error = %e, "user table not ready; retrying"),
            }
            tokio::select! {
                () = shutdown.cancelled() => return,
                () = tokio::time::sleep(wait) => {}
            }
            wait = (wait * 2).min(Duration::from_secs(10));
        }
    });
}
