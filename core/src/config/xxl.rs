//! `[xxl]`: the XXL-JOB gateway (`rondo-xxl-gateway`), the admin of
//! unchanged `xxl-job-core` executors and one rondo executor for each.
//! Its other settings are the cluster's: `registry.*` (the lease it renews
//! while an executor answers `/beat`) and `executor.dedupe_ttl_s` (the
//! marks it keeps on the executors' behalf).

use serde::Deserialize;

use super::values::{ConfigError, is_loopback};

#[derive(Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct XxlConfig {
    /// Where the gateway serves XXL-JOB's admin API (`<context>/api/registry`,
    /// `/api/registryRemove`, `/api/callback`, under any context path): the
    /// address executors name in `xxl.job.admin.addresses`.
    pub listen_addr: String,
    /// One `XXL-JOB-ACCESS-TOKEN` for every group the gateway serves, taken
    /// only with `shared_token = true`. By default each group has its own
    /// (`rondo group xxl-token`), and this stays empty.
    #[serde(deserialize_with = "string_or_integer")]
    pub access_token: String,
    /// `access_token` opens every group the gateway serves, besides each
    /// group's own token: whoever holds it (any executor of any group) may
    /// register under, and send results for, every one of them. For the
    /// move from one shared token to a token per group.
    pub shared_token: bool,
    /// Lets a gateway listening on loopback take calls without a token for
    /// groups that have none (a developer machine). Ignored, and the start
    /// refused, for any other listen address.
    pub allow_no_token: bool,
    /// Addresses of XXL-JOB executors the gateway may call though the
    /// destination rule refuses them (this host, loopback, private and
    /// other internal ranges; see `executor.http_allow`): ranges or
    /// addresses (`10.1.0.0/16`). Executors usually live on a private
    /// network: name it here. Judged on the resolved address before every
    /// call, for registered and listed addresses alike.
    #[serde(deserialize_with = "super::values::list_or_csv")]
    pub address_allow: Vec<String>,
    /// Where `/metrics`, `/healthz` and `/readyz` are served (open, so keep
    /// it on loopback or a private network); empty: not served.
    pub metrics_addr: String,
    /// An executor that has not registered for this long leaves the fleet
    /// (XXL-JOB's 90 s: `xxl-job-core` registers every 30 s, so keep it
    /// well above that). Executors listed in a group's `xxl_addresses`
    /// never expire.
    pub registration_ttl_ms: u64,
    /// How long a call to an executor (`/beat`, `/run`, `/log`, …) waits for
    /// its answer (XXL-JOB's admin waits 3 s).
    pub request_timeout_ms: u64,
    /// Trigger messages of one executor's queue delivered to this gateway
    /// and not yet handed to the executor (AMQP prefetch, per executor).
    pub prefetch: u16,
    /// A trigger handed to an executor whose outcome cannot come any more
    /// is failed as lost (retryable, as for rondo's own executors) when its
    /// executor has not answered `/beat` for this long, or answers but
    /// `/idleBeat` has shown its job neither running nor queued there for
    /// this long (a callback xxl-job-core failed to deliver is retried every
    /// 30 s, so keep this well above that).
    pub lost_after_ms: u64,
    /// While a trigger runs, its log is read from the executor (`/log`) and
    /// shipped this often; once more after its callback.
    pub log_poll_ms: u64,
    /// The gateway's runtime threads (`TOKIO_WORKER_THREADS` wins). One
    /// thread waking no other cost 20–25 % less CPU a fire than one per
    /// core at 1,000 fires/s (see `bench/README.md`, scenario `xxl`); add
    /// instances, or threads, for more.
    pub worker_threads: usize,
}

