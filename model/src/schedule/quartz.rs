//! Quartz 2.3 cron expressions, read and stepped the way Quartz's own
//! `org.quartz.CronExpression` reads and steps them, so a job brought over
//! from XXL-JOB fires at the instants it fired there.
//!
//! This is a port, not a reinterpretation. The parser follows
//! `storeExpressionVals`/`checkNext`/`addToSet` character by character,
//! quirks included (`MON/2` is every Monday, because Quartz drops an
//! increment after a name; `*` in a day field also matches through the
//! `?`-marker sets). The stepping follows `getTimeAfter` over a model of
//! `java.util.GregorianCalendar` in lenient mode: fields are set without
//! being checked, and a read normalises them (day 32 is the 1st of the next
//! month) and converts the wall-clock fields to an instant by Java's rule:
//! a wall time in a skipped hour is read with the offset before the change
//! (02:30 on a spring-forward night is 03:30), a wall time in a repeated
//! hour with the offset after it (the second, standard-time 01:30). That
//! rule, applied every time Quartz sets a field, is what gives Quartz's
//! daylight-saving behaviour: a fire inside the skipped hour is not made up
//! that day, and a fire inside the repeated hour happens once, at its
//! second occurrence.
//!
//! Where Quartz accepts an expression but then fails or computes nonsense,
//! [`CronExpr::parse`] refuses it with the reason instead (see
//! [`CronExpr::sanity`]); the differential test against Quartz itself
//! (`tests/tests/quartz_oracle.rs`) holds the port to the original.
//!
//! Why one file of ~1,100 lines: it ports one Java class (`CronExpression`)
//! in that class's order, so that it reads beside Quartz's source method by
//! method; splitting it would break that reading. Its table test is
//! `quartz/tests.rs`.

use std::collections::BTreeSet;

use chrono::{Datelike, Duration, NaiveDate, NaiveDateTime, Timelike};
use chrono_tz::Tz;
use jiff::tz::{AmbiguousOffset, TimeZone};

const SECOND: usize = 0;
const MINUTE: usize = 1;
const HOUR: usize = 2;
const DAY_OF_MONTH: usize = 3;
const MONTH: usize = 4;
const DAY_OF_WEEK: usize = 5;
const YEAR: usize = 6;

/// Quartz's marker for `*` (kept in the value set, as Quartz keeps it).
const ALL_SPEC: i64 = 99;
/// Quartz's marker for `?`.
const NO_SPEC: i64 = 98;

/// Quartz gives up past this year whatever the expression.
const LAST_SEARCHED_YEAR: i64 = 2999;

/// A bound on `next_after`'s steps. Quartz's loop ends by its year checks;
/// this only guards against an expression the port would step forever.
const MAX_STEPS: usize = 1_000_000;

const FIELD_NAMES: [&str; 7] = [
    "seconds",
    "minutes",
    "hours",
    "day-of-month",
    "month",
    "day-of-week",
    "year",
];

const MONTHS: [&str; 12] = [
    "JAN", "FEB", "MAR", "APR", "MAY", "JUN", "JUL", "AUG", "SEP", "OCT", "NOV", "DEC",
];
const DAYS: [&str; 7] = ["SUN", "MON", "TUE", "WED", "THU", "FRI", "SAT"];

/// Why an expression was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronError {
    /// What is wrong, and in which field.
    pub reason: String,
    /// Quartz 2.3 would accept the expression (or may: non-ASCII input);
    /// rondo refuses it because Quartz would fail on it or compute
    /// something other than what it says.
    pub quartz_accepts: bool,
}

impl std::fmt::Display for CronError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for CronError {}

fn quartz_refuses(reason: String) -> CronError {
    CronError {
        reason,
        quartz_accepts: false,
    }
}

fn rondo_refuses(reason: String) -> CronError {
    CronError {
        reason,
        quartz_accepts: true,
    }
}

/// A parsed Quartz cron expression.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CronExpr {
    sets: [BTreeSet<i64>; 7],
    lastday_of_week: bool,
    nthday_of_week: i64,
    lastday_of_month: bool,
    nearest_weekday: bool,
    lastday_offset: i64,
    /// Quartz's `MAX_YEAR`: the year the expression was read plus 100.
    max_year: i64,
}

impl CronExpr {
    /// Parses `expression` as Quartz 2.3 would, with `MAX_YEAR` taken from
    /// today's date as Quartz takes it. The error says what is wrong and in
    /// which field.
    pub fn parse(expression: &str) -> Result<CronExpr, CronError> {
        let year = chrono::Utc::now().year() as i64;
        CronExpr::parse_with_max_year(expression, year + 100)
    }

