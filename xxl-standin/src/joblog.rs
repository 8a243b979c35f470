//! Files on disk: the per-run job logs (`<log-path>/<yyyy-MM-dd>/<logId>.log`),
//! reading them back for `/log`, and the runs file the tests count from.
//!
//! Writes are synchronous, each one `write` on a file opened for append: a
//! line is never torn, and tokio's paused clock is not disturbed by blocking
//! pool hops.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use chrono::{Local, TimeZone};
use serde::Serialize;
use tracing::warn;

use crate::wire::{LogChunk, Trigger};

/// Appends `line` plus "\n" in one write, creating the parent directory.
pub fn append_line(path: &Path, line: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir)?;
    }
    let mut file = OpenOptions::new().create(true).append(true).open(path)?;
    let mut buf = String::with_capacity(line.len() + 1);
    buf.push_str(line);
    buf.push('\n');
    file.write_all(buf.as_bytes())
}

pub fn now_ms() -> i64 {
    chrono::Utc::now().timestamp_millis()
}

/// The layout under `--log-path`.
#[derive(Clone, Debug)]
pub struct LogDir {
    root: PathBuf,
}

impl LogDir {
    pub fn new(root: PathBuf) -> Self {
        LogDir { root }
    }

    /// `<root>/<yyyy-MM-dd of logDateTime, local zone>/<logId>.log`
    pub fn run_log(&self, log_date_time: i64, log_id: i64) -> PathBuf {
        let day = Local
            .timestamp_millis_opt(log_date_time)
            .earliest()
            .unwrap_or_else(Local::now)
            .format("%Y-%m-%d")
            .to_string();
        self.root.join(day).join(format!("{log_id}.log"))
    }

    pub fn glue_sources(&self) -> PathBuf {
        self.root.join("gluesource")
    }

    pub fn failed_callbacks(&self) -> PathBuf {
        self.root.join("callbacklogs")
    }

    /// The lines of a run's log from `from` (1-based) to the end.
    pub fn read(&self, log_date_time: i64, log_id: i64, from: i32) -> LogChunk {
        let Ok(bytes) = fs::read(self.run_log(log_date_time, log_id)) else {
            return LogChunk {
                from_line_num: from,
                to_line_num: 0,
                log_content: "readLog fail, logFile not exists".into(),
                is_end: true,
            };
        };
        let text = String::from_utf8_lossy(&bytes);
        let mut content = String::new();
        let mut to = 0;
        for (number, line) in (1..).zip(text.lines()) {
            if number >= from {
                content.push_str(line);
                content.push('\n');
                to = number;
            }
        }
        LogChunk {
            from_line_num: from,
            to_line_num: to,
            log_content: content,
            is_end: false,
        }
    }
}

/// One run's log, as XxlJobHelper.log writes it: a timestamp, the calling
/// place, the thread name, the message.
#[derive(Clone, Debug)]
pub struct RunLog {
    path: PathBuf,
    thread: String,
}

impl RunLog {
    pub fn new(path: PathBuf, thread: String) -> Self {
        RunLog { path, thread }
    }

    /// `origin` is `class#method` and `line` a source line, both only for show.
    pub fn log(&self, origin: &str, line: u32, msg: &str) {
        let stamp = Local::now().format("%Y-%m-%d %H:%M:%S");
        self.raw(&format!(
            "{stamp} [{origin}]-[{line}]-[{}] {msg}",
            self.thread
        ));
    }

    /// A line as is (a script's output).
    pub fn raw(&self, line: &str) {
        if let Err(e) = append_line(&self.path, line) {
            warn!(path = %self.path.display(), error = %e, "job log write failed");
        }
    }
}

/// `--runs-file`: one JSON line per handler start and end.
#[derive(Clone, Debug)]
pub struct RunsFile {
    path: Option<PathBuf>,
}

impl RunsFile {
    pub fn new(path: Option<PathBuf>) -> Self {
        RunsFile { path }
    }

    pub fn start(&self, t: &Trigger) {
        self.write(&RunEvent::Start {
            log_id: t.log_id,
            log_date_time: t.log_date_time,
            job_id: t.job_id,
            handler: t.executor_handler.as_deref(),
            params: t.executor_params.as_deref(),
            glue_type: t.glue_type.as_deref(),
            broadcast_index: t.broadcast_index,
            broadcast_total: t.broadcast_total,
            ms: now_ms(),
        });
    }

