//! Event-loop stalls: a worker that stopped serving for a moment; workers blocked in a
//! call (a log write to a slow pipe, a disk read, a lock) for a share of their time.

use super::{fact, finding, ramp, Ctx, FindingId};
use crate::run::Counter;
use crate::run::{Finding, Kind, OffClass, OffWait};

/// Share of the front workers' time blocked (off CPU for a reason other than waiting
/// for work or for a CPU) from which it is a bottleneck: a worker of an event-driven
/// server that blocks stops serving every connection it holds. A healthy nginx worker
/// blocks ~0% (its sockets and, from the page cache, its files never block).
const BLOCKED_SHARE: f64 = 0.10;

/// The evidence naming how many long waits (≥ 10 ms) of the workers the off-CPU watch
/// saw blocked, not waiting for a CPU.
pub(super) const BLOCKED_STALLS: &str = "worker stalls ≥ 10 ms blocked in a call (off-CPU)";

/// The evidence saying the front serves one request per thread (or process) of a pool
/// (Apache's MaxRequestWorkers, a servlet container's maxThreads): a thread blocked in a
/// call holds only its own request, not every connection of an event loop.
pub(super) const ONE_REQUEST_PER_THREAD: &str = "requests a blocked thread holds (a pool's thread)";

/// The evidence saying the workers' top wait was I/O (a pipe, a socket, a disk), not a
/// lock: another task's lack of a CPU cannot make it (a lock's holder waiting for a CPU
/// can make a lock wait).
pub(super) const BLOCKED_IN_IO: &str = "top wait in I/O (a pipe, socket or disk), not a lock";

/// Front workers blocked in a call for a share of their time: what they blocked in
/// (the call, the file, the kernel function), how often and how long, and the fix that
/// follows from it.
pub(super) fn worker_blocked(c: &Ctx) -> Option<Finding> {
    let off = c.offcpu()?;
    let pids = c.front_pids();
    if pids.is_empty() || off.duration_s <= 0.0 {
        return None;
    }
    let classes = [
        OffClass::Disk,
        OffClass::Pipe,
        OffClass::Socket,
        OffClass::Lock,
        OffClass::Other,
    ];
    let blocked_ms: f64 = classes.iter().map(|&k| off.ms_of(&pids, k)).sum();
    let threads: u32 = off
        .processes
        .iter()
        .filter(|p| pids.contains(&p.pid))
        .map(|p| p.threads.max(1))
        .sum();
    let mut share = blocked_ms / (threads.max(1) as f64 * off.duration_s * 1e3);
    // nginx's workers with a thread pool (`aio threads`): the pool's threads wait in
    // reads so that the event loop (the worker's main thread, tid = pid) does not — their
    // waits are the fix working, not the worker blocked. Only the main thread's long
    // waits count then.
    if c.front_kind() == crate::kinds::nginx::KIND && threads as usize > pids.len() {
        let main_ms: f64 = off
            .stalls
            .iter()
            .filter(|s| pids.contains(&s.pid) && s.tid == s.pid)
            .filter(|s| {
                s.class
                    .is_some_and(|k| k.blocks() && k != OffClass::Runnable)
            })
            .map(|s| s.ms)
            .sum();
        share = main_ms / (pids.len() as f64 * off.duration_s * 1e3);
    }
    if share < BLOCKED_SHARE {
        return None;
    }
    let top = off.blocking_waits(&pids).next()?;
    let long = off
        .stalls
        .iter()
        .filter(|s| pids.contains(&s.pid) && s.class == top.class)
        .count();
    let what = top.describe();
    let mut f = finding(
        FindingId::WorkerBlocked,
        Kind::Bottleneck,
        ramp(share, BLOCKED_SHARE, 0.5),
        format!(
            "server workers blocked {:.0}% of the time: {what}",
            share * 100.0
        ),
    );
    f.evidence = vec![
        fact("workers' time blocked in calls", share * 100.0, "%"),
        fact("time in the top call", top.total_ms, "ms"),
        fact("times it blocked", top.count as f64, "calls"),
        fact("longest", top.max_ms, "ms"),
        fact("of them ≥ 10 ms", long as f64, "waits"),
    ];
    if matches!(
        top.class,
        Some(OffClass::Disk | OffClass::Pipe | OffClass::Socket)
    ) {
        f.evidence.push(fact(BLOCKED_IN_IO, 1.0, "yes"));
    }
    // A server of request pools (its concurrency knob is a pool: Apache, a servlet
    // container) serves one request per thread: a blocked thread holds only its own.
    let pooled = c.front_is_a_pool();
    if pooled {
        f.evidence
            .push(fact(ONE_REQUEST_PER_THREAD, 1.0, "requests"));
    }
    let holds = if pooled {
        "Each of this server's threads serves one request at a time: a thread waiting in a call holds its own request, and the time lengthens every request's stay in the pool."
    } else {
        "A worker of an event-driven server serves all its connections from one thread: while it waits in a call, every connection it holds waits too."
    };
    f.explanation = format!(
        "The workers left their CPU while they had work: {what}, {} times for {:.0} ms in all, the longest {:.0} ms. {holds} ({})",
        top.count,
        top.total_ms,
        top.max_ms,
        match off.sampled_hz {
            None => "From the kernel's context switches of the server's threads: each interval off CPU with the stack it left from.".to_string(),
            Some(hz) => format!("From the server threads' states, calls and wait channels sampled in /proc {hz} times a second (every run does; `--profile` watches the context switches with their stacks where perf is permitted): waits are timed to within a sample."),
        }
    );
    f.fix = fix_for(c, top);
    Some(f)
}

