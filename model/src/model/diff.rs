//! What a change of a job changed: each field before and after, as the
//! audit log keeps it (`detail` of `job.*` rows) and a job's history shows
//! it. Secrets never appear (a changed secret reads `***` → `***`), nor a
//! script's text (its version numbers do: the versions are kept apart).

use serde_json::{Map, Value, json};

use super::job::Job;
use super::secrets::MASK;

/// Fields that change at every save, or that only bookkeeping sets.
const IGNORED: [&str; 5] = [
    "updated_ms",
    "created_ms",
    "run_until_ms",
    "glue_updated_ms",
    "glue_source",
];

/// The fields `old` → `new` changed, each as `[before, after]` (`old`
/// none: every field set, before `null`); `None` when nothing did.
pub fn job_diff(old: Option<&Job>, new: &Job) -> Option<Value> {
    let shown = |job: &Job| -> Map<String, Value> {
        let mut value = serde_json::to_value(job).unwrap_or_default();
        if let Some(secrets) = value.get_mut("secrets").and_then(Value::as_object_mut) {
            for v in secrets.values_mut() {
                *v = json!(MASK);
            }
        }
        match value {
            Value::Object(m) => m,
            _ => Map::new(),
        }
    };
    let after = shown(new);
    let before = old.map(shown).unwrap_or_default();
    let mut changed = Map::new();
    for (field, now) in &after {
        if IGNORED.contains(&field.as_str()) {
            continue;
        }
        let was = before.get(field).cloned().unwrap_or(Value::Null);
        if &was != now {
            changed.insert(field.clone(), json!([was, now]));
        }
    }
    if let Some(old) = old {
        // A changed secret value keeps its mask: say that it changed.
        let names: Vec<&String> = new
            .secrets
            .iter()
            .filter(|(name, value)| old.secrets.get(*name).is_some_and(|v| v != *value))
            .map(|(name, _)| name)
            .collect();
        if !names.is_empty() && !changed.contains_key("secrets") {
            changed.insert(
                "secrets".into(),
                json!([
                    format!("{} changed", join(&names)),
                    format!("{} changed", join(&names))
                ]),
            );
        }
    }
    (!changed.is_empty()).then_some(Value::Object(changed))
}

fn join(names: &[&String]) -> String {
    names
        .iter()
        .map(|n| n.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_diff_names_what_changed_and_never_a_secret_or_a_script() {
        let mut old = Job::new(7, "billing", "report");
        old.secrets.insert("TOKEN".into(), "s3cret".into());
        old.glue_source = "echo 1".into();
        let mut new = old.clone();
        new.description = "nightly".into();
        new.updated_ms = 99;
        new.glue_source = "echo 2".into();
        new.glue_version = 2;
        new.secrets.insert("TOKEN".into(), "n3w".into());
        let diff = job_diff(Some(&old), &new).unwrap();
        assert_eq!(diff["description"], json!(["", "nightly"]));
        assert_eq!(diff["glue_version"], json!([0, 2]));
        assert!(diff.get("updated_ms").is_none() && diff.get("glue_source").is_none());
        let text = diff.to_string();
        assert!(
            !text.contains("s3cret") && !text.contains("n3w") && !text.contains("echo"),
            "{text}"
        );
        assert_eq!(diff["secrets"], json!(["TOKEN changed", "TOKEN changed"]));
        assert_eq!(job_diff(Some(&old), &old), None);
        let created = job_diff(None, &old).unwrap();
        assert_eq!(created["group"], json!([null, "billing"]));
    }
}
