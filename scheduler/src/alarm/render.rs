//! What an alarm says: the mail's subject and body, the webhook's JSON
//! body, and the formatting helpers they share.

use lettre::Message;
use lettre::message::header::ContentType;
use lettre::message::{Mailbox, MessageBuilder};
use rondo_core::Job;
use rondo_core::trigger::code;
use serde::Serialize;

use super::failure::Failure;

/// `msg` and `params` are clipped to this many bytes in mails and webhook
/// bodies (a stack trace stays readable, a mail stays small).
pub const MAX_FIELD_BYTES: usize = 16 * 1024;
/// The version of the webhook body (its `v`).
pub const WEBHOOK_BODY_VERSION: u8 = 1;

const CLIPPED: &str = " …[truncated]";

/// Everything an alarm says, for both channels.
pub(super) struct Report<'a> {
    pub(super) job: &'a Job,
    pub(super) failure: &'a Failure,
    pub(super) sent_ms: i64,
}

impl Report<'_> {
    /// The job as people know it: its description, else its handler.
    pub(super) fn job_name(&self) -> &str {
        match self.job.description.trim() {
            "" => &self.job.handler,
            description => description,
        }
    }

    fn subject(&self) -> String {
        format!(
            "rondo alarm: job {} ({}) failed",
            self.job.id,
            one_line(self.job_name())
        )
    }

    /// ` (and N more failures of the job)` when failures were folded in.
    pub(super) fn folded(&self) -> String {
        match self.failure.failures {
            0 | 1 => String::new(),
            n => format!(" (and {} more failures of the job)", n - 1),
        }
    }

    /// The one-line summary (the webhook's `text`).
    fn summary(&self) -> String {
        let f = self.failure;
        let executor = match f.executor_id.as_str() {
            "" => "no executor",
            id => id,
        };
        format!(
            "{}: trigger {} on {executor}, code {}: {}{}",
            self.subject(),
            f.trigger_id,
            f.code,
            one_line(&clip(&f.msg, 300)),
            self.folded(),
        )
    }
}

pub(super) fn mail_message(
    from: &Mailbox,
    to: &[Mailbox],
    report: &Report<'_>,
) -> Result<Message, String> {
    let builder: MessageBuilder = to
        .iter()
        .fold(Message::builder().from(from.clone()), |b, mailbox| {
            b.to(mailbox.clone())
        });
    builder
        .subject(report.subject())
        .header(ContentType::TEXT_PLAIN)
        .body(mail_text(report))
        .map_err(|e| e.to_string())
}

/// The mail body: XXL-JOB's alarm table (group, job, alarm type, content)
/// as text, plus the trigger's details.
fn mail_text(report: &Report<'_>) -> String {
    let (job, f) = (report.job, report.failure);
    let executor = match f.executor_id.as_str() {
        "" => "(none: the trigger never reached an executor)",
        id => id,
    };
    let kind = match f.executor_id.as_str() {
        "" => "trigger failed",
        _ => "run failed",
    };
    let params = match f.params.as_str() {
        "" => "(none)".to_owned(),
        params => clip(params, MAX_FIELD_BYTES),
    };
    let lines = [
        format!("A trigger of job {} failed.", job.id),
        String::new(),
        format!("Group:        {}", job.group),
        format!("Job:          {} ({})", job.id, one_line(report.job_name())),
        format!("Handler:      {}", job.handler),
        format!("Alarm type:   {kind}"),
        format!("Trigger id:   {}", f.trigger_id),
        format!("Fire time:    {} ({} ms)", utc(f.fire_ms), f.fire_ms),
        format!("Executor:     {executor}"),
        format!("Retry count:  {}", f.retry_count),
        format!(
            "Failures:     {} (this one and those folded into this alarm)",
            f.failures
        ),
        format!("Code:         {} ({})", f.code, code_name(f.code)),
        String::new(),
        "Message:".to_owned(),
        clip(&f.msg, MAX_FIELD_BYTES),
        String::new(),
        "Params:".to_owned(),
        params,
        String::new(),
        "-- ".to_owned(),
        format!(
            "Sent by rondo at {} to the job's alarm_email.",
            utc(report.sent_ms)
        ),
    ];
    lines.join("\n")
}

/// The webhook's JSON body (see the module docs).
#[derive(Debug, Serialize)]
pub(super) struct WebhookBody<'a> {
    v: u8,
    text: String,
    job_id: u64,
    job_description: &'a str,
    group: &'a str,
    handler: &'a str,
    trigger_id: &'a str,
    fire_ms: i64,
    fire_time: String,
    executor_id: &'a str,
    code: i32,
    msg: String,
    params: String,
    retry_count: u32,
    /// The job's failures this alarm stands for (1, or more when alarms
    /// of the job were throttled and folded into it).
    failures: u32,
    sent_ms: i64,
}

/// `&`, `<` and `>` as Slack's mrkdwn shows them literally (its
/// documented escaping), so text cannot become a mention or a link.
pub(super) fn slack_escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