    /// [`CronExpr::parse`] with Quartz's `MAX_YEAR` given (tests compare
    /// with a Quartz that was started in a known year).
    pub fn parse_with_max_year(expression: &str, max_year: i64) -> Result<CronExpr, CronError> {
        if !expression.is_ascii() {
            return Err(rondo_refuses(
                "a cron expression is written in ASCII".to_string(),
            ));
        }
        let upper = expression.to_ascii_uppercase();
        let mut tokens: Vec<&str> = upper.split([' ', '\t']).filter(|t| !t.is_empty()).collect();
        if tokens.len() > 7 {
            return Err(rondo_refuses(format!(
                "a cron expression has at most 7 fields (seconds minutes hours day-of-month month day-of-week [year]); Quartz would ignore {:?}",
                tokens[7..].join(" ")
            )));
        }
        if tokens.len() < 6 {
            return Err(quartz_refuses(format!(
                "a cron expression needs 6 or 7 fields (seconds minutes hours day-of-month month day-of-week [year]), got {}",
                tokens.len()
            )));
        }
        // rondo's one extension: `*` in the day field Quartz wants as `?`
        // (`0 0 12 * * MON`, `* * * * * *`) is read as `?`.
        if tokens[DAY_OF_MONTH] == "*" && tokens[DAY_OF_WEEK] != "?" {
            tokens[DAY_OF_MONTH] = "?";
        } else if tokens[DAY_OF_WEEK] == "*" && tokens[DAY_OF_MONTH] != "?" {
            tokens[DAY_OF_WEEK] = "?";
        }
        let mut cron = CronExpr {
            sets: Default::default(),
            lastday_of_week: false,
            nthday_of_week: 0,
            lastday_of_month: false,
            nearest_weekday: false,
            lastday_offset: 0,
            max_year,
        };
        let in_field = |field: usize, token: &str, e: String| {
            format!("{} field {token:?}: {e}", FIELD_NAMES[field])
        };
        for (field, token) in tokens.iter().enumerate() {
            cron.build_field(field, token)
                .map_err(|e| quartz_refuses(in_field(field, token, e)))?;
        }
        if tokens.len() == 6 {
            cron.store(b"*", YEAR)
                .map_err(|e| quartz_refuses(in_field(YEAR, "*", e)))?;
        }
        let dom_spec = !cron.sets[DAY_OF_MONTH].contains(&NO_SPEC);
        let dow_spec = !cron.sets[DAY_OF_WEEK].contains(&NO_SPEC);
        if dom_spec == dow_spec {
            return Err(quartz_refuses(
                "give exactly one of day-of-month and day-of-week, and `?` in the other (Quartz does not combine them)"
                    .to_string(),
            ));
        }
        // What follows Quartz accepts; rondo refuses it with the reason.
        for (field, token) in tokens.iter().enumerate() {
            lists_quartz_misreads(field, token)
                .map_err(|e| rondo_refuses(in_field(field, token, e)))?;
        }
        cron.sanity().map_err(rondo_refuses)?;
        Ok(cron)
    }

    /// Refuses what Quartz accepts but cannot compute: a field that ends up
    /// with no value (Quartz throws on its first fire time) and day numbers
    /// outside the month or week that Quartz lets through after `W` and `#`.
    fn sanity(&self) -> Result<(), String> {
        for field in [SECOND, MINUTE, HOUR, MONTH] {
            if self.sets[field].is_empty() {
                return Err(format!(
                    "the {} field has no value (`L` and `W` belong to the day fields)",
                    FIELD_NAMES[field]
                ));
            }
        }
        let dom = &self.sets[DAY_OF_MONTH];
        if !dom.contains(&NO_SPEC) {
            if dom.is_empty() && !self.lastday_of_month {
                return Err("the day-of-month field has no value".to_string());
            }
            if self.nearest_weekday && dom.iter().any(|d| !(1..=31).contains(d)) {
                return Err("`W` needs a day of the month between 1 and 31".to_string());
            }
        }
        let dow = &self.sets[DAY_OF_WEEK];
        if !dow.contains(&NO_SPEC) {
            if dow.is_empty() {
                return Err("the day-of-week field has no value".to_string());
            }
            if dow.iter().any(|d| !(1..=7).contains(d) && *d != ALL_SPEC) {
                return Err("days of the week are 1-7 (1 = SUN) or SUN-SAT".to_string());
            }
        }
        Ok(())
    }

    /// One whitespace-separated field: Quartz's checks on the whole field,
    /// then each comma-separated part.
    fn build_field(&mut self, field: usize, expr: &str) -> Result<(), String> {
        if field == DAY_OF_MONTH && expr.contains('L') && expr.len() > 1 && expr.contains(',') {
            return Err("'L' and 'LW' cannot be combined with other days of the month".to_string());
        }
        if field == DAY_OF_WEEK && expr.contains('L') && expr.len() > 1 && expr.contains(',') {
            return Err("'L' cannot be combined with other days of the week".to_string());
        }
        if field == DAY_OF_WEEK && expr.matches('#').count() > 1 {
            return Err("only one \"nth\" day (`#`) is supported".to_string());
        }
        for part in expr.split(',').filter(|p| !p.is_empty()) {
            self.store(part.as_bytes(), field)?;
        }
        Ok(())
    }

