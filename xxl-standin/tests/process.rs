//! Runs the `xxl-standin` binary against a tiny in-test "admin": it must
//! register, take a trigger in each generation's dialect, call the result
//! back in that generation's body shape, serve the run's log, and on SIGTERM
//! remove its registration and exit 0.

use std::net::TcpListener as StdListener;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Router;
use axum::extract::{Path as UrlPath, State};
use axum::http::HeaderMap;
use serde_json::{Value, json};
use tokio::process::{Child, Command};
use tokio::sync::mpsc::{UnboundedReceiver, UnboundedSender, unbounded_channel};

const WAIT: Duration = Duration::from_secs(15);
const LOG_DATE: i64 = 1_700_000_000_000;

/// One request the admin received.
#[derive(Debug)]
struct Seen {
    api: String,
    token: Option<String>,
    appname: Option<String>,
    body: Value,
}

struct AdminState {
    seen: UnboundedSender<Seen>,
    /// Callbacks to refuse (code 500) before taking them.
    refuse_callbacks: AtomicUsize,
}

async fn admin_api(
    State(state): State<Arc<AdminState>>,
    UrlPath(api): UrlPath<String>,
    headers: HeaderMap,
    body: String,
) -> String {
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let refuse = api == "callback"
        && state
            .refuse_callbacks
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
    let _ = state.seen.send(Seen {
        api,
        token: header("XXL-JOB-ACCESS-TOKEN"),
        appname: header("XXL-JOB-APPNAME"),
        body: serde_json::from_str(&body).unwrap_or(Value::Null),
    });
    if refuse {
        r#"{"code":500,"msg":"busy"}"#.into()
    } else {
        r#"{"code":200,"msg":"Success"}"#.into()
    }
}

struct Admin {
    base: String,
    seen: UnboundedReceiver<Seen>,
}

impl Admin {
    async fn start(refuse_callbacks: usize) -> Admin {
        let (tx, seen) = unbounded_channel();
        let state = Arc::new(AdminState {
            seen: tx,
            refuse_callbacks: AtomicUsize::new(refuse_callbacks),
        });
        let app = Router::new()
            .route("/xxl-job-admin/api/{api}", axum::routing::post(admin_api))
            .with_state(state);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("admin bind");
        let port = listener.local_addr().expect("admin addr").port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        Admin {
            base: format!("http://127.0.0.1:{port}/xxl-job-admin/"),
            seen,
        }
    }

    /// The next request to `api` (others are skipped).
    async fn next(&mut self, api: &str) -> Seen {
        let wanted = async {
            loop {
                let seen = self.seen.recv().await.expect("admin channel");
                if seen.api == api {
                    return seen;
                }
            }
        };
        tokio::time::timeout(WAIT, wanted)
            .await
            .unwrap_or_else(|_| panic!("no /api/{api} within {WAIT:?}"))
    }
}

fn fresh_dir(tag: &str) -> PathBuf {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_nanos();
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "xxl-standin-it-{tag}-{}-{nanos}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn free_port() -> u16 {
    StdListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("free port")
        .port()
}

struct Executor {
    child: Child,
    base: String,
    headers: Vec<(&'static str, String)>,
}

impl Executor {
    fn start(generation: &str, admin: &Admin, dir: &Path, extra: &[&str]) -> Executor {
        let port = free_port();
        let stderr = std::fs::File::create(dir.join("stderr.log")).expect("stderr file");
        let child = Command::new(env!("CARGO_BIN_EXE_xxl-standin"))
            .args(["--generation", generation, "--port", &port.to_string()])
            .args(["--admin-addresses", &admin.base, "--access-token", "tok"])
            .args(["--appname", "demo-app", "--log-path"])
            .arg(dir.join("logs"))
            .arg("--runs-file")
            .arg(dir.join("runs.jsonl"))
            .args(["--registry-interval-ms", "60000"])
            .args(extra)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .expect("start xxl-standin");
        let mut headers = vec![("XXL-JOB-ACCESS-TOKEN", "tok".to_string())];
        if generation == "3.5" {
            headers.push(("XXL-JOB-APPNAME", "demo-app".to_string()));
        }
        Executor {
            child,
            base: format!("http://127.0.0.1:{port}"),
            headers,
        }
    }

