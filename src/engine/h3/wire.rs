//! A request's and its response's bytes on a QUIC stream (RFC 9114 frames, RFC 9204
//! field sections), without the `h3` crate's per-request work.
//!
//! DESIGN: the `h3` crate still opens the connection's control and QPACK streams and
//! reads the server's SETTINGS and GOAWAY (`h3::client::new` and its driver in
//! `h3/mod.rs`), but a request stream is only a HEADERS frame (and a DATA frame with a
//! body) out and frames in. Through `h3`, each request built `http` types, QPACK-encoded
//! them with Huffman, and each response was decoded into a `HeaderMap`: about a quarter of
//! the client's CPU per response (perf, `bench/h3-cost`). Here the request's bytes are
//! encoded once per target (literals without Huffman; this client announces no dynamic
//! table, so the server's field sections use the static table and literals only) and
//! written as one chunk; a response's frames are read from quinn's chunks as they
//! come, its `:status` and the length of its fields (the bytes counted) taken from the
//! field section without building it (Huffman strings through the HTTP/2 decoder's
//! `huffman_decode`).

use std::cell::RefCell;

use bytes::{BufMut, Bytes, BytesMut};

use super::qpack_table::STATIC;
use crate::engine::h2::huffman::huffman_decode;

/// HTTP/3 frame types (RFC 9114 §7.2).
const DATA: u64 = 0x0;
const HEADERS: u64 = 0x1;
/// Frames that never come on a request stream (§7.2.3-7.2.7): CANCEL_PUSH, SETTINGS,
/// PUSH_PROMISE (this client allows no push), GOAWAY, MAX_PUSH_ID.
const FORBIDDEN: [u64; 5] = [0x3, 0x4, 0x5, 0x7, 0xd];
/// The largest field section taken from a server (its HEADERS frame).
const MAX_HEADERS: u64 = 1 << 20;

/// A response that breaks RFC 9114 or RFC 9204.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Malformed;

/// A QUIC variable-length integer (RFC 9000 §16) appended to `out`.
fn put_varint(out: &mut BytesMut, v: u64) {
    if v < 1 << 6 {
        out.put_u8(v as u8);
    } else if v < 1 << 14 {
        out.put_u16(0x4000 | v as u16);
    } else if v < 1 << 30 {
        out.put_u32(0x8000_0000 | v as u32);
    } else {
        out.put_u64(0xc000_0000_0000_0000 | v);
    }
}

/// A QPACK/HPACK integer with an `n`-bit prefix whose upper bits are `flags`.
fn put_int(out: &mut BytesMut, flags: u8, n: u32, mut v: usize) {
    let max = (1usize << n) - 1;
    if v < max {
        out.put_u8(flags | v as u8);
        return;
    }
    out.put_u8(flags | max as u8);
    v -= max;
    while v >= 0x80 {
        out.put_u8(0x80 | (v & 0x7f) as u8);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// A string literal without Huffman: its length with an `n`-bit prefix, then its bytes.
fn put_str(out: &mut BytesMut, flags: u8, n: u32, s: &[u8]) {
    put_int(out, flags, n, s.len());
    out.put_slice(s);
}

/// A pseudo-header: the static entry when it matches exactly (an indexed field line),
/// else a literal with the name of static entry `name`.
fn put_pseudo(out: &mut BytesMut, name: usize, value: &[u8]) {
    let n = STATIC[name].0;
    match STATIC.iter().position(|&(sn, sv)| sn == n && sv == value) {
        // Indexed field line, static (§4.5.2): 1 T=1 index(6).
        Some(i) => put_int(out, 0xc0, 6, i),
        None => {
            // Literal with name reference, static (§4.5.4): 01 N=0 T=1 index(4).
            put_int(out, 0x50, 4, name);
            put_str(out, 0, 7, value);
        }
    }
}

/// A request's bytes on its stream: a HEADERS frame (its field section with the
/// pseudo-headers, then `headers` as literals with literal names: names lower-case, as
/// HTTP/3 requires), and a DATA frame when `body` is not empty.
pub(super) fn request(
    method: &str,
    authority: &str,
    path: &str,
    headers: &[(&str, &[u8])],
    body: &[u8],
) -> Bytes {
    let mut block = BytesMut::new();
    // Required Insert Count 0, Delta Base 0 (§4.5.1): no dynamic table.
    block.put_slice(&[0, 0]);
    put_pseudo(&mut block, 15, method.as_bytes());
    put_pseudo(&mut block, 22, b"https");
    put_pseudo(&mut block, 0, authority.as_bytes());
    put_pseudo(&mut block, 1, path.as_bytes());
    for (name, value) in headers {
        // Literal with literal name (§4.5.6): 001 N=0 H=0 length(3), then the value.
        put_str(&mut block, 0x20, 3, name.as_bytes());
        put_str(&mut block, 0, 7, value);
    }
    let mut out = BytesMut::with_capacity(block.len() + body.len() + 20);
    put_varint(&mut out, HEADERS);
    put_varint(&mut out, block.len() as u64);
    out.put_slice(&block);
    if !body.is_empty() {
        put_varint(&mut out, DATA);
        put_varint(&mut out, body.len() as u64);
        out.put_slice(body);
    }
    out.freeze()
}

/// What a response's field section says: its status and the length of its fields
/// (names and values, pseudo-headers left out, strings as decoded).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Head {
    pub(super) status: u16,
    pub(super) bytes: u64,
}

/// An integer with an `n`-bit prefix (RFC 9204 §4.1.1 uses RFC 7541 §5.1's), consumed
/// from `b`: HPACK's decoder.
fn integer(b: &mut &[u8], n: u32) -> Result<usize, Malformed> {
    crate::engine::h2::hpack::integer(b, n).map_err(|_| Malformed)
}

/// A string literal with an `n`-bit length prefix, its Huffman flag the bit above it,
/// consumed from `b`: whether it is Huffman-coded, and its bytes as sent.
fn string<'a>(b: &mut &'a [u8], n: u32) -> Result<(bool, &'a [u8]), Malformed> {
    let huffman = b.first().ok_or(Malformed)? & (1 << n) != 0;
    let len = integer(b, n)?;
    if len > b.len() {
        return Err(Malformed);
    }
    let (s, rest) = b.split_at(len);
    *b = rest;
    Ok((huffman, s))
}

