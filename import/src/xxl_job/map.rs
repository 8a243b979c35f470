//! XXL-JOB's rows mapped to rondo's jobs: each checked with the model's
//! own validation, and the child-job graph checked as a whole.

use std::collections::HashMap;

use rondo_model::JobSpec;

use super::tables::{Problem, XxlGroup, XxlJob};

/// Where a job came from: `xxl-job/<source>#<id>` (its `import_ref`).
pub(super) fn import_ref(source: &str, xxl_id: i64) -> String {
    format!("xxl-job/{source}#{xxl_id}")
}

/// XXL-JOB column → the reason it does not map.
type Unmapped = (&'static str, String);

/// A job row mapped to rondo: its spec (without children) and its
/// children's XXL-JOB ids.
#[derive(Debug, Clone)]
pub(super) struct Mapped {
    pub(super) xxl: XxlJob,
    pub(super) spec: JobSpec,
    pub(super) children: Vec<i64>,
}

/// Maps every job row, or says why it does not map.
pub(super) fn map_jobs(
    groups: &[XxlGroup],
    jobs: &[XxlJob],
    zone: Option<&str>,
    source: &str,
) -> (Vec<Mapped>, Vec<Problem>) {
    let apps: HashMap<i64, &str> = groups.iter().map(|g| (g.id, g.app.as_str())).collect();
    let known: Vec<i64> = jobs.iter().map(|j| j.id).collect();
    let mut mapped = Vec::new();
    let mut problems = Vec::new();
    for job in jobs {
        let problem = |column: &str, reason: String| Problem {
            table: "xxl_job_info",
            id: job.id,
            column: column.to_owned(),
            reason,
        };
        match map_job(job, &apps, &known, zone, source) {
            Ok(m) => mapped.push(m),
            Err((column, reason)) => problems.push(problem(column, reason)),
        }
    }
    let (mut keep, bad_graph) = check_child_graph(mapped);
    problems.extend(bad_graph);
    // A child that did not map makes its parent unmappable too: importing
    // the parent without it would change what the parent does (and so on
    // up the chain).
    loop {
        let good: Vec<i64> = keep.iter().map(|m| m.xxl.id).collect();
        let (ok, dropped): (Vec<Mapped>, Vec<Mapped>) = keep
            .into_iter()
            .partition(|m| m.children.iter().all(|c| good.contains(c)));
        keep = ok;
        if dropped.is_empty() {
            break;
        }
        for m in dropped {
            let missing: Vec<String> = m
                .children
                .iter()
                .filter(|c| !good.contains(c))
                .map(i64::to_string)
                .collect();
            problems.push(Problem {
                table: "xxl_job_info",
                id: m.xxl.id,
                column: "child_jobid".into(),
                reason: format!("child job {} does not map (see its row)", missing.join(",")),
            });
        }
    }
    problems.sort_by_key(|p| p.id);
    (keep, problems)
}

/// What the API would refuse of the child jobs only when the links are
/// written (after every job exists): a job its own child, a child named
/// twice, too many, or a cycle (XXL-JOB allows them; rondo would trigger
/// forever). Found here, so the import stops before writing anything.
pub(super) fn check_child_graph(mapped: Vec<Mapped>) -> (Vec<Mapped>, Vec<Problem>) {
    let children: HashMap<i64, Vec<i64>> = mapped
        .iter()
        .map(|m| (m.xxl.id, m.children.clone()))
        .collect();
    let mut problems = Vec::new();
    for m in &mapped {
        let problem = |reason: String| Problem {
            table: "xxl_job_info",
            id: m.xxl.id,
            column: "child_jobid".into(),
            reason,
        };
        let kids = &m.children;
        if kids.contains(&m.xxl.id) {
            problems.push(problem("names the job itself".into()));
        } else if kids.len() > rondo_model::model::MAX_CHILD_JOBS {
            problems.push(problem(format!(
                "names {} jobs; rondo allows {}",
                kids.len(),
                rondo_model::model::MAX_CHILD_JOBS
            )));
        } else if let Some(twice) = kids
            .iter()
            .enumerate()
            .find_map(|(i, c)| kids[..i].contains(c).then_some(c))
        {
            problems.push(problem(format!("names job {twice} twice")));
        } else if reaches(&children, m.xxl.id) {
            problems.push(problem(
                "is part of a cycle of child jobs, which would trigger forever".into(),
            ));
        }
    }
    let bad: Vec<i64> = problems.iter().map(|p| p.id).collect();
    let keep = mapped
        .into_iter()
        .filter(|m| !bad.contains(&m.xxl.id))
        .collect();
    (keep, problems)
}

/// Whether `start` reaches itself through child links.
pub(super) fn reaches(children: &HashMap<i64, Vec<i64>>, start: i64) -> bool {
    let mut seen = std::collections::HashSet::new();
    let mut stack: Vec<i64> = children.get(&start).cloned().unwrap_or_default();
    while let Some(at) = stack.pop() {
        if at == start {
            return true;
        }
        if seen.insert(at) {
            stack.extend(children.get(&at).into_iter().flatten().copied());
        }
    }
    false
}

pub(super) fn map_job(
    job: &XxlJob,
    apps: &HashMap<i64, &str>,
    known: &[i64],
    zone: Option<&str>,
    source: &str,
) -> Result<Mapped, Unmapped> {
    let app = apps.get(&job.group).ok_or_else(|| {
        (
            "job_group",
            format!("no xxl_job_group with id {}", job.group),
        )
    })?;
    let glue = match job.glue_type.as_str() {
        "" | "BEAN" => None,
        "GLUE_PYTHON2" => {
            return Err((
                "glue_type",
                "GLUE_PYTHON2 runs Python 2, which rondo's executors do not: port the script to Python 3 and set GLUE_PYTHON".into(),
            ));
        }
        other => Some(other.to_owned()),
    };
    let children: Vec<i64> = job
        .children
        .split(',')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(|c| {
            c.parse::<i64>()
                .map_err(|_| ("child_jobid", format!("{c:?} is not a job id")))
        })
        .collect::<Result<_, _>>()?;
    if let Some(missing) = children.iter().find(|c| !known.contains(c)) {
        return Err((
            "child_jobid",
            format!("names job {missing}, which is not in xxl_job_info"),
        ));
    }
    let number = |column: &'static str, value: i64| {
        u32::try_from(value.max(0)).map_err(|_| (column, format!("{value} is too large")))
    };
    let spec = JobSpec {
        group: Some((*app).to_owned()),
        description: Some(job.desc.clone()),
        owner: Some(job.author.clone()),
        schedule_type: Some(if job.schedule_type.is_empty() {
            "NONE".to_owned()
        } else {
            job.schedule_type.clone()
        }),
        schedule_conf: Some(job.schedule_conf.clone()),
        zone: zone.map(str::to_owned),
        misfire: Some(or(&job.misfire, "DO_NOTHING")),
        routing: Some(or(&job.routing, "FIRST")),
        block: Some(or(&job.block, "SERIAL_EXECUTION")),
        handler: glue.is_none().then(|| job.handler.clone()),
        params: Some(job.params.clone()),
        timeout_s: Some(number("executor_timeout", job.timeout_s)?),
        retries: Some(number("executor_fail_retry_count", job.retries)?),
        alarm_email: Some(job.alarm_email.clone()),
        // BEAN said out loud: a job XXL-JOB moved from a script back to a
        // handler must stop being a script here too.
        glue_type: Some(glue.clone().unwrap_or_else(|| "BEAN".to_owned())),
        glue_source: glue.as_ref().map(|_| job.glue_source.clone()),
        glue_remark: glue.as_ref().map(|_| job.glue_remark.clone()),
        import_ref: Some(import_ref(source, job.id)),
        enabled: Some(job.running),
        ..JobSpec::default()
    };
    // The model's own validation, with XXL-JOB's column names.
    if let Err(e) = spec.clone().validate(1, 0, None) {
        let field = e.field.as_deref().unwrap_or("");
        return Err((xxl_column(field), e.message));
    }
    Ok(Mapped {
        xxl: job.clone(),
        spec,
        children,
    })
}

pub(super) fn or(value: &str, default: &str) -> String {
    if value.is_empty() { default } else { value }.to_owned()
}

/// The XXL-JOB column a rondo field comes from.
pub(super) fn xxl_column(field: &str) -> &'static str {
    match field {
        "group" => "job_group",
        "description" => "job_desc",
        "owner" => "author",
        "schedule_type" => "schedule_type",
        "schedule_conf" => "schedule_conf",
        "zone" => "--zone",
        "misfire" => "misfire_strategy",
        "routing" => "executor_route_strategy",
        "block" => "executor_block_strategy",
        "handler" => "executor_handler",
        "params" => "executor_param",
        "timeout_s" => "executor_timeout",
        "retries" => "executor_fail_retry_count",
        "alarm_email" => "alarm_email",
        "glue_type" => "glue_type",
        "glue_source" => "glue_source",
        "glue_remark" => "glue_remark",
        _ => "row",
    }
}
