//! Faults of time and tails as parameterised set-ups for the integration tests
//! (`tests/diagnose_time.rs`), each run at the ends of a range where its fault is
//! decisive: an nginx whose access log is a pipe read in `chunk` bytes every `period`
//! (the worker blocks in write(), a stall whatever its period); the JDK's HttpServer
//! with a handler of `handler_ms` writing head and body apart (Nagle behind a slow
//! handler); a link that loses `per_mille` of the server's segments (`nft` in the
//! server's namespace: this kernel has no `netem`). Like `testbed.rs`, test fixtures:
//! they panic with what went wrong, and every process, thread, rule and file goes when
//! dropped (a namespace's rules go with the namespace).

use std::net::TcpStream;
use std::os::unix::fs::OpenOptionsExt;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::jvm::up_java;
use super::testbed::{free_port, in_ns, spawn, stop_child, NetnsPair};
use super::world::which;

/// A FIFO whose reader lags: it reads at most `chunk` bytes every `period`, so a writer
/// faster than `chunk ÷ period` blocks until the next read. The reader is a thread of
/// the test; it and the FIFO go when dropped.
pub struct SlowPipe {
    pub path: PathBuf,
    stop: Arc<AtomicBool>,
    reader: Option<JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl SlowPipe {
    pub fn new(period: Duration, chunk: usize) -> SlowPipe {
        let dir = tempfile::Builder::new()
            .prefix("loadlens-test-pipe")
            .tempdir()
            .expect("cannot make a temp dir");
        let path = dir.path().join("access.fifo");
        let c = std::ffi::CString::new(path.display().to_string()).expect("a path");
        // SAFETY: mkfifo on a NUL-terminated path we own.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o666) } != 0 {
            panic!(
                "mkfifo {}: {}",
                path.display(),
                std::io::Error::last_os_error()
            );
        }
        // Open for reading and writing: the open does not wait for a writer, and a
        // writer's open (nginx's, at its start) finds a reader.
        let fifo = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&path)
            .expect("cannot open the FIFO");
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let reader = std::thread::spawn(move || {
            use std::io::Read;
            let mut fifo = fifo;
            let mut buf = vec![0u8; chunk];
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(period);
                let _ = fifo.read(&mut buf);
            }
        });
        SlowPipe {
            path,
            stop,
            reader: Some(reader),
            _dir: dir,
        }
    }
}

impl Drop for SlowPipe {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
    }
}

/// The JDK's built-in HttpServer on a free loopback port: each request sleeps
/// `handler_ms`, then the head and a `body`-byte body go out in two writes, without
/// TCP_NODELAY unless `nodelay` (`-Dsun.net.httpserver.nodelay=true`, the fix).
/// Stopped when dropped.
pub struct JdkServer {
    child: Child,
    pub port: u16,
    _dir: tempfile::TempDir,
}

impl JdkServer {
    /// `None` when java is not installed.
    pub fn start(handler_ms: u32, body: usize, nodelay: bool) -> Option<JdkServer> {
        which("java")?;
        let dir = tempfile::Builder::new()
            .prefix("loadlens-test-jdk")
            .tempdir()
            .expect("cannot make a temp dir");
        let src = dir.path().join("Up.java");
        std::fs::write(&src, up_java(handler_ms, body)).expect("cannot write Up.java");
        let port = free_port();
        let mut cmd = Command::new("java");
        if nodelay {
            cmd.arg("-Dsun.net.httpserver.nodelay=true");
        }
        cmd.arg(&src)
            .args(["127.0.0.1", &port.to_string()])
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        let mut child = spawn(cmd, "java must be installed (make test does it)");
        // The source launcher compiles first: a few seconds on a busy machine.
        let t0 = Instant::now();
        while t0.elapsed() < Duration::from_secs(60) {
            if let Ok(Some(st)) = child.try_wait() {
                panic!("java exited before listening: {st}");
            }
            if TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return Some(JdkServer {
                    child,
                    port,
                    _dir: dir,
                });
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        stop_child(&mut child);
        panic!("java did not listen on 127.0.0.1:{port} within 60 s");
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }
}

impl Drop for JdkServer {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// Loses `per_mille` ‰ of the TCP segments between the client and the server of `pair`
/// on `port`, each way: dropped as they arrive, the server's in the client's namespace
/// and the client's in the server's (an `nft` table of each namespace's own, removed
/// with it or by [`lossless`]). Dropped on arrival, not on output, where a drop is a
/// local send error that TCP retries without counting a loss. `false` when `nft` is not
/// installed.
pub fn lossy(pair: &NetnsPair, port: u16, per_mille: u32) -> bool {
    if which("nft").is_none() {
        return false;
    }
    for (ns, side) in [(&pair.client, "sport"), (&pair.server, "dport")] {
        in_ns(ns, &["nft", "add", "table", "inet", "loss"]);
        in_ns(
            ns,
            &[
                "nft",
                "add chain inet loss in { type filter hook input priority 0; }",
            ],
        );
        in_ns(
            ns,
            &[
                "nft",
                &format!(
                    "add rule inet loss in tcp {side} {port} numgen random mod 1000 < {per_mille} drop"
                ),
            ],
        );
    }
    true
}

/// Removes [`lossy`]'s loss (the fix).
pub fn lossless(pair: &NetnsPair) {
    for ns in [&pair.client, &pair.server] {
        in_ns(ns, &["nft", "delete", "table", "inet", "loss"]);
    }
}
