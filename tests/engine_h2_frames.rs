//! The parts of HTTP/2 nginx does not exercise, against a scripted h2c server: a header
//! block split over HEADERS and CONTINUATION with padding, padded DATA, a dynamic-table
//! entry used by later responses, PING and SETTINGS acknowledged, the server's stream
//! limit kept, RST_STREAM counted per request.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::{run_json, u};

#[derive(Default)]
struct Seen {
    settings_acks: AtomicU64,
    ping_acks: AtomicU64,
    most_open: AtomicU64,
    stop: AtomicBool,
}

fn frame(out: &mut Vec<u8>, ty: u8, flags: u8, stream: u32, payload: &[u8]) {
    let l = (payload.len() as u32).to_be_bytes();
    out.extend_from_slice(&[l[1], l[2], l[3], ty, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// Serves one connection: SETTINGS (at most 2 streams) and a PING first, then each
/// request answered (every 5th reset) once two are open or the client sent all it can.
fn serve(mut c: TcpStream, seen: Arc<Seen>) {
    c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
    let mut buf = Vec::new();
    let mut chunk = [0u8; 16384];
    let mut preface = false;
    let mut open: Vec<u32> = Vec::new();
    let mut answered = 0u64;
    let mut indexed = false;
    let mut out = Vec::new();
    frame(&mut out, 0x4, 0, 0, &[0, 3, 0, 0, 0, 2]);
    frame(&mut out, 0x6, 0, 0, b"loadlens");
    c.write_all(&out).unwrap();
    while !seen.stop.load(Ordering::Relaxed) {
        let n = match c.read(&mut chunk) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        buf.extend_from_slice(&chunk[..n]);
        if !preface {
            if buf.len() < 24 {
                continue;
            }
            assert_eq!(&buf[..24], b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
            buf.drain(..24);
            preface = true;
        }
        while buf.len() >= 9 {
            let len = (buf[0] as usize) << 16 | (buf[1] as usize) << 8 | buf[2] as usize;
            if buf.len() < 9 + len {
                break;
            }
            let (ty, flags) = (buf[3], buf[4]);
            let stream = u32::from_be_bytes([buf[5], buf[6], buf[7], buf[8]]);
            let payload = buf[9..9 + len].to_vec();
            buf.drain(..9 + len);
            match ty {
                0x4 if flags & 1 == 1 => {
                    seen.settings_acks.fetch_add(1, Ordering::Relaxed);
                }
                0x6 if flags & 1 == 1 && payload == b"loadlens" => {
                    seen.ping_acks.fetch_add(1, Ordering::Relaxed);
                }
                0x1 => open.push(stream),
                _ => {}
            }
        }
        seen.most_open
            .fetch_max(open.len() as u64, Ordering::Relaxed);
        let mut out = Vec::new();
        for s in open.drain(..) {
            answered += 1;
            if answered % 5 == 0 {
                frame(&mut out, 0x3, 0, s, &2u32.to_be_bytes());
                continue;
            }
            // :status 200 (static index 8), then `x-a: b` with incremental indexing the
            // first time and as dynamic index 62 after: the block, split in two.
            let block: Vec<u8> = if indexed {
                vec![0x88, 0xbe]
            } else {
                vec![0x88, 0x40, 3, b'x', b'-', b'a', 1, b'b']
            };
            indexed = true;
            let mut first = vec![4u8]; // pad length, PADDED
            first.extend_from_slice(&block[..1]);
            first.extend_from_slice(&[0; 4]);
            frame(&mut out, 0x1, 0x8, s, &first);
            frame(&mut out, 0x9, 0x4, s, &block[1..]);
            let mut data = vec![3u8];
            data.extend_from_slice(b"hello");
            data.extend_from_slice(&[0; 3]);
            frame(&mut out, 0x0, 0x1 | 0x8, s, &data);
        }
        if c.write_all(&out).is_err() {
            return;
        }
    }
}

#[test]
fn continuation_padding_dynamic_table_ping_and_resets() {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = l.local_addr().unwrap().port();
    let seen = Arc::new(Seen::default());
    let s2 = seen.clone();
    l.set_nonblocking(true).unwrap();
    let server = std::thread::spawn(move || {
        let mut workers = Vec::new();
        while !s2.stop.load(Ordering::Relaxed) {
            match l.accept() {
                Ok((c, _)) => {
                    c.set_nonblocking(false).unwrap();
                    let s3 = s2.clone();
                    workers.push(std::thread::spawn(move || serve(c, s3)));
                }
                Err(_) => std::thread::sleep(Duration::from_millis(5)),
            }
        }
        for w in workers {
            let _ = w.join();
        }
    });
    let run = run_json(&[
        "-n",
        "100",
        "-c",
        "1",
        "-t",
        "1",
        "--h2",
        "--max-concurrent-streams",
        "8",
        "--no-watch",
        &format!("http://127.0.0.1:{port}/"),
    ]);
    seen.stop.store(true, Ordering::Relaxed);
    server.join().unwrap();
    assert_eq!(u(&run, "results.responses"), 80);
    assert_eq!(u(&run, "results.errors.reset"), 20);
    assert_eq!(
        u(&run, "results.errors.parse"),
        0,
        "every header block decoded"
    );
    assert_eq!(u(&run, "results.status_codes.200"), 80);
    assert_eq!(u(&run, "results.connections_opened"), 1);
    assert_eq!(seen.settings_acks.load(Ordering::Relaxed), 1);
    assert_eq!(seen.ping_acks.load(Ordering::Relaxed), 1);
    let most = seen.most_open.load(Ordering::Relaxed);
    assert!(
        (1..=2).contains(&most),
        "{most} streams open at once, the server allowed 2"
    );
}
