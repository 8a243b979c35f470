//! E-mail alarms: the SMTP transport built from `[alarm]`, the recipients
//! of `alarm_email`, and the sending of one message to all of them. A
//! recipient outside `alarm.email_allow` is not sent to, even if a job was
//! saved with it before the list changed.

use std::sync::Arc;
use std::time::Duration;

use lettre::message::Mailbox;
use lettre::transport::smtp::authentication::Credentials;
use lettre::transport::smtp::extension::ClientId;
use lettre::{AsyncSmtpTransport, AsyncTransport, Tokio1Executor};
use rondo_core::config::AlarmConfig;
use rondo_core::mail_domains::MailDomains;

use rondo_core::error::chain;

use super::channel::{AlarmConfigError, timed_out, timeout};
use super::render::{Report, mail_message};

#[derive(Clone)]
pub(super) enum Mail {
    NotConfigured,
    /// The SMTP settings are unusable; every e-mail alarm fails with this.
    Broken(String),
    Ready {
        transport: Arc<AsyncSmtpTransport<Tokio1Executor>>,
        from: Mailbox,
        /// Where a recipient may be (`alarm.email_allow`).
        domains: MailDomains,
    },
}

/// Sends `report` to `addresses`, within `timeout`. Ok: what was sent;
/// Err: why not.
pub(super) async fn send(
    mail: &Mail,
    timeout: Duration,
    addresses: &[&str],
    report: &Report<'_>,
) -> Result<String, String> {
    let (transport, from, domains) = match mail {
        Mail::NotConfigured => return Err("alarm.smtp_host is not configured".into()),
        Mail::Broken(reason) => return Err(reason.clone()),
        Mail::Ready {
            transport,
            from,
            domains,
        } => (transport, from, domains),
    };
    let (to, invalid) = mailboxes(addresses, domains);
    let invalid_note = (!invalid.is_empty()).then(|| invalid.join("; "));
    if to.is_empty() {
        return Err(invalid_note.unwrap_or_default());
    }
    let message = mail_message(from, &to, report).map_err(|e| format!("building the mail: {e}"))?;
    let sent = tokio::time::timeout(timeout, transport.send(message))
        .await
        .map_err(|_| timed_out(timeout))
        .and_then(|sent| sent.map_err(|e| chain(&e)));
    let n = to.len();
    let plural = if n == 1 { "" } else { "s" };
    match (sent, invalid_note) {
        (Ok(_), None) => Ok(format!("sent to {n} recipient{plural}")),
        (Ok(_), Some(note)) => Err(format!("{note} (sent to the other {n} recipient{plural})")),
        (Err(reason), None) => Err(reason),
        (Err(reason), Some(note)) => Err(format!("{note}; {reason}")),
    }
}

pub(super) fn mail_setup(config: &AlarmConfig) -> Result<Mail, AlarmConfigError> {
    let host = config.smtp_host.trim();
    if host.is_empty() {
        return Ok(Mail::NotConfigured);
    }
    let from = config
        .smtp_from
        .parse::<Mailbox>()
        .map_err(|e| AlarmConfigError::From {
            from: config.smtp_from.clone(),
            reason: e.to_string(),
        })?;
    let domains = MailDomains::parse("alarm.email_allow", &config.email_allow, &config.smtp_from)
        .map_err(|e| AlarmConfigError::EmailAllow(e.message))?;
    let transport = Arc::new(smtp_transport(config, host)?);
    Ok(Mail::Ready {
        transport,
        from,
        domains,
    })
}

fn smtp_transport(
    config: &AlarmConfig,
    host: &str,
) -> Result<AsyncSmtpTransport<Tokio1Executor>, AlarmConfigError> {
    type Smtp = AsyncSmtpTransport<Tokio1Executor>;
    let smtp_error = |e: lettre::transport::smtp::Error| AlarmConfigError::Smtp {
        host: host.to_owned(),
        reason: chain(&e),
    };
    let builder = match config.smtp_tls.as_str() {
        "none" => Smtp::builder_dangerous(host),
        "starttls" => Smtp::starttls_relay(host).map_err(smtp_error)?,
        "tls" => Smtp::relay(host).map_err(smtp_error)?,
        other => return Err(AlarmConfigError::Tls(other.to_owned())),
    };
    let mut builder = builder
        .port(config.smtp_port)
        .timeout(Some(timeout(config)))
        .hello_name(hello_name());
    if !config.smtp_user.is_empty() {
        let credentials = Credentials::new(config.smtp_user.clone(), config.smtp_password.clone());
        builder = builder.credentials(credentials);
    }
    Ok(builder.build())
}

/// The EHLO name: this host's name, or an address literal.
fn hello_name() -> ClientId {
    hostname::get()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty() && h.is_ascii())
        .map_or_else(ClientId::default, ClientId::Domain)
}

/// The addresses of an `alarm_email` list, trimmed, without duplicates.
pub(super) fn recipients(list: &str) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for addr in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        if !out.iter().any(|seen| seen.eq_ignore_ascii_case(addr)) {
            out.push(addr);
        }
    }
    out
}

/// The mailboxes to send to, and why each other address is not one: not
/// an address, or its domain (as the mailbox parses it) not allowed.
fn mailboxes(addresses: &[&str], domains: &MailDomains) -> (Vec<Mailbox>, Vec<String>) {
    let mut valid = Vec::new();
    let mut refused = Vec::new();
    for addr in addresses {
        match addr.parse::<Mailbox>() {
            Ok(mailbox) => match domains.check(mailbox.email.as_ref()) {
                Ok(()) => valid.push(mailbox),
                Err(why) => refused.push(why),
            },
            Err(_) => refused.push(format!("not an address: {addr:?}")),
        }
    }
    (valid, refused)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recipients_are_trimmed_and_deduplicated() {
        assert_eq!(
            recipients(" a@x.io, b@x.io,,A@X.IO ,"),
            vec!["a@x.io", "b@x.io"]
        );
        assert!(recipients(" , ").is_empty());
    }
}