/// A string's decoded length, its content copied into `into` when asked.
fn decoded((huffman, raw): (bool, &[u8]), into: Option<&mut Vec<u8>>) -> Result<usize, Malformed> {
    match (huffman, into) {
        (false, Some(v)) => {
            v.extend_from_slice(raw);
            Ok(raw.len())
        }
        (false, None) => Ok(raw.len()),
        (true, Some(v)) => huffman_decode(raw, |c| v.push(c)).map_err(|_| Malformed),
        (true, None) => huffman_len(raw),
    }
}

fn parse_status(v: &[u8]) -> Result<u16, Malformed> {
    if v.len() != 3 || !v.iter().all(u8::is_ascii_digit) {
        return Err(Malformed);
    }
    Ok(v.iter().fold(0u16, |n, &d| n * 10 + (d - b'0') as u16))
}

/// A response's field section (RFC 9204 §4.5), decoded with the static table only
/// (this client announces a dynamic table of 0 bytes: a reference to it is an error).
pub(super) fn head(mut b: &[u8]) -> Result<Head, Malformed> {
    // Required Insert Count must be 0; the Delta Base then means nothing.
    if integer(&mut b, 8)? != 0 {
        return Err(Malformed);
    }
    integer(&mut b, 7)?;
    let mut status = None;
    let mut bytes = 0u64;
    let mut scratch = Vec::new();
    while let Some(&first) = b.first() {
        let (name_len, pseudo, is_status, value_len) = if first & 0x80 != 0 {
            // Indexed field line (§4.5.2): the static table only (T = 1).
            if first & 0x40 == 0 {
                return Err(Malformed);
            }
            let (n, v) = *STATIC.get(integer(&mut b, 6)?).ok_or(Malformed)?;
            if n == b":status" && status.is_none() {
                status = Some(parse_status(v)?);
            }
            (n.len(), n[0] == b':', false, v.len())
        } else if first & 0xc0 == 0x40 {
            // Literal with name reference (§4.5.4).
            if first & 0x10 == 0 {
                return Err(Malformed);
            }
            let (n, _) = *STATIC.get(integer(&mut b, 4)?).ok_or(Malformed)?;
            (n.len(), n[0] == b':', n == b":status", 0)
        } else if first & 0xe0 == 0x20 {
            // Literal with literal name (§4.5.6): the name's Huffman flag is 0x08.
            scratch.clear();
            let len = decoded(string(&mut b, 3)?, Some(&mut scratch))?;
            let pseudo = scratch.first() == Some(&b':');
            (len, pseudo, scratch == b":status", 0)
        } else {
            // Post-base references (§4.5.3, §4.5.5) are to the dynamic table.
            return Err(Malformed);
        };
        let value_len = if first & 0x80 != 0 {
            value_len
        } else if is_status {
            scratch.clear();
            let len = decoded(string(&mut b, 7)?, Some(&mut scratch))?;
            if status.is_none() {
                status = Some(parse_status(&scratch)?);
            }
            len
        } else {
            decoded(string(&mut b, 7)?, None)?
        };
        if !pseudo {
            bytes += (name_len + value_len) as u64;
        }
    }
    Ok(Head {
        status: status.ok_or(Malformed)?,
        bytes,
    })
}

