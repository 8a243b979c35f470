//! Who may call the gateway for which group, and what each executor is
//! sent: the groups the gateway serves (`xxl_gateway`, an admin's mark)
//! with their access tokens, as this instance last read them.
//!
//! A token opens the groups whose token (or, during a rotation, previous
//! token) it is, and with `xxl.shared_token` the shared `xxl.access_token`
//! opens every served group besides. A registration, a `registryRemove` and
//! each callback entry are taken only for a group the caller's token opens;
//! a native group (not marked) is opened by none. Each executor is sent the
//! token it registered with (known by its fingerprint, never kept in the
//! clear outside the group), and a listed address its group's token.
//!
//! The snapshot is read again at every fleet pass (500 ms), so a token set,
//! rotated or ended reaches the gateway within that; a group it does not
//! know yet is read from Redis when a call names it.

use std::collections::HashMap;
use std::sync::RwLock;

use rondo_core::Group;
use sha2::{Digest, Sha256};

/// What a token is to one group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// It opens the group; the fingerprint of the token taken.
    Opens(String),
    /// The group is not served by the gateway (a native group, or none).
    NotServed,
    /// The group is served, and this is not one of its tokens.
    WrongToken,
}

/// The groups the gateway serves, with their tokens.
pub(crate) struct Access {
    groups: RwLock<HashMap<String, Group>>,
    /// `xxl.access_token` when `xxl.shared_token` is set.
    shared: Option<String>,
    /// `xxl.allow_no_token`: a group without a token takes calls without one.
    open_without_token: bool,
}

impl Access {
    pub(crate) fn new(config: &rondo_core::config::XxlConfig) -> Access {
        Access {
            groups: RwLock::default(),
            shared: (config.shared_token && !config.access_token.is_empty())
                .then(|| config.access_token.clone()),
            open_without_token: config.allow_no_token,
        }
    }

    /// Takes the groups just read (only the served ones are kept).
    pub(crate) fn replace(&self, groups: impl IntoIterator<Item = Group>) {
        let served = groups
            .into_iter()
            .filter(|g| g.xxl_gateway)
            .map(|g| (g.app.clone(), g))
            .collect();
        *self.groups.write().expect("access lock") = served;
    }

    /// Takes one group just read (a call named a group not yet known).
    pub(crate) fn learn(&self, group: Group) {
        let mut groups = self.groups.write().expect("access lock");
        if group.xxl_gateway {
            groups.insert(group.app.clone(), group);
        } else {
            groups.remove(&group.app);
        }
    }

    /// Whether `app` is known (served) here.
    pub(crate) fn knows(&self, app: &str) -> bool {
        self.groups.read().expect("access lock").contains_key(app)
    }

    /// The manual address lists of the served groups, by app.
    pub(crate) fn manual_lists(&self) -> Vec<(String, Vec<String>)> {
        self.groups
            .read()
            .expect("access lock")
            .values()
            .filter(|g| !g.xxl_addresses.is_empty())
            .map(|g| (g.app.clone(), g.xxl_addresses.clone()))
            .collect()
    }

    /// What `given` (the call's `XXL-JOB-ACCESS-TOKEN`, empty when none)
    /// is to group `app`.
    pub(crate) fn verdict(&self, app: &str, given: &str) -> Verdict {
        let groups = self.groups.read().expect("access lock");
        let Some(group) = groups.get(app) else {
            return Verdict::NotServed;
        };
        match self.accepted(group).into_iter().find(|t| same(t, given)) {
            Some(token) => Verdict::Opens(fingerprint(token)),
            None => Verdict::WrongToken,
        }
    }

    /// Whether `given` opens any served group (a call whose token opens
    /// none gets XXL-JOB's own refusal).
    pub(crate) fn opens_any(&self, given: &str) -> bool {
        let groups = self.groups.read().expect("access lock");
        let mut any = false;
        // Every group's tokens are compared, so the time taken says
        // nothing of which one matched.
        for group in groups.values() {
            for token in self.accepted(group) {
                any |= same(token, given);
            }
        }
        any
    }

    /// The token to send an executor of `app` that registered with the
    /// token of fingerprint `fp` (empty: listed by hand, or unknown): that
    /// one while the group still takes it, else the group's own, else the
    /// shared one; empty when there is none.
    pub(crate) fn token_for(&self, app: &str, fp: &str) -> String {
        let groups = self.groups.read().expect("access lock");
        let Some(group) = groups.get(app) else {
            return String::new();
        };
        let accepted = self.accepted(group);
        accepted
            .iter()
            .find(|t| !fp.is_empty() && fingerprint(t) == fp)
            .or_else(|| accepted.first())
            .map(|t| (*t).to_owned())
            .unwrap_or_default()
    }

