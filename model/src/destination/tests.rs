use super::*;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The rule with `allow`, on a host whose addresses are `own`.
fn rule(allow: &[&str]) -> Rule {
    let entries: Vec<String> = allow.iter().map(|s| s.to_string()).collect();
    Rule::parse("executor.http_allow", &entries).unwrap()
}

fn own(ranges: &[&str]) -> OwnAddresses {
    OwnAddresses::new(ranges.iter().map(|r| r.parse().unwrap()).collect())
}

/// Why `addr` is refused by `rule` with no own address, panicking if it
/// passes.
fn refused(rule: &Rule, addr: &str) -> String {
    match rule.judge(ip(addr), &OwnAddresses::default()) {
        Err(why) => why,
        Ok(()) => panic!("{addr} passed"),
    }
}

fn passes(rule: &Rule, addr: &str) {
    let verdict = rule.judge(ip(addr), &OwnAddresses::default());
    assert_eq!(verdict, Ok(()), "{addr} passes");
}

#[test]
fn restricted_ranges_are_refused_and_public_ones_pass() {
    let none = Rule::default();
    for addr in [
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
        refused(&none, addr);
    }
    for addr in ["8.8.8.8", "172.32.0.1", "100.128.0.1", "2001:4860::8888"] {
        passes(&none, addr);
    }
}

