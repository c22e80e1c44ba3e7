//! Bounded reads of what another machine sent: lines of a stream ([`LineReader`]) and
//! whole files ([`read_file`]). Whatever the other end does — a line without an end, a
//! file that keeps growing, bytes that are not text — the reader holds at most its
//! stated limit in memory and says which limit was passed and what it saw.
//!
//! Everything loadlens reads from another machine goes through here: the watch
//! protocol on both ends (`session.rs`, `server.rs`), the bootstrap's and the upload's
//! chatter (`ssh.rs`), the Runs Ray's segments hand back (`cli/ray.rs`); `tune` reads
//! the server's config files over ssh with it. `BufRead::read_line` has no bound: a
//! remote end writing 300 MB without a newline cost loadlens 1.18 GB of memory (#46).

use std::fmt;
use std::io::{BufRead, Read};
use std::path::Path;

/// Why a line could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LineError {
    /// More than the limit without a newline; nothing more was read after it.
    #[error("a line longer than the limit of {} ({} read without a newline, starting `{}`)", Size(*limit as u64), Size(*seen as u64), excerpt(start))]
    TooLong {
        limit: usize,
        seen: usize,
        /// The line's first bytes, to say what it was.
        start: Vec<u8>,
    },
    /// The line is not UTF-8.
    #[error(
        "a line that is not UTF-8 text (byte {at} of {len}: `{}`)",
        excerpt(start)
    )]
    NotUtf8 {
        at: usize,
        len: usize,
        start: Vec<u8>,
    },
    #[error("cannot read: {0}")]
    Io(#[from] std::io::Error),
}

/// How many bytes of a bad line an error shows.
const EXCERPT: usize = 40;

/// Up to [`EXCERPT`] bytes, non-printable ones escaped (`\xff`, `\n`).
fn excerpt(bytes: &[u8]) -> String {
    let shown = bytes[..bytes.len().min(EXCERPT)].escape_ascii().to_string();
    if bytes.len() > EXCERPT {
        format!("{shown}…")
    } else {
        shown
    }
}

/// A byte count as a person reads a limit: `32 MiB`, `4 KiB`, `300 B`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.0;
        for (shift, unit) in [(30, "GiB"), (20, "MiB"), (10, "KiB")] {
            if n >= 1 << shift {
                let v = n as f64 / (1u64 << shift) as f64;
                return if n % (1 << shift) == 0 {
                    write!(f, "{} {unit}", n >> shift)
                } else {
                    write!(f, "{v:.1} {unit}")
                };
            }
        }
        write!(f, "{n} B")
    }
}

/// Lines of at most `max_line` bytes (the newline not counted) from a `BufRead`, as
/// UTF-8 text. Reads with `fill_buf`/`consume`, so memory is the line being read and
/// the inner reader's buffer, never more; each line is handed out as the `String` it
/// was read into (no copy).
///
/// A line ends at `\n`; a `\r` before it is dropped, and a last line without a newline
/// is still a line. Past the limit, or on bytes that are not UTF-8, the reader returns
/// an error and should not be read again: where the next line starts is unknown.
///
/// ```
/// use loadlens::remote::bounded::{LineError, LineReader};
/// let mut r = LineReader::new(&b"ok\r\nmuch too long\n"[..], 8);
/// assert_eq!(r.next_line().unwrap().as_deref(), Some("ok"));
/// assert!(matches!(r.next_line(), Err(LineError::TooLong { limit: 8, .. })));
/// ```
pub struct LineReader<R> {
    inner: R,
    line: Vec<u8>,
    max_line: usize,
    read: u64,
}

impl<R: BufRead> LineReader<R> {
    pub fn new(inner: R, max_line: usize) -> LineReader<R> {
        LineReader {
            inner,
            line: Vec::new(),
            max_line,
            read: 0,
        }
    }

