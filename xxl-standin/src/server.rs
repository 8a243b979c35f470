//! The embedded HTTP server, as xxl-job-core's netty one behaves: every
//! request is a POST with a JSON body, every answer is HTTP 200 with a JSON
//! envelope (typed `text/html;charset=UTF-8`), errors included.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::DefaultBodyLimit;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, Method, Uri};
use axum::response::{IntoResponse, Response};
use serde::de::DeserializeOwned;

use crate::config::Generation;
use crate::joblog::LogDir;
use crate::jobs::Jobs;
use crate::wire::{JobRef, LogQuery, Payload, Reply, SUCCESS, Trigger};

pub struct App {
    pub generation: Generation,
    pub access_token: String,
    pub appname: String,
    pub jobs: Jobs,
    pub logs: LogDir,
}

/// netty's aggregator there takes bodies up to 5 MiB.
const MAX_BODY: usize = 5 * 1024 * 1024;

pub fn router(app: Arc<App>) -> Router {
    Router::new()
        .fallback(serve)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .with_state(app)
}

async fn serve(
    State(app): State<Arc<App>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let target = uri.path_and_query().map_or(uri.path(), |pq| pq.as_str());
    let reply = app.dispatch(&method, target, &headers, &String::from_utf8_lossy(&body));
    (
        [(CONTENT_TYPE, "text/html;charset=UTF-8")],
        reply.render(app.generation),
    )
        .into_response()
}

