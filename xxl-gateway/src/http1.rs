//! A small HTTP/1.1 client for the executors' embedded servers: a `POST` of
//! JSON on a kept-alive connection, its answer read in the calling task.
//!
//! Every trigger costs the gateway two calls (`/run`, `/log`); a general
//! client (hyper's, under reqwest) hands each request to a connection task
//! and back, two task wake-ups and their thread hand-offs a call, which at
//! 1,000 fires/s were a large part of the gateway's CPU. Here the caller
//! writes the request and reads the answer on the socket itself.
//!
//! What it speaks: `http://` only (the executors' netty server; `https://`
//! addresses go through reqwest), answers with `Content-Length`, chunked,
//! or read to the end of a connection the server closes. Connections are
//! kept per address while idle less than [`IDLE`] (XXL-JOB's server closes
//! them after 90 s idle) and checked before reuse: one the server closed
//! meanwhile is dropped, not written to.
//!
//! At most [`CALLS_PER_ADDRESS`] calls are in progress per address; the
//! others wait for one of them to end, in order, and take its connection.
//! Without the bound, jobs that fire at the same instant opened a
//! connection each: hundreds of connects at once overflowed the
//! executor's accept queue, and each dropped SYN came back after the
//! kernel's one-second retransmission, a second late.

use std::borrow::Cow;
use std::collections::HashMap;
use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rondo_core::destination::Destinations;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A kept connection idle longer is dropped.
const IDLE: Duration = Duration::from_secs(50);
/// Connections kept per address at most.
const KEEP_PER_ADDRESS: usize = 32;
/// Calls in progress per address at most (so connections, too).
pub const CALLS_PER_ADDRESS: usize = KEEP_PER_ADDRESS;
/// The largest answer read (a long job's whole log comes in one).
pub const MAX_ANSWER: usize = 32 * 1024 * 1024;
/// The longest head read (status line and headers).
const MAX_HEAD: usize = 64 * 1024;
/// The longest chunk-size line read.
const MAX_CHUNK_LINE: usize = 1024;

/// How a call failed.
#[derive(Debug)]
pub enum Failure {
    /// No connection could be made: nothing was sent.
    Connect(io::Error),
    /// Its send-by instant passed before the request went: nothing was
    /// sent.
    Late,
    /// Sent (or maybe sent), then the connection failed or timed out.
    Lost(io::Error),
    /// The answer is not HTTP as this client reads it.
    Malformed(String),
}

/// An answer: status and body.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub body: Vec<u8>,
}

/// `host:port` and path of an `http://` URL (`None` for anything else).
pub fn split_http(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    (!authority.is_empty()).then_some((authority, path))
}

#[derive(Default)]
pub struct Pool {
    idle: Mutex<Idle>,
    /// The calls in progress per address ([`CALLS_PER_ADDRESS`] permits).
    calls: Mutex<HashMap<String, Arc<Semaphore>>>,
    /// Where a connection may go (`None`: anywhere), judged on the
    /// resolved address of every new connection.
    rule: Option<std::sync::Arc<Destinations>>,
}

#[derive(Default)]
struct Idle {
    by_address: HashMap<String, Vec<(TcpStream, Instant)>>,
    /// When connections idle too long were last closed (every address's:
    /// one no call goes to any more keeps none open).
    swept: Option<Instant>,
}

impl Pool {
    /// A pool whose connections go only where `rule` allows: a host name
    /// is resolved and only the allowed addresses are tried; none allowed
    /// is a [`Failure::Connect`] (nothing was sent) that says why.
    pub fn guarded(rule: Destinations) -> Pool {
        Pool {
            idle: Mutex::default(),
            calls: Mutex::default(),
            rule: Some(std::sync::Arc::new(rule)),
        }
    }

    /// `POST`s `body` to `path` on `authority` (`host:port`) with `headers`
    /// (name, value), answered within `timeout`.
    pub async fn post(
        &self,
        authority: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        timeout: Duration,
    ) -> Result<Answer, Failure> {
        self.post_by(authority, path, headers, body, timeout, None)
            .await
    }

