//! A run's log lines, read from its executor (`/log`, page by page from a
//! line number) and shipped as rondo's `log.lines` events, so the console's
//! live tail works for Java jobs too.
//!
//! * While a run waits for its callback, the instance that handed it off
//!   reads its log every `xxl.log_poll_ms` (a run that ends sooner costs no
//!   read before its callback).
//! * After its callback, the instance that handled the callback reads the
//!   rest once.
//!
//! Line `n` of the executor's file (1-based) is rondo's line `n - 1`, so a
//! line read twice (by both) is stored once. XXL-JOB writes `<br>` markup
//! inside its lines; it becomes line breaks, never HTML. A line's time is
//! the timestamp it starts with, read in the cluster's zone (where the
//! executors are expected to run), else when it was read.

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeZone;
use rondo_core::event::{Event, LogLine, LogLines};
use rondo_core::{Error, clock};
use tokio_util::sync::CancellationToken;

use crate::ctx::Ctx;
use crate::runs::Run;
use crate::tails::Tail;

/// Lines per event at most (as rondo's executors).
const LINES_PER_EVENT: usize = 500;
/// Pages read for one run in one go at most.
const MAX_PAGES: usize = 20;
/// XXL-JOB answers a run's whole log from the line asked for; a page this
/// long may have been cut (a fork that pages), so the next one is read.
const FULL_PAGE_LINES: i32 = 1_000;
/// The longest line kept (as rondo's executors).
const MAX_LINE_BYTES: usize = 16 * 1024;

/// Reads what is left of a run's log after its callback (in the
/// background: the callback is answered first).
pub(crate) fn after_callback(ctx: &Arc<Ctx>, run: Run) {
    let from = ctx.tails.take(run.log_id).unwrap_or(1);
    let ctx = ctx.clone();
    let guarded = ctx.clone();
    tokio::spawn(guarded.guard("log shipping", async move {
        if let Err(e) = ship(&ctx, &run, from).await {
            tracing::warn!(trigger_id = %run.trigger_id, error = %e, "cannot read the run's log from its executor");
        }
    }));
}

/// Reads the logs of the runs this instance tails, every `xxl.log_poll_ms`,
/// until `stop`.
pub(crate) async fn tail(ctx: Arc<Ctx>, stop: CancellationToken) {
    let period = Duration::from_millis(ctx.xxl.log_poll_ms);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(period) => {}
        }
        let due = ctx.tails.due(clock::now_ms() - period.as_millis() as i64);
        if let Err(e) = tail_once(&ctx, due).await {
            tracing::warn!(error = %e, "cannot read running logs");
        }
    }
}

async fn tail_once(ctx: &Ctx, due: Vec<Tail>) -> Result<(), Error> {
    let ids: Vec<i64> = due.iter().map(|t| t.run.log_id).collect();
    let live = ctx.runs.runs(&ids).await?;
    for (tail, run) in due.into_iter().zip(live) {
        if run.is_none_or(|r| r.answered) {
            // Called back elsewhere (or answered): its log is read there.
            ctx.tails.take(tail.run.log_id);
            continue;
        }
        match ship(ctx, &tail.run, tail.next_line).await {
            Ok(next) => ctx.tails.advance(tail.run.log_id, next),
            Err(e) => {
                tracing::debug!(trigger_id = %tail.run.trigger_id, error = %e, "cannot read a running log")
            }
        }
    }
    Ok(())
}

