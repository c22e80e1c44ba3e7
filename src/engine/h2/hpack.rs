//! The HPACK decoding a load-generating client needs (RFC 7541): a response's `:status`,
//! with the connection's dynamic table kept in step, and nothing allocated per response.
//!
//! Of a response's header block the client reads only `:status`. Every other field is
//! stepped over, but the dynamic table must still follow what the server's encoder
//! did (§2.3.2, §4): a field added "with incremental indexing" takes room by its
//! decoded length (§4.1: name + value + 32), evicts the oldest entries (§4.4), and may
//! be referred to by index later, perhaps as `:status` itself. So the table keeps, per
//! entry, only its size and whether it is a `:status` (and which) — not its bytes — and
//! a Huffman-coded string (Appendix B) is decoded only when its content or length
//! matters: a literal name (is it `:status`?), a `:status` value, and the length of a
//! value that enters a table with room. nginx, for one, sets its table size to 0 in its
//! first response (a dynamic table size update), so afterwards its values are never
//! decoded at all.
//!
//! The `httlib-hpack` decoder did this before: it hands every field back as owned bytes
//! and builds each from a drained copy of the block. `perf record` of a 4 s HTTP/2 run
//! against nginx (`-c 50 -m 10`, 1 KiB) put 30% of the client's CPU in it and in
//! malloc/free.

use std::collections::VecDeque;

use super::huffman::huffman_decode;
pub use super::huffman::Malformed;

/// The largest dynamic table the server may use: SETTINGS_HEADER_TABLE_SIZE's default,
/// which we never change (RFC 9113 §6.5.2).
pub const MAX_TABLE: usize = 4096;

/// An entry's overhead beyond its name and value (§4.1).
const ENTRY_OVERHEAD: usize = 32;

/// The static table (Appendix A): each entry's name length and, for the `:status`
/// entries (8-14), the status.
const STATIC: [(u8, u16); 61] = {
    const NAMES: [&str; 61] = [
        ":authority",
        ":method",
        ":method",
        ":path",
        ":path",
        ":scheme",
        ":scheme",
        ":status",
        ":status",
        ":status",
        ":status",
        ":status",
        ":status",
        ":status",
        "accept-charset",
        "accept-encoding",
        "accept-language",
        "accept-ranges",
        "accept",
        "access-control-allow-origin",
        "age",
        "allow",
        "authorization",
        "cache-control",
        "content-disposition",
        "content-encoding",
        "content-language",
        "content-length",
        "content-location",
        "content-range",
        "content-type",
        "cookie",
        "date",
        "etag",
        "expect",
        "expires",
        "from",
        "host",
        "if-match",
        "if-modified-since",
        "if-none-match",
        "if-range",
        "if-unmodified-since",
        "last-modified",
        "link",
        "location",
        "max-forwards",
        "proxy-authenticate",
        "proxy-authorization",
        "range",
        "referer",
        "refresh",
        "retry-after",
        "server",
        "set-cookie",
        "strict-transport-security",
        "transfer-encoding",
        "user-agent",
        "vary",
        "via",
        "www-authenticate",
    ];
    const STATUS: [u16; 7] = [200, 204, 206, 304, 400, 404, 500];
    let mut t = [(0u8, 0u16); 61];
    let mut i = 0;
    while i < 61 {
        t[i].0 = NAMES[i].len() as u8;
        if i >= 7 && i < 14 {
            t[i].1 = STATUS[i - 7];
        }
        i += 1;
    }
    t
};

/// Static index of the first `:status` entry, whose name the others share.
const STATUS_NAME: usize = 8;

/// What the table keeps of one field.
#[derive(Debug, Clone, Copy)]
struct Entry {
    name_len: u32,
    value_len: u32,
    /// The name is `:status`.
    is_status: bool,
    /// The value as a status, when `is_status` (0 if it is not a number).
    status: u16,
}

/// A field's name, as far as the client cares.
#[derive(Debug, Clone, Copy)]
struct Name {
    len: usize,
    is_status: bool,
    /// A literal `alt-svc` (the first response of a connection names it literally).
    is_alt_svc: bool,
}