    /// [`post`](Pool::post), but the request is not written once `send_by`
    /// passed (checked right before the write): [`Failure::Late`].
    pub async fn post_by(
        &self,
        authority: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
        timeout: Duration,
        send_by: Option<tokio::time::Instant>,
    ) -> Result<Answer, Failure> {
        let deadline = tokio::time::Instant::now() + timeout;
        let late = || send_by.is_some_and(|by| tokio::time::Instant::now() >= by);
        let _call = self.call_slot(authority, deadline, send_by).await?;
        let request = request(authority, path, headers, body);
        let (mut conn, reused) = match self.take(authority) {
            Some(conn) => (conn, true),
            None => (self.connect(authority, deadline).await?, false),
        };
        if late() {
            return Err(Failure::Late);
        }
        if let Err(e) = write(&mut conn, &request, deadline).await {
            if !reused {
                return Err(Failure::Lost(e));
            }
            // A kept connection that refuses the write was closed by the
            // server before the request: nothing of it was taken. Once more
            // on a new one.
            conn = self.connect(authority, deadline).await?;
            if late() {
                return Err(Failure::Late);
            }
            write(&mut conn, &request, deadline)
                .await
                .map_err(Failure::Lost)?;
        }
        let (answer, keep) = read_answer(&mut conn, deadline).await?;
        if keep {
            self.put(authority, conn);
        }
        Ok(answer)
    }

    /// One of the [`CALLS_PER_ADDRESS`] slots of `authority`, waited for
    /// in order; nothing is sent while waiting: a wait past `send_by` is
    /// [`Failure::Late`], past the call's `deadline` a time-out.
    async fn call_slot(
        &self,
        authority: &str,
        deadline: tokio::time::Instant,
        send_by: Option<tokio::time::Instant>,
    ) -> Result<OwnedSemaphorePermit, Failure> {
        let slots = {
            let mut calls = self.calls.lock().expect("pool lock");
            // Addresses no call holds a slot of are forgotten now and then.
            if calls.len() > 4 * KEEP_PER_ADDRESS {
                calls.retain(|_, s| s.available_permits() < CALLS_PER_ADDRESS);
            }
            calls
                .entry(authority.to_owned())
                .or_insert_with(|| Arc::new(Semaphore::new(CALLS_PER_ADDRESS)))
                .clone()
        };
        if let Ok(permit) = slots.clone().try_acquire_owned() {
            return Ok(permit);
        }
        let until = send_by.map_or(deadline, |by| by.min(deadline));
        // The pool never closes its semaphores: an error is a time-out.
        match tokio::time::timeout_at(until, slots.acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            _ if send_by.is_some_and(|by| by <= deadline) => Err(Failure::Late),
            _ => Err(Failure::Connect(io::Error::new(
                io::ErrorKind::TimedOut,
                "every connection to the executor was busy until the call's time-out",
            ))),
        }
    }

    /// A kept connection to `authority` that is still open, if any.
    fn take(&self, authority: &str) -> Option<TcpStream> {
        let mut idle = self.idle.lock().expect("pool lock");
        let list = idle.by_address.get_mut(authority)?;
        while let Some((conn, since)) = list.pop() {
            if since.elapsed() < IDLE && still_open(&conn) {
                return Some(conn);
            }
        }
        None
    }

    fn put(&self, authority: &str, conn: TcpStream) {
        let mut idle = self.idle.lock().expect("pool lock");
        if idle.swept.is_none_or(|at| at.elapsed() >= IDLE) {
            idle.by_address.retain(|_, list| {
                list.retain(|(_, since)| since.elapsed() < IDLE);
                !list.is_empty()
            });
            idle.swept = Some(Instant::now());
        }
        let list = idle.by_address.entry(authority.to_owned()).or_default();
        if list.len() < KEEP_PER_ADDRESS {
            list.push((conn, Instant::now()));
        }
    }
}

