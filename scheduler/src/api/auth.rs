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
//! Why one file of ~780 lines: finding the caller from a token or a session
//! and the sign-in routes share the throttles (one script over the
//! username, address, pair, address-set and device counters, and the
//! script that takes an attempt back) and the session and device keys; the
//! routes of users and tokens are in their own files, the routes of
//! sign-in in `session.rs`.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use redis::AsyncCommands;
use rondo_core::auth::{self, Access, Principal, Role};
use rondo_core::config::AuthConfig;
use rondo_core::destination::Cidr;
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
/// The device cookie: set by a successful sign-in, it lets its browser
/// sign the same user in while the username is throttled from elsewhere
/// (`auth.login_max_addresses_per_user`).
pub const DEVICE_COOKIE: &str = "rondo_device";
/// Its name with `auth.cookie_secure` (see [`SECURE_SESSION_COOKIE`]).
pub const SECURE_DEVICE_COOKIE: &str = "__Host-rondo_device";
/// How long a browser stays known after its last sign-in.
pub const DEVICE_DAYS: u64 = 30;

/// The device cookie's name under `auth.cookie_secure = secure`.
pub fn device_cookie_name(secure: bool) -> &'static str {
    if secure {
        SECURE_DEVICE_COOKIE
    } else {
        DEVICE_COOKIE
    }
}

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
    /// `config.trusted_proxies`, parsed.
    pub proxies: Vec<Cidr>,
    history: History,
    redis: Pool,
    names: Names,
    tokens: Mutex<HashMap<String, CachedToken>>,
    /// Hashes of tokens MySQL did not know, and when it said so: asked
    /// again only after `cache_ms`.
    unknown_tokens: Mutex<HashMap<String, Instant>>,
    users: Mutex<HashMap<String, (Instant, Option<UserRow>)>>,
}

#[derive(Clone)]
struct CachedToken {
    read: Instant,
    touched: Instant,
    id: u64,
    principal: Principal,
    must_change_password: bool,
    expires_ms: Option<i64>,
}