/// The fix for what blocked, in the server's words where the call and file say which
/// directive is at stake.
fn fix_for(c: &Ctx, w: &OffWait) -> String {
    let file = w.file.as_deref().unwrap_or("");
    let writes = w
        .syscall
        .as_deref()
        .is_some_and(|s| s.starts_with("write") || s.starts_with("pwrite"));
    let nginx = c.front_kind() == crate::kinds::nginx::KIND;
    let apache = c.front_kind() == crate::kinds::apache::KIND;
    let maps = w
        .syscall
        .as_deref()
        .is_some_and(|s| s.starts_with("mmap") || s.starts_with("munmap"));
    let log = c
        .directive("access_log")
        .iter()
        .chain(c.directive("error_log"))
        .find(|v| !file.is_empty() && v.split_whitespace().next() == Some(file));
    match (w.class, writes) {
        (Some(OffClass::Pipe), true) if nginx && log.is_some() => format!(
            "the reader of {file} does not keep up, and nginx writes its log in the worker: log to a file (`access_log /var/log/nginx/access.log combined buffer=64k flush=1s;`) or to syslog over UDP (`access_log syslog:server=127.0.0.1:514;`), which never blocks the worker (now `access_log {}`)",
            log.map(String::as_str).unwrap_or("")
        ),
        (Some(OffClass::Pipe), true) => format!(
            "the reader of {file} does not keep up: write to a file or a datagram socket instead of a pipe, or make the reader faster"
        ),
        (Some(OffClass::Disk), true) if nginx => format!(
            "buffer the log so the worker writes rarely and in large pieces (`access_log {file} combined buffer=64k flush=1s;`), or put {file} on a faster device"
        ),
        (Some(OffClass::Disk), false) if nginx => "read files off the worker: `aio threads;` (with `directio 4m;` for large files), and `open_file_cache max=10000;` for opens".to_string(),
        // Apache maps every file it sends (`EnableMMAP On`, its default) and unmaps it
        // after: the threads of a process take turns at its address-space lock (lab
        // apache-workers, 2 × 64 threads: 37% of their time; with the fix 13.6k → 16.5k/s).
        (Some(OffClass::Lock), _) if apache && maps => format!(
            "Apache maps each file it sends and unmaps it after, and the threads of a process take turns at its address-space lock to do it: `EnableMMAP Off` with `EnableSendfile On`{}",
            c.directive("EnableMMAP").first().map(|v| format!(" (now `EnableMMAP {v}`)")).unwrap_or_else(|| " (`EnableMMAP` is On unless set)".into())
        ),
        (Some(OffClass::Lock), _) => "a lock held by another thread or process: find the holder (`perf lock contention`, the off-CPU stacks of the others)".to_string(),
        _ => "find what blocks the worker (the off-CPU stacks above; `strace -T -p PID`) and move it off the event loop".to_string(),
    }
}

