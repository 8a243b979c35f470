//! What the import and the switch share: the connection to XXL-JOB's
//! MySQL with the source's name, and what an earlier import made, as the
//! API shows it (the import changes nothing twice; the switch finds each
//! row's job).

use std::collections::BTreeMap;

use serde_json::Value;

use anyhow::Context;
use sqlx::{Connection, MySqlConnection};

use rondo_cli::Api;

/// A connection to XXL-JOB's MySQL, and the name the import gives its
/// source (`source`, or the database's name).
pub(super) async fn connect(
    mysql: &str,
    source: Option<&str>,
) -> anyhow::Result<(MySqlConnection, String)> {
    let mut conn = MySqlConnection::connect(mysql).await.with_context(|| {
        format!(
            "connecting to XXL-JOB's MySQL at {}",
            rondo_model::redact::url(mysql)
        )
    })?;
    let database: Option<String> = sqlx::query_scalar("SELECT DATABASE()")
        .fetch_one(&mut conn)
        .await?;
    let source = match (source, database) {
        (Some(source), _) => source.to_owned(),
        (None, Some(db)) => db,
        (None, None) => {
            anyhow::bail!("the MySQL URL names no database: add /<database> or --source")
        }
    };
    Ok((conn, source))
}

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
