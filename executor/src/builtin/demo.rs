//! `demo`: logs its params, shard and trigger id; sleeps `params`
//! milliseconds when params is an integer; fails when params is `fail`.

use std::time::Duration;

use crate::context::JobContext;
use crate::error::JobError;

/// The demo handler (see the module doc).
pub async fn demo(ctx: JobContext) -> Result<(), JobError> {
    ctx.log(format!(
        "demo: trigger {} params {:?} shard {}/{}",
        ctx.trigger_id(),
        ctx.params(),
        ctx.shard_index(),
        ctx.shard_total()
    ));
    let params = ctx.params().trim();
    if params == "fail" {
        return Err(JobError::fail("demo: failure requested by params"));
    }
    if let Ok(ms) = params.parse::<u64>() {
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(ms)) => {}
            () = ctx.cancelled() => {
                ctx.log("demo: cancelled");
                return Err(JobError::fail("demo: cancelled"));
            }
        }
    }
    ctx.log("demo: done");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::{TestRun, run_handler};

    #[tokio::test(start_paused = true)]
    async fn sleeps_then_succeeds() {
        let started = tokio::time::Instant::now();
        let (outcome, lines) = TestRun::new("250")
            .shard(1, 4)
            .trigger_id("t-1")
            .run(demo)
            .await;
        assert!(outcome.is_success());
        assert_eq!(started.elapsed(), Duration::from_millis(250));
        assert_eq!(
            lines,
            vec!["demo: trigger t-1 params \"250\" shard 1/4", "demo: done"]
        );
    }

    #[tokio::test]
    async fn fails_on_request() {
        let (outcome, _) = run_handler(demo, "fail").await;
        assert_eq!(outcome.code, 500);
        assert!(outcome.retryable);
    }

    #[tokio::test(start_paused = true)]
    async fn stops_on_timeout() {
        let (outcome, lines) = TestRun::new("60000").timeout_s(1).run(demo).await;
        assert_eq!(outcome.code, 502);
        assert_eq!(lines.last().map(String::as_str), Some("demo: cancelled"));
    }
}