impl Default for XxlConfig {
    fn default() -> Self {
        XxlConfig {
            listen_addr: "127.0.0.1:8680".into(),
            access_token: String::new(),
            shared_token: false,
            allow_no_token: false,
            address_allow: Vec::new(),
            metrics_addr: String::new(),
            registration_ttl_ms: 90_000,
            request_timeout_ms: 3_000,
            prefetch: 64,
            lost_after_ms: 60_000,
            log_poll_ms: 1_000,
            worker_threads: 1,
        }
    }
}

impl std::fmt::Debug for XxlConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XxlConfig")
            .field("listen_addr", &self.listen_addr)
            .field("access_token", &crate::redact::secret(&self.access_token))
            .field("shared_token", &self.shared_token)
            .field("allow_no_token", &self.allow_no_token)
            .field("address_allow", &self.address_allow)
            .field("metrics_addr", &self.metrics_addr)
            .field("registration_ttl_ms", &self.registration_ttl_ms)
            .field("request_timeout_ms", &self.request_timeout_ms)
            .field("prefetch", &self.prefetch)
            .field("lost_after_ms", &self.lost_after_ms)
            .field("log_poll_ms", &self.log_poll_ms)
            .field("worker_threads", &self.worker_threads)
            .finish()
    }
}

impl XxlConfig {
    /// Checks what can be checked without starting the gateway (its own
    /// start also refuses a missing token, see [`XxlConfig::check_token`]).
    pub(super) fn check(&self) -> Result<(), ConfigError> {
        let bounded = [
            ("request_timeout_ms", self.request_timeout_ms, 100, 600_000),
            (
                "registration_ttl_ms",
                self.registration_ttl_ms,
                1_000,
                86_400_000,
            ),
            ("lost_after_ms", self.lost_after_ms, 1_000, 86_400_000),
            ("log_poll_ms", self.log_poll_ms, 50, 600_000),
            ("prefetch", u64::from(self.prefetch), 1, 65_535),
            ("worker_threads", self.worker_threads as u64, 1, 256),
        ];
        for (key, value, least, most) in bounded {
            if !(least..=most).contains(&value) {
                return Err(ConfigError::Invalid(format!(
                    "xxl.{key} must be {least} to {most}, got {value}"
                )));
            }
        }
        if self.access_token.len() > 255 || self.access_token.chars().any(char::is_control) {
            return Err(ConfigError::Invalid(
                "xxl.access_token must be at most 255 bytes without control characters".into(),
            ));
        }
        Ok(())
    }

    /// The gateway's start: a shared token only when asked for by
    /// `shared_token`; calls without a token only when asked for explicitly
    /// and every address it listens on is loopback.
    pub fn check_token(&self) -> Result<(), ConfigError> {
        if !self.shared_token {
            if !self.access_token.is_empty() {
                return Err(ConfigError::Invalid(
                    "xxl.access_token is one token for every group the gateway serves; each group now has its own (rondo group xxl-token <app>). To keep one shared token while the executors move over, set xxl.shared_token = true (docs/xxl-job-gateway.md says what it costs); otherwise remove xxl.access_token".into(),
                ));
            }
            return self.check_no_token();
        }
        if !self.access_token.is_empty() {
            // It travels as an HTTP header value both ways.
            if !self.access_token.bytes().all(|b| b.is_ascii_graphic()) {
                return Err(ConfigError::Invalid(
                    "xxl.access_token must be printable ASCII without spaces (it is sent as an HTTP header)".into(),
                ));
            }
            return Ok(());
        }
        if !self.allow_no_token {
            return Err(ConfigError::Invalid(
                "xxl.shared_token is set but xxl.access_token is empty: set the token your executors send (xxl.job.accessToken), or, on a developer machine listening on loopback only, xxl.allow_no_token = true".into(),
            ));
        }
        self.check_no_token()
    }

    /// `allow_no_token` only on loopback.
    fn check_no_token(&self) -> Result<(), ConfigError> {
        if self.allow_no_token && !is_loopback(&self.listen_addr) {
            return Err(ConfigError::Invalid(format!(
                "xxl.allow_no_token is only for a gateway listening on loopback; xxl.listen_addr is {}: give each group an access token (rondo group xxl-token <app>)",
                self.listen_addr
            )));
        }
        Ok(())
    }
}

