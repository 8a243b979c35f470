//! The job list as the console pages it, on a real cluster: id pages from
//! Redis (a page reads a page), search, filters and sorts from the MySQL
//! mirror the persistence worker writes, and a viewer seeing only the
//! groups granted to them.

use rondo_core::auth::Role;
use rondo_testkit::{Cluster, PATIENCE, World, eventually};
use serde_json::{Value, json};

fn ids(page: &Value) -> Vec<u64> {
    page["items"]
        .as_array()
        .unwrap_or_else(|| panic!("no items: {page}"))
        .iter()
        .map(|j| j["id"].as_u64().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn jobs_are_paged_searched_filtered_and_sorted() {
    let world = World::new("job_list").await;
    let viewer = world.user("vera", Role::Viewer, &["beta"], false).await;
    let mut cluster = Cluster::new(world);
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    for app in ["alpha", "beta"] {
        assert_eq!(
            api.post("/api/v1/groups", json!({ "app": app })).await.0,
            201
        );
    }
    // 12 jobs: alpha gets the odd ones, beta the even ones; every third is
    // a fixed rate; the last four are stopped.
    let mut created = Vec::new();
    for i in 1..=12u64 {
        let group = if i % 2 == 1 { "alpha" } else { "beta" };
        let (ty, conf) = if i % 3 == 0 {
            ("FIX_RATE", "60")
        } else {
            ("CRON", "0 0 3 * * ?")
        };
        let description = match i {
            5 => "Nightly report for 100% of tenants".to_string(),
            7 => "nightly REPORT, the big one".to_string(),
            _ => format!("job number {i:02}"),
        };
        let id = api
            .create_job(
                json!({ "group": group, "handler": format!("handler_{}", i % 4),
                "description": description, "schedule_type": ty, "schedule_conf": conf,
                "enabled": i <= 8, "owner": if i % 4 == 0 { "li.wei" } else { "ops" } }),
            )
            .await;
        created.push(id);
    }
    assert_eq!(created, (1..=12).collect::<Vec<_>>());

    // Pages by id come from Redis: current at once, in both directions.
    let (status, page) = api.get("/api/v1/jobs?limit=5&offset=5").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(ids(&page), [6, 7, 8, 9, 10]);
    assert_eq!(
        (page["total"].clone(), page["total_exact"].clone()),
        (json!(12), json!(true))
    );
    let (_, page) = api.get("/api/v1/jobs?limit=3&sort=-id").await;
    assert_eq!(ids(&page), [12, 11, 10]);
    let (_, page) = api.get("/api/v1/jobs?group=beta&limit=2&offset=1").await;
    assert_eq!(ids(&page), [4, 6]);
    assert_eq!(page["total"], 6);

    // Search and filters read the MySQL mirror: wait until it has all 12.
    let all_mirrored = || async {
        let (_, page) = api.get("/api/v1/jobs?sort=-updated&limit=100").await;
        ids(&page).len() == 12
    };
    eventually(
        "the persistence worker mirrors the jobs",
        PATIENCE,
        all_mirrored,
    )
    .await;

    // Text in the description, any case; `%` is literal.
    let (status, page) = api.get("/api/v1/jobs?q=nightly%20report").await;
    assert_eq!(status, 200, "{page}");
    assert_eq!(ids(&page), [5, 7]);
    let (_, page) = api.get("/api/v1/jobs?q=100%25").await;
    assert_eq!(ids(&page), [5]);
    // Text in the handler, and an id.
    let (_, page) = api.get("/api/v1/jobs?q=handler_3").await;
    assert_eq!(ids(&page), [3, 7, 11]);
    let (_, page) = api.get("/api/v1/jobs?q=12").await;
    assert_eq!(
        ids(&page),
        [12],
        "id 12, and no description holds \"12\" but job 12's"
    );
    // A search is not counted: total says whether there is more.
    let (_, page) = api.get("/api/v1/jobs?q=job%20number&limit=4").await;
    assert_eq!(ids(&page), [1, 2, 3, 4]);
    assert_eq!(
        (page["total"].clone(), page["total_exact"].clone()),
        (json!(5), json!(false))
    );
    let (_, page) = api
        .get("/api/v1/jobs?q=job%20number&limit=4&offset=8")
        .await;
    assert_eq!(ids(&page), [11, 12]);
    assert_eq!(
        (page["total"].clone(), page["total_exact"].clone()),
        (json!(10), json!(true))
    );

    // Filters combine with groups and with each other.
    let (_, page) = api.get("/api/v1/jobs?enabled=false").await;
    assert_eq!(ids(&page), [9, 10, 11, 12]);
    assert_eq!(page["total"], 4);
    let (_, page) = api
        .get("/api/v1/jobs?schedule_type=FIX_RATE&group=beta")
        .await;
    assert_eq!(ids(&page), [6, 12]);
    let (_, page) = api
        .get("/api/v1/jobs?schedule_type=CRON&enabled=true&q=job")
        .await;
    assert_eq!(ids(&page), [1, 2, 4, 8]);
    // An owner's jobs ("my jobs"), exactly.
    let (_, page) = api.get("/api/v1/jobs?owner=li.wei").await;
    assert_eq!(ids(&page), [4, 8, 12]);
    let (_, page) = api.get("/api/v1/jobs?owner=li.wei&group=alpha").await;
    assert_eq!(ids(&page), Vec::<u64>::new());
    let (_, page) = api.get("/api/v1/jobs?owner=li").await;
    assert_eq!(ids(&page), Vec::<u64>::new(), "not a part of a name");

    // Sorts: by description (byte order), reversed; by last update.
    let (_, page) = api.get("/api/v1/jobs?sort=description&limit=3").await;
    assert_eq!(
        ids(&page),
        [5, 1, 2],
        "\"Nightly\" < \"job\" < … in byte order"
    );
    let (_, page) = api.get("/api/v1/jobs?sort=-description&limit=2").await;
    assert_eq!(ids(&page), [7, 12]);
    let (status, _) = api
        .call(
            reqwest::Method::PUT,
            "/api/v1/jobs/3",
            Some(json!({ "description": "job number 03, edited" })),
        )
        .await;
    assert_eq!(status, 200);
    let newest_first = || async {
        let (_, page) = api.get("/api/v1/jobs?sort=-updated&limit=1").await;
        ids(&page) == [3]
    };
    eventually(
        "the edited job sorts first by update",
        PATIENCE,
        newest_first,
    )
    .await;

    // A viewer granted beta sees beta's jobs only, on every path.
    let vera = cluster.api(node).with_token(&viewer);
    let (_, page) = vera.get("/api/v1/jobs").await;
    assert_eq!(ids(&page), [2, 4, 6, 8, 10, 12]);
    let (_, page) = vera.get("/api/v1/jobs?q=nightly").await;
    assert!(ids(&page).is_empty(), "5 and 7 are alpha's: {page}");
    let (_, page) = vera.get("/api/v1/jobs?q=handler_2").await;
    assert_eq!(ids(&page), [2, 6, 10]);
    let (status, answer) = vera.get("/api/v1/jobs?group=alpha").await;
    assert_eq!(
        (status, answer["error"]["field"].clone()),
        (403, json!("group"))
    );

    // Bad values are refused, naming the key.
    for (query, field) in [
        ("enabled=yes", "enabled"),
        ("schedule_type=DAILY", "schedule_type"),
        (&format!("owner={}", "o".repeat(65)), "owner"),
        ("sort=name", "sort"),
        ("sort=--id", "sort"),
        ("limit=1001", "limit"),
        ("group=no%20such", "group"),
    ] {
        let (status, answer) = api.get(&format!("/api/v1/jobs?{query}")).await;
        assert_eq!(
            (status, answer["error"]["field"].clone()),
            (400, json!(field)),
            "{query}: {answer}"
        );
    }
    let long = "x".repeat(256);
    let (status, answer) = api.get(&format!("/api/v1/jobs?q={long}")).await;
    assert_eq!(
        (status, answer["error"]["field"].clone()),
        (400, json!("q"))
    );

    cluster.stop().await;
}

/// `%` and `_` are literal in a search, with descriptions and handlers
/// that an unescaped pattern would also match; and a viewer granted two
/// groups of three pages through the merge of both, in either order, at
/// every offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn search_wildcards_are_literal_and_a_two_group_viewer_pages_the_merge() {
    let world = World::new("job_list_merge").await;
    let viewer = world
        .user("vic", Role::Viewer, &["one", "three"], false)
        .await;
    let mut cluster = Cluster::new(world);
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    for app in ["one", "two", "three"] {
        assert_eq!(
            api.post("/api/v1/groups", json!({ "app": app })).await.0,
            201
        );
    }
    // Ids 1..=9 in groups one, two, three, one, two, three, …
    let jobs = [
        ("100% done", "plain"),
        ("1000 tenants", "plain"),
        ("100x faster", "plain"),
        ("nothing", "a_b"),
        ("nothing", "axb"),
        ("nothing", "a%b"),
        ("wow! it works", "aXXb"),
        ("other", "plain"),
        ("other", "plain"),
    ];
    for (i, (description, handler)) in jobs.iter().enumerate() {
        let group = ["one", "two", "three"][i % 3];
        let id = api
            .create_job(
                json!({ "group": group, "handler": handler, "description": description,
                "schedule_type": "NONE" }),
            )
            .await;
        assert_eq!(id, i as u64 + 1);
    }
    eventually("the mirror holds the nine jobs", PATIENCE, || async {
        let (_, page) = api.get("/api/v1/jobs?sort=-updated&limit=100").await;
        (ids(&page).len() == 9).then_some(())
    })
    .await;
    for (q, want) in [
        ("100%25", vec![1]),
        ("a_b", vec![4]),
        ("a%25b", vec![6]),
        ("wow!", vec![7]),
        ("100x", vec![3]),
        // A number is an id.
        ("100", vec![]),
    ] {
        let (status, page) = api.get(&format!("/api/v1/jobs?q={q}")).await;
        assert_eq!(status, 200, "{page}");
        assert_eq!(ids(&page), want, "q={q}");
    }

    // Viewer of one and three: ids 1, 3, 4, 6, 7, 9 (two's 2, 5, 8 never).
    let vic = cluster.api(node).with_token(&viewer);
    let mine = [1u64, 3, 4, 6, 7, 9];
    for limit in 1..=4usize {
        for descending in [false, true] {
            let mut want = mine.to_vec();
            if descending {
                want.reverse();
            }
            let sort = if descending { "-id" } else { "id" };
            for offset in 0..=7usize {
                let (status, page) = vic
                    .get(&format!(
                        "/api/v1/jobs?sort={sort}&limit={limit}&offset={offset}"
                    ))
                    .await;
                assert_eq!(status, 200, "{page}");
                let expected: Vec<u64> = want.iter().copied().skip(offset).take(limit).collect();
                assert_eq!(
                    ids(&page),
                    expected,
                    "sort={sort} limit={limit} offset={offset}"
                );
                assert_eq!(page["total"], 6);
            }
        }
    }
    // The same merge through the mirror (a filter), and an offset far out.
    let (_, page) = vic
        .get("/api/v1/jobs?schedule_type=NONE&sort=-id&limit=4&offset=1")
        .await;
    assert_eq!(ids(&page), [7, 6, 4, 3]);
    let (status, page) = vic.get("/api/v1/jobs?offset=9223372036854775807").await;
    assert_eq!((status, ids(&page)), (200, vec![]), "{page}");
    let (status, page) = api.get("/api/v1/jobs?offset=9223372036854775807").await;
    assert_eq!((status, ids(&page)), (200, vec![]), "{page}");
    cluster.stop().await;
}

/// The list of every job reads a window of the partitions' bitmaps and
/// widens it while the window holds too few ids: ids that are mostly
/// deleted, both orders, deep offsets, checked against the ids themselves.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_job_is_paged_from_the_bitmaps_where_most_ids_were_deleted() {
    let world = World::new("job_bits").await;
    let names = world.config.names();
    let pool = rondo_core::redis::pool(&world.config.redis).expect("redis pool");
    let store = rondo_scheduler::store::Store::new(pool, names.clone());
    // Dense at the start and the end, one id in 97 between: the first
    // window, sized for dense ids, is too narrow for most pages.
    let ids: Vec<u64> = (1..=40)
        .chain((41..20_000).filter(|i| i % 97 == 0))
        .chain(30_000..30_020)
        .collect();
    let mut conn = redis::Client::open(world.config.redis.url.as_str())
        .expect("redis url")
        .get_multiplexed_async_connection()
        .await
        .expect("redis");
    let mut pipe = redis::pipe();
    pipe.set(names.layout(), rondo_core::names::LAYOUT).ignore();
    for &id in &ids {
        pipe.setbit(
            names.job_bits(names.partition_of(id)),
            names.job_bit(id) as usize,
            true,
        )
        .ignore();
    }
    let () = pipe.query_async(&mut conn).await.expect("bits written");
    let n = ids.len();
    for descending in [false, true] {
        let mut sorted = ids.clone();
        if descending {
            sorted.reverse();
        }
        for (offset, limit) in [
            (0, 10),
            (0, 60),
            (35, 10),
            (45, 100),
            (200, 50),
            (n - 3, 10),
            (n, 5),
        ] {
            let (total, page) = store
                .api()
                .job_page(None, offset, limit, descending)
                .await
                .expect("a page");
            let want: Vec<u64> = sorted.iter().skip(offset).take(limit).copied().collect();
            assert_eq!(
                (total, page),
                (n, want),
                "offset {offset} limit {limit} descending {descending}"
            );
        }
    }
}

