//! Reading requests: JSON bodies with the field at fault named, ids, and
//! bounded query numbers.

use std::collections::HashMap;

use rondo_core::Error;
use serde::de::DeserializeOwned;

pub(super) fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    let body = if body.iter().all(u8::is_ascii_whitespace) {
        b"{}".as_slice()
    } else {
        body
    };
    let de = &mut serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(de).map_err(|e| {
        let message = e.inner().to_string();
        let path = e.path().to_string();
        let field = if path == "." {
            unknown_field(&message).unwrap_or_else(|| "body".into())
        } else {
            path
        };
        Error::invalid(&field, message)
    })
}

/// serde names an unknown field as "unknown field `x`, expected …".
fn unknown_field(message: &str) -> Option<String> {
    let rest = message.strip_prefix("unknown field `")?;
    Some(rest[..rest.find('`')?].to_owned())
}

pub(super) fn parse_id(raw: &str) -> Result<u64, Error> {
    raw.parse().map_err(|_| {
        Error::invalid(
            "id",
            format!("job id must be a positive integer, got {raw:?}"),
        )
    })
}

pub(super) fn query_usize(
    q: &HashMap<String, String>,
    key: &str,
    default: usize,
    max: usize,
) -> Result<usize, Error> {
    let Some(raw) = q.get(key) else {
        return Ok(default);
    };
    let value: usize = raw
        .parse()
        .map_err(|_| Error::invalid(key, format!("must be a whole number, got {raw:?}")))?;
    if value > max {
        return Err(Error::invalid(key, format!("must be at most {max}")));
    }
    Ok(value)
}
