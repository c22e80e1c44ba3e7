//! A small misbehaving HTTP server for the hostile-server tests, and a run of loadlens
//! measured from outside: how long it took and the peak memory of the process.

use std::io::Read;
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::Value;

/// Serves every request on every connection with `respond` until dropped; `respond`
/// returns whether to keep the connection. Each connection has its own thread, which
/// ends when the client goes away (a write fails) or `respond` says so.
pub struct BadServer {
    pub port: u16,
    stop: Arc<AtomicBool>,
    counts: Arc<Counts>,
}

/// What the server saw, counted as it happened: the tests compare it with what the
/// client counted, instead of timing either.
#[derive(Default)]
struct Counts {
    /// Connections accepted.
    accepted: AtomicU64,
    /// Requests read (reads that called `respond`).
    requests: AtomicU64,
    /// Connections whose thread has ended (the client closed, `respond` said stop, or
    /// the read timed out).
    ended: AtomicU64,
}

impl BadServer {
    pub fn start(respond: impl Fn(&mut TcpStream) -> bool + Send + Sync + 'static) -> BadServer {
        BadServer::start_with(None, respond)
    }

    /// With `greet`: called once on each new connection before any request is read
    /// (a server that answers before it is asked).
    pub fn start_with(
        greet: Option<fn(&mut TcpStream)>,
        respond: impl Fn(&mut TcpStream) -> bool + Send + Sync + 'static,
    ) -> BadServer {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let s2 = stop.clone();
        let counts = Arc::new(Counts::default());
        let c2 = counts.clone();
        let respond = Arc::new(respond);
        l.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            while !s2.load(Ordering::Relaxed) {
                match l.accept() {
                    Ok((mut c, _)) => {
                        c2.accepted.fetch_add(1, Ordering::SeqCst);
                        c.set_nonblocking(false).unwrap();
                        c.set_read_timeout(Some(Duration::from_secs(3))).unwrap();
                        c.set_write_timeout(Some(Duration::from_secs(5))).unwrap();
                        let s3 = s2.clone();
                        let c3 = c2.clone();
                        let respond = respond.clone();
                        std::thread::spawn(move || {
                            if let Some(g) = greet {
                                g(&mut c);
                            }
                            let mut buf = [0u8; 4096];
                            // One request per read is enough for these tests (closed loop).
                            while !s3.load(Ordering::Relaxed) {
                                match c.read(&mut buf) {
                                    Ok(0) | Err(_) => break,
                                    Ok(_) => {
                                        c3.requests.fetch_add(1, Ordering::SeqCst);
                                        if !respond(&mut c) {
                                            break;
                                        }
                                    }
                                }
                            }
                            c3.ended.fetch_add(1, Ordering::SeqCst);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        BadServer { port, stop, counts }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// Connections accepted so far.
    pub fn accepted(&self) -> u64 {
        self.counts.accepted.load(Ordering::SeqCst)
    }

    /// Requests read so far.
    pub fn requests(&self) -> u64 {
        self.counts.requests.load(Ordering::SeqCst)
    }

    /// Waits (bounded, [`super::HANG`]) until the server has accepted `connections`
    /// and every one of them has ended: after the client has exited, the server's
    /// counts are then final.
    pub fn settle(&self, connections: u64) {
        super::wait_for(
            &format!("{connections} connections accepted and ended"),
            || {
                self.accepted() >= connections
                    && self.counts.ended.load(Ordering::SeqCst) == self.accepted()
            },
        );
    }
}

/// Never answers: holds the connection until the client closes it (read timeouts do
/// not end the wait), then ends it. A run against it can only end by its own deadline
/// or timeout.
pub fn hold_until_client_closes(c: &mut TcpStream) -> bool {
    let mut b = [0u8; 4096];
    loop {
        match c.read(&mut b) {
            Ok(0) => return false,
            Ok(_) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                continue
            }
            Err(_) => return false,
        }
    }
}

impl Drop for BadServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Closes `c` with a reset (SO_LINGER 0) instead of a FIN.
pub fn reset(c: TcpStream) {
    use std::os::fd::AsRawFd;
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket fd and a linger struct of the size passed.
    unsafe {
        libc::setsockopt(
            c.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            &l as *const libc::linger as *const libc::c_void,
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
    drop(c);
}

/// A `loadlens run` measured from outside.
pub struct Measured {
    pub run: Value,
    /// Wall-clock time from spawn to exit.
    pub took: Duration,
    /// Peak resident memory of the process (`VmHWM` in `/proc/PID/status`, read every
    /// 2 ms while it ran, so a run of a few ms may end before a reading after its exec; `wait4`'s `ru_maxrss` would include this test process's
    /// memory, which the child had before its `exec`), bytes.
    pub peak_rss: u64,
}

/// How a child watched by [`watch_peak`] ended.
pub struct Exited {
    /// The raw wait status.
    pub status: libc::c_int,
    /// Wall-clock time from `t0` to exit.
    pub took: Duration,
    /// The highest `VmHWM` read while it ran (bytes; 0 when it ended before a reading).
    pub sampled: u64,
    /// The kernel's own peak for it (`ru_maxrss`, bytes): an upper bound, since it counts
    /// the test process's pages the child held before its exec (~10 MB).
    pub ru_maxrss: u64,
}

/// Waits for `child` (spawned at `t0`), reading its peak memory (`VmHWM` in
/// `/proc/PID/status`) every 2 ms, and kills it once `kill_after` has passed (the test
/// then fails on its status rather than hanging). Reaps it.
pub fn watch_peak(child: &Child, t0: Instant, kill_after: Duration) -> Exited {
    let pid = child.id() as libc::pid_t;
    let done = Arc::new(AtomicBool::new(false));
    let d2 = done.clone();
    let watcher = std::thread::spawn(move || {
        let mut peak_kb = 0;
        while !d2.load(Ordering::Relaxed) {
            // Until it is reaped the pid is this child's (a zombie has no VmHWM line).
            if let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) {
                if let Some(kb) = s
                    .lines()
                    .find_map(|l| l.strip_prefix("VmHWM:"))
                    .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                {
                    peak_kb = peak_kb.max(kb);
                }
            }
            if t0.elapsed() > kill_after {
                // SAFETY: the child is not reaped yet (done is set only after it is).
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        peak_kb * 1024
    });
    // Wait without reaping first, so the watcher's last reads still see the process.
    // SAFETY: plain waitid on our own child.
    let mut info: libc::siginfo_t = unsafe { std::mem::zeroed() };
    unsafe {
        libc::waitid(
            libc::P_PID,
            pid as libc::id_t,
            &mut info,
            libc::WEXITED | libc::WNOWAIT,
        )
    };
    let took = t0.elapsed();
    done.store(true, Ordering::Relaxed);
    let sampled = watcher.join().unwrap();
    let mut status = 0;
    // SAFETY: reaping our own child; `usage` is written by the kernel.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    assert_eq!(r, pid, "wait4: {}", std::io::Error::last_os_error());
    Exited {
        status,
        took,
        sampled,
        ru_maxrss: usage.ru_maxrss as u64 * 1024,
    }
}

/// Runs `loadlens run ARGS --json FILE -q`, asserts it succeeded, and returns the Run
/// with the time it took and its peak memory. A run still going after `kill_after` is
/// killed (the test then fails on its exit status rather than hanging).
pub fn measured_run(args: &[&str], kill_after: Duration) -> Measured {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.json");
    let err = dir.path().join("stderr");
    let t0 = Instant::now();
    let child = super::loadlens()
        .arg("run")
        .args(args)
        .arg("--json")
        .arg(&out)
        .arg("-q")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).unwrap())
        .spawn()
        .unwrap();
    let e = watch_peak(&child, t0, kill_after);
    // The kernel's peak covers a run that ended before the watcher's first sample of
    // the grown process; as an upper bound it is what a "stays under" check needs.
    let peak_rss = e.sampled.max(e.ru_maxrss);
    let stderr = std::fs::read_to_string(&err).unwrap_or_default();
    let status = e.status;
    assert!(
        libc::WIFEXITED(status) && libc::WEXITSTATUS(status) == 0,
        "loadlens {args:?} failed (status {status:#x}) after {:?}: {stderr}",
        e.took
    );
    drop(child);
    Measured {
        run: read_json(&out),
        took: e.took,
        peak_rss,
    }
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}
