//! The cron table test (`cases.tsv`, Quartz's answers written by
//! `scripts/quartz-oracle/table.sh` from Quartz 2.3 itself), the
//! daylight-saving rules spelled out on real zones, and the parser's
//! refusals.

use chrono::{DateTime, TimeZone};
use chrono_tz::Tz;

use super::CronExpr;

/// The oracle that wrote `cases.tsv` ran in 2026: Quartz's `MAX_YEAR` was
/// 2126.
const ORACLE_MAX_YEAR: i64 = 2126;

fn parse(expr: &str) -> CronExpr {
    CronExpr::parse_with_max_year(expr, ORACLE_MAX_YEAR)
        .unwrap_or_else(|e| panic!("{expr:?} refused: {e}"))
}

fn fires_ms(cron: &CronExpr, zone: Tz, start_ms: i64, count: usize) -> Vec<i64> {
    let mut fires = Vec::new();
    let mut cursor = start_ms;
    while fires.len() < count {
        let Some(fire) = cron.next_after(zone, cursor) else {
            break;
        };
        fires.push(fire);
        cursor = fire;
    }
    fires
}

/// The next `count` fires after `start` (RFC 3339), as wall-clock times of
/// the zone with their offset.
fn fires(expr: &str, zone: &str, start: &str, count: usize) -> Vec<String> {
    let zone: Tz = zone.parse().unwrap();
    let start = DateTime::parse_from_rfc3339(start)
        .unwrap()
        .timestamp_millis();
    fires_ms(&parse(expr), zone, start, count)
        .into_iter()
        .map(|ms| {
            zone.timestamp_millis_opt(ms)
                .unwrap()
                .format("%Y-%m-%dT%H:%M:%S%:z")
                .to_string()
        })
        .collect()
}

#[test]
fn the_table_gives_quartz_s_answers() {
    let table = include_str!("cases.tsv");
    let mut rows = 0;
    for line in table
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
    {
        let cols: Vec<&str> = line.split('\t').collect();
        let [expr, zone, start, rondo, quartz, answer] = cols[..] else {
            panic!("a row has six columns: {line:?}");
        };
        rows += 1;
        let ours = CronExpr::parse_with_max_year(expr, ORACLE_MAX_YEAR);
        match (rondo, quartz) {
            ("same", "OK") => {
                let cron =
                    ours.unwrap_or_else(|e| panic!("{expr:?}: Quartz accepts it, rondo: {e}"));
                let expected: Vec<i64> = answer
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(|s| DateTime::parse_from_rfc3339(s).unwrap().timestamp_millis())
                    .collect();
                let tz: Tz = zone.parse().unwrap();
                let start = DateTime::parse_from_rfc3339(start)
                    .unwrap()
                    .timestamp_millis();
                assert_eq!(
                    fires_ms(&cron, tz, start, 12),
                    expected,
                    "{expr:?} in {zone} after {start}: Quartz fires {answer}"
                );
            }
            ("same", "ERR") => {
                let e = ours.expect_err(&format!("{expr:?}: Quartz refuses it ({answer})"));
                assert!(!e.quartz_accepts, "{expr:?}: {e}");
            }
            ("refuses", "OK" | "THROW") => {
                let e = ours.expect_err(&format!("{expr:?}: rondo must refuse it"));
                assert!(e.quartz_accepts, "{expr:?}: {e}");
            }
            _ => panic!("unexpected row {line:?}"),
        }
    }
    assert!(rows >= 50, "the table has {rows} cases");
}

#[test]
fn a_fire_in_the_skipped_hour_is_not_made_up_that_day() {
    // New York springs forward at 02:00 on 8 March 2026: 02:30 does not
    // exist that day and Quartz does not fire it at 03:30 either.
    assert_eq!(
        fires(
            "0 30 2 * * ?",
            "America/New_York",
            "2026-03-06T12:00:00Z",
            3
        ),
        [
            "2026-03-07T02:30:00-05:00",
            "2026-03-09T02:30:00-04:00",
            "2026-03-10T02:30:00-04:00"
        ]
    );
    // Berlin skips 02:00-03:00 on 29 March 2026.
    assert_eq!(
        fires("0 30 2 * * ?", "Europe/Berlin", "2026-03-27T12:00:00Z", 2),
        ["2026-03-28T02:30:00+01:00", "2026-03-30T02:30:00+02:00"]
    );
    // Lord Howe moves half an hour, skipping 02:00-02:30 on 4 October 2026.
    assert_eq!(
        fires(
            "0 15 2 * * ?",
            "Australia/Lord_Howe",
            "2026-10-02T00:00:00Z",
            2
        ),
        ["2026-10-03T02:15:00+10:30", "2026-10-05T02:15:00+11:00"]
    );
    // What survives the gap still fires: every ten minutes from 02:00 on the
    // Lord Howe night resumes at 02:30.
    assert_eq!(
        fires(
            "0 0/10 2 * * ?",
            "Australia/Lord_Howe",
            "2026-10-03T15:00:00Z",
            2
        ),
        ["2026-10-04T02:30:00+11:00", "2026-10-04T02:40:00+11:00"]
    );
}

