//! The log list as the console pages it: trigger logs in MySQL, filtered by
//! group, job, status and time, newest first, a page at a time with a
//! cursor, and only of the groups the caller may read.

use rondo_core::auth::Role;
use rondo_testkit::World;
use serde_json::{Value, json};

/// Trigger `n` of the fixture: job 1 (alpha) has the odd ones, job 2
/// (beta) the even ones; one second apart; every third has failed, every
/// fifth (not failed) is still running, the rest succeeded.
fn fixture_row(n: i64) -> (String, i64, u64, &'static str, Option<i32>, Option<i32>) {
    let (job, group) = if n % 2 == 1 {
        (1, "alpha")
    } else {
        (2, "beta")
    };
    let (trigger_code, handle_code) = if n % 3 == 0 {
        (Some(200), Some(500))
    } else if n % 5 == 0 {
        (Some(200), None)
    } else {
        (Some(200), Some(200))
    };
    let fire_ms = 1_780_000_000_000 + n * 1000;
    (
        format!("{job}-{fire_ms}-0"),
        fire_ms,
        job,
        group,
        trigger_code,
        handle_code,
    )
}

fn status_of(n: i64) -> &'static str {
    if n % 3 == 0 {
        "failure"
    } else if n % 5 == 0 {
        "running"
    } else {
        "success"
    }
}

fn triggers(page: &Value) -> Vec<String> {
    page["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items: {page}"))
        .iter()
        .map(|r| r["trigger_id"].as_str().unwrap().to_owned())
        .collect()
}

