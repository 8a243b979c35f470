//! The http handler against a small HTTP/1.1 server on a loopback port
//! (`tls_tests` serves the same routes over TLS).

use std::net::SocketAddr;
use std::time::Instant;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;

use super::body::BODY_PREVIEW_BYTES;
use super::*;
use crate::testing::{TestRun, run_handler};

/// The size of `/big`'s body and of `/chunked`'s.
pub(super) const BIG_BYTES: usize = 5000;

/// Serves `/ok`, `/fail`, `/slow`, `/echo` (the request back), `/big`
/// (with its length), `/chunked` (as big, in chunks without a length) and
/// `/redirect-to/<host>` (a 302 to `/ok` on that host, same port).
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

/// Answers one request on `stream` (a TCP or a TLS stream).
pub(super) async fn serve<S: AsyncRead + AsyncWrite + Unpin>(mut stream: S) {
    let Some(request) = read_request(&mut stream).await else {
        return;
    };
    let path = request.split_whitespace().nth(1).unwrap_or("/").to_owned();
    if path == "/chunked" {
        let _ = write_chunked(&mut stream).await;
        return;
    }
    if let Some(host) = path.strip_prefix("/redirect-to/") {
        // To `/ok` on `host`, at the port this request came to.
        let port = request
            .lines()
            .find_map(|l| {
                l.strip_prefix("host: ")
                    .or_else(|| l.strip_prefix("Host: "))
            })
            .and_then(|h| h.rsplit(':').next())
            .unwrap_or("80")
            .trim()
            .to_owned();
        let response = format!(
            "HTTP/1.1 302 Found\r\nLocation: http://{host}:{port}/ok\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        );
        let _ = stream.write_all(response.as_bytes()).await;
        let _ = stream.shutdown().await;
        return;
    }
    let (status, body) = match path.as_str() {
        "/ok" => ("200 OK", "hello rondo".to_owned()),
        "/fail" => ("500 Internal Server Error", "boom".to_owned()),
        "/echo" => ("201 Created", request),
        "/big" => ("200 OK", "x".repeat(BIG_BYTES)),
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
    let _ = stream.shutdown().await;
}

/// `/chunked`: [`BIG_BYTES`] in five chunks, so only counting finds the
/// size.
async fn write_chunked<S: AsyncWrite + Unpin>(stream: &mut S) -> std::io::Result<()> {
    let head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n";
    stream.write_all(head.as_bytes()).await?;
    let chunk = "x".repeat(BIG_BYTES / 5);
    for _ in 0..5 {
        let framed = format!("{:x}\r\n{chunk}\r\n", chunk.len());
        stream.write_all(framed.as_bytes()).await?;
        stream.flush().await?;
    }
    stream.write_all(b"0\r\n\r\n").await?;
    stream.shutdown().await
}

/// The request head and body, as text.
async fn read_request<S: AsyncRead + Unpin>(stream: &mut S) -> Option<String> {
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
    let (outcome, lines) = run_handler(local(), format!(" http://{addr}/ok ")).await;
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
    let (outcome, lines) = run_handler(local(), params.to_string()).await;
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
    let (outcome, lines) = run_handler(local(), format!("http://{addr}/fail")).await;
    assert_eq!(
        (outcome.code, outcome.msg.as_str(), outcome.retryable),
        (500, "http: status 500 Internal Server Error", true)
    );
    assert_eq!(lines.last().unwrap(), "http: body: boom");
    let (outcome, _) = run_handler(local(), format!("http://{addr}/nothing-here")).await;
    assert_eq!(outcome.msg, "http: status 404 Not Found");
}

#[tokio::test]
async fn the_request_timeout_fails_the_run() {
    let addr = server().await;
    let params = format!(r#"{{"url": "http://{addr}/slow", "timeout_s": 1}}"#);
    let started = Instant::now();
    let (outcome, _) = run_handler(local(), params).await;
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
    let (outcome, lines) = TestRun::new(params).timeout_s(1).run(local()).await;
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
    let (outcome, lines) = run_handler(local(), format!("http://{addr}/big")).await;
    assert!(outcome.is_success());
    let preview = lines[2].strip_prefix("http: body: ").unwrap();
    assert_eq!(preview, format!("{} …", "x".repeat(BODY_PREVIEW_BYTES)));
}

/// The handler allowed to reach `127.0.0.1`, where the test servers are.
pub(super) fn local() -> Http {
    Http::from_config(&allowing_loopback()).unwrap()
}

/// An executor config whose `http_allow` names `127.0.0.1` (only).
pub(super) fn allowing_loopback() -> ExecutorConfig {
    ExecutorConfig {
        http_allow: vec!["127.0.0.1".into()],
        ..ExecutorConfig::default()
    }
}

/// The handler with `http_max_response_bytes` set.
pub(super) fn capped(max_response_bytes: u64) -> Http {
    let config = ExecutorConfig {
        http_max_response_bytes: max_response_bytes,
        ..allowing_loopback()
    };
    Http::from_config(&config).unwrap()
}

#[tokio::test]
async fn a_body_past_the_cap_fails_the_run_naming_the_key() {
    let addr = server().await;
    let expected = "aborted: http: response exceeded 4096 bytes (executor.http_max_response_bytes)";
    // Refused on its Content-Length, before a byte of the body is read.
    let (outcome, lines) = run_handler(capped(4096), format!("http://{addr}/big")).await;
    assert_eq!(
        (outcome.code, outcome.msg.as_str(), outcome.retryable),
        (500, expected, false)
    );
    assert_eq!(lines.len(), 2, "no body was read: {lines:?}");
    // Without a length: counted as it comes, the start still logged.
    let (outcome, lines) = run_handler(capped(4096), format!("http://{addr}/chunked")).await;
    assert_eq!((outcome.msg.as_str(), outcome.retryable), (expected, false));
    let preview = lines[2].strip_prefix("http: body: ").unwrap();
    assert_eq!(preview, format!("{} …", "x".repeat(BODY_PREVIEW_BYTES)));
}

#[tokio::test]
async fn a_body_of_exactly_the_cap_succeeds() {
    let addr = server().await;
    let cap = u64::try_from(BIG_BYTES).unwrap();
    for path in ["big", "chunked"] {
        let (outcome, _) = run_handler(capped(cap), format!("http://{addr}/{path}")).await;
        assert!(outcome.is_success(), "{path}: {outcome:?}");
    }
    let (outcome, _) = run_handler(local(), format!("http://{addr}/chunked")).await;
    assert!(outcome.is_success(), "under the default 1 MiB: {outcome:?}");
}

#[tokio::test]
async fn another_status_wins_over_the_cap() {
    let addr = server().await;
    let (outcome, lines) = run_handler(capped(2), format!("http://{addr}/fail")).await;
    assert_eq!(
        (outcome.msg.as_str(), outcome.retryable),
        ("http: status 500 Internal Server Error", true)
    );
    assert_eq!(
        lines.last().unwrap(),
        "http: response exceeded 2 bytes (executor.http_max_response_bytes)"
    );
}

#[tokio::test]
async fn a_refused_connection_is_a_retryable_failure() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let (outcome, _) = run_handler(local(), format!("http://{addr}/ok")).await;
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
    ] {
        let (outcome, lines) = run_handler(http, params).await;
        assert_eq!(outcome.code, 500, "{params}");
        assert!(!outcome.retryable, "{params}: {outcome:?}");
        assert!(lines.is_empty(), "{params}: nothing was sent: {lines:?}");
    }
    let (outcome, _) = run_handler(http, "ftp://example.invalid/x").await;
    assert_eq!(
        outcome.msg,
        r#"aborted: http: unsupported scheme "ftp"; use http:// or https://"#
    );
}

#[tokio::test]
async fn loopback_link_local_and_private_destinations_are_refused_unless_allowed() {
    let addr = server().await;
    let port = addr.port();
    for (url, kind) in [
        (format!("http://127.0.0.1:{port}/ok"), "loopback"),
        (
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "link-local",
        ),
        ("http://10.20.30.40/".to_owned(), "private"),
        ("http://[::1]/".to_owned(), "loopback"),
        // A name is judged on what it resolves to.
        (format!("http://localhost:{port}/ok"), "loopback"),
    ] {
        let (outcome, _) = run_handler(http, url.clone()).await;
        assert_eq!(outcome.code, 500, "{url}");
        assert!(!outcome.retryable, "{url}: {outcome:?}");
        assert!(
            outcome.msg.contains("destination refused") && outcome.msg.contains(kind),
            "{url}: {}",
            outcome.msg
        );
        assert!(
            outcome.msg.ends_with("(executor.http_allow)"),
            "{}",
            outcome.msg
        );
    }
    // Allowed, the same server is reached.
    let (outcome, _) = run_handler(local(), format!("http://127.0.0.1:{port}/ok")).await;
    assert!(outcome.is_success(), "{outcome:?}");
}

#[tokio::test]
async fn every_redirect_is_judged_again() {
    let addr = server().await;
    // 127.0.0.1 is allowed, 127.0.0.2 (loopback too) is not.
    let (outcome, lines) =
        run_handler(local(), format!("http://{addr}/redirect-to/127.0.0.2")).await;
    assert!(!outcome.retryable, "{outcome:?}");
    assert!(
        outcome.msg.contains("redirect to http://127.0.0.2:"),
        "{}",
        outcome.msg
    );
    assert_eq!(lines.len(), 1, "only the request line: {lines:?}");
    // A redirect to an allowed destination is followed.
    let (outcome, lines) =
        run_handler(local(), format!("http://{addr}/redirect-to/127.0.0.1")).await;
    assert!(outcome.is_success(), "{outcome:?}");
    assert!(
        lines.contains(&"http: body: hello rondo".to_owned()),
        "{lines:?}"
    );
}