/// Whether nothing (no end, no stray bytes) waits on an idle connection.
fn still_open(conn: &TcpStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(conn.try_read(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}

fn request(authority: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256 + body.len());
    out.extend_from_slice(b"POST ");
    out.extend_from_slice(path.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    out.extend_from_slice(authority.as_bytes());
    out.extend_from_slice(
        b"\r\nContent-Type: application/json;charset=UTF-8\r\nConnection: keep-alive\r\n",
    );
    for (name, value) in headers {
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"Content-Length: ");
    out.extend_from_slice(body.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body);
    out
}

/// `authority` with HTTP's port when it names none (`http://host/`).
fn with_port(authority: &str) -> Cow<'_, str> {
    match authority.rsplit_once(':') {
        // A bracketed IPv6 host without a port ends in `]`.
        Some((_, port)) if !port.ends_with(']') => Cow::Borrowed(authority),
        _ => Cow::Owned(format!("{authority}:80")),
    }
}

impl Pool {
    /// A new connection to `authority`, to an address the rule allows.
    async fn connect(
        &self,
        authority: &str,
        deadline: tokio::time::Instant,
    ) -> Result<TcpStream, Failure> {
        let timed_out = || io::Error::new(io::ErrorKind::TimedOut, "no connection in time");
        let target = with_port(authority);
        let connecting = async {
            let Some(rule) = &self.rule else {
                return TcpStream::connect(&*target).await;
            };
            let (host, port) = target.rsplit_once(':').unwrap_or((&target, "80"));
            let port: u16 = port.parse().map_err(|_| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("bad port in {authority}"),
                )
            })?;
            let allowed = rondo_core::outbound::resolve(rule, host, port)
                .await?
                .map_err(|refused| {
                    metrics::counter!("rondo_xxl_calls_refused_total").increment(1);
                    io::Error::new(
                        io::ErrorKind::PermissionDenied,
                        format!("{refused} (xxl.address_allow)"),
                    )
                })?;
            TcpStream::connect(&allowed[..]).await
        };
        let conn = tokio::time::timeout_at(deadline, connecting)
            .await
            .map_err(|_| Failure::Connect(timed_out()))?
            .map_err(Failure::Connect)?;
        conn.set_nodelay(true).map_err(Failure::Connect)?;
        Ok(conn)
    }
}

async fn write(
    conn: &mut TcpStream,
    bytes: &[u8],
    deadline: tokio::time::Instant,
) -> io::Result<()> {
    tokio::time::timeout_at(deadline, conn.write_all(bytes))
        .await
        .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, "the request was not taken in time"))?
}

/// Reads one answer; whether the connection may carry another.
async fn read_answer(
    conn: &mut TcpStream,
    deadline: tokio::time::Instant,
) -> Result<(Answer, bool), Failure> {
    let mut buf: Vec<u8> = Vec::with_capacity(1024);
    let (status, head_len, framing, close) = loop {
        if fill(conn, &mut buf, deadline).await? == 0 {
            return Err(Failure::Lost(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the connection closed before an answer",
            )));
        }
        if let Some(head) = parse_head(&buf)? {
            break head;
        }
        if buf.len() > MAX_HEAD {
            return Err(Failure::Malformed("an answer's head too long".into()));
        }
    };
    let body = match framing {
        Framing::Length(n) => {
            if n > MAX_ANSWER {
                return Err(Failure::Malformed(format!("an answer of {n} bytes")));
            }
            while buf.len() < head_len + n {
                if fill(conn, &mut buf, deadline).await? == 0 {
                    return Err(Failure::Lost(io::Error::new(
                        io::ErrorKind::UnexpectedEof,
                        "the answer broke off",
                    )));
                }
            }
            buf[head_len..head_len + n].to_vec()
        }
        Framing::Chunked => read_chunked(conn, buf.split_off(head_len), deadline).await?,
        Framing::ToEnd => {
            while fill(conn, &mut buf, deadline).await? > 0 {}
            buf.split_off(head_len)
        }
    };
    // Only a counted body leaves the connection where the next answer
    // begins for sure (a chunked one may end in trailers).
    let keep = !close && matches!(framing, Framing::Length(_));
    Ok((Answer { status, body }, keep))
}

