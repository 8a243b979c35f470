//! rondo's Quartz port against Quartz 2.3 itself: thousands of generated
//! expressions (every field form Quartz knows, valid and not, in zones with
//! daylight saving and from starts next to its changes) go to the oracle
//! (`scripts/quartz-oracle/`, Debian's libquartz2-java) and to
//! `CronExpr`, and every answer must agree: the same fires, or a refusal
//! where Quartz refuses, or a refusal rondo documents (`quartz_accepts`)
//! where Quartz accepts something it would fail on or misread.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use chrono::{TimeZone, Utc};
use chrono_tz::Tz;
use rondo_core::schedule::quartz::CronExpr;

/// Expressions per run; the oracle answers them in about a second.
const CASES: usize = 6000;
/// Fires compared per expression.
const FIRES: usize = 12;

const ZONES: [&str; 9] = [
    "UTC",
    "Asia/Shanghai",
    "America/New_York",
    "Europe/Berlin",
    "Australia/Lord_Howe",
    "America/Santiago",
    "Pacific/Chatham",
    "Asia/Kolkata",
    "America/Sao_Paulo",
];

/// Starts next to daylight-saving changes of the zones above (UTC ms).
const EDGES: [&str; 8] = [
    "2026-03-08T06:00:00Z",
    "2026-11-01T04:30:00Z",
    "2026-03-29T00:30:00Z",
    "2026-10-25T00:30:00Z",
    "2026-04-04T14:30:00Z",
    "2026-10-03T15:00:00Z",
    "2026-04-05T02:00:00Z",
    "2026-09-06T03:00:00Z",
];

/// xorshift64*: the cases are the same in every run.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn int(&mut self, lo: i64, hi: i64) -> i64 {
        lo + self.below((hi - lo + 1) as u64) as i64
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

const MONTH_NAMES: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAY_NAMES: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// One part of a numeric field whose values run lo..=hi (sometimes out of
/// range, to see both refuse).
fn numeric_part(rng: &mut Rng, lo: i64, hi: i64) -> String {
    let v = |rng: &mut Rng| {
        if rng.chance(4) {
            rng.int(hi + 1, hi + 3)
        } else {
            rng.int(lo, hi)
        }
    };
    match rng.below(10) {
        0 => "*".to_string(),
        1 => format!("*/{}", rng.int(1, (hi / 2).max(1))),
        2 => format!("{}/{}", v(rng), rng.int(1, (hi / 2).max(1))),
        3 | 4 => format!("{}-{}", v(rng), v(rng)),
        5 => format!("{}-{}/{}", v(rng), v(rng), rng.int(1, 9)),
        _ => v(rng).to_string(),
    }
}

fn list(rng: &mut Rng, part: impl Fn(&mut Rng) -> String) -> String {
    let n = if rng.chance(75) { 1 } else { rng.int(2, 3) };
    (0..n).map(|_| part(rng)).collect::<Vec<_>>().join(",")
}

fn seconds(rng: &mut Rng) -> String {
    if rng.chance(60) {
        return rng.int(0, 59).to_string();
    }
    list(rng, |r| numeric_part(r, 0, 59))
}

fn minutes(rng: &mut Rng) -> String {
    if rng.chance(30) {
        return rng.int(0, 59).to_string();
    }
    list(rng, |r| numeric_part(r, 0, 59))
}

fn hours(rng: &mut Rng) -> String {
    if rng.chance(20) {
        return rng.pick(&["1", "2", "3", "0"]).to_string();
    }
    list(rng, |r| numeric_part(r, 0, 23))
}

fn day_of_month(rng: &mut Rng) -> String {
    match rng.below(13) {
        12 => format!("{}W,{}", rng.int(1, 28), rng.int(1, 28)),
        0 => "L".to_string(),
        1 => format!("L-{}", rng.int(0, 31)),
        2 => "LW".to_string(),
        3 => format!("L-{}W", rng.int(0, 5)),
        4 => format!("{}W", rng.pick(&["1", "2", "15", "28", "29", "30", "31"])),
        5 => rng.pick(&["29", "30", "31"]).to_string(),
        _ => list(rng, |r| numeric_part(r, 1, 31)),
    }
}

fn month(rng: &mut Rng) -> String {
    match rng.below(6) {
        0 => rng.pick(&MONTH_NAMES).to_string(),
        1 => format!("{}-{}", rng.pick(&MONTH_NAMES), rng.pick(&MONTH_NAMES)),
        2 => "*".to_string(),
        _ => list(rng, |r| numeric_part(r, 1, 12)),
    }
}

fn day_of_week(rng: &mut Rng) -> String {
    match rng.below(13) {
        12 => format!("{}#{},{}", rng.int(1, 7), rng.int(1, 5), rng.int(1, 7)),
        0 => format!("{}#{}", rng.int(1, 7), rng.int(1, 5)),
        1 => format!("{}#{}", rng.pick(&DAY_NAMES), rng.int(1, 5)),
        2 => format!("{}L", rng.int(1, 7)),
        3 => format!("{}L", rng.pick(&DAY_NAMES)),
        4 => "L".to_string(),
        5 => format!("{}-{}", rng.pick(&DAY_NAMES), rng.pick(&DAY_NAMES)),
        6 => format!("{}/{}", rng.pick(&DAY_NAMES), rng.int(1, 3)),
        7 => rng.pick(&DAY_NAMES).to_string(),
        _ => list(rng, |r| numeric_part(r, 1, 7)),
    }
}