/// A secret given in the environment may be all digits, which the
/// environment reader turns into a TOML integer.
fn string_or_integer<'de, D: serde::Deserializer<'de>>(d: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Text {
        Str(String),
        Int(i64),
    }
    Ok(match Text::deserialize(d)? {
        Text::Str(s) => s,
        Text::Int(i) => i.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use crate::Config;

    fn load(text: &str, env: &[(&str, &str)]) -> Result<Config, super::ConfigError> {
        let env = env.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned()));
        Config::load(text, env)
    }

    #[test]
    fn a_shared_token_is_taken_only_when_asked_for_and_no_token_only_on_loopback() {
        let c = load("", &[]).unwrap();
        c.xxl
            .check_token()
            .expect("per-group tokens need none here");
        let c = load("", &[("RONDO_XXL_ACCESS_TOKEN", "s3cret-s3cret")]).unwrap();
        let e = c.xxl.check_token().unwrap_err().to_string();
        assert!(
            e.contains("xxl.shared_token") && !e.contains("s3cret"),
            "{e}"
        );
        let shared = [("RONDO_XXL_SHARED_TOKEN", "true")];
        let c = load("", &shared).unwrap();
        assert!(c.xxl.check_token().is_err(), "shared, but no token");
        let c = load(
            "",
            &[shared[0], ("RONDO_XXL_ACCESS_TOKEN", "s3cret-s3cret")],
        )
        .unwrap();
        c.xxl.check_token().expect("a shared token");
        for bad in ["two words", "línea"] {
            let c = load("", &[shared[0], ("RONDO_XXL_ACCESS_TOKEN", bad)]).unwrap();
            let e = c.xxl.check_token().unwrap_err().to_string();
            assert!(e.contains("xxl.access_token") && !e.contains(bad), "{e}");
        }
        let c = load("[xxl]\nallow_no_token = true\n", &[]).unwrap();
        c.xxl.check_token().expect("loopback, allowed");
        let c = load(
            "[xxl]\nallow_no_token = true\nlisten_addr = \"0.0.0.0:8680\"\n",
            &[],
        )
        .unwrap();
        let e = c.xxl.check_token().unwrap_err().to_string();
        assert!(e.contains("xxl.allow_no_token"), "{e}");
    }

    #[test]
    fn the_address_rule_is_a_list_or_comma_separated_and_checked() {
        let c = load("", &[("RONDO_XXL_ADDRESS_ALLOW", "10.1.0.0/16, 127.0.0.1")]).unwrap();
        assert_eq!(c.xxl.address_allow, ["10.1.0.0/16", "127.0.0.1"]);
        let c = load("[xxl]\naddress_allow = [\"10.1.0.0/16\"]\n", &[]).unwrap();
        assert_eq!(c.xxl.address_allow, ["10.1.0.0/16"]);
        let e = load("", &[("RONDO_XXL_ADDRESS_ALLOW", "nowhere")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("xxl.address_allow"), "{e}");
    }

    #[test]
    fn an_all_digit_token_from_the_environment_stays_a_token() {
        for token in ["12345", "0012345", "-7"] {
            let c = load("", &[("RONDO_XXL_ACCESS_TOKEN", token)]).unwrap();
            assert_eq!(c.xxl.access_token, token);
        }
    }

    #[test]
    fn out_of_range_values_name_their_key_and_the_token_is_never_shown() {
        let e = load("[xxl]\nlost_after_ms = 5\n", &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("xxl.lost_after_ms"), "{e}");
        let c = load("[xxl]\naccess_token = \"hunter2\"\n", &[]).unwrap();
        assert!(!format!("{c:?}").contains("hunter2"));
    }
}