/// How many Huffman-coded values `huffman_len` keeps.
const KEPT: usize = 16;

/// Huffman-coded values and their decoded lengths, and the slot the next one replaces.
type Kept = (Vec<(Box<[u8]>, usize)>, usize);

thread_local! {
    /// The Huffman-coded values last decoded on this thread.
    static VALUES: RefCell<Kept> = const { RefCell::new((Vec::new(), 0)) };
}

/// A Huffman-coded value's decoded length, kept for the values seen again: this client
/// announces no QPACK dynamic table, so a server sends every response's fields as
/// literals, the same values each time (quic-go in an order of its map's, so a whole
/// section rarely repeats); decoding them was 4% of the client's CPU per response
/// (perf, `bench/h3-cost`). Only a value decoded without error is kept.
fn huffman_len(raw: &[u8]) -> Result<usize, Malformed> {
    VALUES.with_borrow_mut(|(kept, next)| {
        if let Some(&(_, n)) = kept.iter().find(|(k, _)| **k == *raw) {
            return Ok(n);
        }
        let n = huffman_decode(raw, |_| {}).map_err(|_| Malformed)?;
        if kept.len() < KEPT {
            kept.push((raw.into(), n));
        } else {
            kept[*next] = (raw.into(), n);
            *next = (*next + 1) % KEPT;
        }
        Ok(n)
    })
}

/// Field section `b`'s head when its status is final (interim 1xx ones are skipped).
fn final_head(b: &[u8]) -> Result<Option<Head>, Malformed> {
    let h = head(b)?;
    Ok((!(100..200).contains(&h.status)).then_some(h))
}

/// A QUIC variable-length integer at the start of `b`: its value and length, or `None`
/// when `b` holds only part of it.
pub(super) fn varint(b: &[u8]) -> Option<(u64, usize)> {
    let first = *b.first()?;
    let len = 1usize << (first >> 6);
    if b.len() < len {
        return None;
    }
    let mut v = (first & 0x3f) as u64;
    for &c in &b[1..len] {
        v = v << 8 | c as u64;
    }
    Some((v, len))
}

/// Where a response's frames are.
enum At {
    /// Reading a frame's type and length (the bytes so far in `Reader::prefix`).
    Prefix,
    /// Inside a frame of this type with this many payload bytes left.
    Payload(u64, u64),
}

/// A response read frame by frame from the chunks of its stream as they come: the
/// first field section with a final status (interim 1xx ones skipped), then the body's
/// DATA frames counted (trailers and unknown frames skipped, RFC 9114 §9).
pub(super) struct Reader {
    at: At,
    prefix: [u8; 16],
    prefix_len: usize,
    /// The field section being gathered.
    block: Vec<u8>,
    head: Option<Head>,
    /// Body bytes so far.
    pub(super) body: u64,
}

impl Reader {
    pub(super) fn new() -> Reader {
        Reader {
            at: At::Prefix,
            prefix: [0; 16],
            prefix_len: 0,
            block: Vec::new(),
            head: None,
            body: 0,
        }
    }