pub(super) fn webhook_body<'a>(report: &'a Report<'a>) -> WebhookBody<'a> {
    let (job, f) = (report.job, report.failure);
    WebhookBody {
        v: WEBHOOK_BODY_VERSION,
        // For Slack-style incoming webhooks: shown literally there (a
        // job's output cannot mention `<!channel>` or disguise a link);
        // the other fields are as they are.
        text: slack_escape(&report.summary()),
        job_id: job.id,
        job_description: &job.description,
        group: &job.group,
        handler: &job.handler,
        trigger_id: &f.trigger_id,
        fire_ms: f.fire_ms,
        fire_time: utc_rfc3339(f.fire_ms),
        executor_id: &f.executor_id,
        code: f.code,
        msg: clip(&f.msg, MAX_FIELD_BYTES),
        params: clip(&f.params, MAX_FIELD_BYTES),
        retry_count: f.retry_count,
        failures: f.failures,
        sent_ms: report.sent_ms,
    }
}

fn code_name(c: i32) -> &'static str {
    match c {
        code::SUCCESS => "success",
        code::TIMEOUT => "timed out",
        _ => "failed",
    }
}

/// `2023-11-14 22:13:20.000 UTC`, or the raw number out of range.
fn utc(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms).map_or_else(
        || format!("{ms} ms"),
        |t| t.format("%Y-%m-%d %H:%M:%S%.3f UTC").to_string(),
    )
}

/// `2023-11-14T22:13:20.000Z`, or empty out of range.
pub(super) fn utc_rfc3339(ms: i64) -> String {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.format("%Y-%m-%dT%H:%M:%S%.3fZ").to_string())
        .unwrap_or_default()
}

/// Line breaks and tabs as spaces (for subjects and one-line summaries).
pub(super) fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `text` cut to at most `max` bytes on a character boundary, marked.
pub(super) fn clip(text: &str, max: usize) -> String {
    rondo_core::model::clip(text, max, CLIPPED)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::alarm::tests::{failure, job};

    #[test]
    fn the_webhook_body_has_the_documented_fields() {
        let (job, failure) = (job("", "http://h/x"), failure());
        let report = Report {
            job: &job,
            failure: &failure,
            sent_ms: 5,
        };
        let json = serde_json::to_value(webhook_body(&report)).unwrap();
        let keys: Vec<&str> = json
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut expected = vec![
            "v",
            "text",
            "job_id",
            "job_description",
            "group",
            "handler",
            "trigger_id",
            "fire_ms",
            "fire_time",
            "executor_id",
            "code",
            "msg",
            "params",
            "retry_count",
            "failures",
            "sent_ms",
        ];
        let mut keys = keys;
        keys.sort_unstable();
        expected.sort_unstable();
        assert_eq!(keys, expected);
        assert_eq!(json["fire_time"], "2023-11-14T22:13:20.000Z");
        assert_eq!(json["retry_count"], 1);
        assert_eq!(
            json["text"],
            "rondo alarm: job 42 (nightly report) failed: trigger 42-1700000000000-0 \
             on demo-host-1, code 500: boom at line 3"
        );
    }

    #[test]
    fn the_mail_names_the_job_and_the_trigger() {
        let (job, mut failure) = (job("a@x.io", ""), failure());
        failure.executor_id.clear();
        let report = Report {
            job: &job,
            failure: &failure,
            sent_ms: 0,
        };
        assert_eq!(
            report.subject(),
            "rondo alarm: job 42 (nightly report) failed"
        );
        let text = mail_text(&report);
        for needle in [
            "Group:        demo",
            "Handler:      report",
            "Trigger id:   42-1700000000000-0",
            "Fire time:    2023-11-14 22:13:20.000 UTC",
            "Executor:     (none",
            "Alarm type:   trigger failed",
            "Code:         500 (failed)",
            "boom\nat line 3",
            "--day=today",
        ] {
            assert!(text.contains(needle), "{needle:?} missing from\n{text}");
        }
        let from: Mailbox = "rondo@localhost".parse().unwrap();
        let to: Vec<Mailbox> = ["a@x.io", "b@x.io"]
            .iter()
            .map(|a| a.parse().unwrap())
            .collect();
        let message = mail_message(&from, &to, &report).unwrap();
        let rcpts: Vec<String> = message
            .envelope()
            .to()
            .iter()
            .map(|a| a.to_string())
            .collect();
        assert_eq!(rcpts, ["a@x.io", "b@x.io"]);
    }

    #[test]
    fn long_fields_are_clipped_on_a_char_boundary() {
        let long = "é".repeat(MAX_FIELD_BYTES);
        let clipped = clip(&long, MAX_FIELD_BYTES);
        assert!(clipped.len() <= MAX_FIELD_BYTES);
        assert!(clipped.ends_with("[truncated]"));
        assert_eq!(clip("short", 10), "short");
        assert_eq!(one_line(" a\n\tb  c "), "a b c");
    }

    #[test]
    fn times_outside_chrono_s_range_do_not_panic() {
        assert_eq!(utc(i64::MAX), format!("{} ms", i64::MAX));
        assert_eq!(utc_rfc3339(i64::MIN), "");
    }
}
