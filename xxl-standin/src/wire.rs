//! The JSON shapes on the wire, per generation: the reply envelope
//! (`ReturnT` or `Response`), the request bodies the admin posts, and the
//! callback bodies the executor posts back.
//!
//! The requests are parsed the way gson does: missing fields (and `null`
//! numbers) take their zero value, unknown fields are ignored.

use serde::{Deserialize, Deserializer, Serialize};

use crate::config::Generation;

pub const SUCCESS: i32 = 200;
pub const FAIL: i32 = 500;
pub const TIMEOUT: i32 = 502;

/// What an answer carries besides code and msg.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(untagged)]
pub enum Payload {
    Text(String),
    Log(LogChunk),
}

/// One answer of the embedded server, before its generation's envelope.
#[derive(Clone, Debug, PartialEq)]
pub struct Reply {
    pub code: i32,
    /// `None` on a plain success: omitted by `ReturnT`, "Success" in `Response`.
    pub msg: Option<String>,
    pub data: Option<Payload>,
}

/// 2.x's envelope; gson leaves out null fields.
#[derive(Serialize)]
struct ReturnT<'a> {
    code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    msg: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    content: Option<&'a Payload>,
}

/// 3.x's envelope (xxl-tool's `Response`).
#[derive(Serialize)]
struct Response<'a> {
    code: i32,
    msg: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<&'a Payload>,
}

impl Reply {
    pub fn ok() -> Self {
        Reply {
            code: SUCCESS,
            msg: None,
            data: None,
        }
    }

    pub fn ok_data(data: Payload) -> Self {
        Reply {
            data: Some(data),
            ..Reply::ok()
        }
    }

    pub fn fail(msg: impl Into<String>) -> Self {
        Reply {
            code: FAIL,
            msg: Some(msg.into()),
            data: None,
        }
    }

    /// The body: `{"code","msg","content"}` (gen 2, nulls omitted) or
    /// `{"code","msg","data"}` (gen 3 and 3.5).
    pub fn render(&self, generation: Generation) -> String {
        let rendered = match generation {
            Generation::V2 => serde_json::to_string(&ReturnT {
                code: self.code,
                msg: self.msg.as_deref(),
                content: self.data.as_ref(),
            }),
            Generation::V3 | Generation::V35 => {
                let default = if self.code == SUCCESS {
                    "Success"
                } else {
                    "Fail"
                };
                serde_json::to_string(&Response {
                    code: self.code,
                    msg: self.msg.as_deref().unwrap_or(default),
                    data: self.data.as_ref(),
                })
            }
        };
        // Plain structs of strings and numbers always serialize.
        rendered.unwrap_or_else(|e| format!(r#"{{"code":500,"msg":"{e}"}}"#))
    }
}

/// gson leaves a primitive field at zero when the JSON says `null`.
fn zero_if_null<'de, D, T>(de: D) -> Result<T, D::Error>
where
    D: Deserializer<'de>,
    T: Default + Deserialize<'de>,
{
    Ok(Option::<T>::deserialize(de)?.unwrap_or_default())
}

/// The body of `/run` (`/trigger`), the same in every generation.
#[derive(Clone, Debug, Default, PartialEq, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Trigger {
    #[serde(deserialize_with = "zero_if_null")]
    pub job_id: i32,
    pub executor_handler: Option<String>,
    pub executor_params: Option<String>,
    pub executor_block_strategy: Option<String>,
    #[serde(deserialize_with = "zero_if_null")]
    pub executor_timeout: i32,
    #[serde(deserialize_with = "zero_if_null")]
    pub log_id: i64,
    #[serde(deserialize_with = "zero_if_null")]
    pub log_date_time: i64,
    pub glue_type: Option<String>,
    pub glue_source: Option<String>,
    #[serde(deserialize_with = "zero_if_null")]
    pub glue_updatetime: i64,
    #[serde(deserialize_with = "zero_if_null")]
    pub broadcast_index: i32,
    #[serde(deserialize_with = "zero_if_null")]
    pub broadcast_total: i32,
}

/// The body of `/idleBeat` and `/kill`.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct JobRef {
    #[serde(deserialize_with = "zero_if_null")]
    pub job_id: i32,
}

/// The body of `/log`: the date is `logDateTim` up to 3.4, `logDateTime` in 3.5.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct LogQuery {
    #[serde(deserialize_with = "zero_if_null")]
    pub log_id: i64,
    #[serde(deserialize_with = "zero_if_null")]
    pub from_line_num: i32,
    #[serde(deserialize_with = "zero_if_null")]
    pub log_date_tim: i64,
    #[serde(deserialize_with = "zero_if_null")]
    pub log_date_time: i64,
}

impl LogQuery {
    pub fn date_ms(&self) -> i64 {
        if self.log_date_time != 0 {
            self.log_date_time
        } else {
            self.log_date_tim
        }
    }
}

/// What `/log` answers inside the envelope.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LogChunk {
    pub from_line_num: i32,
    pub to_line_num: i32,
    pub log_content: String,
    pub is_end: bool,
}

/// One finished (or killed) run, as the callback thread queues it and as the
/// failed-callback files keep it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Callback {
    pub log_id: i64,
    pub log_date_time: i64,
    pub handle_code: i32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub handle_msg: Option<String>,
}

