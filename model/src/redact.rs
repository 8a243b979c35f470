//! Secrets out of what is logged or answered: a URL's password.

/// `url` with the password of its user info replaced by `***`
/// (`amqp://rondo:s3cret@mq:5672/%2f` → `amqp://rondo:***@mq:5672/%2f`);
/// a URL without one comes back unchanged.
pub fn url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let Some((userinfo, host)) = authority.rsplit_once('@') else {
        // A password with an unencoded `/`, `?` or `#` ends the authority
        // early; an `@` further on then still marks user info, which is
        // hidden up to the last `@` (too much rather than a leak).
        return match rest.rsplit_once('@') {
            Some((userinfo, after)) => match userinfo.split_once(':') {
                Some((user, _password)) => format!("{scheme}://{user}:***@{after}"),
                None => url.to_owned(),
            },
            None => url.to_owned(),
        };
    };
    match userinfo.split_once(':') {
        Some((user, _password)) => format!("{scheme}://{user}:***@{host}{tail}"),
        None => url.to_owned(),
    }
}

/// A comma-separated list of URLs (the nodes of a cluster), each with its
/// password hidden as [`url`] hides it.
pub fn urls(list: &str) -> String {
    list.split(',')
        .map(|u| url(u.trim()))
        .collect::<Vec<_>>()
        .join(",")
}

/// `url` down to its scheme and host, the rest shown as `***`
/// (`https://oapi.dingtalk.com/robot/send?access_token=…` →
/// `https://oapi.dingtalk.com/***`): for someone who may see where a
/// webhook goes but not the token in its path or query. A URL with
/// nothing past its host comes back without user info only.
pub fn url_path(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return if url.is_empty() {
            String::new()
        } else {
            "***".into()
        };
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if tail.is_empty() || tail == "/" {
        format!("{scheme}://{host}{tail}")
    } else {
        format!("{scheme}://{host}/***")
    }
}

/// A secret as shown: `***`, or empty when it is not set (so a missing
/// secret still shows as missing).
pub fn secret(value: &str) -> &'static str {
    if value.is_empty() { "" } else { "***" }
}

/// The host part of `url` when its user info is exactly `userinfo`
/// (`user:password`); `None` otherwise.
pub fn host_with_userinfo(url: &str, userinfo: &str) -> Option<String> {
    let (_, rest) = url.split_once("://")?;
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (user, host) = rest[..authority_end].rsplit_once('@')?;
    (user == userinfo).then(|| host.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_webhook_shows_only_where_it_goes() {
        assert_eq!(
            url_path("https://oapi.dingtalk.com/robot/send?access_token=abc"),
            "https://oapi.dingtalk.com/***"
        );
        assert_eq!(
            url_path("https://u:p@hooks.example.com:8443/T0/B1/xyz"),
            "https://hooks.example.com:8443/***"
        );
        assert_eq!(
            url_path("https://hooks.example.com/"),
            "https://hooks.example.com/"
        );
        assert_eq!(url_path(""), "");
        assert_eq!(url_path("not a url"), "***");
    }

    #[test]
    fn passwords_in_urls_are_hidden_and_the_rest_kept() {
        assert_eq!(
            url("amqp://rondo:s3cret@mq:5672/%2f?heartbeat=10"),
            "amqp://rondo:***@mq:5672/%2f?heartbeat=10"
        );
        assert_eq!(url("mysql://u:p@h/db"), "mysql://u:***@h/db");
        assert_eq!(url("mysql://u:p/a#s?s@h/db"), "mysql://u:***@h/db");
        assert_eq!(url("redis://h:6379/0"), "redis://h:6379/0");
        assert_eq!(
            url("redis://:pw@127.0.0.1:6379"),
            "redis://:***@127.0.0.1:6379"
        );
        assert_eq!(url("redis://127.0.0.1:6379"), "redis://127.0.0.1:6379");
        assert_eq!(url("amqp://user@h/"), "amqp://user@h/");
        assert_eq!(url("not a url"), "not a url");
        assert_eq!(
            url("http://h/path@x"),
            "http://h/path@x",
            "an @ in the path is not user info"
        );
    }
}
