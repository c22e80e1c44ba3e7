//! Fuzzes the HTTP/1.1 response framing: any byte stream, fed in the pieces the first
//! byte chooses, must never panic, never consume more than it was given, and must frame
//! the same responses whatever the split.
#![no_main]

use libfuzzer_sys::fuzz_target;
use loadlens::engine::http::{Complete, ResponseParser};

fn frame(data: &[u8], piece: usize, head: bool) -> Result<Vec<Complete>, ()> {
    let mut p = ResponseParser::new(head);
    let mut pending = Vec::new();
    let mut out = Vec::new();
    for chunk in data.chunks(piece.max(1)) {
        pending.extend_from_slice(chunk);
        loop {
            let fed = p.feed(&pending).map_err(|_| ())?;
            assert!(fed.consumed <= pending.len());
            pending.drain(..fed.consumed);
            match fed.complete {
                Some(c) => out.push(c),
                None => break,
            }
        }
    }
    if let Some(c) = p.eof().map_err(|_| ())? {
        out.push(c);
    }
    Ok(out)
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let head = first & 0x80 != 0;
    let whole = frame(rest, rest.len().max(1), head);
    let split = frame(rest, (first & 0x7f) as usize, head);
    if let (Ok(a), Ok(b)) = (&whole, &split) {
        assert_eq!(a, b, "framing depends on how the bytes were split");
    }
});