    /// Port of Quartz's `storeExpressionVals` for one comma-separated part.
    fn store(&mut self, s: &[u8], ty: usize) -> Result<(), String> {
        let len = s.len();
        let mut i = 0;
        if i >= len {
            return Ok(());
        }
        let mut c = s[i];
        if c.is_ascii_uppercase() && s != b"L" && s != b"LW" && !is_last_offset(s) {
            let mut sub = slice(s, i, i + 3)?;
            let sval;
            let mut eval = -1;
            if ty == MONTH {
                sval = month_number(sub) + 1;
                if sval <= 0 {
                    return Err(format!("invalid month {:?}", text(sub)));
                }
                if len > i + 3 && s[i + 3] == b'-' {
                    i += 4;
                    sub = slice(s, i, i + 3)?;
                    eval = month_number(sub) + 1;
                    if eval <= 0 {
                        return Err(format!("invalid month {:?}", text(sub)));
                    }
                }
            } else if ty == DAY_OF_WEEK {
                sval = day_number(sub);
                if sval < 0 {
                    return Err(format!("invalid day of the week {:?}", text(sub)));
                }
                if len > i + 3 {
                    c = s[i + 3];
                    if c == b'-' {
                        i += 4;
                        sub = slice(s, i, i + 3)?;
                        eval = day_number(sub);
                        if eval < 0 {
                            return Err(format!("invalid day of the week {:?}", text(sub)));
                        }
                    } else if c == b'#' {
                        self.nthday_of_week = nth_after(s, i + 4)?;
                    } else if c == b'L' {
                        self.lastday_of_week = true;
                    }
                }
            } else {
                return Err(format!("names are not allowed here: {:?}", text(sub)));
            }
            let incr = if eval != -1 { 1 } else { 0 };
            return self.add_to_set(sval, eval, incr, ty);
        }

        if c == b'?' {
            i += 1;
            if i + 1 < len {
                return Err(format!("unexpected {:?} after '?'", s[i] as char));
            }
            if ty != DAY_OF_WEEK && ty != DAY_OF_MONTH {
                return Err("'?' is only allowed in day-of-month or day-of-week".to_string());
            }
            if ty == DAY_OF_WEEK && !self.lastday_of_month {
                match self.sets[DAY_OF_MONTH].last() {
                    Some(&NO_SPEC) => {
                        return Err(
                            "'?' can be given in day-of-month or in day-of-week, not both"
                                .to_string(),
                        );
                    }
                    Some(_) => {}
                    None => return Err("the day-of-month field has no value".to_string()),
                }
            }
            return self.add_to_set(NO_SPEC, -1, 0, ty);
        }

        if c == b'*' || c == b'/' {
            if c == b'*' && i + 1 >= len {
                return self.add_to_set(ALL_SPEC, -1, 0, ty);
            } else if c == b'/' && i + 1 >= len {
                return Err("'/' must be followed by an integer".to_string());
            } else if c == b'*' {
                i += 1;
            }
            let incr = if s[i] == b'/' {
                i += 1;
                if i >= len {
                    return Err("unexpected end after '/'".to_string());
                }
                let incr = java_parse_int(&s[i..])?;
                check_increment_range(incr, ty)?;
                incr
            } else {
                1
            };
            return self.add_to_set(ALL_SPEC, -1, incr, ty);
        }

        if c == b'L' {
            i += 1;
            if ty == DAY_OF_MONTH {
                self.lastday_of_month = true;
            }
            if ty == DAY_OF_WEEK {
                self.add_to_set(7, 7, 0, ty)?;
            }
            if ty == DAY_OF_MONTH && len > i {
                if s[i] == b'-' {
                    let (value, pos) = get_value(0, s, i + 1)?;
                    if value > 30 {
                        return Err("the offset from the last day must be at most 30".to_string());
                    }
                    self.lastday_offset = value;
                    i = pos;
                }
                if len > i && s[i] == b'W' {
                    self.nearest_weekday = true;
                }
            }
            return Ok(());
        }

        if c.is_ascii_digit() {
            let mut val = (c - b'0') as i64;
            i += 1;
            if i >= len {
                return self.add_to_set(val, -1, -1, ty);
            }
            if s[i].is_ascii_digit() {
                let (value, pos) = get_value(val, s, i)?;
                val = value;
                i = pos;
            }
            return self.check_next(i, s, val, ty);
        }
        Err(format!("unexpected character {:?}", c as char))
    }

