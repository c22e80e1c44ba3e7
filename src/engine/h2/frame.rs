//! The HTTP/2 frame layer a load-generating client needs (RFC 9113 §4, §6): frame
//! headers, the connection preface with our SETTINGS, and the request's frames built
//! once before the run with only the stream id patched per request.
//!
//! HPACK (RFC 7541) is the `httlib-hpack` crate's. The request's header block is encoded
//! once, never adding to the dynamic table (static-table indexes and literals without
//! indexing), so the same bytes are valid on every stream of every connection: no
//! encoder state to keep per connection.

use crate::spec::{Spec, Target};

/// What a client sends first on every HTTP/2 connection (RFC 9113 §3.4).
pub const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

pub const DATA: u8 = 0x0;
pub const HEADERS: u8 = 0x1;
pub const RST_STREAM: u8 = 0x3;
pub const SETTINGS: u8 = 0x4;
pub const PUSH_PROMISE: u8 = 0x5;
pub const PING: u8 = 0x6;
pub const GOAWAY: u8 = 0x7;
pub const WINDOW_UPDATE: u8 = 0x8;
pub const CONTINUATION: u8 = 0x9;

pub const END_STREAM: u8 = 0x1;
pub const ACK: u8 = 0x1;
pub const END_HEADERS: u8 = 0x4;
pub const PADDED: u8 = 0x8;
pub const PRIORITY_FLAG: u8 = 0x20;

/// The size of a frame header.
pub const HEAD: usize = 9;
/// The largest frame payload either side sends: the protocol's default, which we never
/// raise (RFC 9113 §6.5.2, SETTINGS_MAX_FRAME_SIZE).
pub const MAX_FRAME: usize = 16_384;
/// A flow-control window until the server's SETTINGS or WINDOW_UPDATE change it: the
/// connection's, and a new stream's (RFC 9113 §6.9.2).
pub const INITIAL_WINDOW: u32 = 65_535;
/// A request body up to this size is prebuilt with its HEADERS (in DATA frames of at most
/// `MAX_FRAME`) and written in one go when the windows allow it; a larger one, or one
/// the windows do not allow, is sent as the server's WINDOW_UPDATEs open them.
pub const WHOLE_BODY: usize = INITIAL_WINDOW as usize;

/// Our receive window, per stream (by SETTINGS) and for the connection (by one
/// WINDOW_UPDATE after the preface): large, so a response never waits on us and
/// WINDOW_UPDATEs are rare (one per half a window consumed).
pub const RECV_WINDOW: u32 = 1 << 30;

/// A parsed frame header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHead {
    pub len: usize,
    pub ty: u8,
    pub flags: u8,
    pub stream: u32,
}

impl FrameHead {
    /// Reads a frame header from the first 9 bytes of `b`.
    #[inline]
    pub fn parse(b: &[u8]) -> FrameHead {
        FrameHead {
            len: (b[0] as usize) << 16 | (b[1] as usize) << 8 | b[2] as usize,
            ty: b[3],
            flags: b[4],
            stream: u32::from_be_bytes([b[5], b[6], b[7], b[8]]) & 0x7fff_ffff,
        }
    }
}

/// Appends a frame header.
#[inline]
pub fn head(out: &mut Vec<u8>, len: usize, ty: u8, flags: u8, stream: u32) {
    let l = (len as u32).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], ty, flags]);
    out.extend_from_slice(&(stream & 0x7fff_ffff).to_be_bytes());
}

/// The connection preface, our SETTINGS (no server push, a large stream window) and
/// the WINDOW_UPDATE that opens the connection window as wide.
pub fn preface(out: &mut Vec<u8>) {
    out.extend_from_slice(PREFACE);
    let settings: [(u16, u32); 2] = [(0x2, 0), (0x4, RECV_WINDOW)];
    head(out, settings.len() * 6, SETTINGS, 0, 0);
    for (id, v) in settings {
        out.extend_from_slice(&id.to_be_bytes());
        out.extend_from_slice(&v.to_be_bytes());
    }
    window_update(out, 0, RECV_WINDOW - INITIAL_WINDOW);
}

/// RST_STREAM's error code for a stream we no longer want (RFC 9113 §7).
pub const CANCEL: u32 = 0x8;

/// Ends stream `stream` from our side with `code`.
pub fn rst_stream(out: &mut Vec<u8>, stream: u32, code: u32) {
    head(out, 4, RST_STREAM, 0, stream);
    out.extend_from_slice(&code.to_be_bytes());
}

