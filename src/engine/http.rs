//! HTTP/1.1 response framing (RFC 9112 §6): where one response ends and the next begins.
//!
//! The parser is a streaming state machine fed whatever the socket returned. It never
//! copies or keeps the body: body bytes are only counted past. Only the status line and
//! headers must be whole in the buffer before they are parsed (httparse needs them
//! contiguous); chunk-size and trailer lines likewise. Everything else is consumed as it
//! arrives, so a 91 KiB body costs as many reads as the socket needs, no more.
//!
//! Framing rules implemented (RFC 9112 §6.3): responses to HEAD and 1xx/204/304 have no
//! body; 1xx interim responses are skipped; `Transfer-Encoding: chunked` wins over
//! `Content-Length`; otherwise `Content-Length`; otherwise the body runs until the server
//! closes. Keep-alive follows the version default (1.1 on, 1.0 off) and `Connection`.

use thiserror::Error;

/// Most headers a response may carry; more is treated as malformed.
const MAX_HEADERS: usize = 64;

/// A response whose framing is complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Complete {
    /// The final (non-1xx) status code.
    pub status: u16,
    /// Whether the connection may carry another request after this response.
    pub keep_alive: bool,
}

/// Why a byte stream is not a valid HTTP/1.x response.
#[derive(Debug, Error, PartialEq, Eq)]
pub enum ParseError {
    #[error("malformed status line or headers: {0}")]
    Head(String),
    #[error("invalid Content-Length")]
    ContentLength,
    #[error("invalid chunk size line")]
    ChunkSize,
    #[error("missing CRLF after chunk data")]
    ChunkEnd,
    #[error("unsupported transfer encoding `{0}`")]
    TransferEncoding(String),
    #[error("101 Switching Protocols is not supported")]
    Upgrade,
    #[error("connection closed before the response was complete")]
    Truncated,
}

