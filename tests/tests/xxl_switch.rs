//! The switch-over from XXL-JOB, on each table layout in use (XXL-JOB's
//! own tables of 2.1–2.2, 2.4, 3.4 and after 3.4, in a MySQL database of
//! their own), while XXL-JOB runs.
//!
//! The test plays XXL-JOB's admin: every 100 ms it does what its schedule
//! thread does (takes `schedule_lock`, reads the running jobs due within
//! 5 s, takes their fires and advances `trigger_last_time` and
//! `trigger_next_time`), and keeps the fires it took. rondo's side runs
//! through the XXL-JOB gateway on a stand-in XXL-JOB executor of the
//! release's protocol. Across `rondo import xxl-job --stopped`, the switch
//! to rondo and the way back, every instant of each job's schedule (counted
//! from the schedule, not from what ran) is made exactly once, by one side
//! or the other: a job every second, one every 3 s, a FIX_RATE job off the
//! whole second (its phase kept), a parent every 2 s with a child (each of
//! rondo's parent runs runs the child once), and a daily cron in
//! XXL-JOB's zone (`Asia/Shanghai`) whose next instant rondo takes as
//! XXL-JOB computed it.
//!
//! Also on each layout: the release is named; the script history becomes
//! the job's script versions with their remarks and times (read in the
//! zone, or as instants where the release kept `TIMESTAMP`s); `author`
//! becomes the owner; the alarm e-mail comes over as it was (a job without
//! one alarms nowhere); users sign in once with their XXL-JOB password
//! (MD5 or SHA-256), then only with the Argon2id hash; a group without a
//! live executor and a group half-switched are refused with nothing moved.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Output;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::TimeZone;
use rondo_testkit::procs::{cli_report as report, rondo_cli};
use rondo_testkit::xxl::{Gateway, Standin, StandinSpec, TOKEN, XxlRelease, xxl_database_of};
use rondo_testkit::{Api, Cluster, PATIENCE, World, eventually};
use serde_json::{Value, json};
use sqlx::MySqlPool;

/// How XXL-JOB schedules a job of the test.
#[derive(Debug, Clone, Copy)]
enum Sched {
    /// Cron `0/n * * * * ?` (`* * * * * ?` for 1 s): every `n` ms, on
    /// the multiples of `n`.
    Every(i64),
    /// FIX_RATE every `n` ms, from its first instant.
    Rate(i64),
    /// Cron `0 0 3 * * ?`, in Asia/Shanghai.
    Daily3,
}

impl Sched {
    fn conf(self) -> (&'static str, String) {
        match self {
            Sched::Every(1000) => ("CRON", "* * * * * ?".into()),
            Sched::Every(ms) => ("CRON", format!("0/{} * * * * ?", ms / 1000)),
            Sched::Rate(ms) => ("FIX_RATE", (ms / 1000).to_string()),
            Sched::Daily3 => ("CRON", "0 0 3 * * ?".into()),
        }
    }

    /// The instant after `t`.
    fn after(self, t: i64) -> i64 {
        match self {
            Sched::Every(ms) => (t.div_euclid(ms) + 1) * ms,
            Sched::Rate(ms) => t + ms,
            Sched::Daily3 => {
                let zone = chrono_tz::Asia::Shanghai;
                let local = zone.timestamp_millis_opt(t).unwrap();
                let mut day = local.date_naive();
                loop {
                    let at = zone
                        .from_local_datetime(&day.and_hms_opt(3, 0, 0).unwrap())
                        .unwrap()
                        .timestamp_millis();
                    if at > t {
                        return at;
                    }
                    day = day.succ_opt().unwrap();
                }
            }
        }
    }
}

/// One `xxl_job_info` row of the test.
struct Row {
    id: i64,
    group: i64,
    sched: Sched,
    running: bool,
    children: &'static str,
    glue: (&'static str, &'static str),
    alarm: &'static str,
}

const EVERY_SECOND: i64 = 1;
const EVERY_3S: i64 = 2;
const RATE: i64 = 3;
const DAILY: i64 = 4;
const PARENT: i64 = 5;
const CHILD: i64 = 6;
const SCRIPT: i64 = 7;
const IDLE: i64 = 8;

