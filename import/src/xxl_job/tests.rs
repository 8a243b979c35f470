use super::map::*;
use super::tables::*;

fn xxl(id: i64) -> XxlJob {
    XxlJob {
        id,
        group: 1,
        desc: format!("job {id}"),
        schedule_type: "CRON".into(),
        schedule_conf: "0 0 2 * * ?".into(),
        misfire: "DO_NOTHING".into(),
        routing: "FIRST".into(),
        handler: "demoJobHandler".into(),
        block: "SERIAL_EXECUTION".into(),
        glue_type: "BEAN".into(),
        running: true,
        ..XxlJob::default()
    }
}

fn groups() -> Vec<XxlGroup> {
    vec![XxlGroup {
        id: 1,
        app: "xxl-job-executor-sample".into(),
        title: "sample".into(),
        addresses: Vec::new(),
        access_token: String::new(),
    }]
}

#[test]
fn rows_that_do_not_map_name_the_xxl_column_and_take_their_parents_along() {
    let mut groovy = xxl(2);
    groovy.glue_type = "GLUE_BASIC".into();
    let mut py2 = xxl(3);
    py2.glue_type = "GLUE_PYTHON2".into();
    let mut cron = xxl(4);
    cron.schedule_conf = "0 0 25 * * ?".into();
    let mut parent = xxl(5);
    parent.children = "2".into();
    let mut orphan = xxl(6);
    orphan.group = 9;
    let mut ok = xxl(7);
    ok.children = "1".into();
    let jobs = [xxl(1), groovy, py2, cron, parent, orphan, ok];
    let (mapped, problems) = map_jobs(&groups(), &jobs, Some("Asia/Shanghai"), "xxl");
    let ids: Vec<i64> = mapped.iter().map(|m| m.xxl.id).collect();
    assert_eq!(ids, [1, 7]);
    let columns: Vec<(i64, &str)> = problems.iter().map(|p| (p.id, p.column.as_str())).collect();
    assert_eq!(
        columns,
        [
            (2, "glue_type"),
            (3, "glue_type"),
            (4, "schedule_conf"),
            (5, "child_jobid"),
            (6, "job_group")
        ]
    );
    assert_eq!(mapped[1].children, [1]);
    assert_eq!(mapped[0].spec.import_ref.as_deref(), Some("xxl-job/xxl#1"));

    let mut a = xxl(1);
    a.children = "2".into();
    let mut b = xxl(2);
    b.children = "1".into();
    let mut own = xxl(3);
    own.children = "3".into();
    let (mapped, problems) = map_jobs(&groups(), &[a, b, own, xxl(4)], None, "xxl");
    assert_eq!(mapped.iter().map(|m| m.xxl.id).collect::<Vec<_>>(), [4]);
    let reasons: Vec<(i64, &str)> = problems.iter().map(|p| (p.id, p.column.as_str())).collect();
    assert_eq!(
        reasons,
        [(1, "child_jobid"), (2, "child_jobid"), (3, "child_jobid")]
    );
}

#[test]
fn groovy_jobs_map_for_xxl_jobs_own_executors() {
    let mut groovy = xxl(1);
    groovy.glue_type = "GLUE_GROOVY".into();
    groovy.glue_source = "class DemoGlueJobHandler {}".into();
    let (mapped, problems) = map_jobs(&groups(), &[groovy], None, "xxl");
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(mapped[0].spec.glue_type.as_deref(), Some("GLUE_GROOVY"));
}

#[test]
fn manual_groups_keep_their_addresses_and_bad_ones_are_problems() {
    let manual = XxlGroup {
        addresses: vec![
            "http://10.0.0.5:9999/".into(),
            "http://10.0.0.6:9999".into(),
            "http://10.0.0.6:9999/".into(),
            "10.0.0.7:9999".into(),
            "ftp://10.0.0.8/".into(),
        ],
        ..groups().remove(0)
    };
    let (groups, problems) = manual_addresses(vec![manual]);
    assert_eq!(
        groups[0].addresses,
        [
            "http://10.0.0.5:9999/",
            "http://10.0.0.6:9999/",
            "http://10.0.0.7:9999/"
        ],
        "an address of XXL-JOB before 2.1 (ip:port) is read as http://"
    );
    assert_eq!(problems.len(), 1);
    assert_eq!(problems[0].column, "address_list");
    assert!(problems[0].reason.contains("ftp://10.0.0.8/"));
}

