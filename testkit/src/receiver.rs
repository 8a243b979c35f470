//! An HTTP receiver for the built-in `http` handler: every request is one
//! handler run, recorded with the `X-Rondo-Trigger-Id` header it carried.
//! A witness of runs that lives outside the executor processes, so a test
//! can count the runs of executors it kills.

use std::sync::{Arc, Mutex};

use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::any;
use rondo_core::clock;
use tokio::task::JoinHandle;

/// One request.
#[derive(Debug, Clone)]
pub struct Call {
    pub trigger_id: String,
    pub received_ms: i64,
}

/// The receiver; it stops when dropped.
pub struct Receiver {
    pub url: String,
    calls: Arc<Mutex<Vec<Call>>>,
    task: JoinHandle<()>,
}

impl Receiver {
    /// Listens on a free loopback port; every request answers 204.
    pub async fn start() -> Receiver {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the receiver");
        let url = format!("http://{}/run", listener.local_addr().expect("addr"));
        let calls: Arc<Mutex<Vec<Call>>> = Arc::default();
        let record = calls.clone();
        let app = Router::new().route(
            "/run",
            any(move |headers: HeaderMap| {
                let record = record.clone();
                async move {
                    let trigger_id = headers
                        .get("x-rondo-trigger-id")
                        .and_then(|v| v.to_str().ok())
                        .unwrap_or_default()
                        .to_owned();
                    let call = Call {
                        trigger_id,
                        received_ms: clock::now_ms(),
                    };
                    record.lock().expect("receiver lock").push(call);
                    StatusCode::NO_CONTENT
                }
            }),
        );
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Receiver { url, calls, task }
    }

    /// Every request so far, in order of arrival.
    pub fn calls(&self) -> Vec<Call> {
        self.calls.lock().expect("receiver lock").clone()
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}
