use super::*;
use chrono::{DateTime, NaiveDateTime};
use chrono_tz::Tz;

fn ms(s: &str) -> i64 {
    NaiveDateTime::parse_from_str(s, "%Y-%m-%d %H:%M:%S")
        .unwrap()
        .and_utc()
        .timestamp_millis()
}

fn fmt(ms: i64) -> String {
    DateTime::from_timestamp_millis(ms)
        .unwrap()
        .format("%Y-%m-%d %H:%M:%S")
        .to_string()
}

fn cron(expr: &str) -> Schedule {
    Schedule::parse(ScheduleType::Cron, expr, Tz::UTC).unwrap_or_else(|e| panic!("{expr}: {e}"))
}

/// Quartz expressions XXL-JOB users write, with the fires Quartz gives.
/// Reference instant: Saturday 2026-11-21 19:00:00 UTC.
#[test]
fn quartz_expressions_fire_when_quartz_says() {
    let from = "2026-11-21 19:00:00";
    let table: &[(&str, &[&str])] = &[
        (
            "* * * * * ?",
            &["2026-11-21 19:00:01", "2026-11-21 19:00:02"],
        ),
        (
            "0/5 * * * * ?",
            &["2026-11-21 19:00:05", "2026-11-21 19:00:10"],
        ),
        (
            "*/15 * * * * ?",
            &["2026-11-21 19:00:15", "2026-11-21 19:00:30"],
        ),
        (
            "0 0/30 * * * ?",
            &["2026-11-21 19:30:00", "2026-11-21 20:00:00"],
        ),
        (
            "0 0 2 * * ?",
            &["2026-11-22 02:00:00", "2026-11-23 02:00:00"],
        ),
        (
            "0 15 10 ? * MON-FRI",
            &["2026-11-23 10:15:00", "2026-11-24 10:15:00"],
        ),
        // Quartz weekday numbers: 2 = Monday, 6 = Friday, 1 = Sunday.
        (
            "0 15 10 ? * 2-6",
            &["2026-11-23 10:15:00", "2026-11-24 10:15:00"],
        ),
        (
            "0 0 12 ? * 1",
            &["2026-11-22 12:00:00", "2026-11-29 12:00:00"],
        ),
        // Last day of the month.
        (
            "0 0 2 L * ?",
            &[
                "2026-11-30 02:00:00",
                "2026-12-31 02:00:00",
                "2027-01-31 02:00:00",
                "2027-02-28 02:00:00",
            ],
        ),
        // Third Friday of the month (Quartz 6 = Friday).
        (
            "0 15 10 ? * 6#3",
            &["2026-12-18 10:15:00", "2027-01-15 10:15:00"],
        ),
        (
            "0 15 10 ? * FRI#3",
            &["2026-12-18 10:15:00", "2027-01-15 10:15:00"],
        ),
        // Last Friday of the month.
        (
            "0 15 10 ? * 6L",
            &["2026-11-27 10:15:00", "2026-12-25 10:15:00"],
        ),
        // Weekday nearest the 1st (2026-12-01 Tue, 2027-01-01 Fri, 2027-02-01 Mon).
        (
            "0 0 12 1W * ?",
            &[
                "2026-12-01 12:00:00",
                "2027-01-01 12:00:00",
                "2027-02-01 12:00:00",
            ],
        ),
        (
            "0 0 12 15W * ?",
            &[
                "2026-12-15 12:00:00",
                "2027-01-15 12:00:00",
                "2027-02-15 12:00:00",
                "2027-03-15 12:00:00",
            ],
        ),
        // 2027-08-15 is a Sunday -> Monday 16; 2027-11-15 is a Monday.
        (
            "0 0 12 15W 8,11 ?",
            &["2027-08-16 12:00:00", "2027-11-15 12:00:00"],
        ),
        // Explicit year field.
        ("0 0 0 1 1 ? 2028", &["2028-01-01 00:00:00"]),
        (
            "0 30 9 1,15 * ?",
            &["2026-12-01 09:30:00", "2026-12-15 09:30:00"],
        ),
        (
            "0 0 9-17/4 * * ?",
            &[
                "2026-11-22 09:00:00",
                "2026-11-22 13:00:00",
                "2026-11-22 17:00:00",
            ],
        ),
        (
            "0 0 0 29 2 ?",
            &["2028-02-29 00:00:00", "2032-02-29 00:00:00"],
        ),
    ];
    for (expr, expected) in table {
        let schedule = cron(expr);
        let mut at = ms(from);
        for want in *expected {
            let got = schedule
                .next_after(at)
                .unwrap_or_else(|| panic!("{expr}: no fire after {}", fmt(at)));
            assert_eq!(fmt(got), *want, "{expr} after {}", fmt(at));
            at = got;
        }
    }
}

#[test]
fn nearest_weekday_does_not_cross_the_month() {
    // 2027-05-01 is a Saturday: Quartz fires Monday 3 May, never 30 April.
    let s = cron("0 0 12 1W * ?");
    let got = s.next_after(ms("2027-04-20 00:00:00")).unwrap();
    assert_eq!(fmt(got), "2027-05-03 12:00:00");
}

