use super::*;

#[test]
fn urls_split_into_authority_and_path() {
    assert_eq!(
        split_http("http://10.0.0.5:9999/run"),
        Some(("10.0.0.5:9999", "/run"))
    );
    assert_eq!(split_http("http://h:1"), Some(("h:1", "/")));
    assert_eq!(with_port("h:1"), "h:1");
    assert_eq!(with_port("h"), "h:80");
    assert_eq!(with_port("[::1]"), "[::1]:80");
    assert_eq!(with_port("[::1]:9"), "[::1]:9");
    assert_eq!(split_http("https://h/run"), None);
    assert_eq!(split_http("http:///run"), None);
}

#[test]
fn heads_say_how_the_body_is_framed() {
    let (status, len, framing, close) =
        parse_head(b"HTTP/1.1 200 OK\r\ncontent-length: 11\r\n\r\n{\"code\":200}")
            .unwrap()
            .unwrap();
    assert_eq!(
        (status, len, framing, close),
        (200, 39, Framing::Length(11), false)
    );
    let (_, _, framing, close) =
        parse_head(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
            .unwrap()
            .unwrap();
    assert_eq!((framing, close), (Framing::Chunked, true));
    let (_, _, framing, close) = parse_head(b"HTTP/1.0 200 OK\r\n\r\n").unwrap().unwrap();
    assert_eq!((framing, close), (Framing::ToEnd, true));
    assert!(
        parse_head(b"HTTP/1.1 200 OK\r\nContent-Le")
            .unwrap()
            .is_none()
    );
    assert!(parse_head(b"garbage\r\n\r\n").is_err());
    let (_, _, framing, close) =
        parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n")
            .unwrap()
            .unwrap();
    assert_eq!(
        (framing, close),
        (Framing::Chunked, true),
        "chunked wins, and the connection is not kept"
    );
    assert!(
        parse_head(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n").is_err()
    );
}

/// A server answering each request on a connection with `answer`.
async fn server(
    answer: &'static [u8],
    close_after: bool,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    slow_server(answer, close_after, Duration::ZERO).await
}

/// [`server`], answering each request `delay` after it came.
async fn slow_server(
    answer: &'static [u8],
    close_after: bool,
    delay: Duration,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicUsize>) {
    use std::sync::atomic::{AtomicUsize, Ordering};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let accepted = std::sync::Arc::new(AtomicUsize::new(0));
    let counter = accepted.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut conn, _)) = listener.accept().await else {
                return;
            };
            counter.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    let mut chunk = [0u8; 4096];
                    let Ok(n) = conn.read(&mut chunk).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    buf.extend_from_slice(&chunk[..n]);
                    let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
                        continue;
                    };
                    let head = String::from_utf8_lossy(&buf[..end]).to_lowercase();
                    let length: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length: "))
                        .and_then(|v| v.trim().parse().ok())
                        .unwrap_or(0);
                    if buf.len() < end + 4 + length {
                        continue;
                    }
                    buf.drain(..end + 4 + length);
                    tokio::time::sleep(delay).await;
                    if conn.write_all(answer).await.is_err() || close_after {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

#[tokio::test]
async fn answers_are_read_in_each_framing_and_connections_kept() {
    use std::sync::atomic::Ordering;
    let pool = Pool::default();
    let t = Duration::from_secs(2);
    let (addr, accepted) = server(
        b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n{\"code\":200}",
        false,
    )
    .await;
    for _ in 0..3 {
        let a = pool
            .post(&addr, "/beat", &[("XXL-JOB-ACCESS-TOKEN", "t")], b"{}", t)
            .await
            .unwrap();
        assert_eq!((a.status, a.body.as_slice()), (200, &b"{\"code\":200}"[..]));
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 1, "one kept connection");

    let (addr, _) = server(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n{\"cod\r\n7\r\ne\":200}\r\n0\r\n\r\n", false).await;
    let a = pool.post(&addr, "/log", &[], b"{}", t).await.unwrap();
    assert_eq!(a.body, b"{\"code\":200}");
    let (addr, _) = server(
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\n{\r\nffffffffffffffff\r\n",
        false,
    )
    .await;
    let huge = pool.post(&addr, "/log", &[], b"{}", t).await;
    assert!(
        matches!(huge, Err(Failure::Malformed(_))),
        "a chunk size near usize::MAX is refused, not an overflow: {huge:?}"
    );

    let (addr, accepted) = server(
        b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n<html>busy</html>",
        true,
    )
    .await;
    for _ in 0..2 {
        let a = pool.post(&addr, "/run", &[], b"{}", t).await.unwrap();
        assert_eq!(a.body, b"<html>busy</html>");
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        2,
        "a closing server gets a new connection each time"
    );
}

/// Jobs that fire at the same instant: a burst of calls to one executor
/// takes at most `CALLS_PER_ADDRESS` connections, every call answered (the
/// others wait their turn rather than each opening a connection, which
/// overflowed the executor's accept queue: a second late per dropped SYN).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_calls_to_one_executor_shares_a_bounded_set_of_connections() {
    use std::sync::atomic::Ordering;
    let pool = std::sync::Arc::new(Pool::default());
    let t = Duration::from_secs(10);
    let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
    let (addr, accepted) = slow_server(answer, false, Duration::from_millis(20)).await;
    let burst = 10 * CALLS_PER_ADDRESS;
    let calls = (0..burst).map(|_| {
        let (pool, addr) = (pool.clone(), addr.clone());
        tokio::spawn(async move { pool.post(&addr, "/run", &[], b"{}", t).await })
    });
    for call in futures_util::future::join_all(calls).await {
        assert_eq!(call.unwrap().unwrap().body, b"{}");
    }
    let opened = accepted.load(Ordering::SeqCst);
    assert!(
        opened <= CALLS_PER_ADDRESS,
        "{burst} calls at once opened {opened} connections"
    );
}

/// A call waiting for one of the executor's busy connections past its
/// send-by instant is not sent: `Late`, as a call found late at the write.
#[tokio::test]
async fn a_call_that_waits_for_a_connection_past_its_send_by_is_late() {
    let pool = std::sync::Arc::new(Pool::default());
    let t = Duration::from_secs(10);
    let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}";
    let (addr, accepted) = slow_server(answer, false, Duration::from_secs(2)).await;
    let busy: Vec<_> = (0..CALLS_PER_ADDRESS)
        .map(|_| {
            let (pool, addr) = (pool.clone(), addr.clone());
            tokio::spawn(async move { pool.post(&addr, "/beat", &[], b"{}", t).await })
        })
        .collect();
    // Each holds its slot from before its connect: all connected, none free.
    while accepted.load(std::sync::atomic::Ordering::SeqCst) < CALLS_PER_ADDRESS {
        tokio::task::yield_now().await;
    }
    let by = tokio::time::Instant::now() + Duration::from_millis(100);
    let late = pool.post_by(&addr, "/run", &[], b"{}", t, Some(by)).await;
    assert!(matches!(late, Err(Failure::Late)), "{late:?}");
    for call in busy {
        call.await.unwrap().unwrap();
    }
}

#[tokio::test]
async fn a_request_whose_send_by_passed_is_not_written() {
    let pool = Pool::default();
    let t = Duration::from_secs(2);
    let (addr, _) = server(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", false).await;
    let now = tokio::time::Instant::now();
    let late = pool.post_by(&addr, "/run", &[], b"{}", t, Some(now)).await;
    assert!(matches!(late, Err(Failure::Late)), "{late:?}");
    let later = now + Duration::from_secs(60);
    let a = pool
        .post_by(&addr, "/run", &[], b"{}", t, Some(later))
        .await
        .unwrap();
    assert_eq!(a.body, b"{}");
}

#[tokio::test]
async fn a_closed_kept_connection_is_not_reused_and_failures_say_where() {
    use std::sync::atomic::Ordering;
    let pool = Pool::default();
    let t = Duration::from_secs(2);
    // Answers with a kept-alive framing, then closes: the kept
    // connection is found closed before the next request.
    let (addr, accepted) = server(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}", true).await;
    pool.post(&addr, "/beat", &[], b"{}", t).await.unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    pool.post(&addr, "/beat", &[], b"{}", t).await.unwrap();
    assert_eq!(accepted.load(Ordering::SeqCst), 2);

    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = closed.local_addr().unwrap().to_string();
    drop(closed);
    assert!(matches!(
        pool.post(&addr, "/run", &[], b"{}", t).await,
        Err(Failure::Connect(_))
    ));

    // A server that takes the request and never answers.
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = silent.local_addr().unwrap().to_string();
    tokio::spawn(async move {
        let (_conn, _) = silent.accept().await.unwrap();
        tokio::time::sleep(Duration::from_secs(10)).await;
    });
    let short = Duration::from_millis(200);
    assert!(matches!(
        pool.post(&addr, "/run", &[], b"{}", short).await,
        Err(Failure::Lost(_))
    ));
}
