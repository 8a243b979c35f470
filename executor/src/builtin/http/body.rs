//! Reading a response body up to `executor.http_max_response_bytes`:
//! chunk by chunk as it arrives, keeping only its start for the job log,
//! and stopping at the first chunk past the cap.

/// How much of the response body goes to the job log.
pub(crate) const BODY_PREVIEW_BYTES: usize = 1024;

/// What was read of a body.
pub(crate) struct Body {
    /// Up to [`BODY_PREVIEW_BYTES`] of it, as text, with ` …` when more
    /// came.
    pub(crate) preview: String,
    pub(crate) end: End,
}

/// How reading a body ended.
pub(crate) enum End {
    /// All of it came, within the cap.
    Complete,
    /// It is longer than the cap (said by its `Content-Length` before a
    /// byte was read, or counted).
    TooLarge,
    /// The connection failed or the request's timeout expired first.
    Failed(reqwest::Error),
}

/// Reads `response`'s body: all of it when it is at most `max_bytes`.
pub(crate) async fn read(mut response: reqwest::Response, max_bytes: u64) -> Body {
    let mut preview = Preview::default();
    if response.content_length().is_some_and(|len| len > max_bytes) {
        return preview.ended(End::TooLarge);
    }
    let mut total: u64 = 0;
    loop {
        let chunk = match response.chunk().await {
            Ok(Some(chunk)) => chunk,
            Ok(None) => return preview.ended(End::Complete),
            Err(e) => return preview.ended(End::Failed(e)),
        };
        preview.push(&chunk);
        total = total.saturating_add(chunk.len() as u64);
        if total > max_bytes {
            return preview.ended(End::TooLarge);
        }
    }
}

/// The start of a body.
#[derive(Default)]
struct Preview {
    bytes: Vec<u8>,
    truncated: bool,
}

impl Preview {
    fn push(&mut self, chunk: &[u8]) {
        let room = BODY_PREVIEW_BYTES - self.bytes.len();
        let kept = chunk.len().min(room);
        self.bytes.extend_from_slice(&chunk[..kept]);
        self.truncated |= kept < chunk.len();
    }

    fn ended(self, end: End) -> Body {
        let mut preview = String::from_utf8_lossy(&self.bytes).into_owned();
        if self.truncated {
            preview.push_str(" …");
        }
        Body { preview, end }
    }
}
