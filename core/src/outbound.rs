//! HTTP clients that go only where [`Destinations`] allows: the `http`
//! handler's (`executor.http_allow`) and the alarm webhook's
//! (`alarm.webhook_allow`).
//!
//! The rule is applied to addresses, where a connection is made:
//! * a host name goes through [`guard`]'s resolver, which hands reqwest
//!   only the addresses the rule allows (a name all of whose addresses
//!   are refused fails with the reason), so a name pointed at `127.0.0.1`
//!   or rebound between two lookups is judged on what is connected to;
//! * an address written in the URL skips resolvers: [`check_url`] judges
//!   it before the request, and the redirect policy at every redirect;
//! * no proxy from the environment is used (it would resolve and connect
//!   in our place).

use std::error::Error as StdError;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use crate::destination::Destinations;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};
use reqwest::redirect::{Attempt, Policy};

/// The most redirects followed (reqwest's default).
const MAX_REDIRECTS: usize = 10;

/// A destination the rule refused; found in a request error's sources by
/// [`refused`].
#[derive(Debug, Clone)]
pub struct Refused(pub String);

impl fmt::Display for Refused {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "destination refused: {}", self.0)
    }
}

impl StdError for Refused {}

/// `builder` made to follow `rule`: its resolver, its redirect policy and
/// no proxy. Also call [`check_url`] on each request's URL.
pub fn guard(builder: reqwest::ClientBuilder, rule: Destinations) -> reqwest::ClientBuilder {
    let rule = Arc::new(rule);
    let redirects = rule.clone();
    builder
        .no_proxy()
        .dns_resolver(Arc::new(Resolver(rule)))
        .redirect(Policy::custom(move |attempt| redirect(&redirects, attempt)))
}

/// Refuses a URL whose host is an address the rule refuses (a host name
/// is judged when it is resolved).
pub fn check_url(rule: &Destinations, url: &reqwest::Url) -> Result<(), Refused> {
    let host = url.host_str().unwrap_or_default();
    // An IPv6 address comes bracketed (`[::1]`).
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    match literal.parse::<IpAddr>() {
        Ok(ip) => rule.check(ip).map_err(Refused),
        Err(_) => Ok(()),
    }
}

/// The refusal behind a request's error, if that is why it failed.
pub fn refused<'e>(e: &'e (dyn StdError + 'static)) -> Option<&'e Refused> {
    let mut next = Some(e);
    while let Some(error) = next {
        if let Some(refused) = error.downcast_ref::<Refused>() {
            return Some(refused);
        }
        next = error.source();
    }
    None
}

fn redirect(rule: &Destinations, attempt: Attempt<'_>) -> reqwest::redirect::Action {
    if attempt.previous().len() >= MAX_REDIRECTS {
        return attempt.error(Refused(format!("more than {MAX_REDIRECTS} redirects")));
    }
    match check_url(rule, attempt.url()) {
        Ok(()) => attempt.follow(),
        Err(refused) => {
            let to = attempt.url().to_string();
            attempt.error(Refused(format!("redirect to {to}: {}", refused.0)))
        }
    }
}

/// The addresses `host` (a name or an address) resolves to that `rule`
/// allows, with `port`; `Err(Refused)` when it resolves to none of them
/// (naming the first refused address and why). A client that connects by
/// itself (the XXL-JOB gateway's) connects only to these.
pub async fn resolve(
    rule: &Destinations,
    host: &str,
    port: u16,
) -> std::io::Result<Result<Vec<SocketAddr>, Refused>> {
    // An IPv6 address comes bracketed (`[::1]`).
    let literal = host.trim_start_matches('[').trim_end_matches(']');
    let found: Vec<SocketAddr> = match literal.parse::<IpAddr>() {
        Ok(ip) => vec![SocketAddr::new(ip, port)],
        Err(_) => tokio::net::lookup_host((literal, port)).await?.collect(),
    };
    let mut why = None;
    let allowed: Vec<SocketAddr> = found
        .into_iter()
        .filter(|a| match rule.check(a.ip()) {
            Ok(()) => true,
            Err(reason) => {
                why.get_or_insert(reason);
                false
            }
        })
        .collect();
    if allowed.is_empty() {
        let why = why.unwrap_or_else(|| "resolves to no address".to_owned());
        return Ok(Err(Refused(format!("{host}: {why}"))));
    }
    Ok(Ok(allowed))
}

/// Resolves with the system's resolver, keeping only allowed addresses.
struct Resolver(Arc<Destinations>);

impl Resolve for Resolver {
    fn resolve(&self, name: Name) -> Resolving {
        let rule = self.0.clone();
        Box::pin(async move {
            match resolve(&rule, name.as_str(), 0).await? {
                Ok(allowed) => {
                    let addrs: Addrs = Box::new(allowed.into_iter());
                    Ok(addrs)
                }
                Err(refused) => {
                    let refused: Box<dyn StdError + Send + Sync> = Box::new(refused);
                    Err(refused)
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_address_in_the_url_is_judged_and_a_name_is_left_to_the_resolver() {
        let rule = Destinations::default();
        let url = |s: &str| reqwest::Url::parse(s).unwrap();
        assert!(check_url(&rule, &url("http://127.0.0.1:8080/x")).is_err());
        assert!(check_url(&rule, &url("http://[::1]/")).is_err());
        assert!(check_url(&rule, &url("http://169.254.169.254/latest/meta-data")).is_err());
        assert!(check_url(&rule, &url("http://8.8.8.8/")).is_ok());
        assert!(check_url(&rule, &url("http://localhost/")).is_ok());
    }

    #[tokio::test]
    async fn a_name_that_resolves_to_loopback_is_refused_by_the_resolver() {
        let resolver = Resolver(Arc::new(Destinations::default()));
        let name: Name = "localhost".parse().unwrap();
        let Err(e) = resolver.resolve(name).await else {
            panic!("localhost resolved to an allowed address");
        };
        assert!(refused(e.as_ref()).is_some(), "{e}");
    }

    #[tokio::test]
    async fn resolve_keeps_only_allowed_addresses_of_a_name_or_a_literal() {
        let strict = Destinations::default();
        let refused = resolve(&strict, "127.0.0.1", 9).await.unwrap().unwrap_err();
        assert!(refused.0.contains("127.0.0.1"), "{}", refused.0);
        assert!(resolve(&strict, "localhost", 9).await.unwrap().is_err());
        assert!(resolve(&strict, "[::1]", 9).await.unwrap().is_err());
        let loopback = Destinations::parse("k", &["127.0.0.0/8".into()]).unwrap();
        let ok = resolve(&loopback, "127.0.0.1", 9).await.unwrap().unwrap();
        assert_eq!(ok, vec!["127.0.0.1:9".parse::<SocketAddr>().unwrap()]);
    }
}