/// Each range added from IANA's registries: its first and last address
/// refused with its kind, the addresses just outside passing (or, in
/// IPv6 outside `2000::/3`, refused as something else).
#[test]
fn the_special_purpose_ranges_are_refused_from_edge_to_edge() {
    let none = Rule::default();
    let ranges: &[(&str, &str, &str, &[&str])] = &[
        (
            "192.0.2.0",
            "192.0.2.255",
            "TEST-NET-1",
            &["192.0.1.255", "192.0.3.0"],
        ),
        (
            "198.51.100.0",
            "198.51.100.255",
            "TEST-NET-2",
            &["198.51.99.255", "198.51.101.0"],
        ),
        (
            "203.0.113.0",
            "203.0.113.255",
            "TEST-NET-3",
            &["203.0.112.255", "203.0.114.0"],
        ),
        (
            "192.88.99.0",
            "192.88.99.255",
            "6to4 relay",
            &["192.88.98.255", "192.88.100.0"],
        ),
        (
            "2001:db8::",
            "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff",
            "documentation",
            &["2001:db7:ffff:ffff:ffff:ffff:ffff:ffff", "2001:db9::"],
        ),
        (
            "3fff::",
            "3fff:fff:ffff:ffff:ffff:ffff:ffff:ffff",
            "documentation",
            &["3ffe:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "3fff:1000::"],
        ),
        (
            "2001::",
            "2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff",
            "",
            &["2000:ffff:ffff:ffff:ffff:ffff:ffff:ffff", "2001:200::"],
        ),
        (
            "2001:2::",
            "2001:2:0:ffff:ffff:ffff:ffff:ffff",
            "benchmarking",
            &[],
        ),
        (
            "64:ff9b:1::",
            "64:ff9b:1:ffff:ffff:ffff:ffff:ffff",
            "local-use NAT64",
            &[],
        ),
        ("100::", "100::ffff:ffff:ffff:ffff", "discard-only", &[]),
        (
            "100:0:0:1::",
            "100::1:ffff:ffff:ffff:ffff",
            "dummy prefix",
            &[],
        ),
        (
            "5f00::",
            "5f00:ffff:ffff:ffff:ffff:ffff:ffff:ffff",
            "SRv6",
            &[],
        ),
        ("::0.0.0.2", "::255.255.255.255", "IPv4-compatible", &[]),
    ];
    for (first, last, kind, outside) in ranges {
        for addr in [first, last] {
            let why = refused(&none, addr);
            assert!(why.contains(kind), "{addr}: {why}");
        }
        for addr in outside.iter() {
            passes(&none, addr);
        }
    }
    // Just outside the local-use NAT64 and the discard-only ranges is
    // still outside `2000::/3`: refused, as reserved.
    for addr in [
        "64:ff9b:0:ffff::",
        "64:ff9b:2::",
        "100:0:0:2::",
        "5eff::1",
        "4000::",
    ] {
        let why = refused(&none, addr);
        assert!(why.contains("reserved"), "{addr}: {why}");
    }
    for addr in ["2000::", "3fff:ffff:ffff:ffff:ffff:ffff:ffff:ffff"] {
        passes(&none, addr);
    }
}

#[test]
fn a_6to4_address_is_judged_as_the_ipv4_address_it_carries() {
    let none = Rule::default();
    // 2002:7f00:0001:: is the 6to4 site of 127.0.0.1.
    let why = refused(&none, "2002:7f00:1::1");
    assert!(why.contains("127.0.0.1 is a loopback address"), "{why}");
    let why = refused(&none, "2002:a9fe:a9fe::");
    assert!(why.contains("169.254.169.254 is a link-local"), "{why}");
    let why = refused(&none, "2002:c000:0202:ffff:ffff:ffff:ffff:ffff");
    assert!(why.contains("192.0.2.2 is a documentation"), "{why}");
    passes(&none, "2002:808:808::1");
    // The allow-list opens it as it opens the IPv4 address.
    passes(&rule(&["127.0.0.1"]), "2002:7f00:1::1");
    refused(&rule(&["127.0.0.1"]), "2002:7f00:2::1");
}

#[test]
fn a_teredo_address_is_judged_by_its_client_then_refused_as_a_tunnel() {
    let none = Rule::default();
    // The client is the last 32 bits inverted: !80ff:fffe = 127.0.0.1.
    let to_loopback = "2001:0:4136:e378:8000:63bf:80ff:fffe";
    let why = refused(&none, to_loopback);
    assert!(
        why.contains("Teredo tunnel to 127.0.0.1: 127.0.0.1 is a loopback"),
        "{why}"
    );
    // !f7f7:f7f7 = 8.8.8.8, public: still refused, as a tunnel.
    let to_public = "2001:0:4136:e378:8000:63bf:f7f7:f7f7";
    let why = refused(&none, to_public);
    assert!(why.contains("is a Teredo tunnel address"), "{why}");
    // Allowing the tunnel range opens a tunnel to a public client only.
    let tunnels = rule(&["2001::/32"]);
    passes(&tunnels, to_public);
    let why = refused(&tunnels, to_loopback);
    assert!(why.contains("loopback"), "{why}");
}

#[test]
fn the_hosts_own_addresses_are_opened_only_by_an_entry_naming_them() {
    let host = own(&[
        "127.0.0.0/8",
        "93.184.216.34",
        "10.1.2.3",
        "fd00::2",
        "2a00:1450::7",
    ]);
    let judge = |allow: &[&str], addr: &str| rule(allow).judge(ip(addr), &host);
    // A public address of this host is refused, its neighbour is not.
    let why = judge(&[], "93.184.216.34").unwrap_err();
    assert!(why.contains("is an address of this host"), "{why}");
    assert_eq!(judge(&[], "93.184.216.35"), Ok(()));
    assert!(judge(&[], "2a00:1450::7").is_err());
    // So is every form that carries it.
    for carried in [
        "::ffff:93.184.216.34",
        "64:ff9b::5db8:d822",
        "2002:5db8:d822::1",
    ] {
        let why = judge(&[], carried).unwrap_err();
        assert!(
            why.contains("93.184.216.34 is an address of this host"),
            "{why}"
        );
    }
    // A range that holds it does not open it; the address itself does.
    assert!(judge(&["93.184.216.0/24"], "93.184.216.34").is_err());
    assert!(judge(&["0.0.0.0/0"], "93.184.216.34").is_err());
    assert_eq!(judge(&["93.184.216.34"], "93.184.216.34"), Ok(()));
    assert_eq!(judge(&["93.184.216.34/32"], "93.184.216.34"), Ok(()));
    // A private address of the host: `10.0.0.0/8` opens the network, not
    // this machine.
    assert!(judge(&["10.0.0.0/8"], "10.1.2.3").is_err());
    assert_eq!(judge(&["10.0.0.0/8"], "10.1.2.4"), Ok(()));
    assert_eq!(judge(&["10.1.2.3"], "10.1.2.3"), Ok(()));
    assert!(judge(&["fd00::/8"], "fd00::2").is_err());
    assert_eq!(judge(&["fd00::2"], "fd00::2"), Ok(()));
    // Loopback stays a range: an entry containing it opens it.
    assert_eq!(judge(&["127.0.0.0/8"], "127.0.0.5"), Ok(()));
    assert_eq!(judge(&["127.0.0.1"], "127.0.0.1"), Ok(()));
    let why = judge(&["127.0.0.1"], "127.0.0.2").unwrap_err();
    assert!(why.contains("loopback"), "{why}");
}

#[test]
fn the_allow_list_opens_what_it_names_and_nothing_else() {
    let allow = rule(&["10.1.0.0/16", "127.0.0.1", "fd00::/8"]);
    passes(&allow, "10.1.200.3");
    passes(&allow, "127.0.0.1");
    passes(&allow, "::ffff:127.0.0.1");
    passes(&allow, "fd12::1");
    refused(&allow, "10.2.0.1");
    refused(&allow, "127.0.0.2");
    let why = refused(&allow, "169.254.169.254");
    assert!(why.contains("link-local"), "{why}");
}

#[test]
fn a_bad_entry_is_named_with_its_key() {
    for bad in ["internal.example", "10.0.0.0/33", "::1/200", ""] {
        let e = Rule::parse("alarm.webhook_allow", &[bad.into()]).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("alarm.webhook_allow"), "{bad}");
    }
}
