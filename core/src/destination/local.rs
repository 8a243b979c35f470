//! This host's own addresses, as Linux delivers them: every range of the
//! local routing table (`/proc/net/fib_trie`'s `LOCAL` entries: each
//! interface's addresses, and a whole range where a local route says so),
//! IPv6 local routes (`/proc/net/ipv6_route`, flag `RTF_LOCAL`) and every
//! interface's IPv6 address (`/proc/net/if_inet6`).
//!
//! Read when first asked and again when asked more than [`REFRESH`] after
//! the last read, so an address added later (DHCP, a container's network
//! coming up) is refused within that time, at the cost of reading three
//! small files at most once per [`REFRESH`]. A system without these files
//! (not Linux) has no own address known: the ranges alone apply there,
//! and a warning says so once.

use std::net::{IpAddr, Ipv6Addr};
use std::sync::{Arc, LazyLock, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rondo_model::destination::{Cidr, OwnAddresses};

/// How long a read of the host's addresses is used.
pub const REFRESH: Duration = Duration::from_secs(1);

/// How a file of `/proc/net` is read into ranges.
type Parser = fn(&str) -> Vec<Cidr>;

/// A read of the host's addresses and when it was made.
type Read = Option<(Instant, Arc<OwnAddresses>)>;

/// The files read, and how each is parsed.
const SOURCES: &[(&str, Parser)] = &[
    ("/proc/net/fib_trie", fib_trie_local),
    ("/proc/net/ipv6_route", ipv6_route_local),
    ("/proc/net/if_inet6", if_inet6),
];

/// `RTF_LOCAL` in `/proc/net/ipv6_route`'s flags.
const RTF_LOCAL: u32 = 0x8000_0000;

/// The last read and when it was made.
static LAST: LazyLock<Mutex<Read>> = LazyLock::new(|| Mutex::new(None));

/// The host's own addresses, read at most [`REFRESH`] ago.
pub fn own_addresses() -> Arc<OwnAddresses> {
    let fresh = |last: &Read| {
        last.as_ref()
            .filter(|(at, _)| at.elapsed() < REFRESH)
            .map(|(_, own)| own.clone())
    };
    if let Some(own) = fresh(&LAST.lock().unwrap_or_else(PoisonError::into_inner)) {
        return own;
    }
    // Read outside the lock: two callers may both read, neither waits.
    let own = Arc::new(read());
    *LAST.lock().unwrap_or_else(PoisonError::into_inner) = Some((Instant::now(), own.clone()));
    own
}

/// Reads every source now.
pub fn read() -> OwnAddresses {
    static WARNED: std::sync::Once = std::sync::Once::new();
    let mut ranges: Vec<Cidr> = Vec::new();
    for (path, parse) in SOURCES {
        match std::fs::read_to_string(path) {
            Ok(text) => ranges.extend(parse(&text)),
            Err(e) => WARNED.call_once(|| {
                tracing::warn!(
                    path, error = %e,
                    "cannot read the host's own addresses: outbound destinations are judged by their ranges only"
                )
            }),
        }
    }
    let mut unique: Vec<Cidr> = Vec::with_capacity(ranges.len());
    for range in ranges {
        if !unique.contains(&range) {
            unique.push(range);
        }
    }
    OwnAddresses::new(unique)
}

/// The `LOCAL` entries of `/proc/net/fib_trie`: a leaf line `|-- <addr>`
/// followed by its entries, `/<len> <scope> <type>`.
fn fib_trie_local(text: &str) -> Vec<Cidr> {
    let mut leaf: Option<IpAddr> = None;
    let mut found = Vec::new();
    for line in text.lines().map(str::trim) {
        if let Some(addr) = line.strip_prefix("|-- ") {
            leaf = addr.trim().parse().ok();
            continue;
        }
        let Some(entry) = line.strip_prefix('/') else {
            continue;
        };
        let fields: Vec<&str> = entry.split_whitespace().collect();
        let (Some(addr), [len, .., "LOCAL"]) = (leaf, fields.as_slice()) else {
            continue;
        };
        found.extend(len.parse().ok().and_then(|len| Cidr::new(addr, len)));
    }
    found
}

/// The local routes of `/proc/net/ipv6_route`: destination (32 hex
/// digits), prefix length (hex), …, flags (hex, the 9th field).
fn ipv6_route_local(text: &str) -> Vec<Cidr> {
    text.lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let flags = u32::from_str_radix(fields.get(8)?, 16).ok()?;
            if flags & RTF_LOCAL == 0 {
                return None;
            }
            let len = u8::from_str_radix(fields.get(1)?, 16).ok()?;
            Cidr::new(IpAddr::V6(hex_v6(fields.first()?)?), len)
        })
        .collect()
}