/// The evidence naming how often the samples caught a worker blocked (read by the
/// table of causes: a blocked worker is a stall whatever else happened).
pub(super) const SEEN_BLOCKED: &str = "samples with a worker stopped or in disk wait";

/// Latency spikes that hit many connections at once while the server is not overloaded:
/// the event loop stopped (a blocking call, a stopped process).
pub(super) fn event_loop_stall(c: &Ctx) -> Option<Finding> {
    let r = &c.run.results;
    // Listen-queue drops and retransmissions also make slow requests; not a stall.
    if c.counter(Counter::ListenOverflows) > 0 || r.errors.timeout > 0 {
        return None;
    }
    // A worker out of fds or connections stops accepting while it serves what it
    // holds: new connections wait in the accept queue and fail — slow requests, but a
    // limit (fd-limit, connection-limit), not a stopped loop.
    if c.fd_fill().is_some_and(|(_, f)| f >= 0.9)
        || c.worker_connections_fill()
            .is_some_and(|(_, fds, limit)| fds as f64 >= 0.9 * limit as f64)
        || c.log("too-many-open-files").is_some()
        || c.log("worker-connections-not-enough").is_some()
        || c.log("max-request-workers-reached").is_some()
    {
        return None;
    }
    let failed = r.errors.read + r.errors.connect;
    if failed as f64 > 0.01 * r.responses.max(1) as f64 {
        return None;
    }
    let h = r.latency.decode().ok()?;
    let p50 = h.value_at_quantile(0.5) as f64;
    let p90 = h.value_at_quantile(0.90) as f64;
    // A spike far outside the normal spread: ≥ 50 ms, ≥ 20× the median and ≥ 10× p90.
    // (A busy server's slow tail — time-wait's expensive connects — is not a stall.)
    // Not p99: a stall of 400 ms every 1.2 s puts p99 among the requests it held
    // (44 ms), and 10× that lies beyond the stall itself.
    let threshold = (20.0 * p50).max(10.0 * p90).max(50_000.0);
    let slow: u64 = h
        .iter_recorded()
        .filter(|v| v.value_iterated_to() as f64 >= threshold)
        .map(|v| v.count_since_last_iteration())
        .sum();
    // Not only the first second: every connection opening at once (handshakes, the
    // accept burst) makes a start-up spike that is not the loop stopping. Require a
    // spike in a later second too (a stall recurs; a run of one second cannot tell).
    let later_spike = c
        .run
        .results
        .timeline
        .iter()
        .any(|s| s.t_s >= 1 && s.max_us as f64 >= threshold);
    if !later_spike {
        return None;
    }
    let conns = c.run.spec.connections as f64;
    // At least half the connections hit at once, yet a small share of all requests.
    if (slow as f64) < 0.5 * conns || slow as f64 > 0.02 * h.len() as f64 {
        return None;
    }
    let stalls = slow as f64 / conns;
    let stopped =
        c.ev.map(|e| {
            e.samples
                .iter()
                .flat_map(|s| s.processes.iter())
                .filter(|p| p.state == "T" || p.state == "D")
                .count()
        })
        .unwrap_or(0);
    // A client stopped by its own CPU quota for most of each period measures its
    // stops as slow requests, many connections at once and recurring: without a
    // worker seen stopped, the spikes are the client's (client-saturated), not the
    // server's loop.
    if stopped == 0 && super::client::client_throttled(c) {
        return None;
    }
    let mut f = finding(
        FindingId::EventLoopStall,
        Kind::Bottleneck,
        ramp(stalls, 0.5, 3.0).max(if stopped > 0 { 0.9 } else { 0.0 }),
        format!(
            "server event loop stalls: {slow} requests ≥ {:.0} ms at once",
            threshold / 1e3
        ),
    );
    f.evidence = vec![
        fact("requests slower than threshold", slow as f64, "requests"),
        fact("threshold", threshold / 1e3, "ms"),
        fact("p50 latency", p50 / 1e3, "ms"),
        fact("max latency", r.latency.max_us as f64 / 1e3, "ms"),
        fact("connections", conns, "connections"),
        fact(SEEN_BLOCKED, stopped as f64, "samples"),
    ];
    // What the off-CPU watch saw the workers block in, when it watched.
    if let Some(off) = c.offcpu() {
        let pids = c.front_pids();
        let blocked = off
            .stalls
            .iter()
            .filter(|s| {
                pids.contains(&s.pid)
                    && s.class
                        .is_some_and(|k| k.blocks() && k != OffClass::Runnable)
            })
            .count();
        f.evidence
            .push(fact(BLOCKED_STALLS, blocked as f64, "waits"));
        let top = off.blocking_waits(&pids).next().map(OffWait::describe);
        if let Some(top) = top.filter(|_| blocked > 0) {
            f.title.push_str(&format!("; the worker blocked in {top}"));
        }
    }
    f.explanation = "Many connections were delayed by the same long pause while the median stayed fast: the worker's event loop stopped serving every connection it holds at once — a blocking call (log reopen, disk read), a stopped or throttled process.".into();
    f.fix = "find what blocks the worker (`strace -T -p PID`, `perf trace`, off-CPU profile); buffer logs (`access_log FILE combined buffer=64k flush=1s`), use `aio threads` for disk".into();
    Some(f)
}

