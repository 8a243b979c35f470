//! The ranges refused unless allowed, from IANA's IPv4 and IPv6
//! Special-Purpose Address Registries (and the IPv6 address space: only
//! `2000::/3` is global unicast), and the IPv6 forms that carry an IPv4
//! address.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::LazyLock;

use super::cidr::Cidr;

/// The IPv4 ranges refused unless allowed, with the name an error gives
/// them. Anything not listed is public.
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
    // Documentation ranges: no public host is there, so a machine or a
    // lab network that uses one is internal (RFC 5737).
    ("192.0.2.0/24", "documentation (TEST-NET-1)"),
    ("198.51.100.0/24", "documentation (TEST-NET-2)"),
    ("203.0.113.0/24", "documentation (TEST-NET-3)"),
    // The deprecated 6to4 relays' anycast (RFC 7526).
    ("192.88.99.0/24", "6to4 relay anycast"),
    ("198.18.0.0/15", "benchmarking"),
    ("224.0.0.0/4", "multicast"),
    ("240.0.0.0/4", "reserved"),
];

/// The IPv6 ranges refused unless allowed; the first that holds an
/// address names it. Whatever is outside `2000::/3` and not listed is
/// refused as `reserved` ([`restricted`]). `::ffff:0:0/96`,
/// `64:ff9b::/96` and `2002::/16` never get here: they are judged as the
/// IPv4 address they carry ([`Embedded`]).
const RESTRICTED_V6: &[(&str, &str)] = &[
    ("::/128", "unspecified"),
    ("::1/128", "loopback"),
    // `::a.b.c.d`, deprecated (RFC 4291): no route but a tunnel's.
    ("::/96", "IPv4-compatible (deprecated)"),
    // Local-use NAT64 (RFC 8215): where the IPv4 address sits depends on
    // the operator's prefix length, so it cannot be judged; refused.
    ("64:ff9b:1::/48", "local-use NAT64"),
    ("100::/64", "discard-only"),
    ("100:0:0:1::/64", "dummy prefix"),
    // A Teredo address is also judged by its client ([`Embedded`]).
    ("2001::/32", "Teredo tunnel"),
    ("2001:2::/48", "benchmarking"),
    ("2001::/23", "IETF protocol assignment"),
    ("2001:db8::/32", "documentation"),
    ("3fff::/20", "documentation"),
    ("5f00::/16", "segment routing (SRv6 SID)"),
    // Unique-local: private networks, and AWS's IPv6 metadata fd00:ec2::254.
    ("fc00::/7", "unique-local"),
    ("fe80::/10", "link-local"),
    ("fec0::/10", "site-local"),
    ("ff00::/8", "multicast"),
];

/// The tables, parsed once (every outbound connection asks).
static PARSED: LazyLock<Vec<(Cidr, &'static str)>> = LazyLock::new(|| {
    RESTRICTED_V4
        .iter()
        .chain(RESTRICTED_V6)
        .map(|(range, kind)| (range.parse().expect("the table's ranges parse"), *kind))
        .collect()
});

/// The kind of restricted range `ip` is in, if any (`ip` as it is: the
/// caller looks inside the IPv6 forms that carry an IPv4 address first).
pub(super) fn restricted(ip: IpAddr) -> Option<&'static str> {
    if ip == IpAddr::V4(Ipv4Addr::BROADCAST) {
        return Some("broadcast");
    }
    // A range of the other family never holds `ip` (`Cidr::contains`).
    let listed = PARSED
        .iter()
        .find_map(|(cidr, kind)| cidr.contains(ip).then_some(*kind));
    match ip {
        IpAddr::V6(v6) if listed.is_none() && !is_global_unicast(v6) => Some("reserved"),
        _ => listed,
    }
}

/// Whether `ip` is in `2000::/3`, IANA's global unicast space.
fn is_global_unicast(ip: Ipv6Addr) -> bool {
    ip.segments()[0] & 0xe000 == 0x2000
}

/// What an address reaches once an IPv6 form that carries an IPv4
/// address is looked into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Embedded {
    /// The address itself.
    Plain(IpAddr),
    /// An IPv6 address that stands for an IPv4 one and is judged as it:
    /// IPv4-mapped (`::ffff:a.b.c.d`), NAT64 (`64:ff9b::a.b.c.d`), or
    /// 6to4 (`2002:AABB:CCDD::/48`, the site of `a.b.c.d`).
    Carries(Ipv4Addr),
    /// A Teredo address (`2001:0::/32`): a tunnel to the client address in
    /// its last 32 bits (inverted).
    Teredo { tunnel: Ipv6Addr, client: Ipv4Addr },
}

impl Embedded {
    /// `ip`, looked into.
    pub(super) fn of(ip: IpAddr) -> Embedded {
        let IpAddr::V6(v6) = ip else {
            return Embedded::Plain(ip);
        };
        if let Some(v4) = v6.to_ipv4_mapped() {
            return Embedded::Carries(v4);
        }
        let seg = v6.segments();
        let [.., a, b, c, d] = v6.octets();
        let last32 = Ipv4Addr::new(a, b, c, d);
        match seg {
            // NAT64 (64:ff9b::/96) reaches the IPv4 address in its last 32 bits.
            [0x64, 0xff9b, 0, 0, 0, 0, ..] => Embedded::Carries(last32),
            // 6to4 (RFC 3056): 2002:V4HI:V4LO::/48 is the site of V4.
            [0x2002, hi, lo, ..] => {
                Embedded::Carries(Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo)))
            }
            // Teredo (RFC 4380): the client's address, every bit inverted.
            [0x2001, 0, ..] => Embedded::Teredo {
                tunnel: v6,
                client: Ipv4Addr::from(!u32::from(last32)),
            },
            _ => Embedded::Plain(ip),
        }
    }
}