/// One connection's response decoder.
#[derive(Debug)]
pub struct Decoder {
    /// Newest first: dynamic index 62 is `table[0]`.
    table: VecDeque<Entry>,
    /// Sum of the entries' sizes (§4.1).
    size: usize,
    /// The table's maximum size as the server's last size update set it (§4.2).
    capacity: usize,
    /// Where a literal name or a `:status` value is decoded (reused).
    scratch: Vec<u8>,
    /// The UDP port of the HTTP/3 a response's `Alt-Svc` offered (the first seen).
    pub alt_svc_h3: Option<u16>,
}

/// Allocates nothing (a placeholder while a connection's state is rebuilt).
impl Default for Decoder {
    fn default() -> Decoder {
        Decoder {
            table: VecDeque::new(),
            size: 0,
            capacity: MAX_TABLE,
            scratch: Vec::new(),
            alt_svc_h3: None,
        }
    }
}

impl Decoder {
    /// A decoder whose table holds the most entries a 4 KiB table can (each at least
    /// 32 bytes) without growing.
    pub fn new() -> Decoder {
        Decoder {
            table: VecDeque::with_capacity(MAX_TABLE / ENTRY_OVERHEAD),
            scratch: Vec::with_capacity(64),
            ..Decoder::default()
        }
    }

    /// A new connection's state, keeping the buffers.
    pub fn reset(&mut self) {
        self.table.clear();
        self.size = 0;
        self.capacity = MAX_TABLE;
    }

    /// Decodes a whole header block and returns its first `:status` (0 when it has
    /// none, e.g. trailers).
    pub fn status(&mut self, mut b: &[u8]) -> Result<u16, Malformed> {
        let mut status = 0;
        let mut fields = false;
        while let Some(&first) = b.first() {
            if first & 0x80 != 0 {
                // Indexed field (§6.1).
                let i = integer(&mut b, 7)?;
                let (is_status, s) = self.indexed_status(i)?;
                if is_status && status == 0 {
                    status = s;
                }
                fields = true;
            } else if first & 0xe0 == 0x20 {
                // Dynamic table size update (§6.3): only before the block's first field
                // (§4.2), and never above what SETTINGS allow.
                let max = integer(&mut b, 5)?;
                if fields || max > MAX_TABLE {
                    return Err(Malformed);
                }
                self.capacity = max;
                self.evict(0);
            } else {
                // A literal (§6.2): with incremental indexing (01), without indexing
                // (0000) or never indexed (0001).
                let indexing = first & 0xc0 == 0x40;
                let i = integer(&mut b, if indexing { 6 } else { 4 })?;
                let name = match i {
                    0 => self.literal_name(&mut b)?,
                    i => self.indexed_name(i)?,
                };
                let (huffman, raw) = string(&mut b)?;
                let mut value_len = raw.len();
                let mut s = 0;
                if name.is_status {
                    let v = self.decode(huffman, raw)?;
                    value_len = v.len();
                    s = parse_status(v);
                    if status == 0 {
                        status = s;
                    }
                } else if name.is_alt_svc && self.alt_svc_h3.is_none() {
                    let v = self.decode(huffman, raw)?;
                    value_len = v.len();
                    let port = crate::engine::http::alt_svc_h3(v);
                    self.alt_svc_h3 = port;
                } else if huffman && indexing && name.len + ENTRY_OVERHEAD <= self.capacity {
                    // Its size decides what is evicted; a field that cannot fit at all
                    // empties the table whatever its length (§4.4).
                    value_len = huffman_decode(raw, |_| {})?;
                }
                if indexing {
                    self.insert(Entry {
                        name_len: name.len as u32,
                        value_len: value_len as u32,
                        is_status: name.is_status,
                        status: s,
                    });
                }
                fields = true;
            }
        }
        Ok(status)
    }

    /// Entry `i` of the index space (§2.3.3): whether it is a `:status`, and which.
    fn indexed_status(&self, i: usize) -> Result<(bool, u16), Malformed> {
        match i {
            0 => Err(Malformed),
            1..=61 => {
                let (_, s) = STATIC[i - 1];
                Ok((s != 0, s))
            }
            _ => {
                let e = self.table.get(i - 62).ok_or(Malformed)?;
                Ok((e.is_status, e.status))
            }
        }
    }