    /// Port of Quartz's `checkNext`: what follows a number.
    fn check_next(&mut self, pos: usize, s: &[u8], val: i64, ty: usize) -> Result<(), String> {
        let len = s.len();
        let mut i = pos;
        if i >= len {
            return self.add_to_set(val, -1, -1, ty);
        }
        match s[pos] {
            b'L' => {
                if ty != DAY_OF_WEEK {
                    return Err("'L' after a number is only allowed in day-of-week".to_string());
                }
                if !(1..=7).contains(&val) {
                    return Err("days of the week are 1-7 (1 = SUN)".to_string());
                }
                self.lastday_of_week = true;
                self.sets[ty].insert(val);
                Ok(())
            }
            b'W' => {
                if ty != DAY_OF_MONTH {
                    return Err("'W' is only allowed in day-of-month".to_string());
                }
                if val > 31 {
                    return Err("'W' needs a day of the month up to 31".to_string());
                }
                self.nearest_weekday = true;
                self.sets[ty].insert(val);
                Ok(())
            }
            b'#' => {
                if ty != DAY_OF_WEEK {
                    return Err("'#' is only allowed in day-of-week".to_string());
                }
                self.nthday_of_week = nth_after(s, i + 1)?;
                self.sets[ty].insert(val);
                Ok(())
            }
            b'-' => {
                i += 1;
                let v = single_digit(s, i)?;
                let mut end = v;
                i += 1;
                if i >= len {
                    return self.add_to_set(val, end, 1, ty);
                }
                if s[i].is_ascii_digit() {
                    let (value, p) = get_value(v, s, i)?;
                    end = value;
                    i = p;
                }
                if i < len && s[i] == b'/' {
                    i += 1;
                    let v2 = single_digit(s, i)?;
                    i += 1;
                    if i >= len {
                        return self.add_to_set(val, end, v2, ty);
                    }
                    if s[i].is_ascii_digit() {
                        let (v3, _) = get_value(v2, s, i)?;
                        return self.add_to_set(val, end, v3, ty);
                    }
                    return self.add_to_set(val, end, v2, ty);
                }
                self.add_to_set(val, end, 1, ty)
            }
            b'/' => {
                if i + 1 >= len {
                    return Err("'/' must be followed by an integer".to_string());
                }
                i += 1;
                let v2 = single_digit(s, i)?;
                i += 1;
                if i >= len {
                    check_increment_range(v2, ty)?;
                    return self.add_to_set(val, -1, v2, ty);
                }
                if s[i].is_ascii_digit() {
                    let (v3, _) = get_value(v2, s, i)?;
                    check_increment_range(v3, ty)?;
                    return self.add_to_set(val, -1, v3, ty);
                }
                Err(format!("unexpected {:?} after '/'", s[i] as char))
            }
            _ => self.add_to_set(val, -1, 0, ty),
        }
    }

    /// Port of Quartz's `addToSet`: checks the bounds, then adds a value, or
    /// a range with an increment, wrapping past the field's end (`22-2`).
    fn add_to_set(&mut self, val: i64, end: i64, incr: i64, ty: usize) -> Result<(), String> {
        let out_of = |lo: i64, hi: i64| (val < lo || val > hi || end > hi) && val != ALL_SPEC;
        match ty {
            SECOND | MINUTE if out_of(0, 59) => {
                return Err("minute and second values must be between 0 and 59".to_string());
            }
            HOUR if out_of(0, 23) => return Err("hour values must be between 0 and 23".to_string()),
            DAY_OF_MONTH if out_of(1, 31) && val != NO_SPEC => {
                return Err("day-of-month values must be between 1 and 31".to_string());
            }
            MONTH if out_of(1, 12) => {
                return Err("month values must be between 1 and 12".to_string());
            }
            DAY_OF_WEEK
                if (val == 0 || val > 7 || end > 7) && val != ALL_SPEC && val != NO_SPEC =>
            {
                return Err("day-of-week values must be between 1 and 7".to_string());
            }
            _ => {}
        }
        let set = &mut self.sets[ty];
        let mut incr = incr;
        if (incr == 0 || incr == -1) && val != ALL_SPEC {
            set.insert(if val != -1 { val } else { NO_SPEC });
            return Ok(());
        }
        let mut start = val;
        let mut stop = end;
        if val == ALL_SPEC && incr <= 0 {
            incr = 1;
            set.insert(ALL_SPEC);
        }
        let (first, last) = match ty {
            SECOND | MINUTE => (0, 59),
            HOUR => (0, 23),
            DAY_OF_MONTH => (1, 31),
            MONTH => (1, 12),
            DAY_OF_WEEK => (1, 7),
            _ => (1970, self.max_year),
        };
        if stop == -1 {
            stop = last;
        }
        if start == -1 || start == ALL_SPEC {
            start = first;
        }
        let mut max = -1;
        if stop < start {
            max = match ty {
                SECOND | MINUTE => 60,
                HOUR => 24,
                MONTH => 12,
                DAY_OF_WEEK => 7,
                DAY_OF_MONTH => 31,
                _ => return Err("a year range must not end before it starts".to_string()),
            };
            stop += max;
        }
        // Years past the last one Quartz searches are never reached; a range
        // such as `2030-2147483647` stops there instead of filling memory.
        let limit = if ty == YEAR {
            stop.min(LAST_SEARCHED_YEAR + 1)
        } else {
            stop
        };
        let mut i = start;
        while i <= limit {
            if max == -1 {
                set.insert(i);
            } else {
                let mut wrapped = i % max;
                if wrapped == 0 && matches!(ty, MONTH | DAY_OF_WEEK | DAY_OF_MONTH) {
                    wrapped = max;
                }
                set.insert(wrapped);
            }
            i += incr;
        }
        Ok(())
    }

