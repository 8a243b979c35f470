use super::*;
use crate::schedule::Schedule;

fn spec() -> JobSpec {
    JobSpec {
        group: Some("demo".into()),
        schedule_type: Some("CRON".into()),
        schedule_conf: Some("* * * * * ?".into()),
        handler: Some("demo".into()),
        ..JobSpec::default()
    }
}

/// The claim's view of a stored job reads what the whole job reads,
/// and still reads a job whose other fields this build does not know.
#[test]
fn the_claims_view_of_a_job_agrees_with_the_job() {
    let jobs = [
        spec().validate(1, 10, None).unwrap(),
        JobSpec {
            schedule_type: Some("FIX_DELAY".into()),
            schedule_conf: Some("30".into()),
            zone: Some("Asia/Shanghai".into()),
            misfire: Some("FIRE_ONCE_NOW".into()),
            misfire_threshold_ms: Some(60_000),
            enabled: Some(false),
            params: Some("a \"quoted\" \\ param".into()),
            ..spec()
        }
        .validate(2, 10, None)
        .unwrap(),
    ];
    let new_year = 1_767_225_600_000;
    for job in jobs {
        let json = serde_json::to_string(&job).unwrap();
        let view: JobSchedule = serde_json::from_str(&json).unwrap();
        assert_eq!(view.enabled, job.enabled);
        assert_eq!(view.schedule_type, job.schedule_type);
        assert_eq!(view.schedule_conf, job.schedule_conf);
        assert_eq!(view.zone, job.zone);
        assert_eq!(view.misfire, job.misfire);
        assert_eq!(view.misfire_threshold(), job.misfire_threshold());
        let next = |s: Schedule| s.next_after(new_year);
        assert_eq!(
            next(view.schedule().unwrap()),
            next(job.schedule().unwrap())
        );
    }
    // Stored before zones existed: UTC, both ways.
    let mut old: serde_json::Value =
        serde_json::to_value(spec().validate(3, 10, None).unwrap()).unwrap();
    old.as_object_mut().unwrap().remove("zone");
    let text = old.to_string();
    let view: JobSchedule = serde_json::from_str(&text).unwrap();
    let job: Job = serde_json::from_value(old.clone()).unwrap();
    assert_eq!((view.zone.as_ref(), job.zone.as_str()), ("UTC", "UTC"));
    // A routing this build does not know: not a job here, still claimed.
    old["routing"] = "SOMETHING_NEWER".into();
    assert!(serde_json::from_value::<Job>(old.clone()).is_err());
    assert!(serde_json::from_str::<JobSchedule>(&old.to_string()).is_ok());
}

#[test]
fn defaults_follow_xxl_job() {
    let job = spec().validate(1, 10, None).unwrap();
    assert_eq!(job.misfire, Misfire::DoNothing);
    assert_eq!(job.routing, Routing::First);
    assert_eq!(job.block, BlockStrategy::SerialExecution);
    assert!(job.enabled);
    assert_eq!((job.created_ms, job.updated_ms), (10, 10));
}

fn field_of(spec: JobSpec) -> String {
    spec.validate(1, 0, None).unwrap_err().field.unwrap()
}

#[test]
fn each_bad_field_is_named() {
    assert_eq!(
        field_of(JobSpec {
            group: None,
            ..spec()
        }),
        "group"
    );
    assert_eq!(
        field_of(JobSpec {
            group: Some("a b".into()),
            ..spec()
        }),
        "group"
    );
    assert_eq!(
        field_of(JobSpec {
            schedule_conf: Some("* * *".into()),
            ..spec()
        }),
        "schedule_conf"
    );
    assert_eq!(
        field_of(JobSpec {
            schedule_type: Some("X".into()),
            ..spec()
        }),
        "schedule_type"
    );
    assert_eq!(
        field_of(JobSpec {
            routing: Some("NEAREST".into()),
            ..spec()
        }),
        "routing"
    );
    assert_eq!(
        field_of(JobSpec {
            block: Some("QUEUE".into()),
            ..spec()
        }),
        "block"
    );
    assert_eq!(
        field_of(JobSpec {
            misfire: Some("LATER".into()),
            ..spec()
        }),
        "misfire"
    );
    assert_eq!(
        field_of(JobSpec {
            handler: Some(" ".into()),
            ..spec()
        }),
        "handler"
    );
    assert_eq!(
        field_of(JobSpec {
            handler: None,
            ..spec()
        }),
        "handler"
    );
    assert_eq!(
        field_of(JobSpec {
            params: Some("x".repeat(MAX_PARAMS_BYTES + 1)),
            ..spec()
        }),
        "params"
    );
    assert_eq!(
        field_of(JobSpec {
            child_jobs: Some(vec![1]),
            ..spec()
        }),
        "child_jobs"
    );
}

#[test]
fn params_at_the_limit_are_accepted() {
    assert!(
        JobSpec {
            params: Some("x".repeat(MAX_PARAMS_BYTES)),
            ..spec()
        }
        .validate(1, 0, None)
        .is_ok()
    );
}