#[test]
fn cron_fire_strictly_after_a_sub_second_instant() {
    let s = cron("* * * * * ?");
    assert_eq!(
        s.next_after(ms("2026-11-21 19:00:00") + 500),
        Some(ms("2026-11-21 19:00:01"))
    );
    assert_eq!(
        s.next_after(ms("2026-11-21 19:00:00")),
        Some(ms("2026-11-21 19:00:01"))
    );
}

#[test]
fn malformed_crons_are_refused_naming_the_field() {
    for bad in [
        "",
        "* * * * *",
        "0 0 25 * * ?",
        "61 * * * * ?",
        "0 0 0 ? * 9",
        "nonsense * * * * ?",
        "0 0 0 30 2 ?",
        "1 2 3 4 5 6 7 8",
    ] {
        let err = Schedule::parse(ScheduleType::Cron, bad, Tz::UTC).expect_err(bad);
        assert_eq!(err.field.as_deref(), Some("schedule_conf"), "{bad}: {err}");
    }
}

#[test]
fn fix_rate_in_seconds_or_milliseconds() {
    assert!(matches!(
        Schedule::parse(ScheduleType::FixRate, "5", Tz::UTC).unwrap(),
        Schedule::FixRate(5000)
    ));
    assert!(matches!(
        Schedule::parse(ScheduleType::FixRate, "5s", Tz::UTC).unwrap(),
        Schedule::FixRate(5000)
    ));
    assert!(matches!(
        Schedule::parse(ScheduleType::FixRate, "250ms", Tz::UTC).unwrap(),
        Schedule::FixRate(250)
    ));
    assert_eq!(
        Schedule::parse(ScheduleType::FixRate, "250ms", Tz::UTC)
            .unwrap()
            .next_after(1000),
        Some(1250)
    );
    for bad in ["", "abc", "-1", "0", "5ms", "1.5", "99999999999"] {
        let err = Schedule::parse(ScheduleType::FixRate, bad, Tz::UTC).expect_err(bad);
        assert_eq!(err.field.as_deref(), Some("schedule_conf"), "{bad}");
    }
}

#[test]
fn unknown_schedule_type_names_the_field() {
    let err = ScheduleType::parse("schedule_type", "WEEKLY").unwrap_err();
    assert_eq!(err.field.as_deref(), Some("schedule_type"));
    assert!(
        Schedule::parse(ScheduleType::None, "", Tz::UTC)
            .unwrap()
            .next_after(0)
            .is_none()
    );
}

fn window(now_ms: i64) -> ClaimWindow {
    ClaimWindow {
        now_ms,
        horizon_ms: now_ms + 5000,
        misfire_threshold_ms: 5000,
        max_fires: 1000,
    }
}

#[test]
fn on_time_claim_takes_every_fire_in_the_window() {
    let s = Schedule::FixRate(1000);
    let plan = plan_claim(&s, MisfireRule::DoNothing, None, 10_500, window(10_000));
    assert_eq!(plan.fires, vec![10_500, 11_500, 12_500, 13_500, 14_500]);
    assert_eq!(plan.next, Some(15_500));
    assert_eq!(plan.missed, None);
    assert_eq!(plan.misfire_fire, None);
}

#[test]
fn lateness_within_the_claim_period_is_on_time() {
    // A 250 ms rate saved 800 ms before the claim: every fire is claimed.
    let s = Schedule::FixRate(250);
    let plan = plan_claim(&s, MisfireRule::DoNothing, None, 9_200, window(10_000));
    assert_eq!(plan.fires.first(), Some(&9_200));
    assert_eq!(plan.fires.len(), 24, "9 200 … 14 950: {:?}", plan.fires);
    assert_eq!(plan.missed, None);
}

#[test]
fn a_little_late_is_not_a_misfire() {
    let s = Schedule::FixRate(60_000);
    let plan = plan_claim(&s, MisfireRule::DoNothing, None, 6_000, window(10_000));
    assert_eq!(plan.fires, vec![6_000]);
    assert_eq!(plan.next, Some(66_000));
    assert_eq!(
        plan.missed, None,
        "one fire, late, is still fired: nothing missed"
    );
}

#[test]
fn late_by_less_than_the_threshold_fires_once_not_every_missed_fire() {
    // Every second, found 3.5 s late: XXL-JOB fires once and goes on from
    // now; the fires in between are skipped (and counted).
    let s = Schedule::FixRate(1_000);
    let plan = plan_claim(&s, MisfireRule::DoNothing, None, 6_500, window(10_000));
    assert_eq!(
        plan.fires,
        vec![6_500, 10_500, 11_500, 12_500, 13_500, 14_500]
    );
    assert_eq!(plan.misfire_fire, None, "a late fire stays CRON");
    assert_eq!(
        plan.missed,
        Some(Missed {
            first_ms: 6_500,
            last_ms: 9_500,
            count: 4,
            skipped: 3,
            misfire: false
        })
    );
    assert_eq!(plan.next, Some(15_500));
}