    /// The first fire strictly after `after_ms` (Quartz's `getTimeAfter`:
    /// the search starts one second later, milliseconds cleared), in `zone`.
    /// `None` when the expression fires no more.
    pub fn next_after(&self, zone: Tz, after_ms: i64) -> Option<i64> {
        let zone = wall_clock_zone(zone)?;
        let after_time = after_ms.checked_add(1000)?;
        let mut cl = Cal::at(zone, after_time.div_euclid(1000))?;
        let [seconds, minutes, hours, doms, months, dows, years] = &self.sets;
        for _ in 0..MAX_STEPS {
            if cl.get(YEAR)? > LAST_SEARCHED_YEAR {
                return None;
            }
            let mut sec = cl.get(SECOND)?;
            let mut min = cl.get(MINUTE)?;

            // second
            match at_least(seconds, sec) {
                Some(s) => sec = s,
                None => {
                    sec = *seconds.first()?;
                    min += 1;
                    cl.set(MINUTE, min);
                }
            }
            cl.set(SECOND, sec);

            // minute
            min = cl.get(MINUTE)?;
            let mut hr = cl.get(HOUR)?;
            let mut t = -1;
            match at_least(minutes, min) {
                Some(m) => {
                    t = min;
                    min = m;
                }
                None => {
                    min = *minutes.first()?;
                    hr += 1;
                }
            }
            if min != t {
                cl.set(SECOND, 0);
                cl.set(MINUTE, min);
                cl.set_hour(hr)?;
                continue;
            }
            cl.set(MINUTE, min);

            // hour
            hr = cl.get(HOUR)?;
            let mut day = cl.get(DAY_OF_MONTH)?;
            t = -1;
            match at_least(hours, hr) {
                Some(h) => {
                    t = hr;
                    hr = h;
                }
                None => {
                    hr = *hours.first()?;
                    day += 1;
                }
            }
            if hr != t {
                cl.set(SECOND, 0);
                cl.set(MINUTE, 0);
                cl.set(DAY_OF_MONTH, day);
                cl.set_hour(hr)?;
                continue;
            }
            cl.set(HOUR, hr);

            // day
            day = cl.get(DAY_OF_MONTH)?;
            let mut mon = cl.get(MONTH)? + 1;
            t = -1;
            let mut tmon = mon;
            let dom_spec = !doms.contains(&NO_SPEC);
            let dow_spec = !dows.contains(&NO_SPEC);
            if dom_spec && !dow_spec {
                if self.lastday_of_month {
                    t = day;
                    day = last_day_of_month(mon, cl.get(YEAR)?)? - self.lastday_offset;
                    if !self.nearest_weekday {
                        if t > day {
                            mon += 1;
                            if mon > 12 {
                                mon = 1;
                                tmon = 3333;
                                cl.add_year()?;
                            }
                            day = 1;
                        }
                    } else {
                        let (weekday, before) =
                            self.nearest_weekday_of(&cl, mon, day, (hr, min, sec), after_time)?;
                        day = weekday;
                        if before {
                            day = 1;
                            mon += 1;
                        }
                    }
                } else if self.nearest_weekday {
                    t = day;
                    day = *doms.first()?;
                    let (weekday, before) =
                        self.nearest_weekday_of(&cl, mon, day, (hr, min, sec), after_time)?;
                    day = weekday;
                    if before {
                        day = *doms.first()?;
                        mon += 1;
                    }
                } else if let Some(d) = at_least(doms, day) {
                    t = day;
                    day = d;
                    if day > last_day_of_month(mon, cl.get(YEAR)?)? {
                        day = *doms.first()?;
                        mon += 1;
                    }
                } else {
                    day = *doms.first()?;
                    mon += 1;
                }
                if day != t || mon != tmon {
                    cl.start_of_day(day, mon - 1);
                    continue;
                }
            } else if dow_spec && !dom_spec {
                let c_dow = cl.day_of_week()?;
                let year = cl.get(YEAR)?;
                if self.lastday_of_week {
                    let dow = *dows.first()?;
                    let mut add = days_to(c_dow, dow);
                    let l_day = last_day_of_month(mon, year)?;
                    if day + add > l_day {
                        cl.start_of_day(1, mon);
                        continue;
                    }
                    while day + add + 7 <= l_day {
                        add += 7;
                    }
                    day += add;
                    if add > 0 {
                        cl.start_of_day(day, mon - 1);
                        continue;
                    }
                } else if self.nthday_of_week != 0 {
                    let dow = *dows.first()?;
                    let add = days_to(c_dow, dow);
                    let shifted = add > 0;
                    day += add;
                    let mut week_of_month = day / 7;
                    if day % 7 > 0 {
                        week_of_month += 1;
                    }
                    let add = (self.nthday_of_week - week_of_month) * 7;
                    day += add;
                    if add < 0 || day > last_day_of_month(mon, year)? {
                        cl.start_of_day(1, mon);
                        continue;
                    } else if add > 0 || shifted {
                        cl.start_of_day(day, mon - 1);
                        continue;
                    }
                } else {
                    let dow = at_least(dows, c_dow).or_else(|| dows.first().copied())?;
                    let add = days_to(c_dow, dow);
                    if day + add > last_day_of_month(mon, year)? {
                        cl.start_of_day(1, mon);
                        continue;
                    } else if add > 0 {
                        cl.start_of_day(day + add, mon - 1);
                        continue;
                    }
                }
            } else {
                return None;
            }
            cl.set(DAY_OF_MONTH, day);

            // month
            mon = cl.get(MONTH)? + 1;
            let mut year = cl.get(YEAR)?;
            t = -1;
            if year > self.max_year {
                return None;
            }
            match at_least(months, mon) {
                Some(m) => {
                    t = mon;
                    mon = m;
                }
                None => {
                    mon = *months.first()?;
                    year += 1;
                }
            }
            if mon != t {
                cl.start_of_day(1, mon - 1);
                cl.set(YEAR, year);
                continue;
            }
            cl.set(MONTH, mon - 1);

            // year
            let t = cl.get(YEAR)?;
            let year = at_least(years, t)?;
            if year != t {
                cl.start_of_day(1, 0);
                cl.set(YEAR, year);
                continue;
            }
            cl.set(YEAR, year);
            return cl.time().map(|secs| secs * 1000);
        }
        None
    }

