//! Cleaning trigger logs by hand (XXL-JOB's 清理, with its nine presets):
//! a job's or a group's (its operators), or every group's (admins), older
//! than an age, beyond the newest so many, or all; a trigger still running
//! stays. Audited as it starts. A row belongs to the group it ran in, so a
//! job's clean deletes only the rows of groups the caller operates.

use axum::body::Bytes;
use axum::extract::State;
use axum::{Extension, Json};
use rondo_core::auth::Access;
use rondo_core::model::validate_app_name;
use rondo_core::{Error, ErrorKind, clock};
use rondo_history::clean::{CleanRule, CleanScope};
use serde::{Deserialize, Serialize};

use super::auth::Caller;
use super::doc::ApiErrors;
use super::input::parse_body;
use super::state::{ApiResult, AppState};

const DAY_MS: i64 = 86_400_000;

/// What to clean: whose logs (`job_id`, `group`, or neither: every
/// group's) and which, by one of `preset`, `older_than_days`, `keep_last`
/// or `all`.
#[derive(Deserialize, Default, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CleanSpec {
    /// One job's logs: of the groups the caller operates (each row judged
    /// by the group it ran in; admins: every row).
    job_id: Option<u64>,
    /// One group's logs (its operators).
    #[schema(pattern = "^[A-Za-z0-9_-]{1,64}$")]
    group: Option<String>,
    /// XXL-JOB's presets: 1 older than a month, 2 three months, 3 six
    /// months, 4 a year; 5 all but the newest 1,000, 6 10,000, 7 30,000,
    /// 8 100,000; 9 all.
    #[schema(minimum = 1, maximum = 9)]
    preset: Option<u8>,
    /// Logs of fires more than this many days ago (1 to 3650).
    #[schema(minimum = 1, maximum = 3650)]
    older_than_days: Option<u32>,
    /// All but the newest so many (0 to 10,000,000; ties at the cut kept).
    #[schema(maximum = 10000000)]
    keep_last: Option<u64>,
    /// Every log of the scope.
    all: Option<bool>,
}

/// What a clean did.
#[derive(Serialize, utoipa::ToSchema)]
pub(super) struct Cleaned {
    /// `job:<id>`, `group:<app>` or `all`.
    scope: String,
    /// The rule, in words.
    rule: String,
    /// Trigger logs deleted (with their log lines).
    deleted: u64,
}

impl CleanSpec {
    fn rule(&self, now_ms: i64) -> Result<(CleanRule, String), Error> {
        let given = [
            self.preset.is_some(),
            self.older_than_days.is_some(),
            self.keep_last.is_some(),
            self.all == Some(true),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(Error::invalid(
                "preset",
                "give exactly one of preset, older_than_days, keep_last or all",
            ));
        }
        let older = |days: i64| {
            (
                CleanRule::Before(now_ms - days * DAY_MS),
                format!("older than {days} days"),
            )
        };
        let keep = |n: u64| (CleanRule::KeepNewest(n), format!("all but the newest {n}"));
        Ok(match (self.preset, self.older_than_days, self.keep_last) {
            (Some(preset), _, _) => match preset {
                1 => older(30),
                2 => older(90),
                3 => older(180),
                4 => older(365),
                5 => keep(1_000),
                6 => keep(10_000),
                7 => keep(30_000),
                8 => keep(100_000),
                9 => (CleanRule::Everything, "all".into()),
                other => {
                    return Err(Error::invalid(
                        "preset",
                        format!("must be 1 to 9, got {other}"),
                    ));
                }
            },
            (None, Some(days), _) if (1..=3650).contains(&days) => older(i64::from(days)),
            (None, Some(days), _) => {
                return Err(Error::invalid(
                    "older_than_days",
                    format!("must be 1 to 3650, got {days}"),
                ));
            }
            (None, None, Some(n)) if n <= 10_000_000 => keep(n),
            (None, None, Some(n)) => {
                return Err(Error::invalid(
                    "keep_last",
                    format!("must be at most 10000000, got {n}"),
                ));
            }
            (None, None, None) => (CleanRule::Everything, "all".into()),
        })
    }
}

/// What a clean of job `id`'s logs by `caller` deletes: the rows of the
/// groups the caller may operate, judged by the group each ran in (a job
/// moved from A to B keeps its A runs as A's: an operator of B only cleans
/// its B runs, an operator of A only its A runs); an admin's, every row.
/// Refused when the caller may operate neither the job's group nor a
/// group of its rows.
async fn job_scope(s: &AppState, caller: &Caller, id: u64) -> Result<CleanScope, Error> {
    if caller.principal.sees_every_group() {
        caller.require(Access::Admin, "job_id")?;
        return Ok(CleanScope::Job { id, groups: None });
    }
    let mut groups = s.history.job_log_groups(id).await?;
    let current = match s.store.get_job(id).await {
        Ok(job) => Some(job.group),
        Err(e) if e.kind == ErrorKind::NotFound => None,
        Err(e) => return Err(e),
    };
    if current.is_none() && groups.is_empty() {
        return Err(Error::not_found("job_id", format!("no job {id}")));
    }
    groups.extend(current);
    groups.retain(|g| caller.principal.may(Access::OperateGroup(g)));
    groups.sort();
    groups.dedup();
    if groups.is_empty() {
        return Err(Error::forbidden(
            "job_id",
            format!("job {id} and its logs are of groups you may not operate"),
        ));
    }
    Ok(CleanScope::Job {
        id,
        groups: Some(groups),
    })
}

/// Deletes trigger logs with their lines; what and how many is audited.
#[utoipa::path(post, path = "/api/v1/logs/clean", tag = "logs",
    request_body = CleanSpec,
    responses((status = 200, description = "What was deleted.", body = Cleaned), ApiErrors))]
pub(super) async fn clean_logs(
    State(s): State<AppState>,
    Extension(caller): Extension<Caller>,
    body: Bytes,
) -> ApiResult<Json<Cleaned>> {
    let spec = parse_body::<CleanSpec>(&body)?;
    let (scope, group) = match (&spec.job_id, &spec.group) {
        (Some(_), Some(_)) => {
            return Err(Error::invalid("group", "give job_id or group, not both").into());
        }
        (Some(id), None) => (job_scope(&s, &caller, *id).await?, None),
        (None, Some(app)) => {
            validate_app_name("group", app)?;
            caller.require(Access::OperateGroup(app), "group")?;
            (CleanScope::Group(app.clone()), Some(app.clone()))
        }
        (None, None) => {
            caller.require(Access::Admin, "group")?;
            (CleanScope::All, None)
        }
    };
    let (rule, words) = spec.rule(clock::now_ms())?;
    let target = match &scope {
        CleanScope::Job { id, .. } => format!("job:{id}"),
        CleanScope::Group(app) => format!("group:{app}"),
        CleanScope::All => "all".into(),
    };
    // Audited before it starts: a clean cut short is on record too.
    s.events
        .publish(&[caller.audit(
            "logs.clean",
            target.clone(),
            group.as_deref(),
            Some(words.clone()),
        )])
        .await?;
    let deleted = s.history.clean_logs(&scope, rule).await?;
    tracing::info!(scope = %target, rule = %words, deleted, "logs cleaned");
    Ok(Json(Cleaned {
        scope: target,
        rule: words,
        deleted,
    }))
}