/// Reads more into `buf`; 0 at the end of the connection.
async fn fill(
    conn: &mut TcpStream,
    buf: &mut Vec<u8>,
    deadline: tokio::time::Instant,
) -> Result<usize, Failure> {
    if buf.len() > MAX_ANSWER {
        return Err(Failure::Malformed("an answer too long".into()));
    }
    // Into the buffer's spare room: a buffer of its own would be carried
    // in the future of every caller.
    buf.reserve(4096);
    tokio::time::timeout_at(deadline, conn.read_buf(buf))
        .await
        .map_err(|_| Failure::Lost(io::Error::new(io::ErrorKind::TimedOut, "no answer in time")))?
        .map_err(Failure::Lost)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Framing {
    Length(usize),
    Chunked,
    ToEnd,
}

/// The status, the head's length, the body's framing and whether the
/// server closes after it, once the head is complete.
fn parse_head(buf: &[u8]) -> Result<Option<(u16, usize, Framing, bool)>, Failure> {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut response = httparse::Response::new(&mut headers);
    let head_len = match response.parse(buf) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => return Ok(None),
        Err(e) => return Err(Failure::Malformed(format!("not an HTTP answer ({e})"))),
    };
    let status = response.code.unwrap_or_default();
    let mut length: Option<usize> = None;
    let mut chunked = false;
    let mut close = response.version == Some(0);
    for h in response.headers.iter() {
        let value = String::from_utf8_lossy(h.value);
        if h.name.eq_ignore_ascii_case("content-length") {
            let n = value
                .trim()
                .parse()
                .map_err(|_| Failure::Malformed(format!("Content-Length {value:?}")))?;
            if length.is_some_and(|m| m != n) {
                return Err(Failure::Malformed("two Content-Lengths".into()));
            }
            length = Some(n);
        } else if h.name.eq_ignore_ascii_case("transfer-encoding")
            && value.to_ascii_lowercase().contains("chunked")
        {
            chunked = true;
        } else if h.name.eq_ignore_ascii_case("connection") {
            let value = value.to_ascii_lowercase();
            close = value.contains("close") || (close && !value.contains("keep-alive"));
        }
    }
    // Chunked wins over a length (RFC 9112 §6.3), and such an answer does
    // not leave the connection where the next one begins for sure.
    let framing = match (chunked, length) {
        (true, Some(_)) => {
            close = true;
            Framing::Chunked
        }
        (true, None) => Framing::Chunked,
        (false, Some(n)) => Framing::Length(n),
        (false, None) => Framing::ToEnd,
    };
    Ok(Some((status, head_len, framing, close)))
}

async fn read_chunked(
    conn: &mut TcpStream,
    mut buf: Vec<u8>,
    deadline: tokio::time::Instant,
) -> Result<Vec<u8>, Failure> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        // Each byte of the size line is looked at once, however it comes.
        let mut scanned = at;
        let line_end = loop {
            if let Some(i) = buf[scanned..].windows(2).position(|w| w == b"\r\n") {
                break scanned + i;
            }
            scanned = buf.len().saturating_sub(1).max(at);
            if scanned - at > MAX_CHUNK_LINE {
                return Err(Failure::Malformed("a chunk size line too long".into()));
            }
            if fill(conn, &mut buf, deadline).await? == 0 {
                return Err(Failure::Lost(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "a chunk broke off",
                )));
            }
        };
        let size_text = String::from_utf8_lossy(&buf[at..line_end]);
        let size_hex = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_hex, 16)
            .map_err(|_| Failure::Malformed(format!("chunk size {size_text:?}")))?;
        let data = line_end + 2;
        // `body` never holds more than MAX_ANSWER: no sum can overflow.
        if size > MAX_ANSWER - body.len() {
            return Err(Failure::Malformed("an answer too long".into()));
        }
        while buf.len() < data + size + 2 {
            if fill(conn, &mut buf, deadline).await? == 0 {
                return Err(Failure::Lost(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "a chunk broke off",
                )));
            }
        }
        if size == 0 {
            // The end; trailers, if any, are left unread (the connection
            // is not kept after a chunked answer).
            return Ok(body);
        }
        body.extend_from_slice(&buf[data..data + size]);
        at = data + size + 2;
    }
}

#[cfg(test)]
mod tests;
