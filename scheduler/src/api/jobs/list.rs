//! The job list: its query checked key by key, paged from Redis's index
//! or searched in MySQL's mirror.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::{Extension, Json};
use rondo_core::auth::Access;
use rondo_core::model::{ScheduleType, validate_app_name};
use rondo_core::{Error, Job};
use rondo_history::{JobQuery, JobSort};
use serde::Serialize;

use crate::api::auth::Caller;
use crate::api::doc::ApiErrors;
use crate::api::input::query_usize;
use crate::api::state::{ApiResult, AppState};

/// The most bytes of job definitions (as JSON) a page holds: a page stops
/// before the job that would pass it, with at least one job, and
/// `next_offset` says where the next page starts. Rows alone do not bound
/// a page: a job's script and params may take 80 KiB.
pub(crate) const PAGE_MAX_BYTES: usize = 1024 * 1024;

/// A page of jobs.
#[derive(Serialize, utoipa::ToSchema)]
pub(crate) struct JobPage {
    /// Jobs matching, on all pages: exactly, or at least this many when
    /// `total_exact` is false (a count that stopped at 10,000, or a text
    /// search, which counts only the pages so far and one more if there
    /// are more).
    total: usize,
    total_exact: bool,
    offset: usize,
    /// Where the next page starts (`offset` of the next request), absent on
    /// the last page. Less than `offset + limit` when the page stopped at
    /// its byte bound (1 MiB of definitions).
    #[serde(skip_serializing_if = "Option::is_none")]
    next_offset: Option<usize>,
    items: Vec<Job>,
}

/// A page of jobs: by id from Redis (always current), or, with a search,
/// a filter or another order, ids from the MySQL mirror (a job saved a
/// moment ago shows once the persistence worker has written it, within
/// its linger) and the definitions from Redis.
#[utoipa::path(get, path = "/api/v1/jobs", tag = "jobs",
    params(
        ("group" = Option<String>, Query, description = "Only this group's jobs.", pattern = "^[A-Za-z0-9_-]{1,64}$"),
        ("q" = Option<String>, Query, description = "A job id (a number), or text found in the description or the handler, in any case (not counted: `total_exact` is false while there are more).", max_length = 255),
        ("enabled" = Option<bool>, Query, description = "Only running (`true`) or stopped (`false`) jobs."),
        ("schedule_type" = Option<String>, Query, description = "Only jobs of this schedule type.", pattern = "^(CRON|FIX_RATE|FIX_DELAY|NONE)$"),
        ("owner" = Option<String>, Query, description = "Only jobs of this owner (exactly; the console's \"my jobs\" asks for the caller's username).", max_length = 64),
        ("sort" = Option<String>, Query, description = "The order: `id` (default), `description`, `updated`; a leading `-` reverses it.", pattern = "^-?(id|description|updated)$"),
        ("limit" = Option<u32>, Query, description = "Page size (default 100).", maximum = 1000),
        ("offset" = Option<i64>, Query, description = "Jobs to skip (default 0).", minimum = 0),
    ),
    responses((status = 200, description = "A page of jobs.", body = JobPage), ApiErrors))]
