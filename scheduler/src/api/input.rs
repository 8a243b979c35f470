//! Reading requests: JSON bodies with the field at fault named, ids, and
//! bounded query numbers.

use std::collections::HashMap;

use rondo_core::Error;
use serde::de::DeserializeOwned;

pub(super) fn parse_body<T: DeserializeOwned>(body: &[u8]) -> Result<T, Error> {
    // No body, or JSON `null`, is an empty object: every field left out.
    let text = body.trim_ascii();
    let body = if text.is_empty() || text == b"null" {
        b"{}".as_slice()
    } else if text.first() != Some(&b'{') {
        // serde would read a struct from an array too: `[null]` is not an
        // object with every field left out.
        return Err(Error::invalid("body", "must be a JSON object"));
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

/// The largest id: ids are JSON integers every client reads exactly as a
/// signed 64-bit number (the spec's `int64`).
pub(super) const MAX_ID: u64 = i64::MAX as u64;

pub(super) fn parse_id(raw: &str) -> Result<u64, Error> {
    raw.parse().ok().filter(|id| *id <= MAX_ID).ok_or_else(|| {
        Error::invalid(
            "id",
            format!("job id must be an integer from 0 to {MAX_ID}, got {raw:?}"),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(serde::Deserialize, Debug)]
    #[serde(deny_unknown_fields)]
    struct Spec {
        name: Option<String>,
    }

    #[test]
    fn no_body_and_null_leave_every_field_out() {
        for body in ["", "  \n", "null", " null "] {
            let spec: Spec = parse_body(body.as_bytes()).expect(body);
            assert_eq!(spec.name, None, "{body:?}");
        }
    }

    #[test]
    fn a_body_that_is_not_an_object_is_refused_by_name() {
        for body in ["[null]", "[]", "\"x\"", "3", "true"] {
            let e = parse_body::<Spec>(body.as_bytes()).expect_err(body);
            assert_eq!(e.field.as_deref(), Some("body"), "{body:?}");
        }
        let e = parse_body::<Spec>(br#"{"nme": "x"}"#).expect_err("unknown field");
        assert_eq!(e.field.as_deref(), Some("nme"));
    }

    #[test]
    fn ids_are_signed_64_bit_integers() {
        assert_eq!(parse_id("0").unwrap(), 0);
        assert_eq!(parse_id("9223372036854775807").unwrap(), MAX_ID);
        for raw in ["9223372036854775808", "-1", "1.0", "x", ""] {
            assert_eq!(
                parse_id(raw).unwrap_err().field.as_deref(),
                Some("id"),
                "{raw}"
            );
        }
    }
}
