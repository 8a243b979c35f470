//! XXL-JOB's JSON, both ways, for both generations of `xxl-job-core` in
//! use: 2.x (to 3.2: the executor answers `ReturnT` `{code, msg,
//! content}`) and 3.x (3.3 on: `Response` `{code, msg, data}`; from 3.5 it
//! takes triggers at `/trigger` instead of `/run`, and checks the appname
//! header). Written from the protocol as the executors speak
//! it (`docs/xxl-job-gateway.md` lists every field); nothing here is
//! XXL-JOB's code.
//!
//! Field names are XXL-JOB's (camelCase, and its spellings: `logDateTim`
//! in 2.x callbacks, `logDateTime` in 3.5's). Readers accept every
//! spelling and ignore fields they do not know, as gson does.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The header every call carries, both ways.
pub const TOKEN_HEADER: &str = "XXL-JOB-ACCESS-TOKEN";
/// The header 3.5 adds: the executor's appname (checked by 3.5 executors).
pub const APPNAME_HEADER: &str = "XXL-JOB-APPNAME";

/// XXL-JOB's success and failure codes (`ReturnT` / `Response`, and a
/// callback's `handleCode`; 502 is a run that timed out).
pub mod code {
    pub const SUCCESS: i32 = 200;
    pub const FAIL: i32 = 500;
    pub const TIMEOUT: i32 = 502;
}

/// Where an executor takes triggers: `/run` (`xxl-job-core` 2.1 to 3.4)
/// or `/trigger` (3.5 on). Every executor is first sent to `/run`; one that
/// answers that it serves no such path is sent to the other, and the
/// gateways remember it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Generation {
    /// 2.1 to 3.4: triggers go to `/run`.
    #[serde(rename = "2")]
    Two,
    /// 3.5 on: triggers go to `/trigger`.
    #[serde(rename = "3")]
    Three,
}

impl Generation {
    /// The path a trigger is posted to.
    pub fn trigger_path(self) -> &'static str {
        match self {
            Generation::Two => "run",
            Generation::Three => "trigger",
        }
    }

    /// The other one (an executor that does not know the path of one
    /// generation runs the other).
    pub fn other(self) -> Generation {
        match self {
            Generation::Two => Generation::Three,
            Generation::Three => Generation::Two,
        }
    }
}

/// A trigger as the executor takes it (`TriggerParam`, 3.x's
/// `TriggerRequest`: the same fields).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct TriggerParam {
    pub job_id: i32,
    pub executor_handler: String,
    pub executor_params: String,
    pub executor_block_strategy: String,
    /// Seconds; 0: none.
    pub executor_timeout: i32,
    pub log_id: i64,
    /// The run's date: names the executor's log file of it, so every
    /// `/log` call passes it again.
    pub log_date_time: i64,
    pub glue_type: String,
    pub glue_source: String,
    pub glue_updatetime: i64,
    pub broadcast_index: i32,
    pub broadcast_total: i32,
}

/// `/idleBeat` and `/kill`.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct JobIdParam {
    pub job_id: i32,
}

/// `/log`: both spellings of the date, so either generation reads its own.
#[derive(Debug, Clone, Copy, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogParam {
    pub log_id: i64,
    pub log_date_tim: i64,
    pub log_date_time: i64,
    pub from_line_num: i32,
}

impl LogParam {
    pub fn new(log_id: i64, log_date_ms: i64, from_line_num: i32) -> LogParam {
        LogParam {
            log_id,
            log_date_tim: log_date_ms,
            log_date_time: log_date_ms,
            from_line_num,
        }
    }
}

/// Any answer of an executor: `ReturnT` (`content`) or `Response` (`data`).
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
pub struct Reply {
    #[serde(default)]
    pub code: i32,
    #[serde(default)]
    pub msg: Option<String>,
    #[serde(default)]
    pub content: Option<Value>,
    #[serde(default)]
    pub data: Option<Value>,
}

impl Reply {
    pub fn is_success(&self) -> bool {
        self.code == code::SUCCESS
    }

    /// The answer's payload, whichever generation sent it.
    pub fn payload(&self) -> Option<&Value> {
        self.content.as_ref().or(self.data.as_ref())
    }
}

