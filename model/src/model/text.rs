//! The bounds and checks of free text: names, handler-sized fields, alarm
//! addresses and webhooks.

use crate::error::Error;

/// The largest `params` accepted, in bytes. Parameters travel inside every
/// trigger message and every log row; larger payloads belong in a store the
/// handler reads.
pub const MAX_PARAMS_BYTES: usize = 16 * 1024;

/// The longest handler name, description or alarm address.
pub const MAX_TEXT: usize = 255;

/// The longest group app name (it becomes part of queue names).
pub const MAX_APP_NAME: usize = 64;

/// `text` cut to at most `max` bytes on a character boundary, ending in
/// `mark` when it was cut (the mark counts toward `max`).
pub fn clip(text: &str, max: usize, mark: &str) -> String {
    if text.len() <= max {
        return text.to_owned();
    }
    format!("{}{mark}", prefix(text, max.saturating_sub(mark.len())))
}

/// The longest start of `text` of at most `max` bytes that ends on a
/// character boundary.
pub fn prefix(text: &str, max: usize) -> &str {
    let mut end = max.min(text.len());
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// Checks an app name: it becomes part of queue names and Redis keys.
pub fn validate_app_name(field: &str, app: &str) -> Result<(), Error> {
    if app.is_empty() || app.len() > MAX_APP_NAME {
        return Err(Error::invalid(
            field,
            format!("must be 1 to {MAX_APP_NAME} characters"),
        ));
    }
    if !app
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_'))
    {
        return Err(Error::invalid(
            field,
            "may contain only ASCII letters, digits, '-' and '_'",
        ));
    }
    Ok(())
}

/// Checks a username: 1 to 64 of `A-Z a-z 0-9 . _ @ -`.
pub fn check_username(field: &str, name: &str) -> Result<(), Error> {
    let ok = (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'@' | b'-'));
    if !ok {
        return Err(Error::invalid(
            field,
            "must be 1 to 64 characters of letters, digits, '.', '_', '@' and '-'",
        ));
    }
    Ok(())
}

pub(crate) fn check_len(field: &str, value: &str, max: usize) -> Result<(), Error> {
    if value.len() > max {
        return Err(Error::invalid(
            field,
            format!("is {} bytes, the limit is {max}", value.len()),
        ));
    }
    Ok(())
}

/// The longest alarm webhook URL.
pub const MAX_URL: usize = 1024;

/// Checks a comma-separated list of e-mail addresses (empty = no mail).
pub(crate) fn validate_emails(list: &str) -> Result<(), Error> {
    for addr in list.split(',').map(str::trim).filter(|a| !a.is_empty()) {
        let valid = addr.split_once('@').is_some_and(|(user, host)| {
            !user.is_empty() && host.contains('.') && !addr.contains(char::is_whitespace)
        });
        if !valid {
            return Err(Error::invalid(
                "alarm_email",
                format!("{addr:?} is not an e-mail address"),
            ));
        }
    }
    Ok(())
}

/// Checks the alarm webhook: empty, or an http(s) URL.
pub(crate) fn validate_webhook(url: &str) -> Result<(), Error> {
    if url.is_empty() {
        return Ok(());
    }
    check_len("alarm_webhook", url, MAX_URL)?;
    let rest = url
        .strip_prefix("http://")
        .or_else(|| url.strip_prefix("https://"));
    if rest.is_none_or(|r| r.is_empty() || r.starts_with('/') || r.contains(char::is_whitespace)) {
        return Err(Error::invalid(
            "alarm_webhook",
            "must be an http:// or https:// URL",
        ));
    }
    Ok(())
}
