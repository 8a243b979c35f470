//! Who an e-mail alarm may be sent to: `alarm.email_allow`, a list of
//! recipient domains, checked when a job is saved (its `alarm_email`) and
//! again when an alarm is sent.
//!
//! An entry is a domain (`example.com`: that domain only) or `*.` and a
//! domain (`*.example.com`: its subdomains, not itself). Empty (the
//! default), the domain of `alarm.smtp_from` is the list: a deployment's
//! alarms go to its own organisation's addresses, and an operator cannot
//! make the SMTP relay (trusted, signed for that domain) mail job output
//! to any address outside it. Names compare without case.

use crate::error::Error;

/// The recipient domains e-mail alarms may go to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MailDomains {
    /// Lowercase: `example.com`, or `.example.com` for `*.example.com`.
    allow: Vec<String>,
}

impl MailDomains {
    /// The list of config key `key`, or, when it is empty, the domain of
    /// `sender` (`rondo@example.com`, `Rondo <rondo@example.com>`); the
    /// error names the key and the entry.
    pub fn parse(key: &str, entries: &[String], sender: &str) -> Result<MailDomains, Error> {
        let allow = match entries {
            [] => domain_of(sender).map(|d| vec![d]).unwrap_or_default(),
            _ => entries
                .iter()
                .map(|entry| pattern(entry).ok_or_else(|| Error::invalid(key, bad_entry(entry))))
                .collect::<Result<_, _>>()?,
        };
        Ok(MailDomains { allow })
    }

    /// `Ok` if `address` (`user@domain`) may be mailed; otherwise why not,
    /// naming its domain.
    pub fn check(&self, address: &str) -> Result<(), String> {
        let Some(domain) = domain_of(address) else {
            return Err(format!("{address:?} has no domain"));
        };
        if self.allow.iter().any(|pattern| matches(pattern, &domain)) {
            return Ok(());
        }
        Err(format!(
            "{domain} is not a domain alarms may be mailed to (alarm.email_allow: {})",
            self.describe()
        ))
    }

    /// The list as configured (`example.com, *.example.com`), or `none`.
    pub fn describe(&self) -> String {
        if self.allow.is_empty() {
            return "none".into();
        }
        let shown: Vec<String> = self
            .allow
            .iter()
            .map(|p| match p.strip_prefix('.') {
                Some(parent) => format!("*.{parent}"),
                None => p.clone(),
            })
            .collect();
        shown.join(", ")
    }
}

/// The domain of an address (after its last `@`, without a closing `>`),
/// lowercase; `None` without one.
fn domain_of(address: &str) -> Option<String> {
    let (_, domain) = address.trim().rsplit_once('@')?;
    let domain = domain.trim_end_matches('>').trim().to_ascii_lowercase();
    is_domain(&domain).then_some(domain)
}

/// An entry as stored: `example.com`, or `.example.com` for `*.example.com`.
fn pattern(entry: &str) -> Option<String> {
    let entry = entry.trim().to_ascii_lowercase();
    match entry.strip_prefix("*.") {
        Some(parent) => is_domain(parent).then(|| format!(".{parent}")),
        None => is_domain(&entry).then_some(entry),
    }
}

fn matches(pattern: &str, domain: &str) -> bool {
    match pattern.strip_prefix('.') {
        Some(_) => domain.ends_with(pattern),
        None => domain == pattern,
    }
}

/// Letters, digits and `-` in dot-separated labels, at least two.
fn is_domain(text: &str) -> bool {
    let labels: Vec<&str> = text.split('.').collect();
    labels.len() >= 2
        && labels.iter().all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && label
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
}

fn bad_entry(entry: &str) -> String {
    format!("{entry:?} is not a domain (example.com) or its subdomains (*.example.com)")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn domains(entries: &[&str]) -> MailDomains {
        let entries: Vec<String> = entries.iter().map(|e| e.to_string()).collect();
        MailDomains::parse("alarm.email_allow", &entries, "rondo@localhost").unwrap()
    }

    #[test]
    fn a_domain_allows_itself_and_a_star_its_subdomains() {
        let allow = domains(&["Example.com", "*.corp.example"]);
        for ok in [
            "ops@example.com",
            "ops@EXAMPLE.COM",
            "a@x.corp.example",
            "a@y.x.corp.example",
        ] {
            assert_eq!(allow.check(ok), Ok(()), "{ok}");
        }
        for refused in [
            "ops@mail.example.com",
            "ops@example.com.evil.io",
            "a@corp.example",
            "a@evilcorp.example",
            "\"ops@example.com\"@evil.io",
            "ops@example.com@evil.io",
        ] {
            let why = allow.check(refused).unwrap_err();
            assert!(why.contains("is not a domain"), "{refused}: {why}");
        }
        let why = allow.check("x@evil.io").unwrap_err();
        assert!(why.starts_with("evil.io is not"), "{why}");
        assert!(why.contains("example.com, *.corp.example"), "{why}");
    }

    #[test]
    fn empty_means_the_senders_domain() {
        let empty: &[String] = &[];
        let from_sender = MailDomains::parse("k", empty, "Rondo <rondo@Corp.Example>").unwrap();
        assert_eq!(from_sender.check("ops@corp.example"), Ok(()));
        assert!(from_sender.check("ops@gmail.com").is_err());
        // The default sender, rondo@localhost, names no domain: none.
        let none = MailDomains::parse("k", empty, "rondo@localhost").unwrap();
        assert!(none.check("ops@example.com").is_err());
        assert_eq!(none.describe(), "none");
    }

    #[test]
    fn a_bad_entry_is_named_with_its_key() {
        for bad in [
            "",
            "*",
            "*.com",
            "localhost",
            "exa mple.com",
            "@example.com",
            "a..b",
        ] {
            let e = MailDomains::parse("alarm.email_allow", &[bad.into()], "").unwrap_err();
            assert_eq!(e.field.as_deref(), Some("alarm.email_allow"), "{bad}");
        }
    }
}