/// Which sign-in counter refused an attempt (the first of [`ATTEMPT`]'s
/// answers), as the field of the 429 it answers.
fn throttled_field(which: u8) -> &'static str {
    if which == 2 { "address" } else { "username" }
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
        // Checked with the rest of the config at start (`check_auth`).
        let proxies = config
            .trusted_proxies
            .iter()
            .filter_map(|p| p.parse().ok())
            .collect();
        Auth {
            config,
            proxies,
            history,
            redis,
            names,
            tokens: Mutex::new(HashMap::new()),
            unknown_tokens: Mutex::new(HashMap::new()),
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

    /// A bearer token's id, end and principal, and whether its user must
    /// set a new password first; 401 when it is not valid, 429 when
    /// `address` sent too many that were not
    /// (`auth.token_max_per_address`). A token of the wrong shape, or one
    /// MySQL did not know within `cache_ms`, is refused without asking it.
    pub(super) async fn token(
        &self,
        token: &str,
        address: &str,
    ) -> Result<(Via, Principal, bool), Error> {
        let invalid = || {
            Error::unauthenticated(
                "authorization",
                "the token is not valid: unknown, revoked or expired, or its user is disabled",
            )
        };
        if !auth::is_token_shaped(token) {
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
            return Ok((via, c.principal, c.must_change_password));
        }
        let known_bad = self
            .unknown_tokens
            .lock()
            .expect("unknown token cache")
            .get(&hash)
            .is_some_and(|at| now.duration_since(*at) < self.cache_for());
        if known_bad {
            return Err(invalid());
        }
        self.bad_tokens_under_limit(address).await?;
        let Some((row, user)) = self.history.valid_token(&hash, now_ms).await? else {
            self.tokens.lock().expect("token cache").remove(&hash);
            {
                let mut unknown = self.unknown_tokens.lock().expect("unknown token cache");
                if unknown.len() >= CACHE_LIMIT {
                    unknown.clear();
                }
                unknown.insert(hash, now);
            }
            self.count_bad_token(address).await?;
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
                    must_change_password: user.must_change_password,
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
        Ok((via, principal, user.must_change_password))
    }

    /// 429 when `address` sent `auth.token_max_per_address` tokens MySQL
    /// did not know in the current window.
    async fn bad_tokens_under_limit(&self, address: &str) -> Result<(), Error> {
        let key = self.names.login_failures("token-addr", address);
        let mut conn = self.redis.get().await?;
        let (count, ttl): (Option<u32>, i64) = redis::pipe()
            .get(&key)
            .ttl(&key)
            .query_async(&mut conn)
            .await?;
        if count.unwrap_or(0) < self.config.token_max_per_address {
            return Ok(());
        }
        Err(Error {
            kind: rondo_core::ErrorKind::TooManyRequests,
            field: Some("authorization".to_owned()),
            message: format!(
                "too many tokens that are not valid from this address; try again in {} s",
                ttl.max(1)
            ),
        })
    }

    /// Counts a token MySQL did not know against `address`.
    async fn count_bad_token(&self, address: &str) -> Result<(), Error> {
        let key = self.names.login_failures("token-addr", address);
        let mut conn = self.redis.get().await?;
        let (count,): (u64,) = redis::pipe().incr(&key, 1).query_async(&mut conn).await?;
        if count == 1 {
            let _: () = conn.expire(&key, self.config.login_window_s as i64).await?;
        }
        Ok(())
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
    /// and `address` (or against the browser's device cookie `device`,
    /// when it is one `username` signed in with), atomically, before the
    /// password is checked; `Err` (429, not counted) when it is throttled
    /// (see [`ATTEMPT`]). [`Auth::succeeded`] takes a good attempt back,
    /// [`Auth::unanswered`] one the server could not judge.
    pub async fn attempt(
        &self,
        username: &str,
        address: &str,
        device: Option<&str>,
    ) -> Result<(), Error> {
        let device_hash = device.map(auth::token_hash).unwrap_or_default();
        let mut conn = self.redis.get().await?;
        let (over, ttl): (u8, i64) = ATTEMPT
            .key(self.names.login_failures("user", username))
            .key(self.names.login_failures("addr", address))
            .key(self.pair_key(username, address))
            .key(self.names.login_failures("user-addrs", username))
            .key(self.names.login_failures("device", &device_hash))
            .key(self.names.login_failures("device-fails", &device_hash))
            .arg(self.config.login_window_s)
            .arg(self.config.login_max_per_user)
            .arg(self.config.login_max_per_address)
            .arg(self.config.login_max_addresses_per_user)
            .arg(if device.is_some() { username } else { "" })
            .arg(address)
            .invoke_async(&mut conn)
            .await?;
        let wait = ttl.max(1);
        let message = match over {
            0 => return Ok(()),
            4 => format!("too many failed sign-ins from this browser; try again in {wait} s"),
            5 => format!(
                "this username failed from too many addresses; sign in from a browser you \
                 signed in with before, or try again in {wait} s"
            ),
            which => {
                let what = throttled_field(which);
                format!("too many failed sign-ins for this {what}; try again in {wait} s")
            }
        };
        Err(Error {
            kind: rondo_core::ErrorKind::TooManyRequests,
            field: Some(throttled_field(over).to_owned()),
            message,
        })
    }

    /// A good password: the username's count, this address's failures
    /// for it and the browser's start afresh, the attempt does not count
    /// against the address, and the address is not one the username
    /// failed from.
    pub async fn succeeded(
        &self,
        username: &str,
        address: &str,
        device: Option<&str>,
    ) -> Result<(), Error> {
        let mut conn = self.redis.get().await?;
        let mut pipe = redis::pipe();
        pipe.del(self.pair_key(username, address))
            .ignore()
            .del(self.names.login_failures("user", username))
            .ignore()
            .srem(self.names.login_failures("user-addrs", username), address)
            .ignore()
            .decr(self.names.login_failures("addr", address), 1)
            .ignore();
        if let Some(device) = device {
            let hash = auth::token_hash(device);
            pipe.del(self.names.login_failures("device-fails", &hash))
                .ignore();
        }
        pipe.query_async::<()>(&mut conn).await?;
        Ok(())
    }

    /// An attempt the server could not judge (MySQL did not answer): it
    /// is not a failed guess, and is taken back from every count.
    pub async fn unanswered(
        &self,
        username: &str,
        address: &str,
        device: Option<&str>,
    ) -> Result<(), Error> {
        let device_hash = device.map(auth::token_hash).unwrap_or_default();
        let mut conn = self.redis.get().await?;
        let _: () = TAKE_BACK
            .key(self.names.login_failures("user", username))
            .key(self.names.login_failures("addr", address))
            .key(self.pair_key(username, address))
            .key(self.names.login_failures("device-fails", &device_hash))
            .invoke_async(&mut conn)
            .await?;
        Ok(())
    }

    /// The browser's device cookie after `username` signed in with it:
    /// the one it sent, kept for [`DEVICE_DAYS`] more, when it was
    /// `username`'s; else a new one. Returns the cookie's value.
    pub async fn known_device(&self, username: &str, sent: Option<&str>) -> Result<String, Error> {
        let ttl = (DEVICE_DAYS * 86_400) as i64;
        let mut conn = self.redis.get().await?;
        if let Some(sent) = sent {
            let key = self.names.login_failures("device", &auth::token_hash(sent));
            let owner: Option<String> = conn.get(&key).await?;
            if owner.as_deref() == Some(username) {
                let _: () = conn.expire(&key, ttl).await?;
                return Ok(sent.to_owned());
            }
        }
        let id = auth::new_secret();
        let key = self.names.login_failures("device", &auth::token_hash(&id));
        let _: () = conn.set_ex(&key, username, ttl as u64).await?;
        Ok(id)
    }

    /// The failures of `username` from `address` (hashed: both are the
    /// caller's input).
    fn pair_key(&self, username: &str, address: &str) -> String {
        let digest = rondo_core::auth::token_hash(&format!("{username}\n{address}"));
        self.names.login_failures("pair", &digest)
    }
}

/// One sign-in attempt. From a browser that signed this username in
/// before (its device cookie names the user), only the browser's own
/// failures count: refused past `login_max_per_user` (answer 4), so
/// neither a shared address nor guesses from elsewhere lock its user out.
/// Otherwise refused (and not counted) when:
/// * its address failed `login_max_per_address` times in the window
///   (answer 2), or
/// * this address failed this username `login_max_per_user` times
///   (answer 3), or
/// * the username failed `login_max_per_user` times from anywhere and
///   this address has failed it before (answer 1), or
/// * the username failed from `login_max_addresses_per_user` addresses
///   and this is another (answer 5).
///
/// So a guessed username is slowed to one guess per address and window,
/// on a few addresses at most, while its user, from a browser they signed
/// in with, still signs in with the right password. Otherwise each count
/// goes up, in a window that starts at its first attempt. The answer is
/// `{which, seconds left}`.
static ATTEMPT: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        r"
local window = ARGV[1]
local max_user, max_addr = tonumber(ARGV[2]), tonumber(ARGV[3])
local max_addrs = tonumber(ARGV[4])
local function count(key)
  redis.call('INCR', key)
  if redis.call('TTL', key) < 0 then redis.call('EXPIRE', key, window) end
end
if ARGV[5] ~= '' and redis.call('GET', KEYS[5]) == ARGV[5] then
  local fails = tonumber(redis.call('GET', KEYS[6]) or '0')
  if fails >= max_user then return {4, redis.call('TTL', KEYS[6])} end
  count(KEYS[6])
  return {0, 0}
end
local user = tonumber(redis.call('GET', KEYS[1]) or '0')
local addr = tonumber(redis.call('GET', KEYS[2]) or '0')
local pair = tonumber(redis.call('GET', KEYS[3]) or '0')
if addr >= max_addr then return {2, redis.call('TTL', KEYS[2])} end
if pair >= max_user then return {3, redis.call('TTL', KEYS[3])} end
if user >= max_user and pair > 0 then return {1, redis.call('TTL', KEYS[1])} end
if redis.call('SISMEMBER', KEYS[4], ARGV[6]) == 0
  and redis.call('SCARD', KEYS[4]) >= max_addrs then
  return {5, redis.call('TTL', KEYS[4])}
end
for i = 1, 3 do count(KEYS[i]) end
redis.call('SADD', KEYS[4], ARGV[6])
if redis.call('TTL', KEYS[4]) < 0 then redis.call('EXPIRE', KEYS[4], window) end
return {0, 0}
",
    )
});

/// Takes one attempt back from each count that has one (see
/// [`Auth::unanswered`]).
static TAKE_BACK: std::sync::LazyLock<redis::Script> = std::sync::LazyLock::new(|| {
    redis::Script::new(
        r"
for i = 1, #KEYS do
  if tonumber(redis.call('GET', KEYS[i]) or '0') > 0 then redis.call('DECRBY', KEYS[i], 1) end
end
return 0
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
        must_change_password: false,
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
