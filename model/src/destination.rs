//! Where a job's or an alarm's outbound HTTP may go: not to this host,
//! and not to an internal or special-purpose address (private ranges, a
//! cloud's metadata service, documentation and benchmarking ranges,
//! tunnels), unless an allow-list names it (`executor.http_allow`,
//! `alarm.webhook_allow`, `xxl.address_allow`).
//!
//! The rule is judged on an address, not a name: the caller checks every
//! address a host name resolves to (a name that resolves to `127.0.0.1`
//! is loopback), at every redirect. This module is the rule, pure: the
//! host's own addresses are given to it ([`OwnAddresses`]);
//! `rondo_core::destination` reads them from the system and keeps them
//! fresh, and `rondo_core::outbound` has the HTTP clients that apply it.
//!
//! # The rule
//!
//! An address is looked into first: an IPv6 address that stands for an
//! IPv4 one (`::ffff:a.b.c.d`, NAT64 `64:ff9b::a.b.c.d`, 6to4
//! `2002:AABB:CCDD::`) is judged as that IPv4 address; a Teredo address
//! (`2001:0::/32`) is judged by its client's IPv4 address and then refused
//! as a tunnel. Then, in order:
//!
//! 1. **The host's own addresses** (every interface's, and every range
//!    the kernel delivers locally) are refused unless an allow entry
//!    *names that address itself* (`192.0.2.2`, not `192.0.2.0/24`): an
//!    operator who allows `10.0.0.0/8` for internal services has not said
//!    "this machine". Loopback is not judged here but as a range (step 2),
//!    so `127.0.0.1` or `127.0.0.0/8` in the list opens it.
//! 2. **The restricted ranges** ([`ranges`]) are refused unless an allow
//!    entry contains the address.
//! 3. Anything else is public and allowed.

use std::net::IpAddr;

use crate::error::Error;

mod cidr;
mod ranges;
#[cfg(test)]
mod tests;

pub use cidr::Cidr;
use ranges::{Embedded, restricted};

/// The host's own addresses: each interface's and each range the kernel
/// delivers to this machine (Linux's local routing table), as read at one
/// moment.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnAddresses {
    ranges: Vec<Cidr>,
}

impl OwnAddresses {
    pub fn new(ranges: Vec<Cidr>) -> OwnAddresses {
        OwnAddresses { ranges }
    }

    /// The ranges, as given.
    pub fn ranges(&self) -> &[Cidr] {
        &self.ranges
    }

    /// Whether `ip` is one of this host's addresses.
    pub fn contains(&self, ip: IpAddr) -> bool {
        self.ranges.iter().any(|range| range.contains(ip))
    }
}

/// The destination rule of one client: the restricted ranges, the host's
/// own addresses, and the allow-list of what it may reach though it is
/// restricted. See the module doc for the order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Rule {
    allow: Vec<Cidr>,
}

impl Rule {
    /// Parses the allow-list of config key `key` (each entry a range or an
    /// address); the error names the key and the entry.
    pub fn parse(key: &str, entries: &[String]) -> Result<Rule, Error> {
        let allow = entries
            .iter()
            .map(|e| e.parse::<Cidr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|why| Error::invalid(key, why))?;
        Ok(Rule { allow })
    }

    /// `Ok` if `ip` may be reached from a host whose addresses are `own`.
    /// Otherwise the reason, naming the address and why it is refused.
    pub fn judge(&self, ip: IpAddr, own: &OwnAddresses) -> Result<(), String> {
        match Embedded::of(ip) {
            Embedded::Plain(ip) => self.judge_plain(ip, own),
            Embedded::Carries(v4) => self
                .judge_plain(IpAddr::V4(v4), own)
                .map_err(|why| format!("{ip} stands for {v4}: {why}")),
            Embedded::Teredo { tunnel, client } => {
                self.judge_plain(IpAddr::V4(client), own)
                    .map_err(|why| format!("{tunnel} is a Teredo tunnel to {client}: {why}"))?;
                self.judge_plain(IpAddr::V6(tunnel), own)
            }
        }
    }

    /// The rule for an address that carries no other.
    fn judge_plain(&self, ip: IpAddr, own: &OwnAddresses) -> Result<(), String> {
        // Loopback is judged as a range: an entry containing it opens it.
        if !ip.is_loopback() && own.contains(ip) && !self.allow.iter().any(|c| c.names(ip)) {
            return Err(format!(
                "{ip} is an address of this host, allowed only by an entry naming it ({ip})"
            ));
        }
        match restricted(ip) {
            Some(kind) if !self.allow.iter().any(|c| c.contains(ip)) => {
                Err(format!("{ip} is a {kind} address, not on the allow-list"))
            }
            _ => Ok(()),
        }
    }
}