/// The trigger ids of fixture rows `ns`, in the order given.
fn expected(ns: impl IntoIterator<Item = i64>) -> Vec<String> {
    ns.into_iter().map(|n| fixture_row(n).0).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_are_filtered_and_paged_newest_first() {
    let world = World::new("log_list").await;
    for n in 1..=30 {
        let (trigger_id, fire_ms, job, group, trigger_code, handle_code) = fixture_row(n);
        sqlx::query(
            "INSERT INTO job_log (trigger_id, fire_ms, job_id, group_app, trigger_code, handle_code) \
             VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(trigger_id)
        .bind(fire_ms)
        .bind(job)
        .bind(group)
        .bind(trigger_code)
        .bind(handle_code)
        .execute(&world.db)
        .await
        .unwrap();
    }
    let viewer = world.user("vic", Role::Viewer, &["beta"], false).await;
    let api = world
        .in_process_api("log-list")
        .await
        .with_token(&world.admin.token);

    // Every row, newest first, in pages of 7 following `next`.
    let mut seen = Vec::new();
    let mut path = "/api/v1/logs?limit=7".to_string();
    loop {
        let (status, page) = api.get(&path).await;
        assert_eq!(status, 200, "{page}");
        seen.extend(triggers(&page));
        match page["next"].as_str() {
            Some(next) => path = format!("/api/v1/logs?limit=7&before={next}"),
            None => break,
        }
    }
    assert_eq!(
        seen,
        expected((1..=30).rev()),
        "each row once, newest first"
    );

    // Each filter alone and together.
    for status in ["success", "failure", "running"] {
        let (_, page) = api.get(&format!("/api/v1/logs?status={status}")).await;
        let want = expected((1..=30).rev().filter(|n| status_of(*n) == status));
        assert_eq!(triggers(&page), want, "{status}");
    }
    let (_, page) = api.get("/api/v1/logs?group=beta&status=failure").await;
    assert_eq!(triggers(&page), expected([30, 24, 18, 12, 6]));
    let (_, page) = api.get("/api/v1/logs?job_id=1&limit=3").await;
    assert_eq!(triggers(&page), expected([29, 27, 25]));
    let from = fixture_row(10).1;
    let until = fixture_row(14).1;
    let (_, page) = api
        .get(&format!("/api/v1/logs?from_ms={from}&until_ms={until}"))
        .await;
    assert_eq!(
        triggers(&page),
        expected([13, 12, 11, 10]),
        "from inclusive, until exclusive"
    );
    let (_, page) = api
        .get(&format!(
            "/api/v1/logs?job_id=2&status=success&from_ms={from}"
        ))
        .await;
    assert_eq!(triggers(&page), expected([28, 26, 22, 16, 14]));

    // A viewer of beta sees beta's rows only, whatever the filter.
    let vic = world.in_process_api("log-list-2").await.with_token(&viewer);
    let (_, page) = vic.get("/api/v1/logs?limit=100").await;
    assert_eq!(
        triggers(&page),
        expected((1..=30).rev().filter(|n| n % 2 == 0))
    );
    let (_, page) = vic.get("/api/v1/logs?job_id=1").await;
    assert!(triggers(&page).is_empty(), "job 1 is alpha's: {page}");
    let (status, answer) = vic.get("/api/v1/logs?group=alpha").await;
    assert_eq!(
        (status, answer["error"]["field"].clone()),
        (403, json!("group"))
    );

    // Bad values are refused, naming the key.
    for (query, field) in [
        ("status=ok", "status"),
        ("job_id=x", "job_id"),
        ("from_ms=-1", "from_ms"),
        ("until_ms=soon", "until_ms"),
        ("before=nope", "before"),
        ("before=12:", "before"),
        ("limit=1001", "limit"),
        ("group=a%20b", "group"),
    ] {
        let (status, answer) = api.get(&format!("/api/v1/logs?{query}")).await;
        assert_eq!(
            (status, answer["error"]["field"].clone()),
            (400, json!(field)),
            "{query}: {answer}"
        );
    }
}

/// Rows that share an instant (a broadcast's shards, jobs due together)
/// are paged by trigger id under the instant: pages of two through seven
/// such rows give each once, newest first then by trigger id, descending;
/// a viewer of two groups of three gets the merge of both in that order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rows_of_one_instant_page_by_trigger_id_across_groups() {
    let world = World::new("log_ties").await;
    let at = 1_780_000_500_000i64;
    // (trigger id, group): job 7's broadcast of four shards, jobs 8 and 9,
    // and one row a second earlier.
    let rows = [
        (format!("7-{at}-0"), "alpha"),
        (format!("7-{at}-1"), "alpha"),
        (format!("7-{at}-2"), "alpha"),
        (format!("7-{at}-3"), "alpha"),
        (format!("8-{at}-0"), "beta"),
        (format!("9-{at}-0"), "gamma"),
        (format!("9-{}-0", at - 1000), "gamma"),
    ];
    for (id, group) in &rows {
        let (job, fire_ms) = {
            let mut parts = id.split('-');
            let job: u64 = parts.next().unwrap().parse().unwrap();
            let fire_ms: i64 = parts.next().unwrap().parse().unwrap();
            (job, fire_ms)
        };
        sqlx::query(
            "INSERT INTO job_log (trigger_id, fire_ms, job_id, group_app, trigger_code, handle_code) \
             VALUES (?, ?, ?, ?, 200, 200)",
        )
        .bind(id)
        .bind(fire_ms)
        .bind(job)
        .bind(group)
        .execute(&world.db)
        .await
        .unwrap();
    }
    let viewer = world
        .user("tess", Role::Viewer, &["alpha", "gamma"], false)
        .await;
    let api = world
        .in_process_api("log-ties")
        .await
        .with_token(&world.admin.token);
    let vic = world.in_process_api("log-ties-2").await.with_token(&viewer);

    let all_pages = |api: rondo_testkit::Api| async move {
        let mut seen = Vec::new();
        let mut path = "/api/v1/logs?limit=2".to_string();
        loop {
            let (status, page) = api.get(&path).await;
            assert_eq!(status, 200, "{page}");
            seen.extend(triggers(&page));
            match page["next"].as_str() {
                Some(next) => path = format!("/api/v1/logs?limit=2&before={next}"),
                None => break seen,
            }
        }
    };
    let mut want: Vec<String> = rows[..6].iter().map(|(id, _)| id.clone()).collect();
    want.sort();
    want.reverse();
    want.push(rows[6].0.clone());
    assert_eq!(all_pages(api).await, want, "each row once, in order");
    let theirs: Vec<String> = want
        .iter()
        .filter(|id| !id.starts_with("8-"))
        .cloned()
        .collect();
    assert_eq!(all_pages(vic).await, theirs, "alpha and gamma merged");
}

/// Cleaning logs by hand (XXL-JOB's 清理): a job's by a preset, a group's
/// beyond a count, every group's; each with its log lines; another job's
/// or group's left as they were; an operator only in their groups; a bad
/// request names its field and deletes nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_are_cleaned_by_job_group_age_and_count() {
    let world = World::new("log_clean").await;
    let now = rondo_core::clock::now_ms();
    let day = 86_400_000;
    let ages = [1, 10, 40, 100, 200, 400];
    for (job, group) in [(1u64, "alpha"), (2, "beta")] {
        for age in ages {
            let fire_ms = now - age * day;
            let trigger_id = format!("{job}-{fire_ms}-0");
            sqlx::query(
                "INSERT INTO job_log (trigger_id, fire_ms, job_id, group_app, trigger_code, handle_code) \
                 VALUES (?, ?, ?, ?, 200, 200)",
            )
            .bind(&trigger_id)
            .bind(fire_ms)
            .bind(job)
            .bind(group)
            .execute(&world.db)
            .await
            .unwrap();
            sqlx::query("INSERT INTO job_log_line (trigger_id, seq, ts_ms, line) VALUES (?, 1, ?, 'a line')")
                .bind(&trigger_id)
                .bind(fire_ms)
                .execute(&world.db)
                .await
                .unwrap();
        }
    }
    let ages_of = |job: u64| {
        let db = world.db.clone();
        async move {
            let fires: Vec<i64> = sqlx::query_scalar(
                "SELECT fire_ms FROM job_log WHERE job_id = ? ORDER BY fire_ms DESC",
            )
            .bind(job)
            .fetch_all(&db)
            .await
            .unwrap();
            fires.iter().map(|f| (now - f) / day).collect::<Vec<i64>>()
        }
    };
    let lines = || {
        let db = world.db.clone();
        async move {
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM job_log_line")
                .fetch_one(&db)
                .await
                .unwrap()
        }
    };
    let base = world.in_process_api("log-clean").await;
    let api = base.clone().with_token(&world.admin.token);
    let operator = world.user("olga", Role::Operator, &["beta"], false).await;
    let ops = base.with_token(&operator);
    let (status, answer) = ops
        .post(
            "/api/v1/logs/clean",
            json!({ "group": "alpha", "all": true }),
        )
        .await;
    assert_eq!(status, 403, "another group's: {answer}");
    let (status, answer) = ops.post("/api/v1/logs/clean", json!({ "all": true })).await;
    assert_eq!(status, 403, "every group's is an admin's: {answer}");
    for (body, field) in [
        (json!({ "job_id": 1, "preset": 1, "all": true }), "preset"),
        (json!({ "job_id": 1 }), "preset"),
        (json!({ "job_id": 1, "preset": 10 }), "preset"),
        (
            json!({ "job_id": 1, "older_than_days": 0 }),
            "older_than_days",
        ),
        (
            json!({ "job_id": 1, "group": "alpha", "all": true }),
            "group",
        ),
        (json!({ "group": "no such!", "all": true }), "group"),
        (json!({ "group": "alpha", "days": 3 }), "days"),
    ] {
        let (status, answer) = api.post("/api/v1/logs/clean", body.clone()).await;
        assert_eq!(
            (status, &answer["error"]["field"]),
            (400, &json!(field)),
            "{body}: {answer}"
        );
    }
    assert_eq!(
        ages_of(1).await,
        [1, 10, 40, 100, 200, 400],
        "nothing deleted yet"
    );

    // A job's logs older than a month (XXL-JOB's preset 1).
    let (status, answer) = api
        .post("/api/v1/logs/clean", json!({ "job_id": 1, "preset": 1 }))
        .await;
    assert_eq!((status, &answer["deleted"]), (200, &json!(4)), "{answer}");
    assert_eq!(ages_of(1).await, [1, 10]);
    assert_eq!(
        ages_of(2).await,
        [1, 10, 40, 100, 200, 400],
        "another job's stay"
    );
    assert_eq!(lines().await, 8, "the lines went with their logs");
    // A group's beyond the newest two, by its operator.
    let (status, answer) = ops
        .post(
            "/api/v1/logs/clean",
            json!({ "group": "beta", "keep_last": 2 }),
        )
        .await;
    assert_eq!((status, &answer["deleted"]), (200, &json!(4)), "{answer}");
    assert_eq!(ages_of(2).await, [1, 10]);
    // Everything, every group's.
    let (status, answer) = api.post("/api/v1/logs/clean", json!({ "preset": 9 })).await;
    assert_eq!((status, &answer["deleted"]), (200, &json!(4)), "{answer}");
    assert_eq!(
        (
            ages_of(1).await.len(),
            ages_of(2).await.len(),
            lines().await
        ),
        (0, 0, 0)
    );
}