/// The evidence naming how many 100 ms slices had no response while requests were in
/// flight (read by the table of causes).
pub(super) const GAP_SLICES: &str = "100 ms slices without a response";
/// The evidence naming how many of those slices lie inside a worker's blocked wait.
pub(super) const LINED_UP: &str = "of them inside a blocked wait of a worker";
/// Share of the load's slices without a response from which the gaps are the finding:
/// a server that answers nobody for a twentieth of the run in whole 100 ms slices.
const GAP_SHARE: f64 = 0.05;
/// A server process's wait for a CPU (ms per second of the run) from which empty
/// slices may be the machine's, not the server's: run-queue-delay's bar.
const STARVED_MS_PER_S: f64 = 100.0;
/// Responses in a typical slice for an empty one to mean something: at 20 a slice, a
/// slice without any by chance is as likely as e⁻²⁰.
const GAP_MIN_TYPICAL: u64 = 20;

/// The starts (s) of the slices without a response in runs of such slices longer than
/// `typical_ms`, the median request's time. A closed loop whose requests all take longer
/// than a slice, started together, answers in waves: between two waves no request is
/// due, and the slices are empty with nothing stopped (php-fpm-children after its fix:
/// 40 requests of a 400 ms script in lockstep, 15 of 19 slices empty, p99 within 3% of
/// p50). A gap no longer than a typical request is a request in flight; a stop holds the
/// requests it catches longer than the others take.
fn gaps_longer_than(slices: &[crate::run::Slice], typical_ms: f64) -> Vec<f64> {
    let slice_ms = slices
        .windows(2)
        .map(|w| w[1].t_ms.saturating_sub(w[0].t_ms))
        .find(|&d| d > 0)
        .unwrap_or(100) as f64;
    let mut gaps = Vec::new();
    let mut run: Vec<f64> = Vec::new();
    let empty = |s: &crate::run::Slice| s.responses == 0 && s.errors == 0;
    for s in slices {
        if empty(s) {
            run.push(s.t_ms as f64 / 1e3);
            continue;
        }
        if run.len() as f64 * slice_ms > typical_ms {
            gaps.append(&mut run);
        }
        run.clear();
    }
    if run.len() as f64 * slice_ms > typical_ms {
        gaps.append(&mut run);
    }
    gaps
}