    /// The name of entry `i`.
    fn indexed_name(&self, i: usize) -> Result<Name, Malformed> {
        match i {
            0 => Err(Malformed),
            1..=61 => Ok(Name {
                len: STATIC[i - 1].0 as usize,
                is_status: (STATUS_NAME..STATUS_NAME + 7).contains(&i),
                is_alt_svc: false,
            }),
            _ => {
                let e = self.table.get(i - 62).ok_or(Malformed)?;
                Ok(Name {
                    len: e.name_len as usize,
                    is_status: e.is_status,
                    is_alt_svc: false,
                })
            }
        }
    }

    /// A literal name: its length decoded, and whether it is `:status`.
    fn literal_name(&mut self, b: &mut &[u8]) -> Result<Name, Malformed> {
        let (huffman, raw) = string(b)?;
        let name = self.decode(huffman, raw)?;
        Ok(Name {
            len: name.len(),
            is_status: name == b":status",
            is_alt_svc: name == b"alt-svc",
        })
    }

    /// A string's content: `raw` itself, or its Huffman decoding in the scratch buffer.
    fn decode<'a>(&'a mut self, huffman: bool, raw: &'a [u8]) -> Result<&'a [u8], Malformed> {
        if !huffman {
            return Ok(raw);
        }
        self.scratch.clear();
        let scratch = &mut self.scratch;
        huffman_decode(raw, |c| scratch.push(c))?;
        Ok(&self.scratch)
    }

    /// Adds an entry, evicting the oldest to make room; one larger than the table
    /// empties it and is not added (§4.4).
    fn insert(&mut self, e: Entry) {
        let size = e.name_len as usize + e.value_len as usize + ENTRY_OVERHEAD;
        if size > self.capacity {
            self.table.clear();
            self.size = 0;
            return;
        }
        self.evict(size);
        self.table.push_front(e);
        self.size += size;
    }

    /// Evicts the oldest entries until `room` more bytes fit under the capacity.
    fn evict(&mut self, room: usize) {
        while self.size + room > self.capacity {
            let Some(e) = self.table.pop_back() else {
                break;
            };
            self.size -= e.name_len as usize + e.value_len as usize + ENTRY_OVERHEAD;
        }
    }
}

/// A `:status` value as a number (0 when it is not one).
fn parse_status(v: &[u8]) -> u16 {
    if v.is_empty() || v.len() > 5 || !v.iter().all(u8::is_ascii_digit) {
        return 0;
    }
    let n = v.iter().fold(0u32, |n, &d| n * 10 + (d - b'0') as u32);
    u16::try_from(n).unwrap_or(0)
}

/// An integer with an `n`-bit prefix (§5.1), consumed from `b`. Bounded well below
/// overflow: no index or size this client accepts is near 2^28.
pub(in crate::engine) fn integer(b: &mut &[u8], n: u32) -> Result<usize, Malformed> {
    let (&first, mut rest) = b.split_first().ok_or(Malformed)?;
    let max = (1usize << n) - 1;
    let mut v = first as usize & max;
    if v == max {
        let mut shift = 0;
        loop {
            let (&c, r) = rest.split_first().ok_or(Malformed)?;
            rest = r;
            v += ((c & 0x7f) as usize) << shift;
            if c & 0x80 == 0 {
                break;
            }
            shift += 7;
            if shift > 21 {
                return Err(Malformed);
            }
        }
    }
    *b = rest;
    Ok(v)
}