/// A page is bounded in bytes as well as rows: jobs with the largest
/// scripts come a few at a time, each page under 1 MiB of definitions (but
/// for a single job), and following `next_offset` reaches every job once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_page_of_large_jobs_stops_at_its_byte_bound_and_goes_on_from_there() {
    let world = World::new("job_bytes").await;
    let mut cluster = Cluster::new(world);
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    assert_eq!(
        api.post("/api/v1/groups", json!({ "app": "big" })).await.0,
        201
    );
    let script = format!("# {}\necho done\n", "x".repeat(60 * 1024));
    let mut created = Vec::new();
    for _ in 0..20 {
        created.push(
            api.create_job(json!({ "group": "big", "schedule_type": "NONE",
                "glue_type": "GLUE_SHELL", "glue_source": script }))
                .await,
        );
    }
    let mut seen = Vec::new();
    let mut offset = 0;
    let mut pages = 0;
    loop {
        let (status, page) = api
            .get(&format!("/api/v1/jobs?group=big&limit=100&offset={offset}"))
            .await;
        assert_eq!(status, 200, "{page}");
        let items = page["items"].as_array().expect("items");
        let bytes: usize = items
            .iter()
            .map(|j| serde_json::to_vec(j).unwrap().len())
            .sum();
        assert!(
            bytes <= 1024 * 1024,
            "page at {offset}: {bytes} bytes of {} jobs",
            items.len()
        );
        assert!(!items.is_empty(), "an empty page at {offset}");
        seen.extend(ids(&page));
        pages += 1;
        match page["next_offset"].as_u64() {
            Some(next) => {
                assert_eq!(next as usize, offset + items.len(), "{page}");
                offset = next as usize;
            }
            None => break,
        }
    }
    assert!(pages > 1, "20 jobs of 60 KiB take more than one page");
    seen.sort_unstable();
    assert_eq!(seen, created, "every job once");
    cluster.stop().await;
}

