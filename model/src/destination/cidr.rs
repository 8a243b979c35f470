//! An address range (`10.0.0.0/8`, `fd00::/8`, `192.168.1.20`), as the
//! allow-lists, the restricted ranges and the host's addresses are given.

use std::net::IpAddr;
use std::str::FromStr;

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
