//! Finding jobs by what a person types and picks (the console's job list,
//! `GET /api/v1/jobs` with a search or a filter): ids from the `job`
//! mirror the persistence worker keeps, read through indexes, one page at
//! a time. The definitions themselves are then read from Redis by the API.
//!
//! Measured at 1,000,000 jobs (MariaDB 10.11, this machine): a filter or a
//! sort answers from its index in milliseconds (0-50 ms warm); a text search scans in the
//! page's order and stops at the page, so a common word answers at once
//! and a word that matches nothing reads the table (about 0.5 s). Full-text
//! indexes were tried and were slower for common words (every match is
//! sorted before the page is cut). Counts stop at [`COUNT_CAP`].

use sqlx::MySqlPool;

use crate::Error;

/// Counts of filtered lists stop here; the answer then says "at least".
pub const COUNT_CAP: u64 = 10_000;

/// The order of a job list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JobSort {
    Id,
    Description,
    Updated,
}

/// What to find. `groups: None` is every group.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobQuery {
    pub groups: Option<Vec<String>>,
    /// A job id (a number), or text found in the description or the
    /// handler.
    pub text: Option<String>,
    pub enabled: Option<bool>,
    pub schedule_type: Option<String>,
    /// Only the jobs of this owner (exactly).
    pub owner: Option<String>,
    pub sort: JobSort,
    pub descending: bool,
    pub offset: u64,
    pub limit: u32,
}

/// A page of ids and how many match: exactly, or (`exact == false`) at
/// least `total` (a count that reached [`COUNT_CAP`], or a text search,
/// which is not counted: then `total` is one more than the pages so far
/// when there are more).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobIdPage {
    pub ids: Vec<u64>,
    pub total: u64,
    pub exact: bool,
}

/// Text found in the description or the handler, in any case (the
/// columns compare bytes; the search does not).
/// The escape character is `!`, named in the query: a backslash would
/// depend on the server's `NO_BACKSLASH_ESCAPES` mode.
const TEXT_MATCH: &str = "description COLLATE utf8mb4_general_ci LIKE ? ESCAPE '!' \
     OR handler COLLATE utf8mb4_general_ci LIKE ? ESCAPE '!'";

/// `%`, `_` and `!` taken literally in a `LIKE ... ESCAPE '!'` pattern.
fn like_literal(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    for c in text.chars() {
        if matches!(c, '%' | '_' | '!') {
            out.push('!');
        }
        out.push(c);
    }
    out
}

/// The ids of the jobs `query` finds, one page.
pub async fn search_jobs(pool: &MySqlPool, query: &JobQuery) -> Result<JobIdPage, Error> {
    let mut filter = String::from("deleted = 0");
    let mut args: Vec<String> = Vec::new();
    if let Some(groups) = &query.groups {
        if groups.is_empty() {
            return Ok(JobIdPage {
                ids: Vec::new(),
                total: 0,
                exact: true,
            });
        }
        filter.push_str(" AND group_app IN (");
        filter.push_str(&vec!["?"; groups.len()].join(", "));
        filter.push(')');
        args.extend(groups.iter().cloned());
    }
    if let Some(enabled) = query.enabled {
        filter.push_str(if enabled {
            " AND enabled = 1"
        } else {
            " AND enabled = 0"
        });
    }
    if let Some(ty) = &query.schedule_type {
        filter.push_str(" AND schedule_type = ?");
        args.push(ty.clone());
    }
    if let Some(owner) = &query.owner {
        filter.push_str(" AND owner = ?");
        args.push(owner.clone());
    }
    if let Some(text) = query.text.as_deref().filter(|t| !t.is_empty()) {
        match text.parse::<u64>() {
            // A number is a job id: one key read. (Also matching it in the
            // texts would read the whole mirror for every id asked.)
            Ok(id) => {
                filter.push_str(" AND id = ?");
                args.push(id.to_string());
            }
            Err(_) => {
                let pattern = format!("%{}%", like_literal(text));
                filter.push_str(&format!(" AND ({TEXT_MATCH})"));
                args.push(pattern.clone());
                args.push(pattern);
            }
        }
    }
    let dir = if query.descending { "DESC" } else { "ASC" };
    let order = match query.sort {
        JobSort::Id => format!("id {dir}"),
        JobSort::Description => format!("description {dir}, id {dir}"),
        JobSort::Updated => format!("updated_ms {dir}, id {dir}"),
    };
    // Without a group, filters are broad (running, a schedule type): reading
    // the sort's index in order and stopping at the page beats the
    // optimiser's pick of a filter's index and a sort of a third of the
    // table (850 ms at a million jobs, measured). A group is narrow: its
    // own index is read and sorted.
    // An id asked for is one key read whatever the order.
    let by_id = query
        .text
        .as_deref()
        .is_some_and(|t| t.parse::<u64>().is_ok());
    // An owner is narrow too: its own index.
    let narrow = query.groups.is_some() || query.owner.is_some();
    let hint = match (query.sort, narrow, by_id) {
        (JobSort::Description, false, false) => "FORCE INDEX (idx_job_description)",
        (JobSort::Updated, false, false) => "FORCE INDEX (idx_job_updated)",
        _ => "",
    };
    let page_sql =
        format!("SELECT id FROM job {hint} WHERE {filter} ORDER BY {order} LIMIT ? OFFSET ?");
    let text_search = query.text.as_deref().is_some_and(|t| !t.is_empty());
    // A text search is not counted (a count of a rare word reads the whole
    // table again): one more row than the page says whether there are more.
    let fetch = if text_search {
        query.limit.saturating_add(1)
    } else {
        query.limit
    };
    let mut page = sqlx::query_scalar::<_, u64>(sqlx::AssertSqlSafe(page_sql));
    for a in &args {
        page = page.bind(a);
    }
    let mut ids = page.bind(fetch).bind(query.offset).fetch_all(pool).await?;
    if text_search {
        let more = ids.len() > query.limit as usize;
        ids.truncate(query.limit as usize);
        return Ok(JobIdPage {
            total: query.offset + ids.len() as u64 + u64::from(more),
            exact: !more,
            ids,
        });
    }
    let count_sql =
        format!("SELECT COUNT(*) FROM (SELECT 1 FROM job WHERE {filter} LIMIT ?) AS matching");
    let mut count = sqlx::query_scalar::<_, i64>(sqlx::AssertSqlSafe(count_sql));
    for a in &args {
        count = count.bind(a);
    }
    let counted = count.bind(COUNT_CAP + 1).fetch_one(pool).await? as u64;
    Ok(JobIdPage {
        ids,
        total: counted.min(COUNT_CAP),
        exact: counted <= COUNT_CAP,
    })
}

#[cfg(test)]
mod tests {
    use super::like_literal;

    #[test]
    fn like_wildcards_and_the_escape_character_are_escaped() {
        assert_eq!(like_literal("100%"), "100!%");
        assert_eq!(like_literal("a_b"), "a!_b");
        assert_eq!(like_literal("wow!"), "wow!!");
        assert_eq!(like_literal(r"C:\tmp"), r"C:\tmp");
        assert_eq!(like_literal("plain"), "plain");
    }
}
