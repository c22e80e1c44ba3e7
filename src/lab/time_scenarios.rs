//! Scenarios about where the server's time goes rather than what saturates: a worker
//! blocked in a call of a real kind (its log written into a pipe whose reader lags).

use super::scenario::{url, Key, Moves, Scenario, Setup};
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
    }]
}
