//! What an earlier import made, as the API shows it: read by the import
//! (to change nothing twice) and by the switch (to find each row's job).

use std::collections::BTreeMap;

use serde_json::Value;

use rondo_cli::Api;

/// Every job the API shows that an earlier import of `source` made, by
/// `import_ref`.
pub(super) async fn existing_jobs(
    api: &mut Api,
    source: &str,
) -> anyhow::Result<BTreeMap<String, Value>> {
    let prefix = format!("xxl-job/{source}#");
    let mut found = BTreeMap::new();
    let mut offset = 0;
    loop {
        let (status, page) = api
            .call(
                reqwest::Method::GET,
                &format!("/api/v1/jobs?limit=1000&offset={offset}"),
                None,
            )
            .await?;
        if status != 200 {
            anyhow::bail!("listing jobs: status {status}: {page}");
        }
        let items = page["items"].as_array().cloned().unwrap_or_default();
        for job in &items {
            if let Some(r) = job["import_ref"]
                .as_str()
                .filter(|r| r.starts_with(&prefix))
            {
                found.insert(r.to_owned(), job.clone());
            }
        }
        // A page may stop early at its byte bound: the next starts where
        // the API says.
        match page["next_offset"].as_u64() {
            Some(next) if !items.is_empty() => offset = next as usize,
            _ => return Ok(found),
        }
    }
}