    async fn post(&self, path: &str, body: Value) -> (String, String) {
        let client = reqwest::Client::new();
        for _ in 0..100 {
            let mut request = client
                .post(format!("{}{path}", self.base))
                .body(body.to_string());
            for (name, value) in &self.headers {
                request = request.header(*name, value);
            }
            if let Ok(response) = request.send().await {
                assert_eq!(response.status(), 200);
                let kind = response
                    .headers()
                    .get("content-type")
                    .and_then(|v| v.to_str().ok())
                    .unwrap_or_default()
                    .to_string();
                return (kind, response.text().await.expect("body"));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        panic!("executor at {} never answered", self.base);
    }

    /// SIGTERM, then the exit status.
    async fn terminate(mut self) -> std::process::ExitStatus {
        let pid = self.child.id().expect("running").to_string();
        let sent = std::process::Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .expect("kill");
        assert!(sent.success());
        tokio::time::timeout(WAIT, self.child.wait())
            .await
            .expect("exits after SIGTERM")
            .expect("exit status")
    }
}

fn trigger(log_id: i64) -> Value {
    json!({
        "jobId": 1,
        "executorHandler": "demoJobHandler",
        "executorParams": "x",
        "executorBlockStrategy": "SERIAL_EXECUTION",
        "executorTimeout": 0,
        "logId": log_id,
        "logDateTime": LOG_DATE,
        "glueType": "BEAN",
        "glueSource": "",
        "glueUpdatetime": 0,
        "broadcastIndex": 0,
        "broadcastTotal": 1
    })
}

fn registration() -> Value {
    json!({"registryGroup":"EXECUTOR","registryKey":"demo-app","registryValue":null})
}

/// Registers, runs one demoJobHandler, calls back, serves the log, stops.
async fn round_trip(generation: &str, trigger_path: &str) -> (Seen, Value) {
    let mut admin = Admin::start(0).await;
    let dir = fresh_dir(generation);
    let executor = Executor::start(generation, &admin, &dir, &[]);

    let registry = admin.next("registry").await;
    assert_eq!(registry.token.as_deref(), Some("tok"));
    let mut expected = registration();
    expected["registryValue"] = json!(format!("{}/", executor.base));
    assert_eq!(registry.body, expected);

    let (kind, answer) = executor.post(trigger_path, trigger(41)).await;
    assert_eq!(kind, "text/html;charset=UTF-8");
    let callback = admin.next("callback").await;

    // The log, with the date field of the generation.
    let date_key = if generation == "3.5" {
        "logDateTime"
    } else {
        "logDateTim"
    };
    let mut query = json!({"logId": 41, "fromLineNum": 1});
    query[date_key] = json!(LOG_DATE);
    let (_, log) = executor.post("/log", query).await;
    let log: Value = serde_json::from_str(&log).expect("log json");
    let chunk = if generation == "2" {
        &log["content"]
    } else {
        &log["data"]
    };
    let content = chunk["logContent"].as_str().expect("logContent");
    assert!(content.contains("xxl-job job execute start -----------<br>----------- Param:x"));
    assert!(content.contains("XXL-JOB, Hello World."));
    assert!(content.contains("Result: handleCode=200, handleMsg = null"));
    assert_eq!(chunk["fromLineNum"], 1);
    assert_eq!(chunk["isEnd"], false);
    assert!(chunk["toLineNum"].as_i64().expect("toLineNum") >= 3);

    let runs = std::fs::read_to_string(dir.join("runs.jsonl")).expect("runs file");
    let events: Vec<Value> = runs
        .lines()
        .map(|l| serde_json::from_str(l).expect("runs line"))
        .collect();
    assert_eq!(events.len(), 2);
    assert_eq!(events[0]["event"], "start");
    assert_eq!(events[0]["handler"], "demoJobHandler");
    assert_eq!(events[1]["event"], "end");
    assert_eq!(events[1]["code"], 200);

    let status = executor.terminate().await;
    assert!(status.success(), "exit status {status}");
    let removed = admin.next("registryRemove").await;
    assert_eq!(removed.body, expected);
    let answer: Value = serde_json::from_str(&answer).expect("answer json");
    (callback, answer)
}

#[tokio::test]
async fn generation_2_runs_and_calls_back_a_bare_array() {
    let (callback, answer) = round_trip("2", "/run").await;
    assert_eq!(answer, json!({"code": 200}));
    assert_eq!(callback.appname, None);
    assert_eq!(
        callback.body,
        json!([{"logId": 41, "logDateTim": LOG_DATE, "handleCode": 200}])
    );
}

#[tokio::test]
async fn generation_3_runs_and_calls_back_a_bare_array() {
    let (callback, answer) = round_trip("3", "/run").await;
    assert_eq!(answer, json!({"code": 200, "msg": "Success"}));
    assert_eq!(
        callback.body,
        json!([{"logId": 41, "logDateTim": LOG_DATE, "handleCode": 200}])
    );
}

#[tokio::test]
async fn generation_3_5_triggers_and_calls_back_a_list() {
    let (callback, answer) = round_trip("3.5", "/trigger").await;
    assert_eq!(answer, json!({"code": 200, "msg": "Success"}));
    assert_eq!(callback.appname.as_deref(), Some("demo-app"));
    assert_eq!(
        callback.body,
        json!({"callbackList": [{"logId": 41, "logDateTime": LOG_DATE, "handleCode": 200}]})
    );
}

#[tokio::test]
async fn a_refused_callback_is_kept_and_sent_again() {
    let mut admin = Admin::start(1).await;
    let dir = fresh_dir("retry");
    let executor = Executor::start("2", &admin, &dir, &["--callback-retry-interval-ms", "300"]);
    admin.next("registry").await;
    let (_, answer) = executor.post("/run", trigger(42)).await;
    assert_eq!(answer, r#"{"code":200}"#);
    let refused = admin.next("callback").await;
    let again = admin.next("callback").await;
    assert_eq!(refused.body, again.body);
    assert_eq!(again.body[0]["logId"], 42);

    // Both outcomes end up in the run's log.
    let mut content = String::new();
    for _ in 0..50 {
        let (_, log) = executor
            .post(
                "/log",
                json!({"logId": 42, "fromLineNum": 1, "logDateTim": LOG_DATE}),
            )
            .await;
        let log: Value = serde_json::from_str(&log).expect("log json");
        content = log["content"]["logContent"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        if content.contains("callback finish.") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(content.contains(
        r#"<br>----------- xxl-job job callback fail, callbackResult:{"code":500,"msg":"busy"}"#
    ));
    assert!(content.contains("<br>----------- xxl-job job callback finish."));
    assert!(executor.terminate().await.success());
}

#[tokio::test]
async fn sigterm_kills_a_long_job_and_flushes_its_callback() {
    let mut admin = Admin::start(0).await;
    let dir = fresh_dir("stop");
    let executor = Executor::start("3", &admin, &dir, &[]);
    admin.next("registry").await;
    let mut long = trigger(43);
    long["executorHandler"] = json!("sleepJobHandler");
    long["executorParams"] = json!("60000");
    let (_, answer) = executor.post("/run", long).await;
    assert_eq!(answer, r#"{"code":200,"msg":"Success"}"#);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(executor.terminate().await.success());
    admin.next("registryRemove").await;
    let callback = admin.next("callback").await;
    assert_eq!(
        callback.body,
        json!([{
            "logId": 43,
            "logDateTim": LOG_DATE,
            "handleCode": 500,
            "handleMsg": "web container destroy and kill the job. [job running, killed]"
        }])
    );
}