fn rows(release: XxlRelease) -> Vec<Row> {
    let row = |id, sched, running| Row {
        id,
        group: 1,
        sched,
        running,
        children: "",
        glue: ("BEAN", ""),
        alarm: "",
    };
    let mut rows = vec![
        Row {
            alarm: "ops@example.com",
            ..row(EVERY_SECOND, Sched::Every(1000), true)
        },
        row(EVERY_3S, Sched::Every(3000), true),
        row(DAILY, Sched::Daily3, true),
        Row {
            children: "6",
            ..row(PARENT, Sched::Every(2000), true)
        },
        row(CHILD, Sched::Daily3, false),
        Row {
            glue: ("GLUE_SHELL", "echo three"),
            ..row(SCRIPT, Sched::Daily3, false)
        },
        Row {
            group: 2,
            ..row(IDLE, Sched::Every(1000), true)
        },
    ];
    if release.typed() {
        rows.push(row(RATE, Sched::Rate(2000), true));
    }
    rows
}

/// The script's history as XXL-JOB's editor leaves it: a row per save,
/// the newest being the current script. (source, remark, saved in
/// Shanghai's local time.)
const HISTORY: [(&str, &str, &str); 3] = [
    ("echo one", "first", "2024-01-02 10:00:00"),
    ("echo two", "second", "2024-03-04 11:30:00"),
    ("echo three", "third", "2024-05-06 12:00:00"),
];

fn shanghai_ms(local: &str) -> i64 {
    let naive = chrono::NaiveDateTime::parse_from_str(local, "%Y-%m-%d %H:%M:%S").unwrap();
    chrono_tz::Asia::Shanghai
        .from_local_datetime(&naive)
        .unwrap()
        .timestamp_millis()
}

/// Fills XXL-JOB's tables: the groups (`sw`, with the stand-in to come,
/// and `idle`, with none), the jobs with the first instants XXL-JOB
/// computed, the script history and the users.
async fn fill(pool: &MySqlPool, release: XxlRelease, now: i64) -> BTreeMap<i64, i64> {
    let title = release.title_column();
    sqlx::query(sqlx::AssertSqlSafe(format!(
        "INSERT INTO xxl_job_group (id, app_name, {title}, address_type) VALUES \
         (1, 'sw', 'Switched', 0), (2, 'idle', 'No executor', 0)"
    )))
    .execute(pool)
    .await
    .expect("groups");
    if release == XxlRelease::V3_5 {
        // 3.5 keeps a token per group; `idle` has none.
        sqlx::query("UPDATE xxl_job_group SET access_token = ? WHERE app_name = 'sw'")
            .bind(TOKEN)
            .execute(pool)
            .await
            .expect("sw's token");
    }
    let mut first = BTreeMap::new();
    for row in rows(release) {
        let (kind, conf) = row.sched.conf();
        // A FIX_RATE job's phase is off any whole second.
        let next = match row.sched {
            Sched::Rate(_) => now + 2_345,
            s => s.after(now),
        };
        first.insert(row.id, next);
        let (schedule_cols, schedule_vals) = if release.typed() {
            (
                "schedule_type, schedule_conf, misfire_strategy",
                format!("'{kind}', '{conf}', 'DO_NOTHING'"),
            )
        } else {
            ("job_cron", format!("'{conf}'"))
        };
        let desc = release.desc_column();
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO xxl_job_info (id, job_group, {desc}, add_time, update_time, author, \
             alarm_email, {schedule_cols}, executor_route_strategy, executor_handler, executor_param, \
             executor_block_strategy, executor_timeout, executor_fail_retry_count, glue_type, \
             glue_source, glue_remark, glue_updatetime, child_jobid, trigger_status, \
             trigger_last_time, trigger_next_time) VALUES (?, ?, 'job', NOW(), NOW(), 'XXL', ?, \
             {schedule_vals}, 'FIRST', ?, '', 'SERIAL_EXECUTION', 0, 0, ?, ?, ?, ?, ?, ?, 0, ?)"
        )))
        .bind(row.id)
        .bind(row.group)
        .bind(row.alarm)
        .bind(if row.glue.0 == "BEAN" {
            "demoJobHandler"
        } else {
            ""
        })
        .bind(row.glue.0)
        .bind(row.glue.1)
        .bind(if row.glue.0 == "BEAN" { "" } else { "third" })
        .bind(HISTORY[2].2)
        .bind(row.children)
        .bind(i8::from(row.running))
        .bind(if row.running { next } else { 0 })
        .execute(pool)
        .await
        .expect("a job row");
    }
    for (source, remark, saved) in HISTORY {
        // 2.1 kept the history's times as TIMESTAMPs (instants); later
        // releases as DATETIMEs in the admin's zone.
        let add_time = if release.typed() {
            format!("'{saved}'")
        } else {
            format!("FROM_UNIXTIME({})", shanghai_ms(saved) / 1000)
        };
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "INSERT INTO xxl_job_logglue (job_id, glue_type, glue_source, glue_remark, add_time, \
             update_time) VALUES (?, 'GLUE_SHELL', ?, ?, {add_time}, {add_time})"
        )))
        .bind(SCRIPT)
        .bind(source)
        .bind(remark)
        .execute(pool)
        .await
        .expect("a script version");
    }
    sqlx::query(
        "INSERT INTO xxl_job_user (id, username, password, role, permission) VALUES \
         (1, 'xxladmin', ?, 1, NULL), (2, 'ops', ?, 0, '1')",
    )
    .bind(release.password_hash("123456"))
    .bind(release.password_hash("ops-password"))
    .execute(pool)
    .await
    .expect("users");
    first
}