    pub fn end(&self, t: &Trigger, code: i32, msg: Option<&str>) {
        self.write(&RunEvent::End {
            log_id: t.log_id,
            job_id: t.job_id,
            code,
            msg,
            ms: now_ms(),
        });
    }

    fn write(&self, event: &RunEvent<'_>) {
        let Some(path) = &self.path else { return };
        let written = serde_json::to_string(event)
            .map_err(std::io::Error::other)
            .and_then(|line| append_line(path, &line));
        if let Err(e) = written {
            warn!(path = %path.display(), error = %e, "runs file write failed");
        }
    }
}

/// One line of the runs file.
#[derive(Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
enum RunEvent<'a> {
    Start {
        log_id: i64,
        /// The run's `logDateTime` (rondo sends the fire instant).
        log_date_time: i64,
        job_id: i32,
        handler: Option<&'a str>,
        params: Option<&'a str>,
        glue_type: Option<&'a str>,
        broadcast_index: i32,
        broadcast_total: i32,
        ms: i64,
    },
    End {
        log_id: i64,
        job_id: i32,
        code: i32,
        msg: Option<&'a str>,
        ms: i64,
    },
}

#[cfg(test)]
pub mod testdir {
    use std::path::PathBuf;
    use std::sync::atomic::{AtomicU32, Ordering};

    /// A fresh directory under the workspace's `target/tmp` (build output,
    /// not the machine's temp dir; left there for a failing test's reader).
    pub fn fresh(tag: &str) -> PathBuf {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let base = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/tmp");
        let dir = base.join(format!(
            "xxl-standin-{tag}-{}-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed),
            super::now_ms()
        ));
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_from_a_line() {
        let dir = LogDir::new(testdir::fresh("read"));
        let date = 1_700_000_000_000;
        let missing = dir.read(date, 9, 1);
        assert!(missing.is_end);
        assert_eq!(missing.log_content, "readLog fail, logFile not exists");
        let log = RunLog::new(dir.run_log(date, 9), "xxl-job, JobThread-1".into());
        log.log("a.B#c", 1, "one");
        log.raw("two");
        log.raw("three");
        let all = dir.read(date, 9, 1);
        assert_eq!((all.to_line_num, all.is_end), (3, false));
        assert!(all.log_content.ends_with("] one\ntwo\nthree\n"));
        assert!(
            all.log_content
                .contains(" [a.B#c]-[1]-[xxl-job, JobThread-1] one")
        );
        let tail = dir.read(date, 9, 2);
        assert_eq!(
            (tail.log_content.as_str(), tail.to_line_num),
            ("two\nthree\n", 3)
        );
        let past = dir.read(date, 9, 4);
        assert_eq!((past.log_content.as_str(), past.to_line_num), ("", 0));
        let day = Local
            .timestamp_millis_opt(date)
            .earliest()
            .expect("date")
            .format("%Y-%m-%d")
            .to_string();
        assert!(dir.run_log(date, 9).ends_with(format!("{day}/9.log")));
    }

    #[test]
    fn runs_file_lines() {
        let path = testdir::fresh("runs").join("runs.jsonl");
        let runs = RunsFile::new(Some(path.clone()));
        let t = Trigger {
            job_id: 3,
            log_id: 7,
            log_date_time: 1_700_000_000_000,
            executor_handler: Some("demoJobHandler".into()),
            glue_type: Some("BEAN".into()),
            broadcast_total: 1,
            ..Trigger::default()
        };
        runs.start(&t);
        runs.end(&t, 200, None);
        let text = fs::read_to_string(&path).expect("runs file");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with(
            r#"{"event":"start","log_id":7,"log_date_time":1700000000000,"job_id":3,"handler":"demoJobHandler","params":null,"glue_type":"BEAN","broadcast_index":0,"broadcast_total":1,"ms":"#
        ));
        assert!(
            lines[1]
                .starts_with(r#"{"event":"end","log_id":7,"job_id":3,"code":200,"msg":null,"ms":"#)
        );
    }
}
