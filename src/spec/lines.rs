//! Reading a targets file or an access log: a block at a time, one line handed out at
//! a time, never the whole text in memory, checked for UTF-8 and a size cap.

use std::io::Read;

/// A targets file or log is read before the load; beyond this it is refused (a device
/// such as /dev/zero would otherwise be read until memory runs out).
const MAX_FILE_BYTES: u64 = 512 * 1024 * 1024;

/// Reads `file` (`-` = standard input) as text, at most [`MAX_FILE_BYTES`]; `what`
/// names it in errors.
pub fn read_capped(file: &str, what: &str) -> Result<String, String> {
    let err = |e: std::io::Error| format!("{what} {file}: {e}");
    let mut bytes = Vec::new();
    if file == "-" {
        std::io::stdin()
            .take(MAX_FILE_BYTES + 1)
            .read_to_end(&mut bytes)
            .map_err(err)?;
    } else {
        std::fs::File::open(file)
            .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
            .map_err(err)?;
    }
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(what, file));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "{what} {file}: not UTF-8 text (byte {} is not)",
            e.utf8_error().valid_up_to()
        )
    })
}

fn too_large(what: &str, file: &str) -> String {
    format!(
        "{what} {file}: larger than {} MiB — split it",
        MAX_FILE_BYTES >> 20
    )
}

/// Opens `file` (`-` = standard input) to be read line by line with [`each_line`].
pub fn open(file: &str, what: &str) -> Result<Box<dyn Read>, String> {
    if file == "-" {
        return Ok(Box::new(std::io::stdin().lock()));
    }
    let f = std::fs::File::open(file).map_err(|e| format!("{what} {file}: {e}"))?;
    Ok(Box::new(f))
}

/// How much of a file [`each_line`] reads at a time (more for a longer line).
const BLOCK: usize = 1 << 16;

/// Calls `each` with every line of `r` (its end of line included) and its number from 1,
/// a block at a time: a million-line file is never held whole, and each block is checked
/// for UTF-8 once, not line by line. The text must be UTF-8 (the first bad byte is an
/// error after the lines before it) and at most [`MAX_FILE_BYTES`]; `what` and `file`
/// name it in errors.
pub fn each_line(
    mut r: impl Read,
    what: &str,
    file: &str,
    mut each: impl FnMut(usize, &str) -> Result<(), String>,
) -> Result<(), String> {
    let mut buf = vec![0u8; BLOCK];
    // The bytes not yet handed out: buf[..len], from byte `offset` of the file.
    let (mut len, mut offset, mut eof, mut n) = (0usize, 0u64, false, 0usize);
    loop {
        while !eof && len < buf.len() {
            match r.read(&mut buf[len..]) {
                Ok(0) => eof = true,
                Ok(got) => len += got,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("{what} {file}: {e}")),
            }
            if offset + len as u64 > MAX_FILE_BYTES {
                return Err(too_large(what, file));
            }
        }
        // Whole lines only, but for the last: a newline never splits a UTF-8 sequence.
        let end = match eof {
            true => len,
            false => match buf[..len].iter().rposition(|&b| b == b'\n') {
                Some(i) => i + 1,
                None => {
                    // A line longer than the buffer.
                    buf.resize(buf.len() * 2, 0);
                    continue;
                }
            },
        };
        let (text, bad) = match std::str::from_utf8(&buf[..end]) {
            Ok(t) => (t, None),
            Err(e) => {
                let p = e.valid_up_to();
                let t = std::str::from_utf8(&buf[..p]).expect("valid up to p");
                (&t[..t.rfind('\n').map_or(0, |i| i + 1)], Some(p))
            }
        };
        for line in text.split_inclusive('\n') {
            n += 1;
            each(n, line)?;
        }
        if let Some(p) = bad {
            return Err(format!(
                "{what} {file}: not UTF-8 text (byte {}, on line {}, is not)",
                offset + p as u64,
                n + 1
            ));
        }
        if eof {
            return Ok(());
        }
        buf.copy_within(end..len, 0);
        len -= end;
        offset += end as u64;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_read_one_at_a_time_and_checked() {
        let mut seen = Vec::new();
        each_line(&b"a\r\n\nb"[..], "targets file", "f", |n, l| {
            seen.push((n, l.trim().to_string()));
            Ok(())
        })
        .unwrap();
        assert_eq!(seen, [(1, "a".into()), (2, "".into()), (3, "b".into())]);
        let e = each_line(&b"/a\n/\xff\n"[..], "targets file", "f", |_, _| Ok(())).unwrap_err();
        assert_eq!(
            e,
            "targets file f: not UTF-8 text (byte 4, on line 2, is not)"
        );
        // Lines longer than a block, and across blocks.
        let long = format!("{}\n{}\nend", "x".repeat(3 * BLOCK), "y".repeat(BLOCK - 1));
        let mut lens = Vec::new();
        each_line(long.as_bytes(), "t", "f", |n, l| {
            lens.push((n, l.len()));
            Ok(())
        })
        .unwrap();
        assert_eq!(lens, [(1, 3 * BLOCK + 1), (2, BLOCK), (3, 3)]);
        let e = each_line(&b"/a\n{bad\n\xff"[..], "t", "f", |n, l| {
            match l.starts_with('{') {
                true => Err(format!("line {n}")),
                false => Ok(()),
            }
        })
        .unwrap_err();
        assert_eq!(e, "line 2", "the first error in the file's order");
    }
}