    /// The `W` day Quartz picks for `day` of month `mon` (1-based) in
    /// `cl`'s year, and whether that fire, at `hms`, is before the search
    /// start (so the next month is looked at). Quartz does this on a second
    /// calendar whose year is read once, before the day is normalised.
    fn nearest_weekday_of(
        &self,
        cl: &Cal,
        mon: i64,
        day: i64,
        (hr, min, sec): (i64, i64, i64),
        after_time_ms: i64,
    ) -> Option<(i64, bool)> {
        let mut cl = cl.clone();
        let year = cl.get(YEAR)?;
        let mut tcal = cl.clone();
        tcal.set(SECOND, 0);
        tcal.set(MINUTE, 0);
        tcal.set(HOUR, 0);
        tcal.set(DAY_OF_MONTH, day);
        tcal.set(MONTH, mon - 1);
        tcal.set(YEAR, year);
        let ldom = last_day_of_month(mon, year)?;
        let dow = tcal.day_of_week()?;
        let mut day = day;
        if dow == 7 && day == 1 {
            day += 2;
        } else if dow == 7 {
            day -= 1;
        } else if dow == 1 && day == ldom {
            day -= 2;
        } else if dow == 1 {
            day += 1;
        }
        tcal.set(SECOND, sec);
        tcal.set(MINUTE, min);
        tcal.set(HOUR, hr);
        tcal.set(DAY_OF_MONTH, day);
        tcal.set(MONTH, mon - 1);
        let n_time = tcal.time()? * 1000;
        Some((day, n_time < after_time_ms))
    }
}

/// `java.util.GregorianCalendar` as Quartz uses it: lenient fields
/// (year, month 0-11, day, hour, minute, second; milliseconds are always 0)
/// that are normalised, through the instant they name, when one is read.
#[derive(Debug, Clone)]
struct Cal {
    zone: TimeZone,
    /// Indexed by SECOND..YEAR; DAY_OF_WEEK is derived, never stored.
    fields: [i64; 7],
    dirty: bool,
}

impl Cal {
    /// A calendar set to the instant `secs`, then touched (Quartz clears
    /// the milliseconds), so the first read goes through the wall-clock
    /// rule.
    fn at(zone: TimeZone, secs: i64) -> Option<Cal> {
        let fields = fields_of(&zone, secs)?;
        Some(Cal {
            zone,
            fields,
            dirty: true,
        })
    }