#[inline]
pub fn window_update(out: &mut Vec<u8>, stream: u32, inc: u32) {
    head(out, 4, WINDOW_UPDATE, 0, stream);
    out.extend_from_slice(&inc.to_be_bytes());
}

/// One request's frames, built once: HEADERS (and DATA frames with a body of at most
/// `WHOLE_BODY`), with the places of the stream id in each frame header; and the body,
/// for DATA frames written as flow control allows.
#[derive(Debug, Clone)]
pub struct RequestFrames {
    pub bytes: Vec<u8>,
    /// Offsets of the 4-byte stream ids to patch.
    id_at: Vec<usize>,
    /// The HEADERS frame's length: the front of `bytes`.
    head_len: usize,
    /// `bytes` holds the DATA frames too.
    whole: bool,
    body: Vec<u8>,
    /// Length of the body: the send windows it spends.
    pub body_len: usize,
}

/// The run's requests as HTTP/2 frames, one per target (like `spec::Requests`).
#[derive(Debug, Clone)]
pub struct H2Requests {
    pub each: Vec<RequestFrames>,
    /// The longest body of them (whether a stream may need a send window).
    pub max_body: usize,
    /// The longest prebuilt frames of them (a connection's write buffer starts so).
    pub max_bytes: usize,
}

impl H2Requests {
    /// The frames of `spec`'s one request, or of each target of its mix.
    pub fn build(spec: &Spec, target: &Target, body: &[u8]) -> Result<H2Requests, String> {
        let each = match &spec.mix {
            None => vec![RequestFrames::build(spec, target, body)?],
            Some(mix) => mix
                .loaded
                .iter()
                .map(|t| {
                    let (s, tg) = t.apply(spec, target);
                    RequestFrames::build(&s, &tg, t.body)
                })
                .collect::<Result<_, _>>()?,
        };
        Ok(H2Requests {
            max_body: each.iter().map(|f| f.body_len).max().unwrap_or(0),
            max_bytes: each.iter().map(|f| f.bytes.len()).max().unwrap_or(0),
            each,
        })
    }
}

/// Request headers that mean something only to an HTTP/1.1 connection (RFC 9113
/// §8.2.2): never sent over HTTP/2.
const CONNECTION_SPECIFIC: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
    "te",
];

impl RequestFrames {
    /// The request `spec` describes, as HTTP/2 frames. Errors are one-line messages
    /// (checked before the load).
    pub fn build(spec: &Spec, target: &Target, body: &[u8]) -> Result<RequestFrames, String> {
        let mut authority = target.host_header();
        let mut fields: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
        for h in &spec.headers {
            let Some((n, v)) = h.split_once(':') else {
                continue;
            };
            let name = n.trim().to_ascii_lowercase();
            if name == "host" {
                authority = v.trim().to_string();
            } else if !CONNECTION_SPECIFIC.contains(&name.as_str()) {
                fields.push((name.into_bytes(), v.trim().as_bytes().to_vec()));
            }
        }
        let has = |f: &[(Vec<u8>, Vec<u8>)], n: &str| f.iter().any(|(k, _)| k == n.as_bytes());
        if !body.is_empty() && !has(&fields, "content-length") {
            fields.push((
                b"content-length".to_vec(),
                body.len().to_string().into_bytes(),
            ));
        }
        if let Some(a) = spec.authorization.as_ref() {
            if !has(&fields, "authorization") {
                fields.push((b"authorization".to_vec(), a.as_bytes().to_vec()));
            }
        }
        let scheme: &[u8] = if target.tls { b"https" } else { b"http" };
        let mut all: Vec<(&[u8], &[u8])> = vec![
            (b":method", spec.method.as_bytes()),
            (b":scheme", scheme),
            (b":authority", authority.as_bytes()),
            (b":path", target.path.as_bytes()),
        ];
        all.extend(fields.iter().map(|(n, v)| (n.as_slice(), v.as_slice())));
        let mut enc = httlib_hpack::Encoder::default();
        let mut block = Vec::new();
        for (n, v) in &all {
            // BEST_FORMAT without WITH_INDEXING: static-table indexes where they match,
            // else literals without indexing; nothing enters a dynamic table.
            enc.encode(
                (n.to_vec(), v.to_vec(), httlib_hpack::Encoder::BEST_FORMAT),
                &mut block,
            )
            .map_err(|e| format!("cannot encode the request headers for HTTP/2: {e:?}"))?;
        }
        if block.len() > MAX_FRAME {
            return Err(format!(
                "the request headers are {} bytes once encoded: over HTTP/2 at most {MAX_FRAME} — use --h1",
                block.len()
            ));
        }
        let whole = body.len() <= WHOLE_BODY;
        let prebuilt = if whole { body.len() } else { 0 };
        let mut bytes =
            Vec::with_capacity(block.len() + prebuilt + (2 + prebuilt / MAX_FRAME) * HEAD);
        let mut id_at = vec![5];
        let flags = END_HEADERS | if body.is_empty() { END_STREAM } else { 0 };
        head(&mut bytes, block.len(), HEADERS, flags, 0);
        bytes.extend_from_slice(&block);
        let head_len = bytes.len();
        if whole {
            let from = bytes.len();
            Self::data(&mut bytes, 0, body, true);
            let mut at = from;
            while at < bytes.len() {
                id_at.push(at + 5);
                at += HEAD + FrameHead::parse(&bytes[at..]).len;
            }
        }
        Ok(RequestFrames {
            bytes,
            id_at,
            head_len,
            whole,
            body: body.to_vec(),
            body_len: body.len(),
        })
    }