#[test]
fn misfire_do_nothing_skips_and_reschedules_from_now() {
    let s = Schedule::FixRate(60_000);
    let plan = plan_claim(&s, MisfireRule::DoNothing, None, 1_000, window(10_000));
    assert_eq!(plan.fires, Vec::<i64>::new());
    let missed = plan.missed.expect("missed");
    assert!(missed.misfire);
    assert_eq!(
        (missed.first_ms, missed.count, missed.skipped),
        (1_000, 1, 1)
    );
    assert_eq!(plan.next, Some(70_000));
}

#[test]
fn misfire_fire_once_now_fires_once_then_from_now() {
    let s = Schedule::FixRate(2_000);
    let plan = plan_claim(&s, MisfireRule::FireOnceNow, None, 1_000, window(100_000));
    // Once now, then the regular fires from now inside the window.
    assert_eq!(plan.fires, vec![100_000, 102_000, 104_000]);
    assert_eq!(
        plan.misfire_fire,
        Some(100_000),
        "the one fire now is MISFIRE"
    );
    let missed = plan.missed.expect("missed");
    // 1 000, 3 000 … 99 000: fifty fires missed, one fired in their place.
    assert_eq!(
        (missed.count, missed.skipped, missed.last_ms),
        (50, 49, 99_000)
    );
    assert_eq!(plan.next, Some(106_000));
}

#[test]
fn a_job_threshold_overrides_the_cluster_one() {
    let s = Schedule::FixRate(60_000);
    // 9 s late: a misfire by the cluster's 5 s, not by the job's 30 s.
    let plan = plan_claim(
        &s,
        MisfireRule::DoNothing,
        Some(30_000),
        1_000,
        window(10_000),
    );
    assert_eq!(plan.fires, vec![1_000]);
    assert_eq!(plan.missed, None);
    // 2 s late: a misfire by the job's 1 s.
    let plan = plan_claim(
        &s,
        MisfireRule::DoNothing,
        Some(1_000),
        8_000,
        window(10_000),
    );
    assert_eq!(plan.fires, Vec::<i64>::new());
    assert!(plan.missed.expect("missed").misfire);
}

#[test]
fn a_fixed_delay_fires_once_and_waits_for_its_result() {
    let s = Schedule::parse(ScheduleType::FixDelay, "30s", Tz::UTC).unwrap();
    assert_eq!(s.first_after(1_000), Some(31_000));
    assert_eq!(
        s.next_after(31_000),
        None,
        "the result monitor sets the next"
    );
    let plan = plan_claim(&s, MisfireRule::DoNothing, None, 11_000, window(10_000));
    assert_eq!((plan.fires, plan.next), (vec![11_000], None));
    // Skipped by a misfire, nothing runs, so no result re-arms it: the
    // claim does, one delay from now.
    let plan = plan_claim(&s, MisfireRule::DoNothing, None, 1_000, window(10_000));
    assert_eq!((plan.fires, plan.next), (Vec::<i64>::new(), Some(40_000)));
    let plan = plan_claim(&s, MisfireRule::FireOnceNow, None, 1_000, window(10_000));
    assert_eq!((plan.fires, plan.next), (vec![10_000], None));
    assert_eq!(s.preview(0, 3), vec![30_000, 60_000, 90_000]);
}

#[test]
fn a_preview_lists_the_next_fires_in_the_jobs_zone() {
    let shanghai: Tz = "Asia/Shanghai".parse().unwrap();
    let s = Schedule::parse(ScheduleType::Cron, "0 0 2 * * ?", shanghai).unwrap();
    // 02:00 in Shanghai is 18:00 UTC the day before.
    assert_eq!(
        s.preview(ms("2026-11-21 19:00:00"), 2)
            .into_iter()
            .map(fmt)
            .collect::<Vec<_>>(),
        ["2026-11-22 18:00:00", "2026-11-23 18:00:00"]
    );
    assert!(Schedule::None.preview(0, 5).is_empty());
}

#[test]
fn an_unknown_zone_names_the_field() {
    let err = parse_zone("zone", "Mars/Olympus").unwrap_err();
    assert_eq!(err.field.as_deref(), Some("zone"));
    assert!(err.message.contains("Mars/Olympus"), "{err}");
}

#[test]
fn max_fires_bounds_a_fast_schedule() {
    let s = Schedule::FixRate(10);
    let w = ClaimWindow {
        max_fires: 3,
        ..window(0)
    };
    let plan = plan_claim(&s, MisfireRule::DoNothing, None, 0, w);
    assert_eq!(plan.fires, vec![0, 10, 20]);
    assert_eq!(plan.next, Some(30));
}

#[test]
fn schedule_none_leaves_the_due_set() {
    let plan = plan_claim(
        &Schedule::None,
        MisfireRule::DoNothing,
        None,
        10_000,
        window(10_000),
    );
    assert_eq!(plan.fires, vec![10_000]);
    assert_eq!(plan.next, None);
}
