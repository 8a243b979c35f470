//! What a plain command is: one HTTP call, its method, path and body.

use serde_json::Value;

/// The one HTTP call a plain command is. (`login`, `logout` and
/// `password` are conversations: see `credentials`.)
pub(crate) type Call = (reqwest::Method, String, Option<Value>);

/// A password from the environment or the terminal: `(variable, what)`.
pub(crate) type Secret<'a> = &'a dyn Fn(&str, &str) -> anyhow::Result<String>;

/// `key=value&…` of the pairs that have a value, each URL-encoded.
pub(crate) fn query_string(pairs: &[(&str, Option<String>)]) -> String {
    let mut url = reqwest::Url::parse("http://rondo/").expect("a fixed URL");
    {
        let mut query = url.query_pairs_mut();
        for (key, value) in pairs {
            if let Some(v) = value {
                query.append_pair(key, v);
            }
        }
    }
    url.query().unwrap_or_default().to_owned()
}