    /// Appends this request, HEADERS and the whole body, on stream `id` to `out`. Only
    /// for a body of at most `WHOLE_BODY` that the windows allow (see `fits`).
    #[inline]
    pub fn write(&self, out: &mut Vec<u8>, id: u32) {
        let at = out.len();
        out.extend_from_slice(&self.bytes);
        let id = id.to_be_bytes();
        for &o in &self.id_at {
            out[at + o..at + o + 4].copy_from_slice(&id);
        }
    }

    /// Whether the whole request may be written at once with `window` bytes of send
    /// window (the smaller of the stream's and the connection's).
    #[inline]
    pub fn fits(&self, window: i64) -> bool {
        self.whole && self.body_len as i64 <= window
    }

    /// Appends only the HEADERS frame on stream `id`: the body follows with
    /// [`write_data`](Self::write_data).
    pub fn write_headers(&self, out: &mut Vec<u8>, id: u32) {
        let at = out.len();
        out.extend_from_slice(&self.bytes[..self.head_len]);
        out[at + 5..at + 9].copy_from_slice(&id.to_be_bytes());
    }

    /// Appends DATA frames on stream `id` carrying the `n` body bytes from `from`; the
    /// frame with the body's last byte ends the stream.
    pub fn write_data(&self, out: &mut Vec<u8>, id: u32, from: usize, n: usize) {
        let ends = from + n == self.body.len();
        Self::data(out, id, &self.body[from..from + n], ends);
    }

    /// `chunk` in DATA frames of at most `MAX_FRAME`, the last with END_STREAM if `ends`.
    fn data(out: &mut Vec<u8>, id: u32, chunk: &[u8], ends: bool) {
        let frames = chunk.len().div_ceil(MAX_FRAME);
        for (k, part) in chunk.chunks(MAX_FRAME).enumerate() {
            let flags = if ends && k + 1 == frames {
                END_STREAM
            } else {
                0
            };
            head(out, part.len(), DATA, flags, id);
            out.extend_from_slice(part);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        Target {
            tls: false,
            host: "example.test".into(),
            port: 8080,
            path: "/a?b=1".into(),
            addrs: vec![],
            resolve_us: 0,
        }
    }

    fn spec() -> Spec {
        let mut s: Spec = serde_json::from_str(
            r#"{"url":"http://example.test:8080/a?b=1","connections":1,"threads":1,
            "duration_s":null,"requests":1,"connreqs":null,"method":"POST",
            "headers":["X-Test: yes","Connection: keep-alive"],"body_bytes":3,
            "timeout_s":2.0,"insecure":false}"#,
        )
        .unwrap();
        s.authorization = None;
        s
    }

    #[test]
    fn request_frames_decode_to_the_request_and_patch_the_stream_id() {
        let r = RequestFrames::build(&spec(), &target(), b"abc").unwrap();
        let mut out = Vec::new();
        r.write(&mut out, 7);
        r.write(&mut out, 9);
        let h = FrameHead::parse(&out);
        assert_eq!((h.ty, h.stream, h.flags), (HEADERS, 7, END_HEADERS));
        let mut dec = httlib_hpack::Decoder::default();
        // Decoded twice by one decoder: the block needs no state from the first time.
        for _ in 0..2 {
            let mut fields = Vec::new();
            dec.decode(&mut out[HEAD..HEAD + h.len].to_vec(), &mut fields)
                .unwrap();
            assert!(fields.iter().all(|f| f.2 & 0x4 == 0), "nothing indexed");
            let get = |n: &[u8]| {
                fields
                    .iter()
                    .find(|(k, _, _)| k == n)
                    .map(|(_, v, _)| String::from_utf8(v.clone()).unwrap())
            };
            assert_eq!(get(b":method").as_deref(), Some("POST"));
            assert_eq!(get(b":authority").as_deref(), Some("example.test:8080"));
            assert_eq!(get(b":path").as_deref(), Some("/a?b=1"));
            assert_eq!(get(b"x-test").as_deref(), Some("yes"));
            assert_eq!(get(b"content-length").as_deref(), Some("3"));
            assert_eq!(get(b"connection"), None, "connection-specific");
        }
        let d = FrameHead::parse(&out[HEAD + h.len..]);
        assert_eq!((d.ty, d.stream, d.flags, d.len), (DATA, 7, END_STREAM, 3));
        let second = FrameHead::parse(&out[r.bytes.len()..]);
        assert_eq!(second.stream, 9);
    }

