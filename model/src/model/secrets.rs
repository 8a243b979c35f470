//! A job's named secrets: values the handler gets (as environment
//! variables of shell and script jobs, and in `params` through
//! `${secret.NAME}` placeholders) and that no answer, log row, alarm or
//! audit entry shows: the API gives [`MASK`] for each value, the executor
//! writes `***` wherever a value would appear in a log line or result
//! message, and the trigger events (the log rows) carry none.

use std::collections::BTreeMap;

use crate::error::Error;

/// What a secret's value is shown as; sent back in an update, it keeps
/// the stored value.
pub const MASK: &str = "***";

/// The most secrets one job holds.
pub const MAX_SECRETS: usize = 32;

/// The largest secret value, in bytes.
pub const MAX_SECRET_BYTES: usize = 4096;

/// The longest secret name.
pub const MAX_SECRET_NAME: usize = 64;

/// The field errors name.
const FIELD: &str = "secrets";

/// Checks names and values: a name is an environment variable name
/// (`[A-Za-z_][A-Za-z0-9_]*`, not `RONDO_…`, which rondo sets), a value is
/// 1 to [`MAX_SECRET_BYTES`] bytes and not [`MASK`] (a mask left after
/// [`resolve`] named a secret the job does not have).
pub fn validate(secrets: &BTreeMap<String, String>) -> Result<(), Error> {
    if secrets.len() > MAX_SECRETS {
        return Err(Error::invalid(
            FIELD,
            format!("holds {} secrets; at most {MAX_SECRETS}", secrets.len()),
        ));
    }
    for (name, value) in secrets {
        let field = format!("{FIELD}.{name}");
        let well_formed = !name.is_empty()
            && name.len() <= MAX_SECRET_NAME
            && !name.starts_with(|c: char| c.is_ascii_digit())
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !well_formed {
            return Err(Error::invalid(
                FIELD,
                format!(
                    "{name:?} is not a secret name: 1 to {MAX_SECRET_NAME} ASCII letters, digits and '_', not starting with a digit"
                ),
            ));
        }
        if name.to_ascii_uppercase().starts_with("RONDO_") {
            return Err(Error::invalid(
                &field,
                "names starting with RONDO_ are rondo's own variables",
            ));
        }
        if value == MASK {
            return Err(Error::invalid(
                &field,
                format!("{MASK} keeps a stored value, and this job has none by that name"),
            ));
        }
        if value.is_empty() || value.len() > MAX_SECRET_BYTES {
            return Err(Error::invalid(
                &field,
                format!("must be 1 to {MAX_SECRET_BYTES} bytes"),
            ));
        }
    }
    Ok(())
}

/// `patch` with each [`MASK`] value replaced by `stored`'s value of that
/// name (a job read, edited and sent back keeps its secrets). A mask
/// without a stored value is left, for [`validate`] to refuse.
pub fn resolve(
    patch: BTreeMap<String, String>,
    stored: Option<&BTreeMap<String, String>>,
) -> BTreeMap<String, String> {
    patch
        .into_iter()
        .map(|(name, value)| {
            let kept = (value == MASK)
                .then(|| stored.and_then(|s| s.get(&name)).cloned())
                .flatten();
            (name, kept.unwrap_or(value))
        })
        .collect()
}

/// Every value shown as [`MASK`].
pub fn masked(secrets: &BTreeMap<String, String>) -> BTreeMap<String, String> {
    secrets
        .keys()
        .map(|name| (name.clone(), MASK.to_owned()))
        .collect()
}

/// `params` with each `${secret.NAME}` of a secret the job has replaced by
/// its value (an unknown name is left as written).
pub fn expand(params: &str, secrets: &BTreeMap<String, String>) -> String {
    if secrets.is_empty() || !params.contains("${secret.") {
        return params.to_owned();
    }
    let mut out = params.to_owned();
    for (name, value) in secrets {
        out = out.replace(&format!("${{secret.{name}}}"), value);
    }
    out
}

/// Hides secret values wherever they appear in a text.
#[derive(Debug, Clone, Default)]
pub struct Masker {
    /// The values, longest first (so a value inside another is not left
    /// half shown).
    values: Vec<String>,
}

impl Masker {
    pub fn new(secrets: &BTreeMap<String, String>) -> Masker {
        let mut values: Vec<String> = secrets
            .values()
            .filter(|v| !v.is_empty())
            .cloned()
            .collect();
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Masker { values }
    }

    /// `text` with every secret value replaced by [`MASK`].
    pub fn mask(&self, text: String) -> String {
        if self.values.iter().all(|v| !text.contains(v.as_str())) {
            return text;
        }
        let mut out = text;
        for value in &self.values {
            out = out.replace(value.as_str(), MASK);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn names_and_values_are_checked_with_the_field_named() {
        assert!(validate(&map(&[("DB_PASSWORD", "s3cret"), ("_x1", "v")])).is_ok());
        for (bad, field) in [
            (map(&[("1X", "v")]), "secrets"),
            (map(&[("A-B", "v")]), "secrets"),
            (map(&[("RONDO_JOB_ID", "v")]), "secrets.RONDO_JOB_ID"),
            (map(&[("A", "")]), "secrets.A"),
            (map(&[("A", MASK)]), "secrets.A"),
        ] {
            let e = validate(&bad).unwrap_err();
            assert_eq!(e.field.as_deref(), Some(field), "{bad:?}: {e:?}");
        }
        let many: BTreeMap<String, String> = (0..=MAX_SECRETS)
            .map(|i| (format!("S{i}"), "v".to_owned()))
            .collect();
        assert!(validate(&many).is_err());
    }

    #[test]
    fn a_mask_sent_back_keeps_the_stored_value() {
        let stored = map(&[("A", "old"), ("B", "b")]);
        let patch = map(&[("A", MASK), ("C", "new"), ("D", MASK)]);
        let resolved = resolve(patch, Some(&stored));
        assert_eq!(resolved, map(&[("A", "old"), ("C", "new"), ("D", MASK)]));
        assert!(validate(&resolved).is_err(), "D has no stored value");
        assert_eq!(masked(&stored), map(&[("A", MASK), ("B", MASK)]));
    }

    #[test]
    fn placeholders_expand_and_values_are_masked() {
        let secrets = map(&[("TOKEN", "abc123"), ("LONG", "abc123xyz")]);
        assert_eq!(
            expand("--token=${secret.TOKEN} ${secret.NOPE}", &secrets),
            "--token=abc123 ${secret.NOPE}"
        );
        let masker = Masker::new(&secrets);
        assert_eq!(
            masker.mask("got abc123xyz and abc123".into()),
            "got *** and ***"
        );
        assert_eq!(masker.mask("nothing".into()), "nothing");
    }
}