    /// Takes a chunk of the stream; returns the response's head when this chunk
    /// completed it.
    pub(super) fn take(&mut self, mut c: &[u8]) -> Result<Option<Head>, Malformed> {
        let mut done = None;
        while !c.is_empty() {
            match self.at {
                At::Prefix => {
                    let n = (self.prefix.len() - self.prefix_len).min(c.len());
                    self.prefix[self.prefix_len..self.prefix_len + n].copy_from_slice(&c[..n]);
                    let have = &self.prefix[..self.prefix_len + n];
                    let Some((kind, a)) = varint(have) else {
                        self.prefix_len += n;
                        c = &c[n..];
                        continue;
                    };
                    let Some((len, b)) = varint(&have[a..]) else {
                        self.prefix_len += n;
                        c = &c[n..];
                        continue;
                    };
                    // The bytes of this chunk the prefix used.
                    let used = a + b - self.prefix_len;
                    self.prefix_len = 0;
                    c = &c[used..];
                    if FORBIDDEN.contains(&kind) || (kind == DATA && self.head.is_none()) {
                        return Err(Malformed);
                    }
                    if kind == HEADERS {
                        if len > MAX_HEADERS {
                            return Err(Malformed);
                        }
                        self.block.clear();
                    }
                    self.at = At::Payload(kind, len);
                    if len == 0 {
                        // An empty frame: an empty field section is malformed.
                        self.at = At::Prefix;
                        if kind == HEADERS && self.head.is_none() {
                            if let Some(h) = final_head(&[])? {
                                self.head = Some(h);
                                done = Some(h);
                            }
                        }
                    }
                }
                At::Payload(kind, left) => {
                    let n = left.min(c.len() as u64) as usize;
                    let (payload, rest) = c.split_at(n);
                    c = rest;
                    self.at = At::Payload(kind, left - n as u64);
                    match kind {
                        DATA => self.body += n as u64,
                        HEADERS if self.head.is_none() => {
                            // A field section whole in this chunk (the usual case) is
                            // read where it is; one split across chunks is gathered.
                            let whole = self.block.is_empty() && n as u64 == left;
                            if !whole {
                                self.block.extend_from_slice(payload);
                            }
                            if n as u64 == left {
                                let section = if whole { payload } else { &self.block };
                                if let Some(h) = final_head(section)? {
                                    self.head = Some(h);
                                    done = Some(h);
                                }
                            }
                        }
                        _ => {}
                    }
                }
            }
            if let At::Payload(_, 0) = self.at {
                self.at = At::Prefix;
            }
        }
        Ok(done)
    }

