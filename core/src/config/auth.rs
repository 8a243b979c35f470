//! `[auth]`: sign-in, sessions and the first admin.

use serde::Deserialize;

/// Sign-in to the admin API (`scheduler/src/api/auth.rs`).
#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthConfig {
    /// The first admin, created by a node when there is no user at all
    /// (both set, or neither). There is no built-in default: without them,
    /// nobody can sign in until an admin is made this way.
    pub admin_user: String,
    pub admin_password: String,
    /// A browser session ends after this long without a request…
    pub session_idle_s: u64,
    /// …and this long after sign-in, whatever its use.
    pub session_max_s: u64,
    /// Failed sign-ins counted per window, per username and per client
    /// address; past a limit, sign-in answers 429 until the window ends.
    pub login_window_s: u64,
    pub login_max_per_user: u32,
    pub login_max_per_address: u32,
    /// How long a node trusts what it read about a token or a user (a
    /// revocation or a role change reaches other nodes within this).
    pub cache_ms: u64,
    /// Mark the session cookie `Secure` (set it when the API is served
    /// over HTTPS, directly or behind a proxy).
    pub cookie_secure: bool,
    /// Take the client address from the last `X-Forwarded-For` entry (only
    /// behind a proxy that sets it); otherwise the TCP peer.
    pub trust_forwarded_for: bool,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            admin_user: String::new(),
            admin_password: String::new(),
            session_idle_s: 30 * 60,
            session_max_s: 12 * 3600,
            login_window_s: 15 * 60,
            login_max_per_user: 10,
            login_max_per_address: 50,
            cache_ms: 5_000,
            cookie_secure: false,
            trust_forwarded_for: false,
        }
    }
}

impl std::fmt::Debug for AuthConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuthConfig")
            .field("admin_user", &self.admin_user)
            .field(
                "admin_password",
                &crate::redact::secret(&self.admin_password),
            )
            .field("session_idle_s", &self.session_idle_s)
            .field("session_max_s", &self.session_max_s)
            .field("login_window_s", &self.login_window_s)
            .field("login_max_per_user", &self.login_max_per_user)
            .field("login_max_per_address", &self.login_max_per_address)
            .field("cache_ms", &self.cache_ms)
            .field("cookie_secure", &self.cookie_secure)
            .field("trust_forwarded_for", &self.trust_forwarded_for)
            .finish()
    }
}