#[test]
fn overlay_keeps_unset_fields() {
    let job = spec().validate(1, 0, None).unwrap();
    let patched = job
        .to_spec()
        .overlay(JobSpec {
            params: Some("p".into()),
            ..JobSpec::default()
        })
        .validate(1, 5, Some(job.created_ms))
        .unwrap();
    assert_eq!(patched.params, "p");
    assert_eq!(patched.schedule_conf, job.schedule_conf);
    assert_eq!(patched.updated_ms, 5);
}

#[test]
fn enum_names_round_trip_through_json() {
    for name in Routing::NAMES {
        let r = Routing::parse("routing", name).unwrap();
        assert_eq!(serde_json::to_string(&r).unwrap(), format!("\"{name}\""));
    }
}

#[test]
fn a_script_job_runs_its_script_handler_and_versions_its_changes() {
    let script = |source: &str| JobSpec {
        handler: None,
        glue_type: Some("GLUE_PYTHON".into()),
        glue_source: Some(source.into()),
        glue_remark: Some("first".into()),
        ..spec()
    };
    let v1 = script("print(1)").validate(1, 10, None).unwrap();
    assert_eq!(
        (v1.handler.as_str(), v1.glue_version, v1.glue_updated_ms),
        ("script:python3", 1, 10)
    );
    // The same script saved again: the same version, and its remark.
    let same = JobSpec {
        glue_remark: Some("other".into()),
        ..script("print(1)")
    }
    .validate(1, 20, Some(10))
    .unwrap()
    .versioned_after(Some(&v1));
    assert_eq!((same.glue_version, same.glue_remark.as_str()), (1, "first"));
    let v2 = JobSpec {
        glue_remark: Some("second".into()),
        ..script("print(2)")
    }
    .validate(1, 30, Some(10))
    .unwrap()
    .versioned_after(Some(&v1));
    assert_eq!(
        (v2.glue_version, v2.glue_updated_ms, v2.glue_remark.as_str()),
        (2, 30, "second")
    );
    // An older version brought over keeps the time it was written.
    let imported = JobSpec {
        glue_saved_ms: Some(25),
        ..script("print(3)")
    }
    .validate(1, 40, Some(10))
    .unwrap()
    .versioned_after(Some(&v2));
    assert_eq!((imported.glue_version, imported.glue_updated_ms), (3, 25));
    let dated_bean = JobSpec {
        glue_saved_ms: Some(25),
        ..spec()
    };
    assert_eq!(
        dated_bean
            .validate(1, 40, None)
            .unwrap_err()
            .field
            .as_deref(),
        Some("glue_saved_ms")
    );
    let bean = spec().validate(1, 0, None).unwrap();
    assert_eq!((bean.glue_type, bean.glue_version), (GlueType::Bean, 0));
}

#[test]
fn a_groups_xxl_addresses_are_checked_and_kept_on_update() {
    let spec = |list: &[&str]| GroupSpec {
        app: Some("billing".into()),
        xxl_addresses: Some(list.iter().map(|s| (*s).to_owned()).collect()),
        xxl_gateway: Some(true),
        ..GroupSpec::default()
    };
    let g = spec(&[
        "http://10.0.0.5:9999",
        "http://10.0.0.5:9999/",
        "https://h/ctx",
    ])
    .validate(1)
    .unwrap();
    assert_eq!(g.xxl_addresses, ["http://10.0.0.5:9999/", "https://h/ctx/"]);
    for (bad, why) in [
        ("10.0.0.5:9999", "http"),
        ("http://", "host"),
        ("http://u:p@h/", "'@'"),
        ("http://h/?x", "'?'"),
    ] {
        let e = spec(&["http://ok/", bad]).validate(1).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("xxl_addresses[1]"), "{bad}");
        assert!(e.message.contains(why), "{bad}: {}", e.message);
    }
    let many: Vec<String> = (0..=MAX_XXL_ADDRESSES)
        .map(|i| format!("http://h{i}/"))
        .collect();
    let many: Vec<&str> = many.iter().map(String::as_str).collect();
    assert!(spec(&many).validate(1).is_err());
    // An update that leaves them out keeps them, and the title too.
    let title_only = GroupSpec {
        title: Some("Billing".into()),
        ..GroupSpec::default()
    };
    let updated = title_only.validate_update(&g, 2).unwrap();
    assert_eq!(updated.xxl_addresses, g.xxl_addresses);
    assert_eq!(updated.title, "Billing");
    let cleared = spec(&[]).validate_update(&updated, 3).unwrap();
    assert!(cleared.xxl_addresses.is_empty());
    assert_eq!(cleared.title, "Billing");
}

