//! The http handler against a small HTTP/1.1 server on a loopback port.

use std::net::SocketAddr;
use std::time::Instant;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::testing::{TestRun, run_handler};

/// Serves `/ok`, `/fail`, `/slow`, `/echo` (the request back) and `/big`.
async fn server() -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(serve(stream));
        }
    });
    addr
}

async fn serve(mut stream: TcpStream) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    let path = request.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let (status, body) = match path.as_str() {
        "/ok" => ("200 OK", "hello rondo".to_owned()),
        "/fail" => ("500 Internal Server Error", "boom".to_owned()),
        "/echo" => ("201 Created", request),
        "/big" => ("200 OK", "x".repeat(5000)),
        "/slow" => {
            tokio::time::sleep(Duration::from_secs(30)).await;
            ("200 OK", String::new())
        }
        _ => ("404 Not Found", String::new()),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = stream.write_all(response.as_bytes()).await;
}

/// The request head and body, as text.
async fn read_request(stream: &mut TcpStream) -> Option<String> {
    let mut data = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = stream.read(&mut buf).await.ok()?;
        if n == 0 {
            return None;
        }
        data.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&data).into_owned();
        let Some(head_end) = text.find("\r\n\r\n") else {
            continue;
        };
        let length = text[..head_end]
            .lines()
            .find_map(|l| {
                let (name, value) = l.split_once(':')?;
                name.eq_ignore_ascii_case("content-length")
                    .then(|| value.trim().parse::<usize>().ok())?
            })
            .unwrap_or(0);
        if data.len() >= head_end + 4 + length {
            return Some(text);
        }
    }
}

#[tokio::test]
async fn a_plain_url_is_a_get_and_2xx_succeeds() {
    let addr = server().await;
    let (outcome, lines) = run_handler(http, format!(" http://{addr}/ok ")).await;
    assert!(outcome.is_success(), "{outcome:?}");
    assert_eq!(lines[0], format!("http: GET http://{addr}/ok"));
    assert!(lines[1].starts_with("http: 200 OK in "), "{lines:?}");
    assert_eq!(lines[2], "http: body: hello rondo");
}

#[tokio::test]
async fn a_json_request_sends_its_method_headers_and_body() {
    let addr = server().await;
    let params = serde_json::json!({
        "method": "post",
        "url": format!("http://{addr}/echo"),
        "headers": {"X-Rondo-Test": "yes", "Content-Type": "text/plain"},
        "body": "payload-123",
        "timeout_s": 5
    });
    let (outcome, lines) = run_handler(http, params.to_string()).await;
    assert!(outcome.is_success(), "{outcome:?}");
    assert!(lines[1].starts_with("http: 201 Created"), "{lines:?}");
    let echoed = &lines[2];
    assert!(
        echoed.starts_with("http: body: POST /echo HTTP/1.1"),
        "{echoed}"
    );
    assert!(
        echoed.to_ascii_lowercase().contains("x-rondo-test: yes"),
        "{echoed}"
    );
    assert!(echoed.contains("user-agent: rondo-executor/"), "{echoed}");
    assert!(
        echoed
            .to_ascii_lowercase()
            .contains("x-rondo-trigger-id: test-trigger"),
        "{echoed}"
    );
    assert!(echoed.ends_with("payload-123"), "{echoed}");
}

#[tokio::test]
async fn another_status_fails_the_run_with_it() {
    let addr = server().await;
    let (outcome, lines) = run_handler(http, format!("http://{addr}/fail")).await;
    assert_eq!(
        (outcome.code, outcome.msg.as_str(), outcome.retryable),
        (500, "http: status 500 Internal Server Error", true)
    );
    assert_eq!(lines.last().unwrap(), "http: body: boom");
    let (outcome, _) = run_handler(http, format!("http://{addr}/nothing-here")).await;
    assert_eq!(outcome.msg, "http: status 404 Not Found");
}

#[tokio::test]
async fn the_request_timeout_fails_the_run() {
    let addr = server().await;
    let params = format!(r#"{{"url": "http://{addr}/slow", "timeout_s": 1}}"#);
    let started = Instant::now();
    let (outcome, _) = run_handler(http, params).await;
    assert_eq!(outcome.code, 500);
    assert!(outcome.retryable);
    assert_eq!(
        outcome.msg,
        format!("http: no response within 1s from http://{addr}/slow")
    );
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn the_trigger_timeout_cancels_the_request() {
    let addr = server().await;
    let params = format!(r#"{{"url": "http://{addr}/slow", "timeout_s": 0}}"#);
    let started = Instant::now();
    let (outcome, lines) = TestRun::new(params).timeout_s(1).run(http).await;
    assert_eq!(outcome.code, rondo_core::trigger::code::TIMEOUT);
    assert_eq!(lines.last().unwrap(), "http: cancelled");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn only_the_start_of_a_long_body_is_logged() {
    let addr = server().await;
    let (outcome, lines) = run_handler(http, format!("http://{addr}/big")).await;
    assert!(outcome.is_success());
    let preview = lines[2].strip_prefix("http: body: ").unwrap();
    assert_eq!(preview, format!("{} …", "x".repeat(BODY_PREVIEW_BYTES)));
}

#[tokio::test]
async fn a_refused_connection_is_a_retryable_failure() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let (outcome, _) = run_handler(http, format!("http://{addr}/ok")).await;
    assert_eq!(outcome.code, 500);
    assert!(outcome.retryable);
    assert!(outcome.msg.starts_with("http: "), "{}", outcome.msg);
}

#[tokio::test]
async fn unusable_params_abort() {
    for params in [
        "",
        "not a url",
        "ftp://example.invalid/x",
        r#"{"url": 5}"#,
        r#"{"url": "http://127.0.0.1:1/", "verb": "GET"}"#,
        r#"{"method": "GE T", "url": "http://127.0.0.1:1/"}"#,
        r#"{"url": "http://127.0.0.1:1/", "headers": {"bad header": "x"}}"#,
        "https://example.invalid/",
    ] {
        let (outcome, lines) = run_handler(http, params).await;
        assert_eq!(outcome.code, 500, "{params}");
        assert!(!outcome.retryable, "{params}: {outcome:?}");
        assert!(lines.is_empty(), "{params}: nothing was sent: {lines:?}");
    }
    let (outcome, _) = run_handler(http, "https://example.invalid/").await;
    assert!(
        outcome.msg.contains("https is not supported"),
        "{}",
        outcome.msg
    );
}