/// XXL-JOB's admin at work: what its schedule thread does, every 100 ms,
/// with the fires it takes.
struct XxlAdmin {
    taken: Arc<Mutex<Vec<(i64, i64)>>>,
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl XxlAdmin {
    fn start(pool: MySqlPool, release: XxlRelease) -> XxlAdmin {
        let scheds: BTreeMap<i64, Sched> = rows(release).iter().map(|r| (r.id, r.sched)).collect();
        let taken = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let task = tokio::spawn({
            let (taken, stop) = (taken.clone(), stop.clone());
            async move {
                while !stop.load(Ordering::SeqCst) {
                    schedule_once(&pool, &scheds, &taken).await;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
            }
        });
        XxlAdmin { taken, stop, task }
    }

    /// The instants it took of job `id`, in order.
    fn taken(&self, id: i64) -> Vec<i64> {
        let taken = self.taken.lock().unwrap();
        taken
            .iter()
            .filter(|(j, _)| *j == id)
            .map(|(_, t)| *t)
            .collect()
    }

    async fn stop(self) -> Vec<(i64, i64)> {
        self.stop.store(true, Ordering::SeqCst);
        self.task.await.expect("the admin's loop");
        let taken = self.taken.lock().unwrap();
        taken.clone()
    }
}

/// One round of XXL-JOB's schedule thread: a fire more than 5 s late is a
/// misfire (skipped, as `DO_NOTHING`), one late by less is made once and
/// the schedule goes on from now, and fires due within 5 s are taken now
/// (then made at their instants by its ring). A handover in the past
/// would so lose or bunch instants, and the test would see it.
async fn schedule_once(
    pool: &MySqlPool,
    scheds: &BTreeMap<i64, Sched>,
    taken: &Mutex<Vec<(i64, i64)>>,
) {
    let mut tx = pool.begin().await.expect("a transaction");
    sqlx::query("SELECT lock_name FROM xxl_job_lock WHERE lock_name = 'schedule_lock' FOR UPDATE")
        .fetch_optional(&mut *tx)
        .await
        .expect("schedule_lock");
    let now = chrono::Utc::now().timestamp_millis();
    let horizon = now + 5_000;
    let due: Vec<(i64, i64)> = sqlx::query_as(
        "SELECT CAST(id AS SIGNED), trigger_next_time FROM xxl_job_info \
         WHERE trigger_status = 1 AND trigger_next_time <= ? ORDER BY id",
    )
    .bind(horizon)
    .fetch_all(&mut *tx)
    .await
    .expect("due jobs");
    let mut took = Vec::new();
    for (id, next) in due {
        let sched = scheds[&id];
        let (mut last, mut at) = (0, next);
        if at < now - 5_000 {
            // More than 5 s late: a misfire; DO_NOTHING skips it, and the
            // next instant is counted from now.
            at = sched.after(now);
        } else if at < now {
            // Late by less: fired once at once, then from now.
            took.push((id, at));
            last = at;
            at = sched.after(now);
        }
        while at <= horizon {
            took.push((id, at));
            last = at;
            at = sched.after(at);
        }
        sqlx::query(
            "UPDATE xxl_job_info SET trigger_last_time = ?, trigger_next_time = ? WHERE id = ?",
        )
        .bind(last)
        .bind(at)
        .bind(id)
        .execute(&mut *tx)
        .await
        .expect("advance a job");
    }
    tx.commit().await.expect("commit");
    taken.lock().unwrap().extend(took);
}

/// Every job the node has, by XXL-JOB id.
async fn imported(api: &Api) -> BTreeMap<i64, Value> {
    let (status, page) = api.get("/api/v1/jobs?limit=1000").await;
    assert_eq!(status, 200, "{page}");
    page["items"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|j| {
            let xxl_id = j["import_ref"].as_str()?.rsplit('#').next()?.parse().ok()?;
            Some((xxl_id, j.clone()))
        })
        .collect()
}

/// The row's (trigger_status, trigger_last_time, trigger_next_time).
async fn status(pool: &MySqlPool, id: i64) -> (i64, i64, i64) {
    sqlx::query_as(
        "SELECT CAST(trigger_status AS SIGNED), trigger_last_time, trigger_next_time \
         FROM xxl_job_info WHERE id = ?",
    )
    .bind(id)
    .fetch_one(pool)
    .await
    .expect("a row")
}

/// The handover of each job in a switch report, by XXL-JOB id.
fn handovers(report: &Value) -> BTreeMap<i64, i64> {
    report["switched"][0]["jobs"]
        .as_array()
        .expect("the switched jobs")
        .iter()
        .map(|j| {
            (
                j["xxl_id"].as_i64().unwrap(),
                j["xxl_next_ms"].as_i64().unwrap(),
            )
        })
        .collect()
}

async fn switch_over_and_back(release: XxlRelease, tag: &str) {
    let mut world = World::new(tag).await;
    // The XXL-JOB jobs' alarms go to ops@example.com: the deployment's
    // domain, as `alarm.email_allow` must say.
    world.config.alarm.email_allow = vec!["example.com".into()];
    let token = world.admin.token.clone();
    let xxl = xxl_database_of(&world.config, release).await;
    let mut cluster = Cluster::new(world);
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    let url = format!("http://{}", cluster.nodes[node].addr());
    let gateway = Gateway::spawn(cluster.config(), "gateway", &cluster.log_dir);
    gateway.until_ready().await;
    let cli = |args: &[&str]| rondo_cli(&url, &token, args);
    let mysql = xxl.url.clone();

    let now = chrono::Utc::now().timestamp_millis();
    let first = fill(&xxl.pool, release, now).await;
    let admin = XxlAdmin::start(xxl.pool.clone(), release);

    // The dry run names the release and gives the daily job's next
    // instant as XXL-JOB computed it in its zone.
    // Before 3.5 the executors' one token is given; 3.5's own are read.
    let mut import = vec![
        "import",
        "xxl-job",
        "--mysql",
        &mysql,
        "--zone",
        "Asia/Shanghai",
        "--stopped",
    ];
    if release != XxlRelease::V3_5 {
        import.extend(["--access-token", TOKEN]);
    }
    let out = cli(&[&import[..], &["--dry-run"]].concat());
    assert!(out.status.success(), "{out:?}");
    let dry = report(&out);
    assert_eq!(dry["xxl_version"], release.layout(), "{dry}");
    let daily = dry["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["xxl_id"] == DAILY)
        .expect("the daily job")
        .clone();
    assert_eq!(daily["next_fires"][0]["at_ms"], first[&DAILY], "{daily}");
    assert_eq!(daily["xxl_trigger_next_ms"], first[&DAILY], "{daily}");
    assert_eq!(daily["script_versions"], Value::Null);

    let import_ms = chrono::Utc::now().timestamp_millis();
    let out = cli(&import);
    assert!(out.status.success(), "{out:?}");
    let done = report(&out);
    let tokens: BTreeMap<String, String> = done["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| {
            let said = g["xxl_token"].as_str().unwrap_or_default().to_owned();
            (g["app"].as_str().unwrap().to_owned(), said)
        })
        .collect();
    let (sw, idle) = if release == XxlRelease::V3_5 {
        ("set from xxl_job_group.access_token", "none: ")
    } else {
        ("set from --access-token", "set from --access-token")
    };
    assert_eq!(tokens["sw"], sw, "{done}");
    assert!(tokens["idle"].starts_with(idle), "{done}");
    let script_entry = done["jobs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|j| j["xxl_id"] == SCRIPT)
        .cloned()
        .unwrap();
    assert_eq!(script_entry["script_versions"], 3, "{script_entry}");
    let jobs = imported(&api).await;
    for (id, job) in &jobs {
        assert_eq!(job["enabled"], false, "--stopped: job {id} stopped");
        assert_eq!(job["owner"], "XXL", "author becomes owner");
    }
    assert_eq!(jobs[&EVERY_SECOND]["alarm_email"], "ops@example.com");
    assert_eq!(
        (
            &jobs[&EVERY_3S]["alarm_email"],
            &jobs[&EVERY_3S]["alarm_webhook"]
        ),
        (&json!(""), &json!("")),
        "no alarm in XXL-JOB, none in rondo"
    );
    let id_of = |xxl_id: i64| jobs[&xxl_id]["id"].as_u64().unwrap();
    assert_eq!(jobs[&PARENT]["child_jobs"], json!([id_of(CHILD)]));
    script_versions_keep_their_remarks_and_times(&api, id_of(SCRIPT), import_ms).await;
    users_sign_in_with_their_xxl_passwords_once(&cluster, &api, &url, release).await;

    // No executor of `idle` is live: its switch is refused, nothing moves.
    let out = cli(&["import", "xxl-switch", "--mysql", &mysql, "--group", "idle"]);
    assert!(!out.status.success());
    let refused = report(&out);
    assert!(
        refused["refused"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("no executor")),
        "{refused}"
    );
    assert_eq!(status(&xxl.pool, IDLE).await.0, 1);
    assert_eq!(imported(&api).await[&IDLE]["enabled"], false);

    let generation = match release {
        XxlRelease::V2_1 | XxlRelease::V2_4 => "2",
        XxlRelease::V3_4 => "3",
        XxlRelease::V3_5 => "3.5",
    };
    let standin = Standin::spawn(
        StandinSpec::new(generation, "sw", vec![gateway.admin_url()]),
        "standin",
        &cluster.log_dir,
    );
    cluster.world.executor_queue("sw", &standin.executor_id);
    api.until_executors("sw", &[standin.executor_id.as_str()])
        .await;
    // XXL-JOB has been firing for a while.
    eventually("XXL-JOB's fires", PATIENCE, || async {
        (admin.taken(EVERY_SECOND).len() >= 8).then_some(())
    })
    .await;

    let out = cli(&["import", "xxl-switch", "--mysql", &mysql, "--group", "sw"]);
    assert!(out.status.success(), "{out:?}");
    let forward = handovers(&report(&out));
    let mut moving: Vec<i64> = rows(release)
        .iter()
        .filter(|r| r.group == 1 && r.running)
        .map(|r| r.id)
        .collect();
    moving.sort_unstable();
    assert_eq!(
        forward.keys().copied().collect::<Vec<_>>(),
        moving,
        "the running jobs of the group move"
    );
    for id in &moving {
        assert_eq!(
            status(&xxl.pool, *id).await,
            (0, 0, 0),
            "stopped in XXL-JOB as its own stop does"
        );
        let (_, read) = api.get(&format!("/api/v1/jobs/{}", id_of(*id))).await;
        // rondo starts at XXL-JOB's first instant not taken: a FIX_RATE
        // job keeps its phase, the daily job its instant in XXL's zone.
        assert_eq!(read["next_fire_ms"], forward[id], "job {id}: {read}");
        assert_eq!(read["enabled"], true);
    }
    assert_eq!(forward[&DAILY], first[&DAILY]);
    assert_eq!(status(&xxl.pool, CHILD).await.0, 0, "a stopped job stays");
    assert_eq!(status(&xxl.pool, IDLE).await.0, 1, "another group stays");

    let out = cli(&["import", "xxl-switch", "--mysql", &mysql, "--group", "sw"]);
    assert!(!out.status.success());
    let refused = report(&out);
    assert!(
        refused["refused"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("half-switched")),
        "{refused}"
    );

    // rondo fires through the gateway on the stand-in.
    let made = |id: i64| -> Vec<i64> {
        let rondo_id = i64::try_from(id_of(id)).unwrap();
        let mut at: Vec<i64> = standin
            .starts()
            .iter()
            .filter(|r| r.job_id == rondo_id)
            .map(|r| r.log_date_time)
            .collect();
        at.sort_unstable();
        at
    };
    let rated = if release.typed() { RATE } else { PARENT };
    eventually("rondo's fires", PATIENCE, || async {
        let each = moving
            .iter()
            .filter(|id| **id != DAILY)
            .all(|id| !made(*id).is_empty());
        (each && made(EVERY_SECOND).len() >= 3 && made(rated).len() >= 2).then_some(())
    })
    .await;

    let out = cli(&[
        "import",
        "xxl-switch",
        "--mysql",
        &mysql,
        "--group",
        "sw",
        "--back",
    ]);
    assert!(out.status.success(), "{out:?}");
    let back = handovers(&report(&out));
    assert_eq!(back.keys().copied().collect::<Vec<_>>(), moving);
    for id in &moving {
        assert_eq!(
            status(&xxl.pool, *id).await.0,
            1,
            "job {id} runs in XXL-JOB again"
        );
    }
    assert_eq!(
        back[&DAILY], first[&DAILY],
        "the daily job goes back as it came"
    );
    let after_back = imported(&api).await;
    for id in &moving {
        assert_eq!(
            after_back[id]["enabled"], false,
            "job {id} stopped in rondo"
        );
    }
    // XXL-JOB takes its fires again, past every handover.
    let past = |id: i64| {
        admin
            .taken(id)
            .last()
            .is_some_and(|t| *t > back[&id] + 3_000)
    };
    eventually("XXL-JOB past the handovers", PATIENCE, || async {
        moving
            .iter()
            .filter(|id| **id != DAILY)
            .all(|id| past(*id))
            .then_some(())
    })
    .await;
    let taken = admin.stop().await;
    let mut next_now = BTreeMap::new();
    for id in &moving {
        next_now.insert(*id, status(&xxl.pool, *id).await.2);
    }

    for id in moving.iter().filter(|id| **id != DAILY) {
        let sched = rows(release).iter().find(|r| r.id == *id).unwrap().sched;
        // The schedule from XXL-JOB's first instant to its next one now.
        let expected: Vec<i64> = std::iter::successors(Some(first[id]), |t| Some(sched.after(*t)))
            .take_while(|t| *t < next_now[id])
            .collect();
        let xxl_side: Vec<i64> = taken
            .iter()
            .filter(|(j, _)| j == id)
            .map(|(_, t)| *t)
            .collect();
        let rondo_side: Vec<i64> = expected
            .iter()
            .copied()
            .filter(|t| *t >= forward[id] && *t < back[id])
            .collect();
        assert!(!rondo_side.is_empty(), "job {id}: rondo made some");
        eventually(&format!("rondo's fires of job {id}"), PATIENCE, || async {
            (made(*id) == rondo_side).then_some(())
        })
        .await;
        let mut both: Vec<i64> = xxl_side.iter().chain(&rondo_side).copied().collect();
        both.sort_unstable();
        assert_eq!(
            both, expected,
            "job {id}: every instant once, on one side or the other"
        );
        let distinct: BTreeSet<i64> = both.iter().copied().collect();
        assert_eq!(distinct.len(), both.len(), "job {id}: none twice");
    }
    if release.typed() {
        assert_eq!(
            (back[&RATE] - first[&RATE]) % 2_000,
            0,
            "the FIX_RATE job goes back on its phase"
        );
    }
    // Every parent run of rondo's ran the child once.
    let parents = made(PARENT).len();
    eventually("the child's runs", PATIENCE, || async {
        (made(CHILD).len() >= parents).then_some(())
    })
    .await;
    let child_runs: Vec<_> = standin
        .starts()
        .into_iter()
        .filter(|r| r.job_id == i64::try_from(id_of(CHILD)).unwrap())
        .collect();
    let ids: BTreeSet<i64> = child_runs.iter().map(|r| r.log_id).collect();
    assert_eq!(
        (child_runs.len(), ids.len()),
        (parents, parents),
        "one child run per parent run"
    );
}

/// The script's kept versions, oldest to newest, with XXL-JOB's remarks
/// and the instants it saved them.
async fn script_versions_keep_their_remarks_and_times(api: &Api, id: u64, imported_from: i64) {
    let path = format!("/api/v1/jobs/{id}/scripts");
    let versions = eventually("the script versions stored", PATIENCE, || async {
        let (_, out) = api.get(&path).await;
        (out["items"].as_array()?.len() == 3).then_some(out)
    })
    .await;
    assert_eq!(versions["current"], 3, "{versions}");
    let got: Vec<(String, String, i64)> = versions["items"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .map(|v| {
            (
                v["glue_source"].as_str().unwrap().to_owned(),
                v["glue_remark"].as_str().unwrap().to_owned(),
                v["created_ms"].as_i64().unwrap(),
            )
        })
        .collect();
    // The kept versions keep XXL-JOB's times; the current script is dated
    // by its save in rondo (executors cache scripts by that time).
    let want: Vec<(String, String, Option<i64>)> = HISTORY
        .iter()
        .enumerate()
        .map(|(i, (s, r, t))| {
            let dated = (i + 1 < HISTORY.len()).then(|| shanghai_ms(t));
            ((*s).to_owned(), (*r).to_owned(), dated)
        })
        .collect();
    let got: Vec<(String, String, Option<i64>)> = got
        .into_iter()
        .map(|(s, r, t)| (s, r, (t < imported_from).then_some(t)))
        .collect();
    assert_eq!(got, want);
}

/// Imported users sign in with their XXL-JOB passwords; the first success
/// replaces XXL-JOB's hash with Argon2id, which the password still
/// matches, and the user must set a new one; a wrong password does not
/// sign in; no answer shows a hash. XXL-JOB's admin, with its stock
/// password, comes over disabled.
async fn users_sign_in_with_their_xxl_passwords_once(
    cluster: &Cluster,
    api: &Api,
    url: &str,
    release: XxlRelease,
) {
    let (status, ops) = api.get("/api/v1/users/ops").await;
    assert_eq!(status, 200, "{ops}");
    assert_eq!(ops["role"], "operator");
    assert_eq!(ops["groups"], json!(["sw"]));
    assert_eq!(ops["enabled"], true);
    let (_, admin) = api.get("/api/v1/users/xxladmin").await;
    assert_eq!(admin["role"], "admin");
    assert_eq!(admin["enabled"], false, "{admin}");
    let old = release.password_hash("ops-password");
    let (_, all) = api.get("/api/v1/users").await;
    assert!(!all.to_string().contains(&old), "{all}");
    let hash = || async {
        sqlx::query_scalar::<_, String>("SELECT password_hash FROM `user` WHERE username = 'ops'")
            .fetch_one(cluster.db())
            .await
            .expect("the user row")
    };
    let prefix = if old.len() == 64 {
        "xxl-sha256:"
    } else {
        "xxl-md5:"
    };
    assert_eq!(hash().await, format!("{prefix}{old}"));
    let client = reqwest::Client::new();
    let login = |password: &'static str| {
        let client = client.clone();
        let url = format!("{url}/api/v1/auth/login");
        async move {
            let answer = client
                .post(url)
                .json(&json!({ "username": "ops", "password": password }))
                .send()
                .await
                .expect("a sign-in answer");
            let status = answer.status().as_u16();
            if status == 200 {
                let session: Value = answer.json().await.expect("a session");
                assert_eq!(session["must_change_password"], true, "{session}");
            }
            status
        }
    };
    assert_eq!(login("not-the-password").await, 401);
    assert!(
        hash().await.starts_with(prefix),
        "a failure changes nothing"
    );
    assert_eq!(login("ops-password").await, 200);
    assert!(
        hash().await.starts_with("$argon2id$"),
        "XXL-JOB's hash is replaced at once"
    );
    assert_eq!(
        login("ops-password").await,
        200,
        "the password is still theirs"
    );
    assert_eq!(login("not-the-password").await, 401);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn switch_over_and_back_on_xxl_job_2_1_tables() {
    switch_over_and_back(XxlRelease::V2_1, "sw21").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn switch_over_and_back_on_xxl_job_2_4_tables() {
    switch_over_and_back(XxlRelease::V2_4, "sw24").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn switch_over_and_back_on_xxl_job_3_4_tables() {
    switch_over_and_back(XxlRelease::V3_4, "sw34").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn switch_over_and_back_on_xxl_job_3_5_tables() {
    switch_over_and_back(XxlRelease::V3_5, "sw35").await;
}

/// A database that is not XXL-JOB's, XXL-JOB 2.0's, and one of a release
/// the importer does not know are refused by name before anything is
/// written; so is a switch on the unknown one.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn databases_the_importer_does_not_know_are_refused_by_name() {
    let world = World::new("xxl_unknown").await;
    let token = world.admin.token.clone();
    let mut cluster = Cluster::new(world);
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    let url = format!("http://{}", cluster.nodes[node].addr());
    let cli = |args: &[&str]| rondo_cli(&url, &token, args);
    let stderr = |out: &Output| String::from_utf8_lossy(&out.stderr).into_owned();

    let other = rondo_history::testing::TestDatabase::empty(&cluster.config().mysql.url).await;
    sqlx::query("CREATE TABLE orders (id INT PRIMARY KEY)")
        .execute(&other.pool)
        .await
        .unwrap();
    let out = cli(&["import", "xxl-job", "--mysql", &other.url, "--dry-run"]);
    assert!(!out.status.success());
    assert!(
        stderr(&out).contains("not XXL-JOB's database"),
        "{}",
        stderr(&out)
    );

    sqlx::query("CREATE TABLE XXL_JOB_QRTZ_TRIGGER_INFO (id INT PRIMARY KEY)")
        .execute(&other.pool)
        .await
        .unwrap();
    let out = cli(&["import", "xxl-job", "--mysql", &other.url]);
    assert!(!out.status.success());
    assert!(stderr(&out).contains("XXL-JOB 2.0"), "{}", stderr(&out));

    let later = xxl_database_of(cluster.config(), XxlRelease::V3_5).await;
    sqlx::query("ALTER TABLE xxl_job_info ADD COLUMN schedule_priority INT NOT NULL DEFAULT 0")
        .execute(&later.pool)
        .await
        .unwrap();
    for args in [
        vec!["import", "xxl-job", "--mysql", &later.url],
        vec![
            "import",
            "xxl-switch",
            "--mysql",
            &later.url,
            "--group",
            "sw",
        ],
    ] {
        let out = cli(&args);
        assert!(!out.status.success());
        let text = stderr(&out);
        assert!(
            text.contains("does not know") && text.contains("schedule_priority"),
            "{text}"
        );
    }
    let (_, page) = api.get("/api/v1/jobs").await;
    assert_eq!(page["items"], json!([]), "nothing written");
}
