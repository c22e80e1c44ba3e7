//! Scenarios about where the server's time goes rather than what saturates: a worker
//! waiting for its CPU behind a busy loop, a worker stopped every second, a worker
//! blocked in a call of a real kind (its log written into a pipe whose reader lags), a
//! server whose responses wait for a delayed ACK (Nagle).

use std::time::Duration;

use super::jvm::up_java;
use super::scenario::{listen, url, Beside, Key, Moves, Scenario, Setup, PORT};
use super::scenarios::start_front;
use super::servers::{children, Nginx};
use super::world::World;
use crate::run::{OtherProcess, Run};

/// nginx's access log as a FIFO read by a log shipper that lags: a read of at most
/// 64 KiB every `period_ms` (250 ms: ~2,700 log lines a second). Returns the FIFO's
/// path; the reader runs until the world ends.
fn slow_log_pipe(w: &mut World, period_ms: u32) -> anyhow::Result<String> {
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
        "exec 3<> '{path}'; while :; do sleep {period}; dd bs=64k count=1 <&3 >/dev/null 2>&1; done",
        period = f64::from(period_ms) / 1e3
    );
    w.spawn(&s, "log-reader", &["sh", "-c", &script])?;
    Ok(path)
}

/// The JDK's HttpServer as the front, on the server address, with `java_opts`.
/// Returns its pid.
fn start_jvm(w: &mut World, java_opts: &[&str], handler_ms: u32) -> anyhow::Result<i32> {
    if super::world::which("java").is_none() {
        anyhow::bail!(
            "java is not installed: apt-get install default-jre-headless (make test installs it)"
        );
    }
    let src = w.write("jvm/Up.java", up_java(handler_ms, 1024).as_bytes())?;
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

/// The command name of cpu-contention's busy loop (a script's name is its comm).
pub const BUSY_LOOP: &str = "busy-loop";

/// The busy loop's CPU % over the window; when it is not among the other processes
/// listed, the most it can have had (the least listed, or the listing's bar).
fn busy_loop_cpu(run: &Run) -> Option<f64> {
    let others = &run.evidence.as_ref()?.window.other_processes;
    if let Some(o) = others.iter().find(|o| o.comm == BUSY_LOOP) {
        return Some(o.cpu_pct);
    }
    Some(match others.last() {
        Some(o) if others.len() >= OtherProcess::LISTED => o.cpu_pct,
        _ => OtherProcess::MIN_PCT,
    })
}

/// The median time from a response's first byte to its last (the body phase), ms.
fn body_p50_ms(r: &crate::run::Run) -> Option<f64> {
    r.results
        .phases
        .as_ref()?
        .body
        .percentiles
        .iter()
        .find(|p| p.p == 50.0)
        .map(|p| p.us as f64 / 1e3)
}

pub fn scenarios() -> Vec<Scenario> {
    vec![
    Scenario {
        name: "cpu-contention",
        summary: "a CPU hog on the core of the single nginx worker (--param connections=5..40)",
        source: "nginx-tail-latencies.txt (run-queue delay from a process hogging the worker's CPU)",
        fault: "a busy loop pinned to the worker's CPU at normal priority; `connections` keep-alive connections (default 20)",
        fix: "the hog moved to SCHED_IDLE (`chrt --idle 0`): it only runs when the worker does not",
        expected_finding: "run-queue-delay",
        key: Key {
            // The busy loop's own share of the worker's CPU, not the worker's run
            // delay: any other job on that CPU delays the worker too (under EEVDF a
            // nice-19 loop or build still takes turns: 35-320 ms/s after the fix,
            // with 4.5 on a quiet machine), while this moves with the fault: 47-50%
            // → 2-3.5% quiet or beside a nice-19 busy loop (÷14-25). A heavy host
            // load on the client's CPU slows the client, and the SCHED_IDLE loop
            // fills the worker's idle gaps: ÷5.0-5.7 beside three nice-19 rustc
            // and a dd, ÷1.6 at worst beside a build before the world's files
            // moved to tmpfs.
            label: "busy loop CPU %",
            read: busy_loop_cpu,
            moves: Moves::Down(5.0),
        },
        build: |w, fixed| {
            let conns = w.param("connections", 20, 5..=40)?.to_string();
            w.two_hosts()?;
            let s = w.server();
            let pid = start_front(w, Nginx {
                    main_extra: "worker_cpu_affinity 10;".into(),
                    ..Nginx::default()
                })?;
            // A script of its own name, so the Run (and its finding) names the
            // busy loop apart from any other shell on the machine.
            let script = w.dir.join(BUSY_LOOP);
            std::fs::write(&script, "#!/bin/sh\nwhile :; do :; done\n")?;
            std::fs::set_permissions(
                &script,
                std::os::unix::fs::PermissionsExt::from_mode(0o755),
            )?;
            let script = script.display().to_string();
            let mut hog = vec!["taskset", "-c", "1"];
            if fixed {
                hog.extend(["chrt", "--idle", "0"]);
            }
            hog.push(&script);
            w.spawn(&s, "hog", &hog)?;
            // The off-CPU watch costs a worker that shares its CPU run delay of its
            // own (after the fix: 126-141 ms/s with it, 20-22 without, over two
            // interleaved runs each), the very key this scenario moves: off here.
            // The load generator stays off the worker's CPU (the contention is the
            // busy loop's; loadlens beside the worker measured 106 ms/s after the fix
            // in a debug build).
            Ok(Setup {
                client_prefix: vec!["taskset".into(), "-c".into(), "0".into()],
                ..Setup::unprobed(
                    url("/1k.bin"),
                    &["-c", &conns, "-t", "1", "--no-offcpu"],
                    vec![pid],
                )
            })
        },
    },
    Scenario {
        name: "event-loop-stall",
        summary: "the nginx worker blocks 150 ms every second (--param stall_ms=150..400, period_ms=600..1200)",
        source: "nginx-tail-latencies.txt (a blocking log reopen stalls every connection of the worker)",
        fault: "the worker is stopped (SIGSTOP) for `stall_ms` (default 150) every `period_ms` (default 1000), as a blocking call would",
        fix: "nothing blocks the worker",
        expected_finding: "event-loop-stall",
        key: Key {
            // Counted, not timed: every stop holds each connection's request for
            // the rest of its 150 ms, so a run of 3 s has 2-3 stops of 20 slow
            // responses each. The threshold sits above what a busy host adds on its
            // own (a nice-19 loop beside the fixed worker: one 102 ms response in
            // 1 of 5 runs; p99.99 had read it as the fault).
            label: "responses slower than 125 ms",
            read: |r| {
                let h = r.results.latency.decode().ok()?;
                Some(h.count_between(125_000, h.max().max(125_000)) as f64)
            },
            // measured 40-60 → 0 over 6 runs beside a nice-19 loop (2 cores).
            moves: Moves::Down(5.0),
        },
        build: |w, fixed| {
            let stall_ms = w.param("stall_ms", 150, 150..=400)?;
            let period_ms = w.param("period_ms", 1000, 600..=1200)?;
            w.two_hosts()?;
            let pid = start_front(w, Nginx { ..Nginx::default() })?;
            let beside = (!fixed).then(|| {
                let workers = children(pid);
                let stall = Duration::from_millis(stall_ms.into());
                Beside::every(Duration::from_millis(period_ms.into()) - stall, move || {
                    for &wk in &workers {
                        unsafe { libc::kill(wk, libc::SIGSTOP) };
                    }
                    std::thread::sleep(stall);
                    for &wk in &workers {
                        unsafe { libc::kill(wk, libc::SIGCONT) };
                    }
                })
            });
            Ok(Setup {
                beside,
                ..Setup::unprobed(url("/1k.bin"), &["-c", "20"], vec![pid])
            })
        },
    },
    Scenario {
        name: "blocking-log",
        summary: "nginx logs each request into a pipe whose reader lags: the worker blocks in write() (--param reader_ms=250..500)",
        source: "nginx-tail-latencies.txt (workers blocked writing and reopening their logs; found with off-CPU stacks)",
        fault: "`access_log` into a FIFO read 64 KiB every `reader_ms` (default 250) by a log shipper (at 150 ms it passes ~4,500 lines/s, within ×4 of what the worker serves alone on a busy machine: ×3.6 measured)",
        fix: "`access_log FILE combined buffer=64k flush=1s;` on a local file",
        expected_finding: "worker-blocked",
        key: Key {
            label: "requests/s",
            read: |r| Some(r.results.requests_per_s),
            // The reader passes ~2,700 lines/s; the worker alone serves ten times that.
            moves: Moves::Up(4.0),
        },
        build: |w, fixed| {
            let reader_ms = w.param("reader_ms", 250, 250..=500)?;
            w.two_hosts()?;
            let logging = if fixed {
                let file = w.dir.join("access.log").display().to_string();
                format!("access_log {file} combined buffer=64k flush=1s;")
            } else {
                format!("access_log {};", slow_log_pipe(w, reader_ms)?)
            };
            let pid = start_front(
                w,
                Nginx {
                    logging,
                    ..Nginx::default()
                },
            )?;
            Ok(Setup::unprobed(url("/1k.bin"), &["-c", "10"], vec![pid]))
        },
    },
    Scenario {
        name: "nagle",
        summary: "the JDK's HttpServer writes each response's head and body apart: the body waits for a delayed ACK (--param handler_ms=0..80)",
        source: "peers-and-techniques.md (a ~40 ms latency mode: Nagle and delayed ACK), the JDK's sun.net.httpserver.nodelay",
        fault: "a JVM (com.sun.net.httpserver) answering 1 KiB without TCP_NODELAY after `handler_ms` (default 0), 10 keep-alive connections",
        fix: "`java -Dsun.net.httpserver.nodelay=true`",
        expected_finding: "nagle-delayed-ack",
        key: Key {
            // The gap between head and body, not the whole latency: the handler's own
            // time (`handler_ms`) is in both runs' latency, the gap only before.
            label: "body phase p50 ms",
            read: body_p50_ms,
            // ~40 ms (the delayed ACK) against well under a millisecond.
            moves: Moves::Down(10.0),
        },
        build: |w, fixed| {
            let handler_ms = w.param("handler_ms", 0, 0..=80)?;
            w.two_hosts()?;
            let opts: &[&str] = if fixed {
                &["-Dsun.net.httpserver.nodelay=true"]
            } else {
                &[]
            };
            let pid = start_jvm(w, opts, handler_ms)?;
            Ok(Setup::unprobed(url("/"), &["-c", "10"], vec![pid]))
        },
    }]
}
