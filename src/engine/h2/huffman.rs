//! HPACK's Huffman code (RFC 7541 Appendix B), decoding only: a canonical code, so a
//! symbol is found from its length's first code after a one-lookup fast path for codes
//! of at most 8 bits (most of what servers send: lower-case letters, digits, `-`, space).
//! The code table itself is `httlib-huffman`'s copy of the RFC's.

/// A header block that breaks RFC 7541 (HTTP/2 calls it COMPRESSION_ERROR).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed;

/// The Huffman code's decoding tables (Appendix B), built once from the encoding
/// table: the code is canonical (codes of one length are consecutive, in symbol order,
/// and above every prefix of the same length of a longer code; a test checks it), so a
/// symbol is found from its length's first code.
struct Huffman {
    /// For every 8-bit prefix: (symbol, code length) when a code of at most 8 bits
    /// starts it, else length 0.
    fast: [(u8, u8); 256],
    /// Per code length: the first code and where its symbols start in `symbols`.
    first: [u32; 31],
    count: [u32; 31],
    offset: [u16; 31],
    /// Symbols (256 = EOS) ordered by code.
    symbols: [u16; 257],
}

fn huffman() -> &'static Huffman {
    static TABLE: std::sync::OnceLock<Huffman> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| {
        let codes = &httlib_huffman::encoder::table::ENCODE_TABLE;
        let mut h = Huffman {
            fast: [(0, 0); 256],
            first: [0; 31],
            count: [0; 31],
            offset: [0; 31],
            symbols: [0; 257],
        };
        let mut order: Vec<u16> = (0..257).collect();
        order.sort_by_key(|&s| {
            let (len, code) = codes[s as usize];
            (len, code)
        });
        for (k, &s) in order.iter().enumerate() {
            let (len, code) = codes[s as usize];
            let l = len as usize;
            if h.count[l] == 0 {
                h.first[l] = code;
                h.offset[l] = k as u16;
            }
            h.count[l] += 1;
            h.symbols[k] = s;
            if len <= 8 {
                let from = (code << (8 - len)) as usize;
                for p in from..from + (1 << (8 - len)) {
                    h.fast[p] = (s as u8, len);
                }
            }
        }
        h
    })
}

/// Decodes a Huffman-coded string (Appendix B), handing each byte to `emit`; returns
/// the decoded length. Padding must be at most 7 bits, all ones (the EOS code's
/// prefix), and EOS itself must not appear (§5.2).
pub(in crate::engine) fn huffman_decode(
    src: &[u8],
    mut emit: impl FnMut(u8),
) -> Result<usize, Malformed> {
    let h = huffman();
    // Unconsumed bits are the low `bits` bits of `acc`.
    let mut acc: u64 = 0;
    let mut bits: u32 = 0;
    let mut next = 0;
    let mut n = 0;
    loop {
        while bits <= 56 && next < src.len() {
            acc = acc << 8 | src[next] as u64;
            bits += 8;
            next += 1;
        }
        if bits == 0 {
            return Ok(n);
        }
        // The next 30 bits (a code's longest), padded with ones past the end.
        let peek = if bits >= 30 {
            (acc >> (bits - 30)) as u32 & 0x3fff_ffff
        } else {
            ((acc << (30 - bits)) as u32 | ((1u32 << (30 - bits)) - 1)) & 0x3fff_ffff
        };
        let (sym, len) = h.fast[(peek >> 22) as usize];
        let (sym, len) = if len != 0 {
            (sym as u16, len as u32)
        } else {
            let mut found = None;
            for l in 9..=30u32 {
                let v = peek >> (30 - l);
                let (first, count) = (h.first[l as usize], h.count[l as usize]);
                if count > 0 && v >= first && v - first < count {
                    found = Some((
                        h.symbols[h.offset[l as usize] as usize + (v - first) as usize],
                        l,
                    ));
                    break;
                }
            }
            found.ok_or(Malformed)?
        };
        if len > bits {
            // What is left is shorter than the code the padding completes: padding, if
            // it is at most 7 bits of ones.
            let ones = (1u64 << bits) - 1;
            return if next == src.len() && bits <= 7 && acc & ones == ones {
                Ok(n)
            } else {
                Err(Malformed)
            };
        }
        if sym == 256 {
            return Err(Malformed);
        }
        emit(sym as u8);
        n += 1;
        bits -= len;
    }
}

#[cfg(test)]
mod tests {
    use super::super::testutil::{encode_huffman, Rng};
    use super::*;

    #[test]
    fn the_huffman_code_is_canonical_and_every_symbol_decodes() {
        let codes = &httlib_huffman::encoder::table::ENCODE_TABLE;
        // Canonical: sorted by (length, symbol), codes count up, shifting left at each
        // longer length (what `Huffman` relies on).
        let mut order: Vec<usize> = (0..257).collect();
        order.sort_by_key(|&s| (codes[s].0, s));
        let mut expect = 0u32;
        let mut len = codes[order[0]].0;
        for &s in &order {
            let (l, code) = codes[s];
            expect <<= l - len;
            len = l;
            assert_eq!(code, expect, "symbol {s}");
            expect += 1;
        }
        for c in 0..=255u8 {
            let mut got = Vec::new();
            assert_eq!(
                huffman_decode(&encode_huffman(&[c]), |b| got.push(b)),
                Ok(1)
            );
            assert_eq!(got, [c]);
        }
    }

    #[test]
    fn huffman_strings_decode_like_the_reference() {
        let mut r = Rng(0x9e37_79b9_7f4a_7c15);
        for _ in 0..5000 {
            let len = r.below(40) as usize;
            // Mostly text (short codes), sometimes any byte (long codes).
            let s: Vec<u8> = (0..len)
                .map(|_| match r.below(4) {
                    0 => r.next() as u8,
                    _ => b"abcdefghijklmnopqrstuvwxyz0123456789 :/-,"[r.below(41) as usize],
                })
                .collect();
            let mut got = Vec::new();
            let n = huffman_decode(&encode_huffman(&s), |b| got.push(b));
            assert_eq!(n, Ok(s.len()));
            assert_eq!(got, s);
        }
    }

    #[test]
    fn bad_huffman_padding_and_eos_are_malformed() {
        // 'a' is 00011 (5 bits): three padding bits of ones are fine, zeros are not.
        assert_eq!(huffman_decode(&[0b0001_1111], |_| {}), Ok(1));
        assert_eq!(huffman_decode(&[0b0001_1000], |_| {}), Err(Malformed));
        // Eight or more bits of padding.
        assert_eq!(huffman_decode(&[0b0001_1111, 0xff], |_| {}), Err(Malformed));
        // EOS (30 ones) in full.
        assert_eq!(
            huffman_decode(&[0xff, 0xff, 0xff, 0xfc], |_| {}),
            Err(Malformed)
        );
    }
}
