//! Where a job's or an alarm's outbound HTTP may go: never to this host,
//! its network's private ranges or a cloud's metadata service, unless an
//! allow-list names them (`executor.http_allow`, `alarm.webhook_allow`).
//!
//! The rule is judged on an address, not a name: the caller checks every
//! address a host name resolves to (a name that resolves to `127.0.0.1`
//! is loopback), at every redirect. This module is the rule; the HTTP
//! clients that apply it are `rondo_core::outbound`.

use std::net::{IpAddr, Ipv4Addr};
use std::str::FromStr;

use crate::error::Error;

/// The ranges refused unless allowed, with the name an error gives them.
/// IPv4 first; an IPv6 address that embeds an IPv4 one (`::ffff:a.b.c.d`,
/// `64:ff9b::a.b.c.d`) is judged as that IPv4 address.
const RESTRICTED_V4: &[(&str, &str)] = &[
    ("0.0.0.0/8", "this network"),
    ("127.0.0.0/8", "loopback"),
    ("10.0.0.0/8", "private"),
    ("172.16.0.0/12", "private"),
    ("192.168.0.0/16", "private"),
    // AWS, GCP, Azure and others' metadata service is 169.254.169.254.
    ("169.254.0.0/16", "link-local"),
    // Carrier-grade NAT; Alibaba Cloud's metadata service is 100.100.100.200.
    ("100.64.0.0/10", "shared (carrier-grade NAT)"),
    // IETF protocol assignments; Oracle Cloud's metadata is 192.0.0.192.
    ("192.0.0.0/24", "IETF protocol assignment"),
    ("198.18.0.0/15", "benchmarking"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
];

const RESTRICTED_V6: &[(&str, &str)] = &[
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    // Unique-local: private networks, and AWS's IPv6 metadata fd00:ec2::254.
    ("fc00::/7", "unique-local"),
    ("ff00::/8", "multicast"),
];

/// An address range: an address and how many leading bits count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr {
    addr: IpAddr,
    bits: u8,
}

impl Cidr {
    /// Whether `ip` is in this range (an IPv4 range never holds an IPv6
    /// address, and the other way round).
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => prefix_eq(&net.octets(), &ip.octets(), self.bits),
            (IpAddr::V6(net), IpAddr::V6(ip)) => prefix_eq(&net.octets(), &ip.octets(), self.bits),
            _ => false,
        }
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
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let bits = match bits {
            None => max,
            Some(b) => b
                .trim()
                .parse::<u8>()
                .ok()
                .filter(|b| *b <= max)
                .ok_or_else(|| format!("{text:?}: the prefix length must be 0 to {max}"))?,
        };
        Ok(Cidr { addr, bits })
    }
}

/// The allow-list of one client: ranges it may reach though they are
/// restricted.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Destinations {
    allow: Vec<Cidr>,
}

impl Destinations {
    /// Parses the allow-list of config key `key` (each entry a range or an
    /// address); the error names the key and the entry.
    pub fn parse(key: &str, entries: &[String]) -> Result<Destinations, Error> {
        let allow = entries
            .iter()
            .map(|e| e.parse::<Cidr>())
            .collect::<Result<Vec<_>, _>>()
            .map_err(|why| Error::invalid(key, why))?;
        Ok(Destinations { allow })
    }

    /// `Ok` if `ip` may be reached: not restricted, or allowed. Otherwise
    /// the reason, naming the address and its range's kind.
    pub fn check(&self, ip: IpAddr) -> Result<(), String> {
        let ip = canonical(ip);
        match restricted(ip) {
            Some(kind) if !self.allow.iter().any(|c| c.contains(ip)) => {
                Err(format!("{ip} is a {kind} address, not on the allow-list"))
            }
            _ => Ok(()),
        }
    }
}

/// An IPv6 address that carries an IPv4 one, as that IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    let IpAddr::V6(v6) = ip else {
        return ip;
    };
    if let Some(v4) = v6.to_ipv4_mapped() {
        return IpAddr::V4(v4);
    }
    // NAT64 (64:ff9b::/96) reaches the IPv4 address in its last 32 bits.
    let seg = v6.segments();
    if seg[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        let [.., a, b, c, d] = v6.octets();
        return IpAddr::V4(Ipv4Addr::new(a, b, c, d));
    }
    IpAddr::V6(v6)
}

/// The kind of restricted range `ip` is in, if any.
fn restricted(ip: IpAddr) -> Option<&'static str> {
    // The tables, parsed once (every outbound connection asks).
    static PARSED: std::sync::LazyLock<Vec<(Cidr, &'static str)>> =
        std::sync::LazyLock::new(|| {
            RESTRICTED_V4
                .iter()
                .chain(RESTRICTED_V6)
                .map(|(range, kind)| (range.parse().expect("the table's ranges parse"), *kind))
                .collect()
        });
    if ip == IpAddr::V4(Ipv4Addr::BROADCAST) {
        return Some("broadcast");
    }
    // A range of the other family never holds `ip` (`Cidr::contains`).
    PARSED
        .iter()
        .find_map(|(cidr, kind)| cidr.contains(ip).then_some(*kind))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn restricted_ranges_are_refused_and_public_ones_pass() {
        let none = Destinations::default();
        for refused in [
            "127.0.0.1",
            "127.9.9.9",
            "0.0.0.0",
            "10.1.2.3",
            "172.16.0.1",
            "172.31.255.255",
            "192.168.1.1",
            "169.254.169.254",
            "100.100.100.200",
            "192.0.0.192",
            "224.0.0.1",
            "255.255.255.255",
            "::1",
            "::",
            "fe80::1",
            "fd00:ec2::254",
            "::ffff:127.0.0.1",
            "::ffff:169.254.169.254",
            "64:ff9b::a9fe:a9fe",
        ] {
            assert!(none.check(ip(refused)).is_err(), "{refused} is refused");
        }
        for open in ["8.8.8.8", "172.32.0.1", "100.128.0.1", "2001:4860::8888"] {
            assert_eq!(none.check(ip(open)), Ok(()), "{open} passes");
        }
    }

    #[test]
    fn the_allow_list_opens_what_it_names_and_nothing_else() {
        let allow = Destinations::parse(
            "executor.http_allow",
            &["10.1.0.0/16".into(), "127.0.0.1".into(), "fd00::/8".into()],
        )
        .unwrap();
        assert_eq!(allow.check(ip("10.1.200.3")), Ok(()));
        assert_eq!(allow.check(ip("127.0.0.1")), Ok(()));
        assert_eq!(allow.check(ip("::ffff:127.0.0.1")), Ok(()));
        assert_eq!(allow.check(ip("fd12::1")), Ok(()));
        assert!(allow.check(ip("10.2.0.1")).is_err());
        assert!(allow.check(ip("127.0.0.2")).is_err());
        assert!(allow.check(ip("169.254.169.254")).is_err());
        let why = allow.check(ip("169.254.169.254")).unwrap_err();
        assert!(why.contains("link-local"), "{why}");
    }

    #[test]
    fn a_bad_entry_is_named_with_its_key() {
        for bad in ["internal.example", "10.0.0.0/33", "::1/200", ""] {
            let e = Destinations::parse("alarm.webhook_allow", &[bad.into()]).unwrap_err();
            assert_eq!(e.field.as_deref(), Some("alarm.webhook_allow"), "{bad}");
        }
    }
}