/// Issue 47: history is judged by the group a run belongs to, not by the
/// job's group now. A job of `alpha` moved to `beta`: an operator of
/// `beta` only tries to read and clean `alpha`'s old runs through the job
/// id and gets `beta`'s runs only; an operator of `alpha` only still reads
/// and cleans `alpha`'s; an operator of neither is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_moved_jobs_runs_stay_with_the_group_they_ran_in() {
    let world = World::new("log_move").await;
    let base = world.in_process_api("log-move").await;
    let admin = base.clone().with_token(&world.admin.token);
    for app in ["alpha", "beta"] {
        let (status, answer) = admin.post("/api/v1/groups", json!({ "app": app })).await;
        assert_eq!(status, 201, "{answer}");
    }
    let id = admin
        .create_job(json!({ "group": "alpha", "handler": "demo" }))
        .await;
    let run = |n: i64, group: &'static str| {
        let db = world.db.clone();
        async move {
            let fire_ms = 1_780_000_000_000 + n * 1000;
            let trigger_id = format!("{id}-{fire_ms}-0");
            sqlx::query(
                "INSERT INTO job_log (trigger_id, fire_ms, job_id, group_app, trigger_code, handle_code) \
                 VALUES (?, ?, ?, ?, 200, 200)",
            )
            .bind(&trigger_id)
            .bind(fire_ms)
            .bind(id)
            .bind(group)
            .execute(&db)
            .await
            .unwrap();
            trigger_id
        }
    };
    // Three runs in alpha, the move, two runs in beta.
    let mut alpha_runs = vec![
        run(1, "alpha").await,
        run(2, "alpha").await,
        run(3, "alpha").await,
    ];
    let (status, answer) = admin
        .put(&format!("/api/v1/jobs/{id}"), json!({ "group": "beta" }))
        .await;
    assert_eq!(status, 200, "the move: {answer}");
    let mut beta_runs = vec![run(4, "beta").await, run(5, "beta").await];
    alpha_runs.reverse();
    beta_runs.reverse();
    let rows_of = |group: &'static str| {
        let db = world.db.clone();
        async move {
            sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM job_log WHERE job_id = ? AND group_app = ?",
            )
            .bind(id)
            .bind(group)
            .fetch_one(&db)
            .await
            .unwrap()
        }
    };
    let ids_of = |page: &Value| -> Vec<String> {
        page.as_array()
            .unwrap_or_else(|| panic!("not a list: {page}"))
            .iter()
            .map(|r| r["trigger_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let as_user = |token: String| base.clone().with_token(&token);
    let bob = as_user(world.user("bob", Role::Operator, &["beta"], false).await);
    let ann = as_user(world.user("ann", Role::Operator, &["alpha"], false).await);
    let eve = as_user(world.user("eve", Role::Operator, &["gamma"], false).await);
    let logs = format!("/api/v1/jobs/{id}/logs");
    let clean_all = json!({ "job_id": id, "all": true });

    // The operator of the job's new group reads its runs: beta's only.
    let (status, page) = bob.get(&logs).await;
    assert_eq!((status, ids_of(&page)), (200, beta_runs.clone()), "{page}");
    // And cleans them: beta's go, alpha's stay.
    let (status, answer) = bob.post("/api/v1/logs/clean", clean_all.clone()).await;
    assert_eq!((status, &answer["deleted"]), (200, &json!(2)), "{answer}");
    assert_eq!((rows_of("alpha").await, rows_of("beta").await), (3, 0));

    // An operator of neither group gets nothing.
    let (status, answer) = eve.get(&logs).await;
    assert_eq!(status, 403, "{answer}");
    let (status, answer) = eve.post("/api/v1/logs/clean", clean_all.clone()).await;
    assert_eq!(status, 403, "{answer}");
    assert_eq!(rows_of("alpha").await, 3);

    // The old group's operator still reads and cleans its runs.
    let (status, page) = ann.get(&logs).await;
    assert_eq!((status, ids_of(&page)), (200, alpha_runs), "{page}");
    let (status, answer) = ann.post("/api/v1/logs/clean", clean_all).await;
    assert_eq!((status, &answer["deleted"]), (200, &json!(3)), "{answer}");
    assert_eq!(rows_of("alpha").await, 0);
}