    /// The tokens `group` takes, its own current one first.
    fn accepted<'a>(&'a self, group: &'a Group) -> Vec<&'a str> {
        let mut tokens: Vec<&str> = group.xxl_access.tokens().collect();
        if let Some(shared) = &self.shared {
            tokens.push(shared);
        }
        if tokens.is_empty() && self.open_without_token {
            tokens.push("");
        }
        tokens
    }
}

/// A token's fingerprint, as an executor's record keeps it: the first 16
/// hex digits of its SHA-256 (which token it registered with, without the
/// token).
pub(crate) fn fingerprint(token: &str) -> String {
    let digest = Sha256::digest(token.as_bytes());
    digest.iter().take(8).map(|b| format!("{b:02x}")).collect()
}

/// Compares two tokens in constant time for their length (no timing tells
/// how much of one was right).
fn same(expected: &str, given: &str) -> bool {
    let (e, g) = (expected.as_bytes(), given.as_bytes());
    let mut diff = u8::from(e.len() != g.len());
    for (i, b) in e.iter().enumerate() {
        diff |= b ^ g.get(i).copied().unwrap_or(0);
    }
    diff == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use rondo_core::config::XxlConfig;
    use rondo_core::model::XxlAccess;

    fn group(app: &str, served: bool, token: &str, previous: &str) -> Group {
        Group {
            xxl_gateway: served,
            xxl_access: XxlAccess {
                token: token.into(),
                previous: previous.into(),
                changed_ms: 1,
            },
            ..rondo_core::testkit::fixtures::group(app)
        }
    }

    fn access(config: XxlConfig) -> Access {
        let a = Access::new(&config);
        a.replace([
            group("billing", true, "billing-token", ""),
            group("report", true, "report-new", "report-old"),
            group("native", false, "never-used", ""),
            group("bare", true, "", ""),
        ]);
        a
    }

    #[test]
    fn a_token_opens_its_own_group_only_and_never_a_native_one() {
        let a = access(XxlConfig::default());
        let fp = fingerprint("billing-token");
        assert_eq!(a.verdict("billing", "billing-token"), Verdict::Opens(fp));
        assert_eq!(a.verdict("report", "billing-token"), Verdict::WrongToken);
        assert_eq!(a.verdict("billing", ""), Verdict::WrongToken);
        assert_eq!(a.verdict("billing", "billing-toke"), Verdict::WrongToken);
        assert_eq!(a.verdict("native", "never-used"), Verdict::NotServed);
        assert_eq!(a.verdict("nowhere", "billing-token"), Verdict::NotServed);
        assert_eq!(
            a.verdict("bare", ""),
            Verdict::WrongToken,
            "no token, no call"
        );
        assert!(a.opens_any("report-old"));
        assert!(!a.opens_any("never-used"));
        assert!(!a.opens_any(""));
    }

    #[test]
    fn during_a_rotation_both_tokens_open_and_each_executor_gets_its_own() {
        let a = access(XxlConfig::default());
        for t in ["report-new", "report-old"] {
            assert!(matches!(a.verdict("report", t), Verdict::Opens(_)), "{t}");
        }
        assert_eq!(
            a.token_for("report", &fingerprint("report-old")),
            "report-old"
        );
        assert_eq!(
            a.token_for("report", &fingerprint("report-new")),
            "report-new"
        );
        assert_eq!(
            a.token_for("report", ""),
            "report-new",
            "listed: the current"
        );
        assert_eq!(a.token_for("native", ""), "", "never sent a native group's");
    }

    #[test]
    fn the_shared_token_opens_every_served_group_only_when_configured() {
        let shared = XxlConfig {
            shared_token: true,
            access_token: "one-for-all".into(),
            ..XxlConfig::default()
        };
        let a = access(shared);
        for app in ["billing", "report", "bare"] {
            assert!(
                matches!(a.verdict(app, "one-for-all"), Verdict::Opens(_)),
                "{app}"
            );
        }
        assert_eq!(a.verdict("native", "one-for-all"), Verdict::NotServed);
        assert_eq!(a.token_for("bare", ""), "one-for-all");
        let not_shared = XxlConfig {
            access_token: "one-for-all".into(),
            ..XxlConfig::default()
        };
        let a = access(not_shared);
        assert_eq!(a.verdict("bare", "one-for-all"), Verdict::WrongToken);
    }

    #[test]
    fn without_a_token_only_when_allowed_and_only_for_groups_without_one() {
        let dev = XxlConfig {
            allow_no_token: true,
            ..XxlConfig::default()
        };
        let a = access(dev);
        assert!(matches!(a.verdict("bare", ""), Verdict::Opens(_)));
        assert_eq!(a.verdict("billing", ""), Verdict::WrongToken);
    }
}