/// The port of the HTTP/3 an `Alt-Svc` field value offers (RFC 7838 §3:
/// `h3=":443"; ma=86400, h3-29=":443"`), when it offers `h3`.
pub fn alt_svc_h3(value: &[u8]) -> Option<u16> {
    let value = std::str::from_utf8(value).ok()?;
    value.split(',').find_map(|alt| {
        let (proto, rest) = alt.split(';').next()?.trim().split_once('=')?;
        if proto.trim() != "h3" {
            return None;
        }
        let authority = rest.trim().trim_matches('"');
        authority.rsplit_once(':')?.1.parse().ok()
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Waiting for a complete status line and header block.
    Head,
    /// Counting down a Content-Length body.
    Body { remaining: u64 },
    /// Waiting for a chunk-size line.
    ChunkSize,
    /// Inside a chunk's data.
    ChunkData { remaining: u64 },
    /// The CRLF that ends a chunk's data.
    ChunkEnd,
    /// Trailer lines after the last chunk, up to an empty line.
    Trailers,
    /// The body runs until the server closes the connection.
    UntilClose,
}

/// Streaming parser for one connection's sequence of responses.
#[derive(Debug, Clone)]
pub struct ResponseParser {
    state: State,
    status: u16,
    keep_alive: bool,
    head_request: bool,
    /// The UDP port of the HTTP/3 a response's `Alt-Svc` offered (the first seen).
    pub alt_svc_h3: Option<u16>,
}

/// What one call to [`ResponseParser::feed`] achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fed {
    /// Bytes consumed from the front of the buffer; the caller keeps the rest.
    pub consumed: usize,
    /// Set when a response ended inside the consumed bytes.
    pub complete: Option<Complete>,
}

impl ResponseParser {
    /// A parser for responses to requests made with `method` (HEAD responses have no body).
    pub fn new(head_request: bool) -> Self {
        ResponseParser {
            state: State::Head,
            status: 0,
            keep_alive: true,
            head_request,
            alt_svc_h3: None,
        }
    }

    /// Whether the next response answers a HEAD request (a `--targets` mix may hold
    /// both).
    #[inline]
    pub fn set_head(&mut self, head_request: bool) {
        self.head_request = head_request;
    }

    /// True when no byte of a response has been consumed yet.
    pub fn is_idle(&self) -> bool {
        self.state == State::Head
    }

    /// Forgets any partial response (after the connection is replaced).
    pub fn reset(&mut self) {
        self.state = State::Head;
    }

    /// Consumes bytes from `buf` until one response completes or more bytes are needed.
    ///
    /// When `consumed < buf.len()` and `complete` is `None`, the remaining bytes are an
    /// incomplete line or header block: the caller must keep them and append more.
    pub fn feed(&mut self, buf: &[u8]) -> Result<Fed, ParseError> {
        let mut pos = 0;
        loop {
            let rest = &buf[pos..];
            match self.state {
                State::Head => {
                    if rest.is_empty() {
                        return Ok(Fed::more(pos));
                    }
                    match self.parse_head(rest)? {
                        None => return Ok(Fed::more(pos)),
                        Some(n) => {
                            pos += n;
                            if let Some(done) = self.after_head_done() {
                                return Ok(Fed::done(pos, done));
                            }
                        }
                    }
                }
                State::Body { remaining } => {
                    let take = remaining.min(rest.len() as u64);
                    pos += take as usize;
                    if take == remaining {
                        return Ok(Fed::done(pos, self.finish()));
                    }
                    self.state = State::Body {
                        remaining: remaining - take,
                    };
                    return Ok(Fed::more(pos));
                }
                State::ChunkSize => match httparse::parse_chunk_size(rest) {
                    Ok(httparse::Status::Complete((n, size))) => {
                        pos += n;
                        self.state = if size == 0 {
                            State::Trailers
                        } else {
                            State::ChunkData { remaining: size }
                        };
                    }
                    Ok(httparse::Status::Partial) => return Ok(Fed::more(pos)),
                    Err(_) => return Err(ParseError::ChunkSize),
                },
                State::ChunkData { remaining } => {
                    let take = remaining.min(rest.len() as u64);
                    pos += take as usize;
                    if take == remaining {
                        self.state = State::ChunkEnd;
                    } else {
                        self.state = State::ChunkData {
                            remaining: remaining - take,
                        };
                        return Ok(Fed::more(pos));
                    }
                }
                State::ChunkEnd => match take_line(rest) {
                    None => return Ok(Fed::more(pos)),
                    Some((0, n)) => {
                        pos += n;
                        self.state = State::ChunkSize;
                    }
                    Some(_) => return Err(ParseError::ChunkEnd),
                },
                State::Trailers => match take_line(rest) {
                    None => return Ok(Fed::more(pos)),
                    Some((0, n)) => {
                        pos += n;
                        return Ok(Fed::done(pos, self.finish()));
                    }
                    Some((_, n)) => pos += n,
                },
                State::UntilClose => return Ok(Fed::more(buf.len())),
            }
        }
    }

    /// The server closed the connection: completes a close-delimited body, reports a
    /// truncated response, or `Ok(None)` when the connection was between responses.
    pub fn eof(&mut self) -> Result<Option<Complete>, ParseError> {
        match self.state {
            State::UntilClose => Ok(Some(self.finish())),
            State::Head => Ok(None),
            _ => {
                self.state = State::Head;
                Err(ParseError::Truncated)
            }
        }
    }

    /// Parses a complete head at the front of `buf`; `None` when it is not all there yet.
    fn parse_head(&mut self, buf: &[u8]) -> Result<Option<usize>, ParseError> {
        // Left uninitialised: httparse writes only the headers it finds. (Initialising all
        // 64 first made this parse 5.0% of the client's CPU per keep-alive 1 KiB response
        // in a perf profile, 2.4% without.)
        let mut headers = [const { std::mem::MaybeUninit::uninit() }; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut []);
        let parsed = httparse::ParserConfig::default().parse_response_with_uninit_headers(
            &mut resp,
            buf,
            &mut headers,
        );
        let n = match parsed {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) => return Ok(None),
            Err(e) => return Err(ParseError::Head(e.to_string())),
        };
        let status = resp.code.unwrap_or(0);
        // Three digits, 100–999 (RFC 9110 §15); anything else is not HTTP.
        if !(100..=999).contains(&status) {
            return Err(ParseError::Head(format!("status code {status}")));
        }
        let mut keep_alive = resp.version == Some(1);
        let mut content_length: Option<u64> = None;
        let mut chunked = false;
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let v = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .ok_or(ParseError::ContentLength)?;
                if content_length.is_some_and(|old| old != v) {
                    return Err(ParseError::ContentLength);
                }
                content_length = Some(v);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                let v = String::from_utf8_lossy(h.value);
                let last = v.rsplit(',').next().unwrap_or("").trim();
                if last.eq_ignore_ascii_case("chunked") {
                    chunked = true;
                } else if !last.eq_ignore_ascii_case("identity") {
                    return Err(ParseError::TransferEncoding(last.to_string()));
                }
            } else if self.alt_svc_h3.is_none() && h.name.eq_ignore_ascii_case("alt-svc") {
                self.alt_svc_h3 = alt_svc_h3(h.value);
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in h.value.split(|&b| b == b',') {
                    let token = token.trim_ascii();
                    if token.eq_ignore_ascii_case(b"close") {
                        keep_alive = false;
                    } else if token.eq_ignore_ascii_case(b"keep-alive") {
                        keep_alive = true;
                    }
                }
            }
        }
        self.status = status;
        self.keep_alive = keep_alive;
        self.state = if (100..200).contains(&status) {
            if status == 101 {
                return Err(ParseError::Upgrade);
            }
            State::Head // interim response: the final one follows
        } else if self.head_request || status == 204 || status == 304 {
            State::Body { remaining: 0 }
        } else if chunked {
            State::ChunkSize
        } else if let Some(len) = content_length {
            State::Body { remaining: len }
        } else {
            self.keep_alive = false;
            State::UntilClose
        };
        Ok(Some(n))
    }

    /// After a head: a bodiless final response is complete at once.
    fn after_head_done(&mut self) -> Option<Complete> {
        match self.state {
            State::Body { remaining: 0 } => Some(self.finish()),
            _ => None,
        }
    }

    /// Bytes of a Content-Length body still to come, while the parser is inside one:
    /// they may be discarded unread and accounted with [`skip`](Self::skip).
    pub fn body_remaining(&self) -> Option<u64> {
        match self.state {
            State::Body { remaining } => Some(remaining),
            _ => None,
        }
    }

    /// Accounts for `n` bytes of a Content-Length body discarded unread (at most
    /// [`body_remaining`](Self::body_remaining)); the response when none remain.
    pub fn skip(&mut self, n: u64) -> Option<Complete> {
        let State::Body { remaining } = self.state else {
            return None;
        };
        let left = remaining - n.min(remaining);
        if left == 0 {
            return Some(self.finish());
        }
        self.state = State::Body { remaining: left };
        None
    }

    fn finish(&mut self) -> Complete {
        self.state = State::Head;
        Complete {
            status: self.status,
            keep_alive: self.keep_alive,
        }
    }
}