    /// Parses `out` into (type, length, END_STREAM, stream) per frame.
    fn frames_of(out: &[u8]) -> Vec<(u8, usize, u8, u32)> {
        let mut at = 0;
        let mut frames = Vec::new();
        while at < out.len() {
            let f = FrameHead::parse(&out[at..]);
            frames.push((f.ty, f.len, f.flags & END_STREAM, f.stream));
            at += HEAD + f.len;
        }
        assert_eq!(at, out.len());
        frames
    }

    #[test]
    fn a_body_larger_than_a_stream_window_goes_in_pieces_the_last_ending_the_stream() {
        let body: Vec<u8> = (0..100_000u32).map(|i| i as u8).collect();
        let r = RequestFrames::build(&spec(), &target(), &body).unwrap();
        assert!(!r.fits(i64::MAX), "too large to go whole");
        let mut out = Vec::new();
        r.write_headers(&mut out, 3);
        let head = frames_of(&out);
        assert_eq!(head, vec![(HEADERS, head[0].1, 0, 3)], "no END_STREAM yet");
        // As windows open: 20,000 bytes, then 50,000, then the rest.
        let mut sent = Vec::new();
        for (from, n) in [(0, 20_000), (20_000, 50_000), (70_000, 30_000)] {
            let at = out.len();
            r.write_data(&mut out, 3, from, n);
            let f = frames_of(&out[at..]);
            assert!(f
                .iter()
                .all(|&(ty, len, _, id)| ty == DATA && len <= MAX_FRAME && id == 3));
            assert_eq!(f.iter().map(|x| x.1).sum::<usize>(), n);
            sent.push(f.iter().map(|x| x.2).collect::<Vec<_>>());
        }
        assert!(sent[0].iter().chain(&sent[1]).all(|&e| e == 0));
        assert_eq!(sent[2].last(), Some(&END_STREAM));
        // The DATA payloads, in order, are the body.
        let mut got = Vec::new();
        let mut p = head[0].1 + HEAD;
        while p < out.len() {
            let h = FrameHead::parse(&out[p..]);
            got.extend_from_slice(&out[p + HEAD..p + HEAD + h.len]);
            p += HEAD + h.len;
        }
        assert_eq!(got, body);
    }

    #[test]
    fn a_body_goes_in_frames_of_at_most_16_kib_the_last_ending_the_stream() {
        let body = vec![7u8; 40_000];
        let r = RequestFrames::build(&spec(), &target(), &body).unwrap();
        let mut out = Vec::new();
        r.write(&mut out, 11);
        let mut at = 0;
        let mut frames = Vec::new();
        while at < out.len() {
            let f = FrameHead::parse(&out[at..]);
            assert_eq!(f.stream, 11);
            frames.push((f.ty, f.len, f.flags & END_STREAM));
            at += HEAD + f.len;
        }
        assert_eq!(at, out.len());
        assert_eq!(frames[0].0, HEADERS);
        assert_eq!(
            &frames[1..],
            &[
                (DATA, 16_384, 0),
                (DATA, 16_384, 0),
                (DATA, 7_232, END_STREAM)
            ]
        );
    }

    #[test]
    fn preface_carries_settings_and_the_window() {
        let mut out = Vec::new();
        preface(&mut out);
        assert!(out.starts_with(PREFACE));
        let s = FrameHead::parse(&out[PREFACE.len()..]);
        assert_eq!((s.ty, s.len, s.stream), (SETTINGS, 12, 0));
        let w = FrameHead::parse(&out[PREFACE.len() + HEAD + 12..]);
        assert_eq!((w.ty, w.len, w.stream), (WINDOW_UPDATE, 4, 0));
    }
}
