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
use std::str::FromStr;

use crate::error::Error;

mod ranges;
#[cfg(test)]
mod tests;

use ranges::{Embedded, restricted};

/// An address range: an address and how many leading bits count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    bits: u8,
}

impl Cidr {
    /// The range of one address.
    pub fn single(addr: IpAddr) -> Cidr {
        let bits = if addr.is_ipv4() { 32 } else { 128 };
        Cidr { addr, bits }
    }

    /// `addr/bits`; `None` when `bits` is longer than the family's.
    pub fn new(addr: IpAddr, bits: u8) -> Option<Cidr> {
        let max = if addr.is_ipv4() { 32 } else { 128 };
        (bits <= max).then_some(Cidr { addr, bits })
    }

    /// The range's first address, as given.
    pub fn addr(&self) -> IpAddr {
        self.addr
    }

    /// How many leading bits count.
    pub fn bits(&self) -> u8 {
        self.bits
    }

    /// Whether `ip` is in this range (an IPv4 range never holds an IPv6
    /// address, and the other way round).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => prefix_eq(&net.octets(), &ip.octets(), self.bits),
            (IpAddr::V6(net), IpAddr::V6(ip)) => prefix_eq(&net.octets(), &ip.octets(), self.bits),
            _ => false,
        }
    }

    /// Whether this range is `ip` alone (`192.0.2.2`, `192.0.2.2/32`).
    pub fn names(&self, ip: IpAddr) -> bool {
        *self == Cidr::single(ip)
    }
}

fn prefix_eq(a: &[u8], b: &[u8], bits: u8) -> bool {
    let bits = usize::from(bits);
    let (whole, rest) = (bits / 8, bits % 8);
    if a[..whole] != b[..whole] {
        return false;
    }
    rest == 0 || {
        let mask = 0xffu8 << (8 - rest);
        a[whole] & mask == b[whole] & mask
    }
}

impl FromStr for Cidr {
    type Err = String;

    /// `10.0.0.0/8`, `fd00::/8`, or a single address (`192.168.1.20`).
    fn from_str(text: &str) -> Result<Cidr, String> {
        let (addr, bits) = match text.split_once('/') {
            Some((addr, bits)) => (addr, Some(bits)),
            None => (text, None),
        };
        let addr: IpAddr = addr.trim().parse().map_err(|_| {
            format!("{text:?} is not an address or a range (10.0.0.0/8, fd00::/8, 192.168.1.20)")
        })?;
        let Some(bits) = bits else {
            return Ok(Cidr::single(addr));
        };
        let max = if addr.is_ipv4() { 32 } else { 128 };
        bits.trim()
            .parse::<u8>()
            .ok()
            .and_then(|bits| Cidr::new(addr, bits))
            .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))
    }
}

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
