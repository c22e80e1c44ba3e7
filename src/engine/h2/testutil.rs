//! What the HPACK and Huffman decoders' tests share.

/// A small deterministic generator (xorshift64*), so failures repeat.
pub(super) struct Rng(pub(super) u64);
impl Rng {
    pub(super) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(super) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// `s` Huffman-coded by an independent encoder.
pub(super) fn encode_huffman(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    httlib_huffman::encode(s, &mut out).unwrap();
    out
}
