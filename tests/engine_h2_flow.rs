//! HTTP/2 request bodies against a strict server: it grants its windows in small steps
//! and counts every DATA byte sent beyond what it granted (RFC 9113 §6.9). nginx cannot
//! show this: it opens a stream's window as soon as it starts reading a body, so a client
//! that ignores the windows still passes against it.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use common::{run_json, status_codes, u};

const DATA: u8 = 0x0;
const HEADERS: u8 = 0x1;
const RST_STREAM: u8 = 0x3;
const SETTINGS: u8 = 0x4;
const WINDOW_UPDATE: u8 = 0x8;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;
const ACK: u8 = 0x1;
const DEFAULT_WINDOW: i64 = 65_535;

/// What the server saw, over all connections.
#[derive(Default, Debug)]
struct Seen {
    /// DATA bytes beyond a stream's or the connection's window.
    violations: u64,
    /// Body length of every stream that ended.
    bodies: Vec<u64>,
    /// Streams the client reset after our answer (the rest of their bodies unsent).
    resets: u64,
    /// Streams still open when their connection closed.
    open_at_close: u64,
    /// Most streams open at once on one connection.
    max_open: usize,
}

/// How the server grants its windows.
#[derive(Clone, Copy)]
struct Grants {
    /// SETTINGS_INITIAL_WINDOW_SIZE it announces.
    stream_window: u32,
    /// Whether it gives a stream's window back when it is used up (the connection's
    /// always is).
    stream_updates: bool,
    /// Answers 200 on a request's HEADERS, before its body.
    answer_early: bool,
}

struct StrictH2 {
    port: u16,
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    accept: Option<JoinHandle<()>>,
}

impl StrictH2 {
    fn start(g: Grants) -> StrictH2 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let stop = Arc::new(AtomicBool::new(false));
        let (s, st) = (seen.clone(), stop.clone());
        let accept = std::thread::spawn(move || {
            let mut conns = Vec::new();
            while !st.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((sock, _)) => {
                        let s = s.clone();
                        conns.push(std::thread::spawn(move || serve(sock, g, &s)));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
            for c in conns {
                let _ = c.join();
            }
        });
        StrictH2 {
            port,
            seen,
            stop,
            accept: Some(accept),
        }
    }
}

impl Drop for StrictH2 {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(a) = self.accept.take() {
            let _ = a.join();
        }
    }
}

fn frame(out: &mut Vec<u8>, ty: u8, flags: u8, stream: u32, payload: &[u8]) {
    out.extend_from_slice(&(payload.len() as u32).to_be_bytes()[1..]);
    out.extend_from_slice(&[ty, flags]);
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
}

/// One stream as the server tracks it.
struct Stream {
    id: u32,
    /// What the client may still send on it.
    window: i64,
    /// Opened before the client acknowledged our SETTINGS (its window moves when it does).
    before_ack: bool,
    received: u64,
    answered: bool,
}

/// Serves one connection until the client closes it.
fn serve(mut sock: TcpStream, g: Grants, seen: &Mutex<Seen>) {
    sock.set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut preface = [0u8; 24];
    if sock.read_exact(&mut preface).is_err() {
        return;
    }
    let mut out = Vec::new();
    let mut settings = vec![0, 4];
    settings.extend_from_slice(&g.stream_window.to_be_bytes());
    frame(&mut out, SETTINGS, 0, 0, &settings);
    if sock.write_all(&out).is_err() {
        return;
    }
    let mut streams: Vec<Stream> = Vec::new();
    let mut conn_window = DEFAULT_WINDOW;
    let mut acked = false;
    loop {
        let mut head = [0u8; 9];
        if sock.read_exact(&mut head).is_err() {
            seen.lock().unwrap().open_at_close += streams.len() as u64;
            return;
        }
        let len = u32::from_be_bytes([0, head[0], head[1], head[2]]) as usize;
        let (ty, flags) = (head[3], head[4]);
        let id = u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7fff_ffff;
        let mut payload = vec![0u8; len];
        if sock.read_exact(&mut payload).is_err() {
            return;
        }
        out.clear();
        let mut ended = None;
        match ty {
            SETTINGS if flags & ACK != 0 => {
                acked = true;
                let change = g.stream_window as i64 - DEFAULT_WINDOW;
                for s in streams.iter_mut().filter(|s| s.before_ack) {
                    s.window += change;
                }
            }
            SETTINGS => frame(&mut out, SETTINGS, ACK, 0, &[]),
            HEADERS => {
                streams.push(Stream {
                    id,
                    window: if acked {
                        g.stream_window as i64
                    } else {
                        DEFAULT_WINDOW
                    },
                    before_ack: !acked,
                    received: 0,
                    answered: g.answer_early,
                });
                if g.answer_early {
                    frame(&mut out, HEADERS, END_HEADERS | END_STREAM, id, &[0x88]);
                }
                let mut v = seen.lock().unwrap();
                v.max_open = v.max_open.max(streams.len());
                if flags & END_STREAM != 0 {
                    ended = Some(id);
                }
            }
            RST_STREAM => {
                if let Some(i) = streams.iter().position(|s| s.id == id && s.answered) {
                    streams.swap_remove(i);
                    seen.lock().unwrap().resets += 1;
                }
            }
            DATA => {
                let Some(s) = streams.iter_mut().find(|s| s.id == id) else {
                    // DATA on a stream that is not open (e.g. after its reset).
                    seen.lock().unwrap().violations += 1;
                    continue;
                };
                let n = len as i64;
                let mut v = seen.lock().unwrap();
                if n > s.window || n > conn_window {
                    v.violations += 1;
                }
                s.window -= n;
                conn_window -= n;
                s.received += n as u64;
                // A window is given back only once it is used up: a client that sends
                // beyond it is caught before the server has granted anything more.
                if conn_window <= 0 {
                    let inc = DEFAULT_WINDOW - conn_window;
                    frame(&mut out, WINDOW_UPDATE, 0, 0, &(inc as u32).to_be_bytes());
                    conn_window += inc;
                }
                if g.stream_updates && s.window <= 0 && flags & END_STREAM == 0 {
                    let inc = g.stream_window as i64 - s.window;
                    frame(&mut out, WINDOW_UPDATE, 0, id, &(inc as u32).to_be_bytes());
                    s.window += inc;
                }
                if flags & END_STREAM != 0 {
                    ended = Some(id);
                }
            }
            _ => {}
        }
        if let Some(id) = ended {
            let i = streams.iter().position(|s| s.id == id).unwrap();
            let s = streams.swap_remove(i);
            seen.lock().unwrap().bodies.push(s.received);
            if !s.answered {
                // HPACK static index 8: `:status: 200`.
                frame(&mut out, HEADERS, END_HEADERS | END_STREAM, id, &[0x88]);
            }
        }
        if !out.is_empty() && sock.write_all(&out).is_err() {
            return;
        }
    }
}