    fn set(&mut self, field: usize, value: i64) {
        self.fields[field] = value;
        self.dirty = true;
    }

    fn get(&mut self, field: usize) -> Option<i64> {
        self.complete()?;
        Some(self.fields[field])
    }

    /// Calendar.DAY_OF_WEEK: 1 = Sunday … 7 = Saturday.
    fn day_of_week(&mut self) -> Option<i64> {
        self.complete()?;
        let [_, _, _, day, month, _, year] = self.fields;
        let date = NaiveDate::from_ymd_opt(year as i32, month as u32 + 1, day as u32)?;
        Some(date.weekday().number_from_sunday() as i64)
    }

    fn complete(&mut self) -> Option<()> {
        if self.dirty {
            let secs = self.time()?;
            self.fields = fields_of(&self.zone, secs)?;
            self.dirty = false;
        }
        Some(())
    }

    /// Quartz's `setCalendarHour`: an hour that the zone skips that day is
    /// read as the hour after it.
    fn set_hour(&mut self, hour: i64) -> Option<()> {
        self.set(HOUR, hour);
        if self.get(HOUR)? != hour && hour != 24 {
            self.set(HOUR, hour + 1);
        }
        Some(())
    }

    /// Seconds, minutes and hours to 0, then the day and the (0-based,
    /// lenient) month: the way Quartz moves to the start of a later day.
    fn start_of_day(&mut self, day: i64, month0: i64) {
        self.set(SECOND, 0);
        self.set(MINUTE, 0);
        self.set(HOUR, 0);
        self.set(DAY_OF_MONTH, day);
        self.set(MONTH, month0);
    }

    /// `add(YEAR, 1)`: normalise, add, and pin the day to the month's end.
    fn add_year(&mut self) -> Option<()> {
        self.complete()?;
        self.fields[YEAR] += 1;
        let last = last_day_of_month(self.fields[MONTH] + 1, self.fields[YEAR])?;
        self.fields[DAY_OF_MONTH] = self.fields[DAY_OF_MONTH].min(last);
        self.dirty = true;
        Some(())
    }

    /// The instant (epoch seconds) the fields name: lenient normalisation
    /// of the wall-clock fields, then Java's rule for skipped and repeated
    /// wall times.
    fn time(&self) -> Option<i64> {
        let [sec, min, hour, day, month, _, year] = self.fields;
        let year = year.checked_add(month.div_euclid(12))?;
        let month = month.rem_euclid(12);
        let first = NaiveDate::from_ymd_opt(i32::try_from(year).ok()?, month as u32 + 1, 1)?;
        let date = first.checked_add_signed(Duration::try_days(day.checked_sub(1)?)?)?;
        let of_day = hour
            .checked_mul(3600)?
            .checked_add(min.checked_mul(60)?)?
            .checked_add(sec)?;
        let wall = date
            .and_hms_opt(0, 0, 0)?
            .checked_add_signed(Duration::try_seconds(of_day)?)?;
        wall_to_instant(&self.zone, wall)
    }
}

/// The zone's rules for the wall-clock maths. jiff goes on with a zone's
/// current daylight-saving rule past 2037, as Java does; chrono-tz (which
/// names the zone everywhere else in rondo) stops there.
pub fn wall_clock_zone(zone: Tz) -> Option<TimeZone> {
    TimeZone::get(zone.name()).ok()
}

/// Java's reading of a wall-clock time in a zone: a repeated wall time is
/// read with the offset after the change (the later instant), a skipped one
/// with the offset in force before the change (so it lands after the gap).
fn wall_to_instant(zone: &TimeZone, wall: NaiveDateTime) -> Option<i64> {
    let civil = jiff::civil::DateTime::new(
        i16::try_from(wall.year()).ok()?,
        wall.month() as i8,
        wall.day() as i8,
        wall.hour() as i8,
        wall.minute() as i8,
        wall.second() as i8,
        0,
    )
    .ok()?;
    let offset = match zone.to_ambiguous_timestamp(civil).offset() {
        AmbiguousOffset::Unambiguous { offset } => offset,
        AmbiguousOffset::Gap { before, .. } => before,
        AmbiguousOffset::Fold { after, .. } => after,
    };
    Some(wall.and_utc().timestamp() - offset.seconds() as i64)
}

fn fields_of(zone: &TimeZone, secs: i64) -> Option<[i64; 7]> {
    let at = zone.to_datetime(jiff::Timestamp::from_second(secs).ok()?);
    Some([
        at.second() as i64,
        at.minute() as i64,
        at.hour() as i64,
        at.day() as i64,
        at.month() as i64 - 1,
        0,
        at.year() as i64,
    ])
}