    /// The stream has ended: the response, if it was whole.
    pub(super) fn end(&self) -> Result<Head, Malformed> {
        match (&self.at, self.prefix_len, self.head) {
            (At::Prefix, 0, Some(h)) => Ok(h),
            _ => Err(Malformed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn huffman(s: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let (mut acc, mut bits) = (0u64, 0u32);
        for &c in s {
            let (len, code) = httlib_huffman::encoder::table::ENCODE_TABLE[c as usize];
            acc = acc << len | code as u64;
            bits += len as u32;
            while bits >= 8 {
                out.push((acc >> (bits - 8)) as u8);
                bits -= 8;
            }
        }
        if bits > 0 {
            out.push(((acc << (8 - bits)) as u8) | ((1u8 << (8 - bits)) - 1));
        }
        out
    }

    /// A request's field section decodes back: the pseudo-headers and the header given.
    #[test]
    fn a_request_is_one_headers_frame_then_its_body() {
        let r = request("GET", "localhost:8443", "/1k.txt", &[("x-a", b"b")], b"");
        // HEADERS, its length, then the block.
        assert_eq!(r[0], 0x01);
        assert_eq!(r[1] as usize, r.len() - 2);
        let block = &r[2..];
        // :method GET and :scheme https are indexed (17, 23).
        assert_eq!(&block[..4], &[0, 0, 0xc0 | 17, 0xc0 | 23]);
        // The field section without pseudo-headers: x-a: b.
        assert_eq!(
            head(&[0, 0, 0xd9, 0x23, b'x', b'-', b'a', 1, b'b'])
                .unwrap()
                .bytes,
            4
        );
        let r = request("PUT", "h", "/", &[], b"abc");
        let n = r.len();
        assert_eq!(&r[n - 5..], &[0x00, 3, b'a', b'b', b'c']);
        // :method PUT indexed (21), :path / indexed (1).
        assert_eq!(&r[2..5], &[0, 0, 0xc0 | 21]);
        assert_eq!(r[r.len() - 6], 0xc0 | 1);
        // A method off the table: a literal with :method's name (index 15, continued).
        let r = request("PATCH", "h", "/", &[], b"");
        assert_eq!(&r[4..7], &[0x5f, 0, 5]);
    }

    /// A field section as quic-go (Caddy) sends it: indexed, name-referenced with
    /// Huffman values, and literal names.
    #[test]
    fn a_response_head_gives_its_status_and_field_bytes() {
        let mut b = vec![0, 0, 0xc0 | 25];
        // content-length (4) with value "1024", Huffman-coded.
        let v = huffman(b"1024");
        b.push(0x50 | 4);
        b.push(0x80 | v.len() as u8);
        b.extend_from_slice(&v);
        // server: Caddy as a literal name, value plain.
        b.push(0x20 | 6);
        b.extend_from_slice(b"server");
        b.push(5);
        b.extend_from_slice(b"Caddy");
        // accept-ranges: bytes, indexed (32).
        b.push(0xc0 | 32);
        let h = head(&b).unwrap();
        assert_eq!(h.status, 200);
        assert_eq!(h.bytes, (14 + 4) + (6 + 5) + (13 + 5));
        // :status as a literal with a Huffman value.
        let v = huffman(b"418");
        // Index 24 does not fit the 4-bit prefix: 15, then 9.
        let mut b = vec![0, 0, 0x5f, 9, 0x80 | v.len() as u8];
        b.extend_from_slice(&v);
        assert_eq!(
            head(&b).unwrap(),
            Head {
                status: 418,
                bytes: 0
            }
        );
        // Dynamic references, a missing status, a cut string: malformed.
        assert_eq!(head(&[1, 0, 0xc0 | 25]), Err(Malformed));
        assert_eq!(head(&[0, 0, 0x80 | 1]), Err(Malformed));
        assert_eq!(head(&[0, 0, 0x10]), Err(Malformed));
        assert_eq!(head(&[0, 0, 0xc0 | 32]), Err(Malformed));
        assert_eq!(head(&[0, 0, 0x5f, 9, 5, b'2']), Err(Malformed));
    }

    /// Frames split anywhere across chunks read the same: an interim response, the
    /// head, a grease frame, DATA, trailers.
    #[test]
    fn frames_split_anywhere_read_alike() {
        let mut s = vec![0x01, 3, 0, 0, 0xc0 | 24]; // 103
        s.extend_from_slice(&[0x01, 3, 0, 0, 0xc0 | 25]); // 200
        s.extend_from_slice(&[0x40, 0x21, 2, 9, 9]); // a reserved frame type (0x21)
        s.extend_from_slice(&[0x00, 0x44, 0x00]);
        s.extend_from_slice(&[b'a'; 0x400]);
        s.extend_from_slice(&[0x00, 2, b'x', b'y']);
        s.extend_from_slice(&[0x01, 3, 0, 0, 0xc0 | 32]); // trailers
        for cut in 0..s.len() {
            for cut2 in cut..s.len().min(cut + 9) {
                let mut r = Reader::new();
                let mut heads = 0;
                for part in [&s[..cut], &s[cut..cut2], &s[cut2..]] {
                    if let Some(h) = r.take(part).unwrap() {
                        assert_eq!(
                            h,
                            Head {
                                status: 200,
                                bytes: 0
                            }
                        );
                        heads += 1;
                    }
                }
                assert_eq!(heads, 1);
                assert_eq!(r.body, 0x402);
                assert_eq!(r.end().unwrap().status, 200);
            }
        }
        // Cut short, DATA before HEADERS, a SETTINGS frame: malformed.
        let mut r = Reader::new();
        r.take(&s[..20]).unwrap();
        assert_eq!(r.end(), Err(Malformed));
        assert_eq!(Reader::new().take(&[0x00, 1, 0]), Err(Malformed));
        assert_eq!(Reader::new().take(&[0x04, 0]), Err(Malformed));
        // An empty HEADERS frame, whole or cut after its prefix: malformed.
        assert_eq!(Reader::new().take(&[0x01, 0]), Err(Malformed));
        let mut r = Reader::new();
        assert_eq!(r.take(&[0x01, 0, 0x00, 1, b'a']), Err(Malformed));
    }

    /// A value seen again reads as decoded; more values than are kept, and a malformed
    /// one (not kept), read as decoded too.
    #[test]
    fn huffman_values_seen_again_read_as_decoded() {
        let words: Vec<Vec<u8>> = (0..KEPT * 2 + 3)
            .map(|i| format!("value-{i}-{}", "x".repeat(i)).into_bytes())
            .collect();
        for _ in 0..3 {
            for w in &words {
                assert_eq!(huffman_len(&huffman(w)), Ok(w.len()));
            }
            assert_eq!(huffman_len(&huffman(&words[0])), Ok(words[0].len()));
            // Padding that is not all ones.
            assert_eq!(huffman_len(&[0x00]), Err(Malformed));
        }
    }
}