/// Reads `run`'s log from line `from` to its end and publishes it; the next
/// line to read.
async fn ship(ctx: &Ctx, run: &Run, mut from: i32) -> Result<i32, Error> {
    let target = match ctx.fleet.get(&run.executor_id) {
        Some(served) => served.target(),
        // Not served here (yet, or any more): its record says where it is.
        None => match ctx.executors.get(&run.executor_id).await? {
            Some(record) => crate::client::Target {
                token: ctx.access.token_for(&record.app, &record.token_fp),
                address: record.address,
                app: record.app,
                generation: record.generation.unwrap_or(crate::wire::Generation::Two),
            },
            None => return Ok(from),
        },
    };
    for _ in 0..MAX_PAGES {
        let page = ctx
            .client
            .log(&target, run.log_id, run.log_date_ms, from)
            .await
            .map_err(|e| Error::unavailable(e.to_string()))?;
        let Some(page) = page else { break };
        if page.to_line_num < from || (page.is_end && page.to_line_num == 0) {
            break;
        }
        let content = page.log_content.unwrap_or_default();
        let wanted = (page.to_line_num - from + 1) as usize;
        let lines = lines_of(&content, wanted, ctx.zone);
        let first_seq = (from - 1) as u32;
        publish(ctx, run, first_seq, lines).await?;
        let read = page.to_line_num - from + 1;
        from = page.to_line_num.saturating_add(1);
        if read < FULL_PAGE_LINES {
            break;
        }
    }
    Ok(from)
}

async fn publish(ctx: &Ctx, run: &Run, first_seq: u32, lines: Vec<LogLine>) -> Result<(), Error> {
    let masker = run.masker();
    let lines: Vec<LogLine> = lines
        .into_iter()
        .map(|l| LogLine {
            text: masker.mask(l.text),
            ..l
        })
        .collect();
    let events: Vec<Event> = lines
        .chunks(LINES_PER_EVENT)
        .enumerate()
        .map(|(i, chunk)| {
            Event::Log(LogLines {
                trigger_id: run.trigger_id.clone(),
                job_id: run.job_id,
                first_seq: first_seq + (i * LINES_PER_EVENT) as u32,
                lines: chunk.to_vec(),
            })
        })
        .collect();
    ctx.events.publish(&events).await
}

/// The first `wanted` lines of a page, as rondo's log lines.
fn lines_of(content: &str, wanted: usize, zone: chrono_tz::Tz) -> Vec<LogLine> {
    let now = clock::now_ms();
    content
        .split('\n')
        .take(wanted)
        .map(|line| {
            let line = line.strip_suffix('\r').unwrap_or(line);
            LogLine {
                ts_ms: stamp(line, zone).unwrap_or(now),
                text: cut(crate::wire::plain(line)),
            }
        })
        .collect()
}

/// The time a line of XXL-JOB's starts with (`yyyy-MM-dd HH:mm:ss`).
fn stamp(line: &str, zone: chrono_tz::Tz) -> Option<i64> {
    let head = line.get(..19)?;
    let naive = chrono::NaiveDateTime::parse_from_str(head, "%Y-%m-%d %H:%M:%S").ok()?;
    Some(
        zone.from_local_datetime(&naive)
            .earliest()?
            .timestamp_millis(),
    )
}

fn cut(mut text: String) -> String {
    if text.len() > MAX_LINE_BYTES {
        text = rondo_core::model::clip(&text, MAX_LINE_BYTES, "…");
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_plain_text_stamped_by_their_own_time() {
        let content = "2026-11-27 03:36:42 [JobThread#run]-[133]-[t] <br>----------- xxl-job job execute start -----------<br>----------- Param:p1\r\nshell output\nnot read\n";
        let lines = lines_of(content, 2, chrono_tz::Asia::Shanghai);
        assert_eq!(lines.len(), 2);
        assert_eq!(
            lines[0].text,
            "2026-11-27 03:36:42 [JobThread#run]-[133]-[t] \n----------- xxl-job job execute start -----------\n----------- Param:p1"
        );
        // 03:36:42 in Shanghai is 19:36:42 UTC the day before.
        assert_eq!(lines[0].ts_ms, 1_795_721_802_000);
        assert_eq!(lines[1].text, "shell output");
        assert!(lines[1].ts_ms > lines[0].ts_ms, "read now");
    }

    #[test]
    fn long_lines_are_cut() {
        let long = cut("x".repeat(MAX_LINE_BYTES + 10));
        assert!(long.len() <= MAX_LINE_BYTES && long.ends_with('…'));
    }
}