/// A page of a run's log (`LogResult`, 3.x's `LogData`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct LogPage {
    #[serde(default)]
    pub from_line_num: i32,
    #[serde(default)]
    pub to_line_num: i32,
    #[serde(default)]
    pub log_content: Option<String>,
    #[serde(default)]
    pub is_end: bool,
}

/// A registration (`RegistryParam`, 3.x's `RegistryRequest`).
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RegistryParam {
    #[serde(default)]
    pub registry_group: Option<String>,
    #[serde(default)]
    pub registry_key: Option<String>,
    #[serde(default)]
    pub registry_value: Option<String>,
}

/// One run's outcome in a callback (`HandleCallbackParam`, 3.x's
/// `CallbackRequest` / `CallbackData`): `handleCode` and `handleMsg`, or
/// in 2.2 an `executeResult` (`ReturnT`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CallbackEntry {
    pub log_id: i64,
    #[serde(default)]
    pub handle_code: Option<i32>,
    #[serde(default)]
    pub handle_msg: Option<String>,
    #[serde(default)]
    pub execute_result: Option<ExecuteResult>,
}

/// 2.2's outcome of a run inside a callback entry.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
pub struct ExecuteResult {
    #[serde(default)]
    pub code: i32,
    #[serde(default)]
    pub msg: Option<String>,
}

impl CallbackEntry {
    /// The run's code, whichever generation sent it (0 when none did).
    pub fn code(&self) -> i32 {
        self.handle_code
            .or_else(|| self.execute_result.as_ref().map(|r| r.code))
            .unwrap_or_default()
    }

    /// The run's message, whichever generation sent it.
    pub fn msg(&self) -> Option<&str> {
        self.handle_msg
            .as_deref()
            .or_else(|| self.execute_result.as_ref()?.msg.as_deref())
    }
}

/// A callback's body: a list (2.x to 3.4), or `{callbackList: [...]}`
/// (3.5).
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum CallbackBody {
    List(Vec<CallbackEntry>),
    Wrapped {
        #[serde(rename = "callbackList")]
        callback_list: Vec<CallbackEntry>,
    },
}

impl CallbackBody {
    pub fn entries(self) -> Vec<CallbackEntry> {
        match self {
            CallbackBody::List(list) => list,
            CallbackBody::Wrapped { callback_list } => callback_list,
        }
    }
}

/// What the gateway answers an executor: XXL-JOB's own shape, read alike by
/// 2.x (`ReturnT`) and 3.x (`Response`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Answer {
    pub code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub msg: Option<String>,
}

impl Answer {
    pub fn success() -> Answer {
        Answer {
            code: code::SUCCESS,
            msg: None,
        }
    }

    pub fn fail(msg: impl Into<String>) -> Answer {
        Answer {
            code: code::FAIL,
            msg: Some(msg.into()),
        }
    }
}

/// The failure XXL-JOB's admin answers a wrong or missing token with.
pub const WRONG_TOKEN: &str = "The access token is wrong.";

/// The start of what an executor answers a path it does not serve
/// (`invalid request, uri-mapping(/run) not found.`).
const NO_SUCH_PATH: &str = "uri-mapping(";

/// Whether `reply` says the executor does not serve the path it was sent
/// to: it runs the other generation.
pub fn is_unknown_path(reply: &Reply) -> bool {
    !reply.is_success()
        && reply
            .msg
            .as_deref()
            .is_some_and(|m| m.contains(NO_SUCH_PATH) && m.contains("not found"))
}

/// Whether a refused trigger was refused because its logId already waits
/// in the job's queue there (`repeat trigger job`, 2.x: `repeate`): it is
/// there, and will run.
pub fn is_repeat(reply: &Reply) -> bool {
    !reply.is_success()
        && reply.msg.as_deref().is_some_and(|m| {
            m.starts_with("repeat trigger job") || m.starts_with("repeate trigger job")
        })
}

/// Whether a refusal is the job's own block strategy (DISCARD_LATER's
/// `block strategy effect：Discard Later`): not retried, as rondo's
/// executors do not retry a discard.
pub fn is_block_refusal(msg: &str) -> bool {
    msg.starts_with("block strategy effect")
}