/// Lists Quartz accepts but reads as their smallest day only.
fn lists_quartz_misreads(field: usize, expr: &str) -> Result<(), String> {
    if field == DAY_OF_WEEK && expr.contains('#') && expr.contains(',') {
        return Err(
            "'#' cannot be combined with other days of the week (Quartz would use only the smallest)"
                .to_string(),
        );
    }
    if field == DAY_OF_MONTH && expr.contains('W') && expr.contains(',') {
        return Err(
            "'W' cannot be combined with other days of the month (Quartz would use only the smallest)"
                .to_string(),
        );
    }
    Ok(())
}

/// Days from weekday `from` forward to weekday `to` (both 1-7), as Quartz
/// counts them.
fn days_to(from: i64, to: i64) -> i64 {
    if from < to {
        to - from
    } else if from > to {
        to + (7 - from)
    } else {
        0
    }
}

fn at_least(set: &BTreeSet<i64>, value: i64) -> Option<i64> {
    set.range(value..).next().copied()
}

fn last_day_of_month(month: i64, year: i64) -> Option<i64> {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    Some(match month {
        1 | 3 | 5 | 7 | 8 | 10 | 12 => 31,
        4 | 6 | 9 | 11 => 30,
        2 if leap => 29,
        2 => 28,
        _ => return None,
    })
}

/// Quartz's `checkIncrementRange`.
fn check_increment_range(incr: i64, ty: usize) -> Result<(), String> {
    let max = match ty {
        SECOND | MINUTE => 59,
        HOUR => 23,
        DAY_OF_MONTH => 31,
        DAY_OF_WEEK => 7,
        MONTH => 12,
        _ => return Ok(()),
    };
    if incr > max {
        return Err(format!(
            "the increment {incr} is larger than the field allows ({max})"
        ));
    }
    Ok(())
}

/// `L-<digits>` optionally followed by `W`: Quartz's `^L-[0-9]*[W]?`.
fn is_last_offset(s: &[u8]) -> bool {
    let Some(rest) = s.strip_prefix(b"L-") else {
        return false;
    };
    let rest = rest.strip_suffix(b"W").unwrap_or(rest);
    rest.iter().all(u8::is_ascii_digit)
}

fn slice(s: &[u8], from: usize, to: usize) -> Result<&[u8], String> {
    s.get(from..to)
        .ok_or_else(|| format!("{:?} is cut short", text(s)))
}

fn text(s: &[u8]) -> String {
    String::from_utf8_lossy(s).into_owned()
}

fn month_number(name: &[u8]) -> i64 {
    MONTHS
        .iter()
        .position(|m| m.as_bytes() == name)
        .map_or(-1, |p| p as i64)
}

fn day_number(name: &[u8]) -> i64 {
    DAYS.iter()
        .position(|d| d.as_bytes() == name)
        .map_or(-1, |p| p as i64 + 1)
}

/// The number after `#` (Quartz parses the rest of the part), 1 to 5.
fn nth_after(s: &[u8], from: usize) -> Result<i64, String> {
    let nth = s
        .get(from..)
        .and_then(|rest| java_parse_int(rest).ok())
        .filter(|n| (1..=5).contains(n));
    nth.ok_or_else(|| "a number between 1 and 5 must follow '#'".to_string())
}

/// `Integer.parseInt(String.valueOf(c))` of the character at `i`.
fn single_digit(s: &[u8], i: usize) -> Result<i64, String> {
    match s.get(i) {
        Some(c) if c.is_ascii_digit() => Ok((c - b'0') as i64),
        Some(c) => Err(format!("expected a digit, found {:?}", *c as char)),
        None => Err(format!("{:?} ends where a number was expected", text(s))),
    }
}

/// Quartz's `getValue`: `v` followed by the digits from `i`; the position
/// after them (Quartz's quirk: one past the end when they end the part).
fn get_value(v: i64, s: &[u8], i: usize) -> Result<(i64, usize), String> {
    if i >= s.len() {
        return Err(format!("{:?} ends where a number was expected", text(s)));
    }
    let mut digits = v.to_string();
    let mut i = i;
    while i < s.len() && s[i].is_ascii_digit() {
        digits.push(s[i] as char);
        i += 1;
    }
    let value = java_parse_int(digits.as_bytes())?;
    let pos = if i < s.len() { i } else { i + 1 };
    Ok((value, pos))
}

/// `Integer.parseInt`: an optional sign and ASCII digits that fit an `int`.
fn java_parse_int(s: &[u8]) -> Result<i64, String> {
    let bad = || format!("{:?} is not a number", text(s));
    let digits = match s.first() {
        Some(b'-') | Some(b'+') => &s[1..],
        _ => s,
    };
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return Err(bad());
    }
    let value: i64 = text(s).parse().map_err(|_| bad())?;
    if value < i32::MIN as i64 || value > i32::MAX as i64 {
        return Err(bad());
    }
    Ok(value)
}

#[cfg(test)]
mod tests;