fn post(port: u16, body: &std::path::Path, n: &str) -> serde_json::Value {
    run_json(&[
        "-n",
        n,
        "-c",
        "2",
        "-t",
        "1",
        "--h2",
        "--max-concurrent-streams",
        "4",
        "-X",
        "POST",
        "--body-file",
        body.to_str().unwrap(),
        "-d",
        "20s",
        "--no-watch",
        &format!("http://127.0.0.1:{port}/upload"),
    ])
}

/// A 1,000-byte stream window, given back each time it is used up: a 50,000-byte body
/// goes in about 50 steps, each waiting for the server's WINDOW_UPDATE; nothing is sent
/// beyond a window, the first stream's default window included.
#[test]
fn bodies_wait_for_the_stream_window_and_never_exceed_it() {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    std::fs::write(&body, vec![b'x'; 50_000]).unwrap();
    let server = StrictH2::start(Grants {
        stream_window: 1_000,
        stream_updates: true,
        answer_early: false,
    });
    let run = post(server.port, &body, "40");
    let port = server.port;
    let seen = std::mem::take(&mut *server.seen.lock().unwrap());
    drop(server);
    assert_eq!(u(&run, "results.responses"), 40, "port {port}");
    assert_eq!(status_codes(&run).get(&200).copied(), Some(40));
    assert_eq!(seen.violations, 0, "DATA beyond a window");
    assert_eq!(seen.bodies.len(), 40);
    assert!(
        seen.bodies.iter().all(|&b| b == 50_000),
        "{:?}",
        seen.bodies
    );
}

/// Stream windows larger than the body, and a connection window of 65,535 given back
/// each time it is used up, shared by four streams of 150,000 bytes: they wait for the
/// connection's WINDOW_UPDATEs, none overruns it.
#[test]
fn bodies_share_the_connection_window_and_never_exceed_it() {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    std::fs::write(&body, vec![b'y'; 150_000]).unwrap();
    let server = StrictH2::start(Grants {
        stream_window: 1 << 20,
        stream_updates: false,
        answer_early: false,
    });
    let run = post(server.port, &body, "24");
    let seen = std::mem::take(&mut *server.seen.lock().unwrap());
    drop(server);
    assert_eq!(u(&run, "results.responses"), 24);
    assert_eq!(status_codes(&run).get(&200).copied(), Some(24));
    assert_eq!(seen.violations, 0, "DATA beyond the connection window");
    assert_eq!(seen.bodies.len(), 24);
    assert!(
        seen.bodies.iter().all(|&b| b == 150_000),
        "{:?}",
        seen.bodies
    );
}

/// A server that answers before the body has arrived (as RFC 9113 §8.1 allows): the
/// response counts, the rest of the body is not sent, and the stream is reset from our
/// side so that the server does not keep counting it open.
#[test]
fn a_response_before_the_whole_body_ends_the_stream_with_a_reset() {
    let dir = tempfile::tempdir().unwrap();
    let body = dir.path().join("body");
    std::fs::write(&body, vec![b'z'; 50_000]).unwrap();
    let server = StrictH2::start(Grants {
        stream_window: 1_000,
        stream_updates: true,
        answer_early: true,
    });
    let run = post(server.port, &body, "20");
    let seen = std::mem::take(&mut *server.seen.lock().unwrap());
    drop(server);
    assert_eq!(u(&run, "results.responses"), 20);
    assert_eq!(status_codes(&run).get(&200).copied(), Some(20));
    assert_eq!(seen.violations, 0, "DATA beyond a window or after a reset");
    // A stream started before our SETTINGS arrived may have sent its whole body (50,000
    // bytes fit the default window): it ends with END_STREAM; the others with a reset,
    // or, for the last ones, with their connection at the end of the run.
    let whole = seen.bodies.iter().filter(|&&b| b == 50_000).count() as u64;
    assert_eq!(seen.resets + whole + seen.open_at_close, 20, "{seen:?}");
    assert!(seen.open_at_close <= 8, "{seen:?}");
    assert!(seen.resets >= 10, "{seen:?}");
    // The server never saw more streams open than we keep in flight.
    assert!(seen.max_open <= 4, "{seen:?}");
}