#[test]
fn an_hourly_job_goes_from_before_the_gap_to_after_it() {
    assert_eq!(
        fires("0 0 * * * ?", "America/New_York", "2026-03-08T05:30:00Z", 3),
        [
            "2026-03-08T01:00:00-05:00",
            "2026-03-08T03:00:00-04:00",
            "2026-03-08T04:00:00-04:00"
        ]
    );
}

#[test]
fn a_fire_in_the_repeated_hour_fires_once_at_its_second_occurrence() {
    // New York falls back at 02:00 on 1 November 2026: 01:30 happens twice
    // and Quartz fires the second (standard-time) one only.
    assert_eq!(
        fires(
            "0 30 1 * * ?",
            "America/New_York",
            "2026-10-30T12:00:00Z",
            3
        ),
        [
            "2026-10-31T01:30:00-04:00",
            "2026-11-01T01:30:00-05:00",
            "2026-11-02T01:30:00-05:00"
        ]
    );
    assert_eq!(
        fires("0 30 2 * * ?", "Europe/Berlin", "2026-10-23T12:00:00Z", 2),
        ["2026-10-24T02:30:00+02:00", "2026-10-25T02:30:00+01:00"]
    );
    assert_eq!(
        fires(
            "0 45 1 * * ?",
            "Australia/Lord_Howe",
            "2026-04-03T00:00:00Z",
            2
        ),
        ["2026-04-04T01:45:00+11:00", "2026-04-05T01:45:00+10:30"]
    );
}

#[test]
fn fires_inside_the_first_pass_of_the_repeated_hour_are_skipped() {
    // Every half hour through the New York fall-back: 01:00 and 01:30 come
    // once each, in standard time; the daylight-time pass is not fired.
    assert_eq!(
        fires(
            "0 0/30 * * * ?",
            "America/New_York",
            "2026-11-01T04:10:00Z",
            4
        ),
        [
            "2026-11-01T00:30:00-04:00",
            "2026-11-01T01:00:00-05:00",
            "2026-11-01T01:30:00-05:00",
            "2026-11-01T02:00:00-05:00"
        ]
    );
    // Lord Howe repeats 01:30-02:00 on 5 April 2026.
    assert_eq!(
        fires(
            "0 0/10 1 * * ?",
            "Australia/Lord_Howe",
            "2026-04-04T14:00:00Z",
            4
        ),
        [
            "2026-04-05T01:10:00+11:00",
            "2026-04-05T01:20:00+11:00",
            "2026-04-05T01:30:00+10:30",
            "2026-04-05T01:40:00+10:30"
        ]
    );
}

#[test]
fn daylight_saving_goes_on_past_2037() {
    assert_eq!(
        fires(
            "0 30 2 * * ? 2045",
            "America/New_York",
            "2045-03-10T12:00:00Z",
            2
        ),
        ["2045-03-11T02:30:00-05:00", "2045-03-13T02:30:00-04:00"]
    );
}

#[test]
fn a_star_in_the_other_day_field_reads_as_a_question_mark() {
    let zone: Tz = "UTC".parse().unwrap();
    for (extended, quartz) in [
        ("0 0 12 * * MON", "0 0 12 ? * MON"),
        ("0 0 12 15 * *", "0 0 12 15 * ?"),
        ("* * * * * *", "* * * ? * *"),
    ] {
        let start = 1_767_225_600_000; // 2026-01-01
        assert_eq!(
            fires_ms(&parse(extended), zone, start, 5),
            fires_ms(&parse(quartz), zone, start, 5),
            "{extended}"
        );
    }
}

#[test]
fn refusals_name_the_field_and_the_reason() {
    for (expr, field) in [
        ("0 0 25 * * ?", "hours field"),
        ("0 0 12 ? * MON#6", "day-of-week field"),
        ("0 0 12 L-31 * ?", "day-of-month field"),
        ("0 0 12 ? FOO *", "month field"),
        ("0 0 12 ? * 1#2,3", "day-of-week field"),
        ("0 0 12 1W,15 * ?", "day-of-month field"),
    ] {
        let e = CronExpr::parse(expr).expect_err(expr);
        assert!(e.reason.contains(field), "{expr}: {e}");
    }
    for expr in [
        "0 0 12 * *",
        "0 0 12 * * ? 2030 extra",
        "0 0 12 1 * MON",
        "L 0 12 * * ?",
        "0 0 12 ? * ０",
    ] {
        assert!(CronExpr::parse(expr).is_err(), "{expr}");
    }
}

#[test]
fn huge_year_ranges_and_increments_stay_bounded() {
    let cron = parse("0 0 0 1 1 ? 2030-2147483647");
    let zone: Tz = "UTC".parse().unwrap();
    assert_eq!(fires_ms(&cron, zone, 0, 1).len(), 1);
    let cron = parse("0 0 0 1 1 ? 2030/2147483647");
    assert_eq!(fires_ms(&cron, zone, 0, 3).len(), 1);
}
