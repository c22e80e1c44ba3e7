//! Scenarios about where the server's time goes rather than what saturates: a worker
//! blocked in a call of a real kind (its log written into a pipe whose reader lags), a
//! server whose responses wait for a delayed ACK (Nagle).

use super::jvm::up_java;
use super::scenario::{listen, url, Key, Moves, Scenario, Setup, PORT};
use super::scenarios::start_front;
use super::servers::Nginx;
use super::world::World;

/// nginx's access log as a FIFO read by a log shipper that lags: a read of at most
/// 64 KiB every 250 ms (~2,700 log lines a second). Returns the FIFO's path; the reader
/// runs until the world ends.
fn slow_log_pipe(w: &mut World) -> anyhow::Result<String> {
    let fifo = w.dir.join("access.fifo");
    let path = fifo.display().to_string();
    let c = std::ffi::CString::new(path.clone())?;
    if unsafe { libc::mkfifo(c.as_ptr(), 0o644) } != 0 {
        anyhow::bail!("mkfifo {path}: {}", std::io::Error::last_os_error());
    }
    let s = w.server();
    // The reader holds its end open across nginx's config test and start (a FIFO
    // without a reader would fail nginx's open); a read returns at most what the pipe
    // holds, so the writer blocks whenever its 64 KiB are full.
    let script = format!(
        "exec 3<> '{path}'; while :; do sleep 0.25; dd bs=64k count=1 <&3 >/dev/null 2>&1; done"
    );
    w.spawn(&s, "log-reader", &["sh", "-c", &script])?;
    Ok(path)
}

/// The JDK's HttpServer as the front, on the server address, with `java_opts`.
/// Returns its pid.
fn start_jvm(w: &mut World, java_opts: &[&str]) -> anyhow::Result<i32> {
    if super::world::which("java").is_none() {
        anyhow::bail!(
            "java is not installed: apt-get install default-jre-headless (make test installs it)"
        );
    }
    let src = w.write("jvm/Up.java", up_java(0, 1024).as_bytes())?;
    let s = w.server();
    let (c, addr) = (w.client(), listen());
    let host = addr.split(':').next().unwrap_or_default().to_string();
    let port = PORT.to_string();
    let src = src.display().to_string();
    let mut args = vec!["java"];
    args.extend_from_slice(java_opts);
    args.extend([src.as_str(), host.as_str(), port.as_str()]);
    let pid = w.spawn(&s, "jvm", &args)?;
    w.wait_tcp(&c, &addr, "jvm")?;
    Ok(pid)
}

/// The median latency, ms.
fn p50_ms(r: &crate::run::Run) -> Option<f64> {
    r.results
        .latency
        .percentiles
        .iter()
        .find(|p| p.p == 50.0)
        .map(|p| p.us as f64 / 1e3)
}

pub fn scenarios() -> Vec<Scenario> {
    vec![Scenario {
        name: "blocking-log",
        summary: "nginx logs each request into a pipe whose reader lags: the worker blocks in write()",
        source: "nginx-tail-latencies.txt (workers blocked writing and reopening their logs; found with off-CPU stacks)",
        fault: "`access_log` into a FIFO read 64 KiB every 250 ms by a log shipper",
        fix: "`access_log FILE combined buffer=64k flush=1s;` on a local file",
        expected_finding: "worker-blocked",
        key: Key {
            label: "requests/s",
            read: |r| Some(r.results.requests_per_s),
            // The reader passes ~2,700 lines/s; the worker alone serves ten times that.
            moves: Moves::Up(4.0),
        },
        build: |w, fixed| {
            w.two_hosts()?;
            let logging = if fixed {
                let file = w.dir.join("access.log").display().to_string();
                format!("access_log {file} combined buffer=64k flush=1s;")
            } else {
                format!("access_log {};", slow_log_pipe(w)?)
            };
            let pid = start_front(
                w,
                Nginx {
                    logging,
                    ..Nginx::default()
                },
            )?;
            Ok(Setup::new(url("/1k.bin"), &["-c", "10"], vec![pid]))
        },
    },
    Scenario {
        name: "nagle",
        summary: "the JDK's HttpServer writes each response's head and body apart: the body waits for a delayed ACK",
        source: "peers-and-techniques.md (a ~40 ms latency mode: Nagle and delayed ACK), the JDK's sun.net.httpserver.nodelay",
        fault: "a JVM (com.sun.net.httpserver) answering 1 KiB without TCP_NODELAY, 10 keep-alive connections",
        fix: "`java -Dsun.net.httpserver.nodelay=true`",
        expected_finding: "nagle-delayed-ack",
        key: Key {
            label: "latency p50 ms",
            read: p50_ms,
            // ~40 ms (the delayed ACK) against well under a millisecond.
            moves: Moves::Down(10.0),
        },
        build: |w, fixed| {
            w.two_hosts()?;
            let opts: &[&str] = if fixed {
                &["-Dsun.net.httpserver.nodelay=true"]
            } else {
                &[]
            };
            let pid = start_jvm(w, opts)?;
            Ok(Setup::new(url("/"), &["-c", "10"], vec![pid]))
        },
    }]
}
