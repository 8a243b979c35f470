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
    /// Distinct client addresses a username may fail from in a window;
    /// past it, the username is refused from any other address, except
    /// from a browser it signed in from before (its `rondo_device`
    /// cookie): guesses spread over many addresses stop there, and the
    /// user still signs in from their own browser.
    pub login_max_addresses_per_user: u32,
    /// API tokens that are not valid, per client address and window;
    /// past it the address gets 429 without a database look-up.
    pub token_max_per_address: u32,
    /// How long a node trusts what it read about a token or a user (a
    /// revocation or a role change reaches other nodes within this).
    pub cache_ms: u64,
    /// Mark the session cookie `Secure` (set it when the API is served
    /// over HTTPS, directly or behind a proxy).
    pub cookie_secure: bool,
    /// The proxies in front of the nodes (addresses or ranges): a request
    /// from one of them is taken to come from the last `X-Forwarded-For`
    /// entry that is not itself one of them. Empty (the default): the TCP
    /// peer, whatever the header says.
    #[serde(deserialize_with = "super::values::list_or_csv")]
    pub trusted_proxies: Vec<String>,
    /// Replaced by `trusted_proxies`; `true` is refused at start, so a
    /// node upgraded with it set does not trust every caller's header.
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
            login_max_addresses_per_user: 5,
            token_max_per_address: 100,
            cache_ms: 5_000,
            cookie_secure: false,
            trusted_proxies: Vec::new(),
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
            .field(
                "login_max_addresses_per_user",
                &self.login_max_addresses_per_user,
            )
            .field("token_max_per_address", &self.token_max_per_address)
            .field("cache_ms", &self.cache_ms)
            .field("cookie_secure", &self.cookie_secure)
            .field("trusted_proxies", &self.trusted_proxies)
            .finish()
    }
}