#[test]
fn each_layout_is_told_by_its_columns_and_an_unknown_one_is_named() {
    use super::layout::{Layout, layout_of};
    let cols = |names: &str| -> std::collections::BTreeSet<String> {
        names.split_whitespace().map(str::to_owned).collect()
    };
    let common = "id job_group add_time update_time author alarm_email \
        executor_route_strategy executor_handler executor_param executor_block_strategy \
        executor_timeout executor_fail_retry_count glue_type glue_source glue_remark \
        glue_updatetime child_jobid trigger_status trigger_last_time trigger_next_time";
    let typed = "schedule_type schedule_conf misfire_strategy";
    assert_eq!(
        layout_of(&cols(&format!("{common} job_cron job_desc"))).unwrap(),
        Layout::Cron21
    );
    assert_eq!(
        layout_of(&cols(&format!("{common} {typed} job_desc"))).unwrap(),
        Layout::Typed23
    );
    assert_eq!(
        layout_of(&cols(&format!("{common} {typed} name"))).unwrap(),
        Layout::Named35
    );
    let later = layout_of(&cols(&format!("{common} {typed} name priority")))
        .unwrap_err()
        .to_string();
    assert!(
        later.contains("does not know") && later.contains("priority") && later.contains("3.5"),
        "{later}"
    );
    let fewer = layout_of(&cols(&format!("{common} job_desc")))
        .unwrap_err()
        .to_string();
    assert!(fewer.contains("lacks"), "{fewer}");
}

#[test]
fn script_history_becomes_versions_oldest_first_with_their_times() {
    use super::glue::{Version, versions};
    let zone = chrono_tz::Asia::Shanghai;
    let mut job = xxl(1);
    job.glue_type = "GLUE_SHELL".into();
    job.glue_source = "echo 3".into();
    job.glue_remark = "third".into();
    let kept = |glue_type: &str, source: &str, remark: &str, saved: &str| XxlGlue {
        glue_type: glue_type.into(),
        source: source.into(),
        remark: remark.into(),
        saved: XxlTime(saved.into()),
    };
    let history = [
        kept("GLUE_SHELL", "echo 1", "first", "2024-01-02 10:00:00"),
        kept(
            "GLUE_PYTHON",
            "print(1)",
            "other type",
            "2024-02-02 10:00:00",
        ),
        kept("GLUE_SHELL", "  ", "empty", "2024-02-03 10:00:00"),
        // 2.1.0 kept TIMESTAMPs: read as the instant.
        kept("GLUE_SHELL", "echo 2", "second", "@1709523000"),
        kept("GLUE_SHELL", "echo 3", "third", "2024-05-06 12:00:00"),
    ];
    let now = 1_800_000_000_000;
    let version = |source: &str, remark: &str, saved_ms| Version {
        source: source.into(),
        remark: remark.into(),
        saved_ms,
    };
    assert_eq!(
        versions(&job, &history, zone, now),
        (
            vec![
                version("echo 1", "first", Some(1_704_160_800_000)),
                version("echo 2", "second", Some(1_709_523_000_000)),
                // The current script, the newest kept one: dated by its
                // save in rondo.
                version("echo 3", "third", None),
            ],
            1
        )
    );
    // A kept time not yet come, or not after the version before, is not
    // taken: the save dates it.
    let mut skewed = history.clone();
    skewed[0].saved = XxlTime("2999-01-01 00:00:00".into());
    skewed[3].saved = XxlTime("2023-01-01 00:00:00".into());
    let got = versions(&job, &skewed, zone, now).0;
    assert_eq!(
        (got[0].saved_ms, got[1].saved_ms),
        (None, Some(1_672_502_400_000))
    );
    let mut backwards = history.clone();
    backwards[3].saved = XxlTime("2023-01-01 00:00:00".into());
    assert_eq!(versions(&job, &backwards, zone, now).0[1].saved_ms, None);
    // No history: the current script alone.
    assert_eq!(
        versions(&job, &[], zone, now),
        (vec![version("echo 3", "third", None)], 0)
    );
}