fn parse<T: DeserializeOwned>(body: &str) -> Result<T, Reply> {
    serde_json::from_str(body).map_err(|e| Reply::fail(format!("request error:{e}")))
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

impl App {
    pub fn dispatch(&self, method: &Method, uri: &str, headers: &HeaderMap, body: &str) -> Reply {
        if method != Method::POST {
            return Reply::fail("invalid request, HttpMethod not support.");
        }
        if let Err(refused) = self.authorize(headers) {
            return refused;
        }
        self.route(uri, body).unwrap_or_else(|refused| refused)
    }

    fn authorize(&self, headers: &HeaderMap) -> Result<(), Reply> {
        let token = header(headers, "XXL-JOB-ACCESS-TOKEN");
        match self.generation {
            Generation::V2 | Generation::V3 => {
                let checked = !self.access_token.trim().is_empty();
                if checked && token != Some(self.access_token.as_str()) {
                    return Err(Reply::fail("The access token is wrong."));
                }
            }
            Generation::V35 => {
                let appname = header(headers, "XXL-JOB-APPNAME");
                let blank = |v: Option<&str>| v.is_none_or(|v| v.trim().is_empty());
                if blank(token) || blank(appname) {
                    return Err(Reply::fail(
                        "invalid request, accessToken or appname is empty.",
                    ));
                }
                if token != Some(self.access_token.as_str())
                    || appname != Some(self.appname.as_str())
                {
                    return Err(Reply::fail(
                        "invalid request, accessToken or appname invalid.",
                    ));
                }
            }
        }
        Ok(())
    }

    fn route(&self, uri: &str, body: &str) -> Result<Reply, Reply> {
        let reply = match uri {
            "/beat" => Reply::ok(),
            "/idleBeat" => {
                let job: JobRef = parse(body)?;
                if self.jobs.busy(job.job_id) {
                    Reply::fail("job thread is running or has trigger queue.")
                } else {
                    Reply::ok()
                }
            }
            "/kill" => {
                let job: JobRef = parse(body)?;
                if self.jobs.kill(job.job_id) {
                    Reply::ok()
                } else {
                    self.already_killed()
                }
            }
            "/log" => {
                let query: LogQuery = parse(body)?;
                let chunk = self
                    .logs
                    .read(query.date_ms(), query.log_id, query.from_line_num);
                Reply::ok_data(Payload::Log(chunk))
            }
            path if path == self.generation.trigger_path() => {
                let trigger: Trigger = parse(body)?;
                match self.jobs.trigger(trigger) {
                    Ok(()) => Reply::ok(),
                    Err(msg) => Reply::fail(msg),
                }
            }
            other => Reply::fail(format!("invalid request, uri-mapping({other}) not found.")),
        };
        Ok(reply)
    }

    /// `ReturnT(200, msg)` in 2.x; `Response.ofSuccess(data)` in 3.x.
    fn already_killed(&self) -> Reply {
        let note = "job thread already killed.";
        match self.generation {
            Generation::V2 => Reply {
                code: SUCCESS,
                msg: Some(note.into()),
                data: None,
            },
            Generation::V3 | Generation::V35 => Reply::ok_data(Payload::Text(note.into())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::callback::CallbackQueue;
    use crate::joblog::{RunsFile, testdir};
    use crate::jobs::Env;
    use std::time::Duration;

    fn app(generation: Generation, token: &str) -> App {
        let logs = LogDir::new(testdir::fresh("server"));
        let (callbacks, _rx) = CallbackQueue::new();
        App {
            generation,
            access_token: token.into(),
            appname: "demo".into(),
            jobs: Jobs::new(Env {
                generation,
                logs: logs.clone(),
                runs: RunsFile::new(None),
                callbacks,
                idle_remove: Duration::from_secs(90),
            }),
            logs,
        }
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, value.parse().expect("header value"));
        }
        map
    }

    fn call(app: &App, method: Method, uri: &str, h: &HeaderMap, body: &str) -> String {
        app.dispatch(&method, uri, h, body).render(app.generation)
    }

    #[tokio::test]
    async fn generation_2_envelope_and_token() {
        let app = app(Generation::V2, "secret");
        let good = headers(&[("XXL-JOB-ACCESS-TOKEN", "secret")]);
        let bad = headers(&[("XXL-JOB-ACCESS-TOKEN", "nope")]);
        assert_eq!(
            call(&app, Method::POST, "/beat", &good, ""),
            r#"{"code":200}"#
        );
        assert_eq!(
            call(&app, Method::POST, "/beat", &bad, ""),
            r#"{"code":500,"msg":"The access token is wrong."}"#
        );
        assert_eq!(
            call(&app, Method::GET, "/beat", &good, ""),
            r#"{"code":500,"msg":"invalid request, HttpMethod not support."}"#
        );
        assert_eq!(
            call(&app, Method::POST, "/trigger", &good, "{}"),
            r#"{"code":500,"msg":"invalid request, uri-mapping(/trigger) not found."}"#
        );
        assert_eq!(
            call(&app, Method::POST, "/kill", &good, r#"{"jobId":1}"#),
            r#"{"code":200,"msg":"job thread already killed."}"#
        );
        assert!(
            call(&app, Method::POST, "/run", &good, "not json")
                .starts_with(r#"{"code":500,"msg":"request error:"#)
        );
        let log = call(
            &app,
            Method::POST,
            "/log",
            &good,
            r#"{"logId":1,"fromLineNum":1,"logDateTim":0}"#,
        );
        assert_eq!(
            log,
            r#"{"code":200,"content":{"fromLineNum":1,"toLineNum":0,"logContent":"readLog fail, logFile not exists","isEnd":true}}"#
        );
        let run = r#"{"jobId":1,"logId":5,"glueType":"BEAN","executorHandler":"demoJobHandler"}"#;
        assert_eq!(
            call(&app, Method::POST, "/run", &good, run),
            r#"{"code":200}"#
        );
    }

    #[tokio::test]
    async fn generation_3_envelope_and_paths() {
        let app = app(Generation::V3, "");
        let none = HeaderMap::new();
        assert_eq!(
            call(&app, Method::POST, "/beat", &none, ""),
            r#"{"code":200,"msg":"Success"}"#
        );
        assert_eq!(
            call(&app, Method::POST, "/idleBeat", &none, r#"{"jobId":1}"#),
            r#"{"code":200,"msg":"Success"}"#
        );
        assert_eq!(
            call(&app, Method::POST, "/kill", &none, r#"{"jobId":1}"#),
            r#"{"code":200,"msg":"Success","data":"job thread already killed."}"#
        );
        let run = r#"{"jobId":1,"logId":5,"glueType":"BEAN","executorHandler":"sleepJobHandler","executorParams":"1000"}"#;
        assert_eq!(
            call(&app, Method::POST, "/run", &none, run),
            r#"{"code":200,"msg":"Success"}"#
        );
        assert_eq!(
            call(&app, Method::POST, "/idleBeat", &none, r#"{"jobId":1}"#),
            r#"{"code":500,"msg":"job thread is running or has trigger queue."}"#
        );
        assert_eq!(
            call(
                &app,
                Method::POST,
                "/run",
                &none,
                &run.replace("sleepJobHandler", "x")
            ),
            r#"{"code":500,"msg":"job handler [x] not found."}"#
        );
        assert_eq!(
            call(&app, Method::POST, "/kill", &none, r#"{"jobId":1}"#),
            r#"{"code":200,"msg":"Success"}"#
        );
    }

    #[tokio::test]
    async fn generation_3_5_wants_token_and_appname() {
        let app = app(Generation::V35, "secret");
        let empty = r#"{"code":500,"msg":"invalid request, accessToken or appname is empty."}"#;
        let invalid = r#"{"code":500,"msg":"invalid request, accessToken or appname invalid."}"#;
        let only_token = headers(&[("XXL-JOB-ACCESS-TOKEN", "secret")]);
        let wrong_app = headers(&[
            ("XXL-JOB-ACCESS-TOKEN", "secret"),
            ("XXL-JOB-APPNAME", "other"),
        ]);
        let good = headers(&[
            ("XXL-JOB-ACCESS-TOKEN", "secret"),
            ("XXL-JOB-APPNAME", "demo"),
        ]);
        assert_eq!(call(&app, Method::POST, "/beat", &only_token, ""), empty);
        assert_eq!(call(&app, Method::POST, "/beat", &wrong_app, ""), invalid);
        assert_eq!(
            call(&app, Method::POST, "/beat", &good, ""),
            r#"{"code":200,"msg":"Success"}"#
        );
        assert_eq!(
            call(&app, Method::POST, "/run", &good, "{}"),
            r#"{"code":500,"msg":"invalid request, uri-mapping(/run) not found."}"#
        );
        let trigger =
            r#"{"jobId":1,"logId":5,"glueType":"BEAN","executorHandler":"demoJobHandler"}"#;
        assert_eq!(
            call(&app, Method::POST, "/trigger", &good, trigger),
            r#"{"code":200,"msg":"Success"}"#
        );
    }
}