#[test]
fn only_a_gateway_group_has_xxl_addresses_and_an_update_keeps_its_tokens() {
    let native = GroupSpec {
        app: Some("web".into()),
        xxl_addresses: Some(vec!["http://10.0.0.5:9999/".into()]),
        ..GroupSpec::default()
    };
    let e = native.validate(1).unwrap_err();
    assert_eq!(e.field.as_deref(), Some("xxl_addresses"));
    let served = GroupSpec {
        app: Some("web".into()),
        xxl_gateway: Some(true),
        xxl_addresses: Some(vec!["http://10.0.0.5:9999/".into()]),
        ..GroupSpec::default()
    }
    .validate(1)
    .unwrap();
    let with_token = Group {
        xxl_access: XxlAccess {
            token: "t0ken-of-web".into(),
            previous: String::new(),
            changed_ms: 1,
        },
        ..served
    };
    let retitled = GroupSpec {
        title: Some("Web".into()),
        ..GroupSpec::default()
    }
    .validate_update(&with_token, 2)
    .unwrap();
    assert_eq!(retitled.xxl_access, with_token.xxl_access, "tokens kept");
    assert!(retitled.xxl_gateway);
    // No longer the gateway's: its list goes with it.
    let unmarked = GroupSpec {
        xxl_gateway: Some(false),
        ..GroupSpec::default()
    }
    .validate_update(&retitled, 3)
    .unwrap();
    assert!(!unmarked.xxl_gateway && unmarked.xxl_addresses.is_empty());
    let shown = serde_json::to_value(with_token.clone().masked()).unwrap();
    assert_eq!(shown["xxl_access"]["token"], "***");
    assert!(!format!("{with_token:?}").contains("t0ken-of-web"));
}

#[test]
fn access_tokens_are_checked_naming_the_field() {
    validate_xxl_token("token", "a-good-token-1").unwrap();
    for bad in [
        "short",
        "has space in it",
        "default_token",
        &"x".repeat(256),
    ] {
        let e = validate_xxl_token("token", bad).unwrap_err();
        assert_eq!(e.field.as_deref(), Some("token"), "{bad}");
    }
}

#[test]
fn script_fields_are_checked_naming_the_field() {
    let field = |spec: JobSpec| spec.validate(1, 0, None).unwrap_err().field.unwrap();
    let glue = |ty: &str, source: &str| JobSpec {
        handler: None,
        glue_type: Some(ty.into()),
        glue_source: Some(source.into()),
        ..spec()
    };
    assert_eq!(field(glue("GLUE_PYTHON2", "x")), "glue_type");
    assert_eq!(field(glue("GLUE_SHELL", " ")), "glue_source");
    let groovy = glue("GLUE_GROOVY", "class X {}")
        .validate(1, 0, None)
        .unwrap();
    assert_eq!(
        groovy.handler, "script:groovy",
        "run by XXL-JOB's executors"
    );
    assert!(!groovy.glue_type.runs_on_rondo_executors());
    assert_eq!(
        GlueType::by_interpreter("groovy"),
        None,
        "no rondo executor runs it"
    );
    assert_eq!(
        field(glue("GLUE_SHELL", &"x".repeat(MAX_SCRIPT_BYTES + 1))),
        "glue_source"
    );
    assert_eq!(
        field(JobSpec {
            handler: Some("demo".into()),
            ..glue("GLUE_SHELL", "x")
        }),
        "handler"
    );
    assert_eq!(
        field(JobSpec {
            handler: Some("script:sh".into()),
            ..spec()
        }),
        "handler"
    );
    assert_eq!(GlueType::by_interpreter("node"), Some(GlueType::NodeJs));
    assert_eq!(GlueType::by_interpreter("ruby"), None);
}

#[test]
fn text_is_clipped_on_a_character_boundary_with_its_mark() {
    // "é" is two bytes: a cut inside it backs off to before it.
    assert_eq!(super::prefix("aé", 2), "a");
    assert_eq!(super::prefix("ab", 9), "ab");
    assert_eq!(super::clip("short", 5, "…"), "short");
    // The mark (3 bytes) counts toward the limit.
    assert_eq!(super::clip("abcdef", 5, "…"), "ab…");
    assert_eq!(super::clip("aééé", 5, "…"), "a…");
    assert_eq!(super::clip("aééé", 6, "…"), "aé…");
}

#[test]
fn a_stopped_job_makes_its_claimed_fires_up_to_its_stops_reach() {
    let running = Job::new(1, "g", "h");
    assert!(running.makes_claimed_fire(i64::MAX));
    let stopped = Job {
        enabled: false,
        run_until_ms: 10_000,
        ..Job::new(1, "g", "h")
    };
    assert!(stopped.makes_claimed_fire(10_000));
    assert!(!stopped.makes_claimed_fire(10_001));
    // An edit of the stopped job keeps the reach; a start clears it.
    let edited = Job {
        description: "x".into(),
        run_until_ms: 0,
        ..stopped.clone()
    }
    .versioned_after(Some(&stopped));
    assert_eq!(edited.run_until_ms, 10_000);
}