/// A callback as 2.x – 3.4 send it: the date is `logDateTim`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct LegacyCallback<'a> {
    log_id: i64,
    log_date_tim: i64,
    handle_code: i32,
    #[serde(skip_serializing_if = "Option::is_none")]
    handle_msg: Option<&'a str>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct CallbackList<'a> {
    callback_list: &'a [Callback],
}

/// The body of `/api/callback`: a bare array with `logDateTim` (gen 2, 3),
/// or `{"callbackList":[…]}` with `logDateTime` (3.5).
pub fn callback_body(generation: Generation, batch: &[Callback]) -> String {
    let body = match generation {
        Generation::V2 | Generation::V3 => {
            let legacy: Vec<LegacyCallback<'_>> = batch
                .iter()
                .map(|c| LegacyCallback {
                    log_id: c.log_id,
                    log_date_tim: c.log_date_time,
                    handle_code: c.handle_code,
                    handle_msg: c.handle_msg.as_deref(),
                })
                .collect();
            serde_json::to_string(&legacy)
        }
        Generation::V35 => serde_json::to_string(&CallbackList {
            callback_list: batch,
        }),
    };
    body.unwrap_or_default()
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Registration<'a> {
    registry_group: &'a str,
    registry_key: &'a str,
    registry_value: &'a str,
}

/// The body of `/api/registry` and `/api/registryRemove`.
pub fn registry_body(appname: &str, address: &str) -> String {
    serde_json::to_string(&Registration {
        registry_group: "EXECUTOR",
        registry_key: appname,
        registry_value: address,
    })
    .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn return_t_omits_nulls() {
        assert_eq!(Reply::ok().render(Generation::V2), r#"{"code":200}"#);
        assert_eq!(
            Reply::fail("The access token is wrong.").render(Generation::V2),
            r#"{"code":500,"msg":"The access token is wrong."}"#
        );
        let log = Reply::ok_data(Payload::Log(LogChunk {
            from_line_num: 2,
            to_line_num: 3,
            log_content: "a\nb\n".into(),
            is_end: false,
        }))
        .render(Generation::V2);
        assert_eq!(
            log,
            r#"{"code":200,"content":{"fromLineNum":2,"toLineNum":3,"logContent":"a\nb\n","isEnd":false}}"#
        );
    }

    #[test]
    fn response_says_success() {
        for generation in [Generation::V3, Generation::V35] {
            assert_eq!(
                Reply::ok().render(generation),
                r#"{"code":200,"msg":"Success"}"#
            );
            assert_eq!(
                Reply::fail("job handler [x] not found.").render(generation),
                r#"{"code":500,"msg":"job handler [x] not found."}"#
            );
            assert_eq!(
                Reply::ok_data(Payload::Text("job thread already killed.".into()))
                    .render(generation),
                r#"{"code":200,"msg":"Success","data":"job thread already killed."}"#
            );
        }
    }

    #[test]
    fn callback_bodies() {
        let batch = [
            Callback {
                log_id: 7,
                log_date_time: 1_700_000_000_000,
                handle_code: 200,
                handle_msg: None,
            },
            Callback {
                log_id: 8,
                log_date_time: 1,
                handle_code: 500,
                handle_msg: Some("boom".into()),
            },
        ];
        let legacy = r#"[{"logId":7,"logDateTim":1700000000000,"handleCode":200},{"logId":8,"logDateTim":1,"handleCode":500,"handleMsg":"boom"}]"#;
        assert_eq!(callback_body(Generation::V2, &batch), legacy);
        assert_eq!(callback_body(Generation::V3, &batch), legacy);
        assert_eq!(
            callback_body(Generation::V35, &batch),
            r#"{"callbackList":[{"logId":7,"logDateTime":1700000000000,"handleCode":200},{"logId":8,"logDateTime":1,"handleCode":500,"handleMsg":"boom"}]}"#
        );
    }

    #[test]
    fn requests_parse_like_gson() {
        let t: Trigger = serde_json::from_str(
            r#"{"jobId":3,"logId":null,"executorHandler":"demoJobHandler","x":1}"#,
        )
        .expect("parses");
        assert_eq!(t.job_id, 3);
        assert_eq!(t.log_id, 0);
        assert_eq!(t.executor_params, None);
        let old: LogQuery =
            serde_json::from_str(r#"{"logId":1,"fromLineNum":2,"logDateTim":5}"#).expect("parses");
        let new: LogQuery =
            serde_json::from_str(r#"{"logId":1,"fromLineNum":2,"logDateTime":6}"#).expect("parses");
        assert_eq!((old.date_ms(), new.date_ms()), (5, 6));
        assert!(serde_json::from_str::<Trigger>("").is_err());
        assert!(serde_json::from_str::<Trigger>(r#"{"jobId":"x"}"#).is_err());
    }

    #[test]
    fn log_chunk_shape() {
        let chunk = LogChunk {
            from_line_num: 1,
            to_line_num: 0,
            log_content: "readLog fail, logFile not exists".into(),
            is_end: true,
        };
        assert_eq!(
            serde_json::to_string(&chunk).expect("serializes"),
            r#"{"fromLineNum":1,"toLineNum":0,"logContent":"readLog fail, logFile not exists","isEnd":true}"#
        );
    }
}