    /// Changes the limit for the lines after this one (e.g. once a peer has said who
    /// it is, its messages may be longer than its greeting).
    pub fn set_max_line(&mut self, max_line: usize) {
        self.max_line = max_line;
    }

    pub fn max_line(&self) -> usize {
        self.max_line
    }

    /// Bytes consumed so far: every line read with its newline, and what was read of
    /// a line refused.
    pub fn bytes_read(&self) -> u64 {
        self.read
    }

    /// The next line, without its newline; `Ok(None)` at the end of the stream.
    pub fn next_line(&mut self) -> Result<Option<String>, LineError> {
        self.line.clear();
        loop {
            let avail = match self.inner.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e.into()),
            };
            if avail.is_empty() {
                if self.line.is_empty() {
                    return Ok(None);
                }
                break;
            }
            let (take, end) = match avail.iter().position(|&b| b == b'\n') {
                Some(i) => (i, true),
                None => (avail.len(), false),
            };
            if self.line.len() + take > self.max_line {
                let seen = self.line.len() + take;
                let room = EXCERPT.saturating_sub(self.line.len()).min(take);
                let mut start = std::mem::take(&mut self.line);
                start.truncate(EXCERPT);
                start.extend_from_slice(&avail[..room]);
                let used = take + usize::from(end);
                self.inner.consume(used);
                self.read += used as u64;
                return Err(LineError::TooLong {
                    limit: self.max_line,
                    seen,
                    start,
                });
            }
            self.line.extend_from_slice(&avail[..take]);
            let used = take + usize::from(end);
            self.inner.consume(used);
            self.read += used as u64;
            if end {
                break;
            }
        }
        if self.line.last() == Some(&b'\r') {
            self.line.pop();
        }
        match String::from_utf8(std::mem::take(&mut self.line)) {
            Ok(s) => Ok(Some(s)),
            Err(e) => {
                let bytes = e.as_bytes();
                Err(LineError::NotUtf8 {
                    at: e.utf8_error().valid_up_to(),
                    len: bytes.len(),
                    start: bytes[..bytes.len().min(EXCERPT)].to_vec(),
                })
            }
        }
    }
}

/// Why a file could not be read whole.
#[derive(Debug, thiserror::Error)]
pub enum FileError {
    #[error("{} is larger than the limit of {} (at least {} read)", .path, Size(*limit), Size(*seen))]
    TooLarge { path: String, limit: u64, seen: u64 },
    #[error("{path} is not UTF-8 text (byte {at})")]
    NotUtf8 { path: String, at: usize },
    #[error("cannot read {path}: {source}")]
    Io {
        path: String,
        source: std::io::Error,
    },
}

