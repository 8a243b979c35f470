//! The destination rule as a process applies it: rondo-model's pure
//! [`Rule`] (the restricted ranges and an allow-list) with this host's own
//! addresses, read from the system ([`local`]) and kept fresh.
//!
//! [`Destinations`] is what a client holds: built from an allow-list key
//! (`executor.http_allow`, `alarm.webhook_allow`, `xxl.address_allow`),
//! asked about every address it is about to connect to
//! ([`Destinations::check`]). The HTTP clients that do so are
//! [`crate::outbound`].

use std::net::IpAddr;
use std::sync::Arc;

pub use rondo_model::destination::{Cidr, OwnAddresses, Rule};

use crate::error::Error;

pub mod local;

/// One client's destination rule, with the host's addresses it is judged
/// against. Cheap to clone.
#[derive(Debug, Clone, Default)]
pub struct Destinations {
    rule: Rule,
    host: Host,
}

/// Where the host's own addresses come from.
#[derive(Debug, Clone, Default)]
enum Host {
    /// The system's, as [`local::own_addresses`] keeps them.
    #[default]
    System,
    /// Given (tests, and embedders that know better).
    Fixed(Arc<OwnAddresses>),
}

impl Destinations {
    /// The rule of config key `key` on this host (each entry a range or an
    /// address); the error names the key and the entry.
    pub fn parse(key: &str, entries: &[String]) -> Result<Destinations, Error> {
        let rule = Rule::parse(key, entries)?;
        Ok(Destinations {
            rule,
            host: Host::System,
        })
    }

    /// `rule` judged as on a host whose addresses are `own`.
    pub fn with_own(rule: Rule, own: OwnAddresses) -> Destinations {
        Destinations {
            rule,
            host: Host::Fixed(Arc::new(own)),
        }
    }

    /// `Ok` if `ip` may be reached now. Otherwise the reason, naming the
    /// address and why it is refused.
    pub fn check(&self, ip: IpAddr) -> Result<(), String> {
        match &self.host {
            Host::System => self.rule.judge(ip, &local::own_addresses()),
            Host::Fixed(own) => self.rule.judge(ip, own),
        }
    }
}