/// Slices of 100 ms in which the server answered nobody while the load kept requests in
/// flight: the server stopped, whatever its period and whatever the mean latency says
/// (the latency is then two modes: the requests served, and those held through a gap).
/// Lined up with the server threads' waits when the off-CPU watch saw them.
pub(super) fn server_stalled(c: &Ctx) -> Option<Finding> {
    let r = &c.run.results;
    // The start (connections opening) and the end (a partial slice) are left out.
    if r.slices.len() < 12 || c.counter(Counter::ListenOverflows) > 0 || r.errors.timeout > 0 {
        return None;
    }
    if (r.errors.read + r.errors.connect) as f64 > 0.01 * r.responses.max(1) as f64 {
        return None;
    }
    let inner = &r.slices[1..r.slices.len() - 1];
    let mut served: Vec<u64> = inner
        .iter()
        .map(|s| s.responses)
        .filter(|&n| n > 0)
        .collect();
    served.sort_unstable();
    let typical = *served.get(served.len() / 2)?;
    // Open loop: only where the asked rate keeps requests coming in every slice.
    let asked = c.run.spec.rate.map(|rate| rate * 0.1);
    if typical < GAP_MIN_TYPICAL || asked.is_some_and(|a| a < GAP_MIN_TYPICAL as f64) {
        return None;
    }
    let h = r.latency.decode().ok()?;
    let (p50, p99) = (
        h.value_at_quantile(0.5) as f64 / 1e3,
        h.value_at_quantile(0.99) as f64 / 1e3,
    );
    let gaps = gaps_longer_than(inner, p50);
    let share = gaps.len() as f64 / inner.len() as f64;
    if gaps.len() < 2 || share < GAP_SHARE {
        return None;
    }
    let in_flight = c.run.spec.connections as f64 * r.streams_per_connection.max(1) as f64;
    let mut f = finding(
        FindingId::ServerStalled,
        Kind::Bottleneck,
        ramp(share, GAP_SHARE, 0.2),
        format!(
            "the server answered nobody in {} of {} slices of 100 ms while {in_flight:.0} requests waited: latency in two modes, p50 {p50:.2} ms and p99 {p99:.1} ms",
            gaps.len(),
            inner.len()
        ),
    );
    f.evidence = vec![
        fact(GAP_SLICES, gaps.len() as f64, "slices"),
        fact("share of the load's slices", share * 100.0, "%"),
        fact("responses in a typical slice", typical as f64, "responses"),
        fact("p50 latency", p50, "ms"),
        fact("p99 latency", p99, "ms"),
        fact(
            "mean latency (describes neither mode)",
            r.latency.mean_us / 1e3,
            "ms",
        ),
    ];
    // Which waits of the server's threads cover the gaps (50 ms allowed at each end for
    // the watch's and the load's clocks, which start a few ms apart).
    let pids = c.front_pids();
    let lined = c.offcpu().and_then(|off| {
        let top = off.blocking_waits(&pids).next()?;
        let covered = gaps
            .iter()
            .filter(|&&t| {
                off.stalls.iter().any(|s| {
                    pids.contains(&s.pid)
                        && s.class
                            .is_some_and(|k| k.blocks() && k != OffClass::Runnable)
                        && s.t_s - 0.05 <= t
                        && t + 0.1 <= s.t_s + s.ms / 1e3 + 0.05
                })
            })
            .count();
        (covered > 0).then_some((top, covered))
    });
    let how = match &lined {
        Some((top, covered)) => {
            f.title
                .push_str(&format!("; the worker was blocked in {} through {covered} of them", top.describe()));
            f.evidence
                .push(fact(LINED_UP, *covered as f64, "slices"));
            format!(
                "The server threads' waits line up with the gaps: {covered} of the {} empty slices lie inside a wait of a worker blocked in {}.",
                gaps.len(),
                top.describe()
            )
        }
        None => match c.offcpu() {
            Some(_) => "No blocked wait of the workers covers them: look for what else stops the whole server (a stop signal, a cgroup freeze, a pause of the machine).".to_string(),
            None => "Where the server's threads were is not known for this run (the off-CPU watch was off or not permitted): run again without --no-offcpu, as root or as the server's user, to name the call.".to_string(),
        },
    };
    f.explanation = format!(
        "The load kept {in_flight:.0} requests in flight, yet in {} slices of 100 ms not one response came back, while a typical slice had {typical}. The server stopped serving, not slowed down: the requests caught in a gap waited for it to end, the others were served at once — two modes, so the mean ({:.1} ms) describes no request. {how}",
        gaps.len(),
        r.latency.mean_us / 1e3
    );
    // No blocked wait lines up, and a server process waited for a CPU as long as
    // run-queue-delay's bar: a busy machine may have emptied those slices (the server
    // runnable but not running), which is no stall of the server's own. Told, not named
    // the bottleneck.
    let starved = c
        .procs()
        .iter()
        .filter_map(|p| p.run_delay_ms_per_s)
        .fold(0.0, f64::max);
    if lined.is_none() && starved >= STARVED_MS_PER_S {
        f.kind = Kind::Warning;
        f.evidence.push(fact(
            "server process waiting for a CPU (most)",
            starved,
            "ms/s",
        ));
        f.explanation.push_str(&format!(
            " A server process waited {starved:.0} ms/s for a CPU: other work on this machine may have held it off the CPUs in those slices, so they are not counted as a stall of the server."
        ));
    }
    f.fix = match &lined {
        Some((top, _)) => fix_for(c, top),
        None => "find what stops the server's workers: the off-CPU watch (default; needs read access to /proc/PID/task/*/syscall), `strace -T -p PID`, or `loadlens run --profile` for the stacks".into(),
    };
    Some(f)
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture};

    /// Slow requests from a worker at its fd limit, or from connections failing, are
    /// not a stopped event loop.
    #[test]
    fn a_worker_at_a_limit_is_not_a_stall() {
        let run = fixture("event-loop-stall-before");
        assert!(fires(&run, "event-loop-stall"));
        let mut at_limit = run.clone();
        for p in at_limit
            .evidence
            .as_mut()
            .unwrap()
            .window
            .processes
            .iter_mut()
        {
            p.fds_max = Some(1000);
            p.fd_limit = Some(1024);
        }
        assert!(!fires(&at_limit, "event-loop-stall"));
        assert!(fires(&at_limit, "fd-limit"));
        let mut failing = run.clone();
        failing.results.errors.read = failing.results.responses / 20;
        assert!(!fires(&failing, "event-loop-stall"));
    }

    /// Regression (worker-connections after its fix): 200 connections opening at once
    /// made 132 requests of the first second slow; no later second was.
    #[test]
    fn a_start_up_spike_is_not_a_stall() {
        let run = fixture("worker-connections-after");
        assert!(!fires(&run, "event-loop-stall"));
        let mut only_first = fixture("event-loop-stall-before");
        for s in only_first
            .results
            .timeline
            .iter_mut()
            .filter(|s| s.t_s >= 1)
        {
            s.max_us = s.p99_us;
        }
        assert!(!fires(&only_first, "event-loop-stall"));
    }

    /// Regression (lab php-fpm-children at 4 children and a 400 ms script, after its
    /// fix): 40 connections to 60 children, every request 400 ms and started together,
    /// answered in waves — 15 of 19 slices empty, p99 within 3% of p50 — and
    /// `server-stalled` was the bottleneck, the closed loop's arithmetic beneath it. A
    /// gap no longer than a typical request is a request in flight, not a stop.
    #[test]
    fn requests_in_lockstep_longer_than_a_slice_are_no_stall() {
        let run = fixture("php-fpm-children-4-400-after");
        assert!(!fires(&run, "server-stalled"));
        // The closed loop's arithmetic is what is left to say (a warning here: the
        // host's load left the CPUs no idle time), no bottleneck above it.
        let found = crate::diagnose::diagnose(&run);
        assert_eq!(found[0].id, "concurrency-bound", "{found:?}");
        assert!(
            found
                .iter()
                .all(|f| f.kind != crate::run::Kind::Bottleneck || f.id == "concurrency-bound"),
            "{found:?}"
        );
        // The same slices with the requests fast (a 5 ms median): the gaps are longer
        // than any request takes, a stop.
        let mut fast = run.clone();
        let mut h = crate::diagnose::testutil::histogram();
        h.record_n(5_000, run.results.latency.count).unwrap();
        fast.results.latency = crate::run::LatencySummary::from_histogram(&h, false);
        assert!(fires(&fast, "server-stalled"));
    }

    /// The blocking-log Run: 12 slices without a response, each inside the worker's
    /// wait in write() on the pipe, shown beneath worker-blocked; without the off-CPU
    /// watch the slices alone are the bottleneck; after the fix, and in the mix's Runs
    /// (2 empty slices of 61, 3%), nothing.
    #[test]
    fn gaps_in_the_slices_are_a_stall_lined_up_with_the_waits() {
        let run = fixture("blocking-log-before");
        let found = crate::diagnose::diagnose(&run);
        let f = found.iter().find(|f| f.id == "server-stalled").unwrap();
        assert_eq!(f.kind, crate::run::Kind::Info, "{f:?}");
        assert!(f.title.contains("access.fifo"), "{}", f.title);
        let mut blind = run.clone();
        blind.evidence.as_mut().unwrap().offcpu = None;
        let found = crate::diagnose::diagnose(&blind);
        let f = found.iter().find(|f| f.id == "server-stalled").unwrap();
        // The stall is the bottleneck: the slices' own finding, or beneath the same
        // stall named from its spikes (event-loop-stall's bar at 10× p90 reaches the
        // 200 ms writes; 10× p99 did not).
        let top = found
            .iter()
            .find(|f| f.kind == crate::run::Kind::Bottleneck)
            .unwrap();
        assert!(
            top.id == "server-stalled"
                || (top.id == "event-loop-stall"
                    && f.explanation.contains("Explained by event-loop-stall")),
            "{top:?} {f:?}"
        );
        assert!(f.explanation.contains("describes no request"));
        assert!(!fires(&fixture("blocking-log-after"), "server-stalled"));
        assert!(!fires(&fixture("mix-before"), "server-stalled"));
        // Fewer responses per slice than a gap can be told from: not a stall.
        let mut slow = blind.clone();
        for s in slow.results.slices.iter_mut() {
            s.responses = s.responses.min(10);
        }
        assert!(!fires(&slow, "server-stalled"));
        // The same gaps, a server process waiting for a CPU at run-queue-delay's bar
        // (a starved machine: CI, the thread pool's JVM beside other builds): told,
        // not the bottleneck (beneath run-queue-delay, or a warning); just under the
        // bar, still the bottleneck.
        let kind = |delay: f64| {
            let mut starved = blind.clone();
            for p in starved
                .evidence
                .as_mut()
                .unwrap()
                .window
                .processes
                .iter_mut()
            {
                p.run_delay_ms_per_s = Some(delay);
            }
            // The stall as told: the slices' finding, or event-loop-stall above it.
            let found = crate::diagnose::diagnose(&starved);
            let stall = |id: &str| found.iter().find(|f| f.id == id).map(|f| f.kind);
            match stall("event-loop-stall") {
                Some(crate::run::Kind::Bottleneck) => Some(crate::run::Kind::Bottleneck),
                _ => stall("server-stalled"),
            }
        };
        assert_ne!(kind(100.0), Some(crate::run::Kind::Bottleneck));
        assert!(kind(100.0).is_some());
        assert_eq!(kind(90.0), Some(crate::run::Kind::Bottleneck));
    }
}