/// A job's history: each save keeps what changed, field by field (a
/// secret's value and a script's text never), and who changed it; a
/// deleted job comes back from its last state, stopped, by an admin only.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_jobs_changes_are_kept_and_a_deleted_job_restored() {
    let world = World::new("job_history").await;
    let mut cluster = Cluster::new(world);
    cluster.start_persist_worker();
    let node = cluster.start_node().await;
    let api = cluster.api(node);
    assert_eq!(
        api.post("/api/v1/groups", json!({ "app": "alpha" }))
            .await
            .0,
        201
    );
    let token = cluster
        .world
        .user("olga", rondo_core::auth::Role::Operator, &["alpha"], false)
        .await;
    let ops = api.clone().with_token(&token);
    let id = ops
        .create_job(
            json!({ "group": "alpha", "handler": "report", "description": "v1",
            "schedule_type": "CRON", "schedule_conf": "0 0 3 * * ?",
            "secrets": { "TOKEN": "s3cret" } }),
        )
        .await;
    let (status, _) = ops
        .put(
            &format!("/api/v1/jobs/{id}"),
            json!({ "description": "v2", "schedule_conf": "0 30 3 * * ?", "secrets": { "TOKEN": "n3w" } }),
        )
        .await;
    assert_eq!(status, 200);
    let path = format!("/api/v1/jobs/{id}/history");
    let history = eventually("both changes kept", PATIENCE, || async {
        let (_, h) = ops.get(&path).await;
        (h["items"].as_array()?.len() == 2).then_some(h)
    })
    .await;
    let update = &history["items"][0];
    assert_eq!(
        (&update["action"], &update["username"]),
        (&json!("job.update"), &json!("olga"))
    );
    assert_eq!(update["changes"]["description"], json!(["v1", "v2"]));
    assert_eq!(
        update["changes"]["schedule_conf"],
        json!(["0 0 3 * * ?", "0 30 3 * * ?"])
    );
    assert_eq!(
        update["changes"]["secrets"],
        json!(["TOKEN changed", "TOKEN changed"])
    );
    assert!(update["changes"].get("updated_ms").is_none(), "{update}");
    assert!(!history.to_string().contains("s3cret") && !history.to_string().contains("n3w"));
    assert_eq!(
        history["items"][1]["changes"]["description"],
        json!([null, "v1"])
    );

    let (status, _) = ops
        .call(reqwest::Method::DELETE, &format!("/api/v1/jobs/{id}"), None)
        .await;
    assert_eq!(status, 204);
    let restore = format!("/api/v1/jobs/{id}/restore");
    let (status, answer) = ops.post(&restore, json!({})).await;
    assert_eq!(status, 403, "an admin's: {answer}");
    let restored = eventually("the deletion stored, then restored", PATIENCE, || async {
        let (status, job) = api.post(&restore, json!({})).await;
        (status == 201).then_some(job)
    })
    .await;
    assert_eq!(
        (
            &restored["id"],
            &restored["description"],
            &restored["enabled"],
            &restored["schedule_conf"]
        ),
        (
            &json!(id),
            &json!("v2"),
            &json!(false),
            &json!("0 30 3 * * ?")
        )
    );
    let (status, job) = api.get(&format!("/api/v1/jobs/{id}")).await;
    assert_eq!((status, &job["secrets"]), (200, &json!({ "TOKEN": "***" })));
    // The secret's value came back too (it is never shown: read where
    // the mirror keeps it).
    eventually(
        "the restored job mirrored with its secret",
        PATIENCE,
        || async {
            let secrets: Option<Option<String>> =
                sqlx::query_scalar("SELECT secrets FROM job WHERE id = ? AND deleted = 0")
                    .bind(id)
                    .fetch_optional(cluster.db())
                    .await
                    .ok()?;
            secrets.flatten()?.contains("n3w").then_some(())
        },
    )
    .await;
    let (status, _) = api.post(&restore, json!({})).await;
    assert_eq!(status, 409, "it exists again");
    cluster.stop().await;
}