/// A string literal (§5.2), consumed from `b`: whether it is Huffman-coded, and its
/// bytes as sent.
fn string<'a>(b: &mut &'a [u8]) -> Result<(bool, &'a [u8]), Malformed> {
    let huffman = b.first().ok_or(Malformed)? & 0x80 != 0;
    let len = integer(b, 7)?;
    if len > b.len() {
        return Err(Malformed);
    }
    let (s, rest) = b.split_at(len);
    *b = rest;
    Ok((huffman, s))
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{encode_huffman, Rng};
    use super::*;

    /// nginx's first response on a connection: the table size set to 0, `:status: 200`
    /// indexed, and fields with incremental indexing (which then never fit).
    #[test]
    fn nginx_like_blocks() {
        let mut d = Decoder::new();
        let mut block = vec![0x20, 0x88];
        for (idx, v) in [
            (54u8, &b"nginx"[..]),
            (33, b"Tue, 25 Nov 2026 08:00:00 GMT"),
        ] {
            block.push(0x40 | idx);
            let h = encode_huffman(v);
            block.push(0x80 | h.len() as u8);
            block.extend_from_slice(&h);
        }
        assert_eq!(d.status(&block), Ok(200));
        assert_eq!((d.capacity, d.table.len()), (0, 0));
        assert_eq!(d.status(&block[1..]), Ok(200));
        // A size update after a field is malformed; so is one above SETTINGS.
        assert_eq!(d.status(&[0x88, 0x20]), Err(Malformed));
        assert_eq!(d.status(&[0x3f, 0xe2, 0x1f]), Err(Malformed));
        // An index past the table, and index 0.
        assert_eq!(d.status(&[0xbe]), Err(Malformed));
        assert_eq!(d.status(&[0x80]), Err(Malformed));
    }

    /// Against httlib-hpack's decoder: blocks from its encoder with every
    /// representation (indexed, literal with and without indexing, never indexed,
    /// Huffman or not), dynamic-table references, evictions and size updates, the
    /// `:status` sometimes only in the dynamic table. Both must agree on every
    /// block's status through thousands of blocks on one connection.
    #[test]
    fn status_matches_the_reference_decoder_through_the_dynamic_table() {
        let mut r = Rng(42);
        for conn in 0..20 {
            let mut enc = httlib_hpack::Encoder::default();
            let mut reference = httlib_hpack::Decoder::default();
            let mut ours = Decoder::new();
            for block_no in 0..300 {
                let mut block = Vec::new();
                if r.below(20) == 0 {
                    let size = [0u32, 64, 256, 1000, 4096][r.below(5) as usize];
                    enc.update_max_dynamic_size(size, &mut block).unwrap();
                }
                let status = [200u16, 204, 301, 302, 404, 503, 299][r.below(7) as usize];
                let mut fields = vec![(b":status".to_vec(), status.to_string().into_bytes())];
                for _ in 0..r.below(8) {
                    let name = [
                        &b"server"[..],
                        b"date",
                        b"x-custom-header",
                        b"etag",
                        b"vary",
                    ][r.below(5) as usize];
                    let len = r.below(60) as usize;
                    let value: Vec<u8> = (0..len)
                        .map(|_| b"abcdefxyz0123456789-, \"/"[r.below(24) as usize])
                        .collect();
                    fields.push((name.to_vec(), value));
                }
                if r.below(10) == 0 {
                    // A second :status later in the block: the first one counts.
                    fields.push((b":status".to_vec(), b"500".to_vec()));
                }
                for (n, v) in fields {
                    let flags = [0x0u8, 0x1, 0x2, 0x3, 0x4, 0x7, 0x8, 0x14, 0x17, 0x13]
                        [r.below(10) as usize];
                    enc.encode((n, v, flags), &mut block).unwrap();
                }
                let mut fields = Vec::new();
                reference.decode(&mut block.clone(), &mut fields).unwrap();
                let want = fields
                    .iter()
                    .find(|(n, _, _)| n == b":status")
                    .map(|(_, v, _)| std::str::from_utf8(v).unwrap().parse::<u16>().unwrap())
                    .unwrap();
                assert_eq!(want, status);
                assert_eq!(
                    ours.status(&block),
                    Ok(want),
                    "connection {conn} block {block_no}"
                );
            }
        }
    }

    #[test]
    fn random_bytes_never_panic() {
        let mut r = Rng(7);
        let mut d = Decoder::new();
        for _ in 0..20_000 {
            let len = r.below(24) as usize;
            let b: Vec<u8> = (0..len).map(|_| r.next() as u8).collect();
            let _ = d.status(&b);
        }
    }

    #[test]
    fn integers_with_continuation_bytes() {
        // RFC 7541 C.1.2: 1337 with a 5-bit prefix.
        let mut b: &[u8] = &[0x1f, 0x9a, 0x0a, 0xff];
        assert_eq!(integer(&mut b, 5), Ok(1337));
        assert_eq!(b, &[0xff]);
        let mut b: &[u8] = &[0x1f, 0x9a];
        assert_eq!(integer(&mut b, 5), Err(Malformed));
    }
}