/// Every address of `/proc/net/if_inet6` (its first field, 32 hex digits).
fn if_inet6(text: &str) -> Vec<Cidr> {
    text.lines()
        .filter_map(|line| hex_v6(line.split_whitespace().next()?))
        .map(|v6| Cidr::single(IpAddr::V6(v6)))
        .collect()
}

fn hex_v6(hex: &str) -> Option<Ipv6Addr> {
    (hex.len() == 32)
        .then(|| u128::from_str_radix(hex, 16).ok())
        .flatten()
        .map(Ipv6Addr::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    const FIB_TRIE: &str = "\
Main:
  +-- 0.0.0.0/0 3 0 5
     |-- 0.0.0.0
        /0 universe UNICAST
     +-- 192.0.2.0/24 2 0 2
        +-- 192.0.2.0/30 2 0 2
           |-- 192.0.2.0
              /24 link UNICAST
           |-- 192.0.2.2
              /32 host LOCAL
        |-- 192.0.2.255
           /32 link BROADCAST
Local:
  +-- 0.0.0.0/0 3 0 5
     +-- 127.0.0.0/8 2 0 2
        +-- 127.0.0.0/31 1 0 0
           |-- 127.0.0.0
              /8 host LOCAL
           |-- 127.0.0.1
              /32 host LOCAL
     |-- 10.9.0.0
        /16 host LOCAL
";

    #[test]
    fn the_local_entries_of_fib_trie_are_the_hosts() {
        let found = OwnAddresses::new(fib_trie_local(FIB_TRIE));
        for own in ["192.0.2.2", "127.0.0.1", "127.5.5.5", "10.9.200.1"] {
            assert!(found.contains(ip(own)), "{own}");
        }
        for other in ["192.0.2.1", "192.0.2.255", "0.0.0.1", "10.8.0.1"] {
            assert!(!found.contains(ip(other)), "{other}");
        }
    }

    #[test]
    fn ipv6_local_routes_and_interface_addresses_are_the_hosts() {
        let routes = "\
fd000000000000000000000000000000 40 00000000000000000000000000000000 00 00000000000000000000000000000000 00000100 00000001 00000000 00000001     eth0
00000000000000000000000000000001 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000002 00000000 80200001       lo
fd000000000000000000000000000002 80 00000000000000000000000000000000 00 00000000000000000000000000000000 00000000 00000003 00000000 80200001     eth0
";
        let interfaces = "fe8000000000000000fc00fffe000001 04 40 20 80     eth0\n";
        let mut ranges = ipv6_route_local(routes);
        ranges.extend(if_inet6(interfaces));
        let found = OwnAddresses::new(ranges);
        for own in ["::1", "fd00::2", "fe80::fc:ff:fe00:1"] {
            assert!(found.contains(ip(own)), "{own}");
        }
        // The on-link route of fd00::/64 is not local: its other hosts
        // are not this one.
        assert!(!found.contains(ip("fd00::3")));
    }

    /// On Linux (where rondo runs) the system's own addresses include
    /// loopback, so the reader found the files and parsed them.
    #[test]
    #[cfg(target_os = "linux")]
    fn the_system_read_finds_loopback() {
        let own = own_addresses();
        assert!(own.contains(ip("127.0.0.1")), "{own:?}");
        assert!(
            Arc::ptr_eq(&own, &own_addresses()),
            "read again within REFRESH"
        );
    }
}