pub(crate) async fn list_jobs(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    Query(q): Query<HashMap<String, String>>,
) -> ApiResult<Json<JobPage>> {
    let query = JobListQuery::parse(&q)?;
    if let Some(g) = &query.group {
        caller.require(Access::ReadGroup(g), "group")?;
    }
    let groups: Option<Vec<String>> = match (&query.group, caller.readable_groups()) {
        (Some(g), _) => Some(vec![g.clone()]),
        (None, Some(readable)) => Some(readable.iter().cloned().collect()),
        (None, None) => None,
    };
    let (total, total_exact, page) = if query.by_id_only() {
        let (total, ids) = s
            .store
            .api()
            .job_page(
                groups.as_deref(),
                query.offset,
                query.limit,
                query.descending,
            )
            .await?;
        (total, true, ids)
    } else {
        let found = s
            .history
            .search_jobs(&JobQuery {
                groups,
                text: query.text.clone(),
                enabled: query.enabled,
                schedule_type: query.schedule_type.clone(),
                owner: query.owner.clone(),
                sort: query.sort,
                descending: query.descending,
                offset: query.offset as u64,
                limit: query.limit as u32,
            })
            .await?;
        (found.total as usize, found.exact, found.ids)
    };
    let jobs = s.store.get_jobs(&page).await?;
    // The page's ids may come from MySQL's mirror, which trails Redis: a
    // job moved to a group the caller may not read is left out here.
    let mut items = Vec::new();
    let mut bytes = 0;
    let mut consumed = 0;
    for id in &page {
        let Some(job) = jobs
            .get(id)
            .filter(|j| caller.principal.may(Access::ReadGroup(&j.group)))
        else {
            consumed += 1;
            continue;
        };
        let job = super::shown_to(&caller, Job::clone(job));
        let size = serde_json::to_vec(&job).map_or(0, |b| b.len());
        if !items.is_empty() && bytes + size > PAGE_MAX_BYTES {
            break;
        }
        bytes += size;
        items.push(job);
        consumed += 1;
    }
    let more = if total_exact {
        query.offset + page.len() < total
    } else {
        page.len() == query.limit
    };
    // Nothing consumed (`limit=0`): no next page, or a client following
    // it would ask for this one again.
    let next_offset =
        (consumed > 0 && (consumed < page.len() || more)).then_some(query.offset + consumed);
    Ok(Json(JobPage {
        total,
        total_exact,
        offset: query.offset,
        next_offset,
        items,
    }))
}

/// The job list's query, checked: each bad value is a 400 naming its key.
struct JobListQuery {
    group: Option<String>,
    text: Option<String>,
    enabled: Option<bool>,
    schedule_type: Option<String>,
    owner: Option<String>,
    sort: JobSort,
    descending: bool,
    limit: usize,
    offset: usize,
}

impl JobListQuery {
    fn parse(q: &HashMap<String, String>) -> Result<JobListQuery, Error> {
        let group = q.get("group").cloned();
        if let Some(g) = &group {
            validate_app_name("group", g)?;
        }
        let text = q
            .get("q")
            .map(|t| t.trim().to_owned())
            .filter(|t| !t.is_empty());
        if text.as_ref().is_some_and(|t| t.chars().count() > 255) {
            return Err(Error::invalid("q", "must be at most 255 characters"));
        }
        let enabled = match q.get("enabled").map(String::as_str) {
            None => None,
            Some("true") => Some(true),
            Some("false") => Some(false),
            Some(other) => {
                return Err(Error::invalid(
                    "enabled",
                    format!("must be true or false, got {other:?}"),
                ));
            }
        };
        let schedule_type = match q.get("schedule_type") {
            None => None,
            Some(t) => Some(ScheduleType::parse("schedule_type", t)?.as_str().to_owned()),
        };
        let owner = q.get("owner").cloned();
        if owner
            .as_ref()
            .is_some_and(|o| o.len() > rondo_core::model::MAX_OWNER)
        {
            return Err(Error::invalid(
                "owner",
                format!("must be at most {} bytes", rondo_core::model::MAX_OWNER),
            ));
        }
        let raw_sort = q.get("sort").map(String::as_str).unwrap_or("id");
        let (descending, key) = match raw_sort.strip_prefix('-') {
            Some(key) => (true, key),
            None => (false, raw_sort),
        };
        let sort = match key {
            "id" => JobSort::Id,
            "description" => JobSort::Description,
            "updated" => JobSort::Updated,
            _ => {
                return Err(Error::invalid(
                    "sort",
                    format!(
                        "must be id, description or updated, optionally with a leading -, got {raw_sort:?}"
                    ),
                ));
            }
        };
        Ok(JobListQuery {
            group,
            text,
            enabled,
            schedule_type,
            owner,
            sort,
            descending,
            limit: query_usize(q, "limit", 100, 1000)?,
            offset: query_usize(q, "offset", 0, crate::api::input::MAX_ID as usize)?,
        })
    }

    /// Nothing but id order: Redis answers, current to the last save.
    fn by_id_only(&self) -> bool {
        self.text.is_none()
            && self.enabled.is_none()
            && self.schedule_type.is_none()
            && self.owner.is_none()
            && self.sort == JobSort::Id
    }
}