/// XXL-JOB's text with its `<br>` markup made line breaks.
pub fn plain(text: &str) -> String {
    text.replace("<br>", "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_trigger_is_written_with_xxl_jobs_field_names() {
        let p = TriggerParam {
            job_id: 7,
            executor_handler: "demoJobHandler".into(),
            executor_params: "p".into(),
            executor_block_strategy: "SERIAL_EXECUTION".into(),
            executor_timeout: 5,
            log_id: 42,
            log_date_time: 1_700_000_000_000,
            glue_type: "BEAN".into(),
            glue_source: String::new(),
            glue_updatetime: 0,
            broadcast_index: 1,
            broadcast_total: 2,
        };
        let v = serde_json::to_value(&p).unwrap();
        for key in [
            "jobId",
            "executorHandler",
            "executorParams",
            "executorBlockStrategy",
            "executorTimeout",
            "logId",
            "logDateTime",
            "glueType",
            "glueSource",
            "glueUpdatetime",
            "broadcastIndex",
            "broadcastTotal",
        ] {
            assert!(v.get(key).is_some(), "{key} in {v}");
        }
        let log = serde_json::to_value(LogParam::new(42, 9, 3)).unwrap();
        assert_eq!(log["logDateTim"], 9);
        assert_eq!(log["logDateTime"], 9);
        assert_eq!(log["fromLineNum"], 3);
    }

    #[test]
    fn both_generations_answers_are_read_alike() {
        let two: Reply = serde_json::from_str(r#"{"code":200}"#).unwrap();
        let three: Reply = serde_json::from_str(r#"{"code":200,"msg":"Success"}"#).unwrap();
        assert!(two.is_success() && three.is_success());
        let page = r#"{"fromLineNum":1,"toLineNum":2,"logContent":"a\nb\n","isEnd":false}"#;
        let two: Reply =
            serde_json::from_str(&format!(r#"{{"code":200,"content":{page}}}"#)).unwrap();
        let three: Reply =
            serde_json::from_str(&format!(r#"{{"code":200,"msg":"Success","data":{page}}}"#))
                .unwrap();
        assert_eq!(two.payload(), three.payload());
        let page: LogPage = serde_json::from_value(two.payload().unwrap().clone()).unwrap();
        assert_eq!(page.to_line_num, 2);
    }

    #[test]
    fn callbacks_of_every_generation_are_read() {
        let two = r#"[{"logId":7,"logDateTim":1,"handleCode":200}]"#;
        let three_five =
            r#"{"callbackList":[{"logId":7,"logDateTime":1,"handleCode":500,"handleMsg":"x"}]}"#;
        let a = serde_json::from_str::<CallbackBody>(two).unwrap().entries();
        let b = serde_json::from_str::<CallbackBody>(three_five)
            .unwrap()
            .entries();
        assert_eq!(a[0].log_id, 7);
        assert_eq!((a[0].code(), a[0].msg()), (200, None));
        assert_eq!((b[0].code(), b[0].msg()), (500, Some("x")));
        let two_two = r#"[{"logId":7,"logDateTim":1,"executeResult":{"code":500,"msg":"boom"}}]"#;
        let c = serde_json::from_str::<CallbackBody>(two_two)
            .unwrap()
            .entries();
        assert_eq!(
            (c[0].code(), c[0].msg()),
            (500, Some("boom")),
            "2.2's shape"
        );
        assert!(serde_json::from_str::<CallbackBody>(r#"{"x":1}"#).is_err());
    }

    #[test]
    fn answers_are_xxl_jobs_shape() {
        assert_eq!(
            serde_json::to_string(&Answer::success()).unwrap(),
            r#"{"code":200}"#
        );
        assert_eq!(
            serde_json::to_string(&Answer::fail(WRONG_TOKEN)).unwrap(),
            r#"{"code":500,"msg":"The access token is wrong."}"#
        );
    }

    #[test]
    fn refusals_are_told_apart() {
        let path: Reply = serde_json::from_str(
            r#"{"code":500,"msg":"invalid request, uri-mapping(/run) not found."}"#,
        )
        .unwrap();
        assert!(is_unknown_path(&path) && !is_repeat(&path));
        let repeat: Reply =
            serde_json::from_str(r#"{"code":500,"msg":"repeate trigger job, logId:7"}"#).unwrap();
        assert!(is_repeat(&repeat));
        assert!(is_block_refusal("block strategy effect：Discard Later"));
        assert!(!is_block_refusal("job handler [x] not found."));
    }
}