/// A whole file another machine wrote (or a stream's end, from a pipe), as UTF-8 text,
/// refused past `limit` bytes without holding more than `limit + 1` of them.
pub fn read_file(path: &Path, limit: u64) -> Result<String, FileError> {
    let name = path.display().to_string();
    let io = |source| FileError::Io {
        path: name.clone(),
        source,
    };
    let file = std::fs::File::open(path).map_err(io)?;
    // The size said by the file system refuses at once; the bounded read holds for a
    // file still growing, or one that is not a regular file.
    let size = file.metadata().map_err(io)?.len();
    if size > limit {
        return Err(FileError::TooLarge {
            path: name,
            limit,
            seen: size,
        });
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(limit + 1).read_to_end(&mut bytes).map_err(io)?;
    if bytes.len() as u64 > limit {
        return Err(FileError::TooLarge {
            path: name,
            limit,
            seen: bytes.len() as u64,
        });
    }
    String::from_utf8(bytes).map_err(|e| FileError::NotUtf8 {
        path: name,
        at: e.utf8_error().valid_up_to(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    /// Every way a stream can be cut into reads: one byte at a time, and whole.
    fn lines(input: &[u8], max: usize, cap: usize) -> Vec<Result<String, String>> {
        let mut r = LineReader::new(BufReader::with_capacity(cap, input), max);
        let mut out = Vec::new();
        loop {
            match r.next_line() {
                Ok(Some(l)) => out.push(Ok(l)),
                Ok(None) => return out,
                Err(e) => {
                    out.push(Err(e.to_string()));
                    return out;
                }
            }
        }
    }

    #[test]
    fn lines_whatever_the_reads() {
        let input = b"one\r\n\ntwo\nlast";
        for cap in [1, 2, 3, 5, 64] {
            assert_eq!(
                lines(input, 4, cap),
                [
                    Ok("one".into()),
                    Ok("".into()),
                    Ok("two".into()),
                    Ok("last".into())
                ],
                "buffer {cap}"
            );
        }
    }

    #[test]
    fn a_line_at_the_limit_passes_and_one_byte_more_is_refused() {
        for cap in [1, 3, 8192] {
            assert_eq!(lines(b"12345678\n", 8, cap), [Ok("12345678".into())]);
            let got = lines(b"123456789\nnext\n", 8, cap);
            assert_eq!(got.len(), 1, "{got:?}");
            let e = got[0].as_ref().unwrap_err();
            assert!(e.contains("limit of 8 B"), "{e}");
            assert!(e.contains("starting `12345678"), "{e}");
        }
    }

    #[test]
    fn an_endless_line_is_refused_after_the_limit_having_read_no_more() {
        // An endless stream: the reader stops once past the limit.
        let endless = std::io::repeat(b'a');
        let mut r = LineReader::new(BufReader::with_capacity(4096, endless), 1 << 20);
        let e = r.next_line().unwrap_err();
        assert!(
            matches!(e, LineError::TooLong { limit, seen, .. } if limit == 1 << 20 && seen > limit)
        );
        assert!(r.bytes_read() <= (1 << 20) + 4096, "{}", r.bytes_read());
        assert!(e.to_string().contains("limit of 1 MiB"), "{e}");
    }

    #[test]
    fn bytes_that_are_not_utf8_are_an_error_naming_them() {
        let got = lines(b"ok\nab\xff\xfe\n", 64, 8192);
        assert_eq!(got[0], Ok("ok".into()));
        let e = got[1].as_ref().unwrap_err();
        assert!(e.contains("not UTF-8") && e.contains("byte 2 of 4"), "{e}");
        assert!(e.contains(r"ab\xff\xfe"), "{e}");
    }

    #[test]
    fn the_limit_can_change_between_lines() {
        let mut r = LineReader::new(&b"short\na longer line\n"[..], 5);
        assert_eq!(r.next_line().unwrap().as_deref(), Some("short"));
        r.set_max_line(100);
        assert_eq!(r.next_line().unwrap().as_deref(), Some("a longer line"));
        assert_eq!(r.bytes_read(), 20);
    }

    #[test]
    fn sizes_read_as_limits() {
        assert_eq!(Size(32 << 20).to_string(), "32 MiB");
        assert_eq!(Size(4096).to_string(), "4 KiB");
        assert_eq!(Size(1536).to_string(), "1.5 KiB");
        assert_eq!(Size(300).to_string(), "300 B");
    }

    #[test]
    fn files_past_the_limit_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "0123456789").unwrap();
        assert_eq!(read_file(&p, 10).unwrap(), "0123456789");
        let e = read_file(&p, 9).unwrap_err().to_string();
        assert!(e.contains("larger than the limit of 9 B"), "{e}");
        std::fs::write(&p, b"a\xffb").unwrap();
        let e = read_file(&p, 9).unwrap_err().to_string();
        assert!(e.contains("not UTF-8"), "{e}");
        // A stream, whose size the file system does not know.
        let e = read_file(Path::new("/dev/zero"), 1 << 16)
            .unwrap_err()
            .to_string();
        assert!(e.contains("larger than the limit of 64 KiB"), "{e}");
    }
}