fn year(rng: &mut Rng) -> Option<String> {
    match rng.below(8) {
        0 => Some("*".to_string()),
        1 => Some(rng.int(2026, 2032).to_string()),
        2 => Some(format!("{}-{}", rng.int(2026, 2029), rng.int(2025, 2034))),
        3 => Some(format!("{}/{}", rng.int(2026, 2028), rng.int(1, 4))),
        4 => Some(format!("{},{}", rng.int(2026, 2030), rng.int(2026, 2030))),
        _ => None,
    }
}

fn expression(rng: &mut Rng) -> String {
    let (dom, dow) = match rng.below(20) {
        0 => (day_of_month(rng), day_of_week(rng)),
        1 => ("?".to_string(), "?".to_string()),
        2 => ("*".to_string(), day_of_week(rng)),
        3..=11 => (day_of_month(rng), "?".to_string()),
        _ => ("?".to_string(), day_of_week(rng)),
    };
    let mut fields = vec![seconds(rng), minutes(rng), hours(rng), dom, month(rng), dow];
    if let Some(y) = year(rng) {
        fields.push(y);
    }
    let mut text = fields.join(" ");
    if rng.chance(5) {
        text = text.to_lowercase();
    }
    text
}

/// `*` where Quartz wants `?`: rondo reads it as `?` (documented).
fn uses_star_extension(expr: &str) -> bool {
    let tokens: Vec<&str> = expr.split_whitespace().collect();
    tokens.len() >= 6
        && ((tokens[3] == "*" && tokens[5] != "?") || (tokens[5] == "*" && tokens[3] != "?"))
}

fn oracle_classpath() -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
    let out = Command::new("bash")
        .arg(root.join("scripts/quartz-oracle/build.sh"))
        .current_dir(root)
        .output()
        .expect("running scripts/quartz-oracle/build.sh");
    assert!(
        out.status.success(),
        "scripts/quartz-oracle/build.sh failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn the_port_gives_quartz_s_fires() {
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    let mut cases = Vec::with_capacity(CASES);
    for i in 0..CASES {
        let expr = expression(&mut rng);
        let zone = rng.pick(&ZONES);
        let start = if i % 3 == 0 {
            let edge = chrono::DateTime::parse_from_rfc3339(rng.pick(&EDGES)).unwrap();
            edge.timestamp_millis() + rng.int(-2 * 3600, 2 * 3600) * 1000
        } else if i % 3 == 1 {
            let from = Utc.with_ymd_and_hms(2025, 1, 1, 0, 0, 0).unwrap();
            from.timestamp_millis() + rng.int(0, 12 * 365 * 86_400) * 1000
        } else {
            // Past 2037, where some zone libraries stop daylight saving.
            let from = Utc.with_ymd_and_hms(2038, 1, 1, 0, 0, 0).unwrap();
            from.timestamp_millis() + rng.int(0, 80 * 365 * 86_400) * 1000
        };
        cases.push((expr, zone, start));
    }

    let mut input = String::new();
    for (expr, zone, start) in &cases {
        input.push_str(&format!("{expr}\t{zone}\t{start}\t{FIRES}\n"));
    }
    let mut oracle = Command::new("java")
        .args(["-cp", &oracle_classpath(), "QuartzOracle"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("starting the Quartz oracle (java)");
    let mut stdin = oracle.stdin.take().unwrap();
    let writer = std::thread::spawn(move || stdin.write_all(input.as_bytes()));
    let out = oracle
        .wait_with_output()
        .expect("the Quartz oracle's answers");
    writer.join().unwrap().expect("feeding the oracle");
    assert!(out.status.success(), "the Quartz oracle failed");
    let answers: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    assert_eq!(answers.len(), cases.len(), "one answer per case");

    let (mut same, mut refused_both, mut refused_by_rondo, mut extension) = (0, 0, 0, 0);
    let mut wrong = Vec::new();
    for ((expr, zone, start), answer) in cases.iter().zip(&answers) {
        let tz: Tz = zone.parse().unwrap();
        let (kind, rest) = answer.split_once('\t').unwrap_or((answer, ""));
        let ours = CronExpr::parse(expr);
        match (kind, &ours) {
            ("ERR", Err(_)) => refused_both += 1,
            ("ERR", Ok(_)) if uses_star_extension(expr) => extension += 1,
            ("THROW", Err(e)) if e.quartz_accepts => refused_by_rondo += 1,
            ("OK", Err(e)) if e.quartz_accepts => refused_by_rondo += 1,
            ("OK", Ok(cron)) => {
                let expected: Vec<i64> = rest
                    .split(',')
                    .filter(|s| !s.is_empty())
                    .map(|s| s.parse().unwrap())
                    .collect();
                let mut got = Vec::new();
                let mut cursor = *start;
                while got.len() < FIRES {
                    match cron.next_after(tz, cursor) {
                        Some(fire) => {
                            got.push(fire);
                            cursor = fire;
                        }
                        None => break,
                    }
                }
                if got == expected {
                    same += 1;
                } else {
                    wrong.push(format!(
                        "{expr:?} in {zone} after {start}: Quartz {expected:?}, rondo {got:?}"
                    ));
                }
            }
            _ => wrong.push(format!(
                "{expr:?}: Quartz answered {answer:?}, rondo {:?}",
                ours.as_ref().map(|_| "accepted").map_err(|e| e.to_string())
            )),
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} cases differ from Quartz (same {same}, refused by both {refused_both}, refused by rondo only {refused_by_rondo}, `*` extension {extension}):\n{}",
        wrong.len(),
        cases.len(),
        wrong
            .iter()
            .take(40)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    // The generator must keep exercising the engine, not only the parser.
    assert!(
        same > CASES / 2 && refused_both > 0 && refused_by_rondo > 0 && extension > 0,
        "the cases must cover every outcome: same fires {same} of {CASES}, refused by both {refused_both}, refused by rondo only {refused_by_rondo}, `*` extension {extension}"
    );
}