impl Fed {
    fn more(consumed: usize) -> Self {
        Fed {
            consumed,
            complete: None,
        }
    }
    fn done(consumed: usize, c: Complete) -> Self {
        Fed {
            consumed,
            complete: Some(c),
        }
    }
}

/// Finds one line (LF or CRLF terminated): `(content length, bytes including the end)`.
fn take_line(buf: &[u8]) -> Option<(usize, usize)> {
    let lf = buf.iter().position(|&b| b == b'\n')?;
    let content = if lf > 0 && buf[lf - 1] == b'\r' {
        lf - 1
    } else {
        lf
    };
    Some((content, lf + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `stream` in the pieces given by `cuts`, keeping unconsumed bytes the way a
    /// connection does, and returns the responses completed plus whatever EOF yields.
    fn run(stream: &[u8], cuts: &[usize], head: bool) -> Result<Vec<Complete>, ParseError> {
        let mut p = ResponseParser::new(head);
        let mut pending: Vec<u8> = Vec::new();
        let mut out = Vec::new();
        let mut bounds: Vec<usize> = cuts.to_vec();
        bounds.push(stream.len());
        let mut start = 0;
        for &end in &bounds {
            pending.extend_from_slice(&stream[start..end]);
            start = end;
            loop {
                let fed = p.feed(&pending)?;
                pending.drain(..fed.consumed);
                match fed.complete {
                    Some(c) => out.push(c),
                    None => break,
                }
            }
        }
        if let Some(c) = p.eof()? {
            out.push(c);
        }
        Ok(out)
    }

    fn ok(status: u16, keep_alive: bool) -> Complete {
        Complete { status, keep_alive }
    }

    /// Every way of splitting the stream in two, and byte by byte, gives the same result.
    fn check_all_splits(stream: &[u8], head: bool, want: &[Complete]) {
        assert_eq!(run(stream, &[], head).unwrap(), want, "whole");
        for cut in 0..=stream.len() {
            assert_eq!(run(stream, &[cut], head).unwrap(), want, "cut at {cut}");
        }
        let every: Vec<usize> = (1..stream.len()).collect();
        assert_eq!(run(stream, &every, head).unwrap(), want, "byte by byte");
    }

    #[test]
    fn content_length_pipelined_responses() {
        let s = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhelloHTTP/1.1 404 Not Found\r\nContent-Length: 3\r\nConnection: close\r\n\r\nnop";
        check_all_splits(s, false, &[ok(200, true), ok(404, false)]);
    }

    #[test]
    fn chunked_with_extensions_and_trailers() {
        let s = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\nX-Trailer: yes\r\nOther: 2\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        check_all_splits(s, false, &[ok(200, true), ok(200, true)]);
    }

    #[test]
    fn chunked_wins_over_content_length() {
        let s = b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: gzip, chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n";
        check_all_splits(s, false, &[ok(200, true)]);
    }

    #[test]
    fn close_delimited_body_ends_at_eof() {
        let s = b"HTTP/1.0 200 OK\r\nServer: x\r\n\r\nbody until the end";
        check_all_splits(s, false, &[ok(200, false)]);
    }

    #[test]
    fn interim_responses_are_skipped() {
        let s = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
        check_all_splits(s, false, &[ok(201, true)]);
    }

    #[test]
    fn bodiless_statuses_and_head() {
        let s = b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\nContent-Length: 50\r\n\r\n";
        check_all_splits(s, false, &[ok(204, true), ok(304, true)]);
        let h = b"HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n";
        check_all_splits(h, true, &[ok(200, true), ok(200, true)]);
    }

    #[test]
    fn http10_keep_alive_is_opt_in() {
        let s = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 1\r\n\r\nx";
        check_all_splits(s, false, &[ok(200, true)]);
        let s = b"HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx";
        check_all_splits(s, false, &[ok(200, false)]);
    }

    #[test]
    fn malformed_inputs_are_errors() {
        assert!(matches!(
            run(b"HTTP/1.1 2x0 OK\r\n\r\n", &[], false),
            Err(ParseError::Head(_))
        ));
        assert!(matches!(
            run(b"garbage\r\n\r\n", &[], false),
            Err(ParseError::Head(_))
        ));
        assert_eq!(
            run(
                b"HTTP/1.1 200 OK\r\nContent-Length: abc\r\n\r\n",
                &[],
                false
            ),
            Err(ParseError::ContentLength)
        );
        assert_eq!(
            run(
                b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
                &[],
                false
            ),
            Err(ParseError::ContentLength)
        );
        assert_eq!(
            run(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
                &[],
                false
            ),
            Err(ParseError::ChunkSize)
        );
        assert_eq!(
            run(
                b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nabc\r\n",
                &[],
                false
            ),
            Err(ParseError::ChunkEnd)
        );
        assert_eq!(
            run(b"HTTP/1.1 101 Switching\r\n\r\n", &[], false),
            Err(ParseError::Upgrade)
        );
    }

    #[test]
    fn truncated_bodies_are_errors_at_eof() {
        let s = b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort";
        for cut in 0..=s.len() {
            assert_eq!(run(s, &[cut], false), Err(ParseError::Truncated));
        }
        // A partial head at EOF is also truncated, not silently dropped.
        let mut p = ResponseParser::new(false);
        assert_eq!(p.feed(b"HTTP/1.1 200").unwrap().consumed, 0);
        assert!(p.is_idle());
    }

    #[test]
    fn alt_svc_offers_of_http3() {
        assert_eq!(alt_svc_h3(br#"h3=":8443"; ma=2592000"#), Some(8443));
        assert_eq!(
            alt_svc_h3(br#"h3-29=":1", h3="alt.example:443""#),
            Some(443)
        );
        assert_eq!(alt_svc_h3(br#"h2=":443""#), None);
        assert_eq!(alt_svc_h3(b"clear"), None);
    }
}
