//! The off-CPU watch: where the server's threads slept. One perf event per thread on
//! the kernel's context switches (a sample with the thread's kernel and user stacks and
//! its first syscall argument each time it leaves a CPU) and the switch records the
//! kernel writes beside it (`context_switch`: out, flagged when preempted while
//! runnable, and in). The time from a switch out to the next switch in is the interval
//! off CPU; it is classified from the stack (the deepest kernel function below the
//! scheduler and the system call it served) and summed per process, call and file.
//! No `perf` binary, no tracefs: the same permission as the on-CPU profile (root or
//! CAP_PERFMON, or `kernel.perf_event_paranoid` ≤ 1).

use std::collections::{BTreeMap, HashMap};
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use perf_event::data::Record;
use perf_event::events::Software;
use perf_event::{Builder, Clock, SampleFlag, Sampler};

mod classify;
pub mod sampled;
mod syscalls;

use super::profile::{fold, paranoid, permission, symbolize, threads, Names, Raw};
use crate::run::{OffClass, OffCpu, OffProcess, OffStall, OffWait, Profile, STALL_MS};
use crate::sys::thread_cpu::ThreadCpuSample;
use classify::{why, Why};

/// A switch-heavy worker makes ~20k switches/s with ~0.5 KiB each: 20 ms of them fit.
const RING_BYTES: usize = 512 * 1024;
const DRAIN_EVERY: Duration = Duration::from_millis(20);
/// Threads watched at most (each has a ring buffer of its own).
const MAX_THREADS: usize = 64;
/// Kernel stack frames kept per switch (the scheduler's own are a handful).
const MAX_STACK: u16 = 48;
/// Long intervals kept raw for the stall list before classification.
const MAX_RAW_STALLS: usize = 20_000;
/// Stalls kept in the Run.
const MAX_STALLS: usize = 1000;

/// `PERF_RECORD_SWITCH` and its `misc` flags.
const RECORD_SWITCH: u32 = 14;
const MISC_SWITCH_OUT: u16 = 1 << 13;
const MISC_SWITCH_OUT_PREEMPT: u16 = 1 << 14;

/// The register holding a system call's first argument, as perf numbers registers.
#[cfg(target_arch = "x86_64")]
const ARG0_REG: u64 = 5; // PERF_REG_X86_DI
#[cfg(target_arch = "aarch64")]
const ARG0_REG: u64 = 0; // PERF_REG_ARM64_X0
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
const ARG0_REG: u64 = 0;

/// One way of leaving the CPU: the stack, whether preempted, and the file behind the
/// first argument.
struct Key {
    pid: i32,
    chain: Vec<u64>,
    preempted: bool,
    file: Option<String>,
}

#[derive(Default, Clone, Copy)]
struct Tally {
    count: u64,
    total_ns: u64,
    max_ns: u64,
}

/// A long interval, raw: (key index, tid, start ns, length ns).
type RawStall = (usize, i32, u64, u64);

#[derive(Default)]
struct Gathered {
    keys: Vec<Key>,
    /// A hash of each key → its index (a key is built only the first time it is seen:
    /// the drain allocates nothing per switch).
    index: HashMap<u64, usize>,
    tally: Vec<Tally>,
    stalls: Vec<RawStall>,
    lost: u64,
    /// CPU the drain thread used, percent of one core.
    cpu_pct: f64,
}

/// A thread between its switch out and its switch back in (one per thread, reused).
#[derive(Default)]
struct Away {
    /// Out and not yet back in.
    out: bool,
    at_ns: u64,
    chain: Vec<u64>,
    /// The first argument of the call it left in, when it may be a descriptor.
    fd: Option<u64>,
    /// The file behind `fd`, read when the switch was drained (the thread is usually
    /// still waiting on it); only for a thread that went to sleep.
    file: Option<String>,
    preempted: bool,
}

/// A running off-CPU watch.
pub struct OffCpuWatch {
    /// Threads watched per process.
    per_pid: BTreeMap<i32, u32>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Gathered>,
    started_ns: u64,
}

/// The off-CPU watch in force: the context switches, or — where perf may not watch
/// them — the threads' states sampled from `/proc`.
pub enum Watch {
    Switches(OffCpuWatch),
    Sampled(sampled::SampledWatch),
}

impl Watch {
    /// Starts the best watch permitted on every thread of `pids`: Ok with a note when it
    /// had to sample; Err, one line saying why neither can and what to change.
    pub fn start(pids: &[i32]) -> Result<(Watch, Option<String>), String> {
        let threads = threads(pids);
        match OffCpuWatch::start_threads(&threads) {
            Ok(w) => Ok((Watch::Switches(w), None)),
            Err(Refused::NotPermitted(e)) => match sampled::SampledWatch::start(&threads) {
                Ok(w) => Ok((
                    Watch::Sampled(w),
                    Some(format!(
                        "{e}; sampled the threads' states from /proc at {} Hz instead (no stacks)",
                        sampled::HZ
                    )),
                )),
                Err(why) => Err(format!("{e}; and {why}")),
            },
            Err(Refused::Other(e)) => Err(e),
        }
    }

    /// The threads' states sampled from `/proc` (no perf): what every run watches.
    pub fn sampled(pids: &[i32]) -> Result<Watch, String> {
        sampled::SampledWatch::start(&threads(pids)).map(Watch::Sampled)
    }

    /// Stops watching. `origin_ns`/`origin`: the watch's start on CLOCK_MONOTONIC and
    /// as an `Instant` (stalls go on the samples' clock).
    pub fn finish(self, origin_ns: u64, origin: std::time::Instant) -> OffCpu {
        match self {
            Watch::Switches(w) => w.finish(origin_ns),
            Watch::Sampled(w) => w.finish(origin),
        }
    }
}

/// Why the context switches cannot be watched.
#[derive(Debug)]
pub enum Refused {
    /// Not permitted (the message says what to change); /proc may still be sampled.
    NotPermitted(String),
    Other(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::NotPermitted(e) | Refused::Other(e) => f.write_str(e),
        }
    }
}

impl OffCpuWatch {
    /// Starts watching the threads `(pid, tid)`.
    pub fn start_threads(threads: &[(i32, i32)]) -> Result<OffCpuWatch, Refused> {
        let mut samplers = Vec::new();
        let mut first_err = None;
        for &(pid, tid) in threads.iter().take(MAX_THREADS) {
            match open(tid) {
                Ok(s) => samplers.push((pid, tid, s)),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if samplers.is_empty() {
            return Err(match first_err {
                Some(e) if permission(&e) => Refused::NotPermitted(format!(
                    "off-CPU: not permitted to watch the server's context switches ({e}; kernel.perf_event_paranoid={}): run as root or with CAP_PERFMON",
                    paranoid()
                )),
                Some(e) => Refused::Other(format!("off-CPU: perf events unavailable ({e})")),
                None => Refused::Other("off-CPU: no server thread to watch".to_string()),
            });
        }
        for (_, _, s) in samplers.iter_mut() {
            let _ = s.enable();
        }
        let mut per_pid = BTreeMap::new();
        for (pid, _, _) in &samplers {
            *per_pid.entry(*pid).or_insert(0) += 1;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("loadlens-offcpu".into())
            .spawn(move || drain(samplers, &flag))
            .map_err(|e| Refused::Other(format!("off-CPU: cannot start its thread ({e})")))?;
        Ok(OffCpuWatch {
            per_pid,
            stop,
            thread,
            started_ns: monotonic_ns(),
        })
    }

    /// Stops watching and returns the classified time. `origin_ns`: the watch's start on
    /// CLOCK_MONOTONIC (stalls are placed on the samples' clock).
    pub fn finish(self, origin_ns: u64) -> OffCpu {
        self.stop.store(true, Ordering::Relaxed);
        let g = self.thread.join().unwrap_or_default();
        let duration_s = monotonic_ns().saturating_sub(self.started_ns) as f64 / 1e9;
        classify(g, &self.per_pid, duration_s, origin_ns)
    }
}

/// CLOCK_MONOTONIC now, nanoseconds (the clock the events are stamped with).
pub fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn open(tid: i32) -> std::io::Result<Sampler> {
    Builder::new(Software::CONTEXT_SWITCHES)
        .observe_pid(tid)
        .any_cpu()
        .sample_period(1)
        .sample(SampleFlag::TID | SampleFlag::TIME | SampleFlag::CALLCHAIN | SampleFlag::REGS_USER)
        .sample_regs_user(1 << ARG0_REG)
        .sample_max_stack(MAX_STACK)
        .sample_id_all(true)
        .context_switch(true)
        .clockid(Clock::MONOTONIC)
        // The switch happens in the kernel: a sample needs kernel mode counted.
        .include_kernel()
        .exclude_hv(true)
        .enabled(false)
        .build()?
        .sampled(RING_BYTES)
}

/// The drain loop: pairs each switch out with the next switch in, per thread, until
/// told to stop, then once more.
fn drain(mut samplers: Vec<(i32, i32, Sampler)>, stop: &AtomicBool) -> Gathered {
    let mut g = Gathered::default();
    let cpu_at_start = ThreadCpuSample::now();
    let started = std::time::Instant::now();
    let mut away: HashMap<i32, Away> = HashMap::new();
    let mut files: HashMap<(i32, u64), Option<String>> = HashMap::new();
    loop {
        let last = stop.load(Ordering::Relaxed);
        // Descriptors are reused: a name read is trusted for one round only.
        files.clear();
        for (pid, tid, s) in samplers.iter_mut() {
            if last {
                let _ = s.disable();
            }
            while let Some(rec) = s.next_record() {
                if rec.ty() == RECORD_SWITCH {
                    let Some(at_ns) = switch_time(&rec.to_contiguous()) else {
                        continue;
                    };
                    let a = away.entry(*tid).or_default();
                    if rec.misc() & MISC_SWITCH_OUT != 0 {
                        if !a.out {
                            // No sample before it (lost): the time without a stack.
                            a.out = true;
                            a.at_ns = at_ns;
                            a.chain.clear();
                            a.fd = None;
                        }
                        a.preempted = rec.misc() & MISC_SWITCH_OUT_PREEMPT != 0;
                        a.file = None;
                        if a.preempted {
                            // Waiting for a CPU whatever it ran: one key per process.
                            a.chain.clear();
                        } else if let Some(fd) = a.fd {
                            a.file = files
                                .entry((*pid, fd))
                                .or_insert_with(|| fd_path(*pid, fd))
                                .clone();
                        }
                    } else if a.out {
                        a.out = false;
                        g.add(*pid, *tid, a, at_ns);
                    }
                    continue;
                }
                match rec.parse_record() {
                    Ok(Record::Sample(sample)) => {
                        let a = away.entry(*tid).or_default();
                        a.out = true;
                        a.at_ns = sample.time().unwrap_or(0);
                        a.chain.clear();
                        a.chain
                            .extend_from_slice(sample.callchain().unwrap_or_default());
                        a.fd = sample
                            .regs_user()
                            .and_then(|r| r.regs.first().copied())
                            .filter(|&fd| fd < 1 << 20);
                        a.preempted = false;
                    }
                    Ok(Record::Lost(l)) => g.lost += l.lost,
                    _ => {}
                }
            }
        }
        if last {
            g.cpu_pct = ThreadCpuSample::now()
                .since(&cpu_at_start, started.elapsed())
                .busy_pct;
            return g;
        }
        std::thread::sleep(DRAIN_EVERY);
    }
}

impl Gathered {
    /// Counts the interval of `a` (out since `a.at_ns`, back in at `in_ns`).
    fn add(&mut self, pid: i32, tid: i32, a: &Away, in_ns: u64) {
        let (at_ns, ns) = (a.at_ns, in_ns.saturating_sub(a.at_ns));
        let mut h = std::hash::DefaultHasher::new();
        (pid, a.preempted, &a.file, &a.chain).hash(&mut h);
        let i = *self.index.entry(h.finish()).or_insert_with(|| {
            self.keys.push(Key {
                pid,
                chain: a.chain.clone(),
                preempted: a.preempted,
                file: a.file.clone(),
            });
            self.tally.push(Tally::default());
            self.keys.len() - 1
        });
        let t = &mut self.tally[i];
        t.count += 1;
        t.total_ns += ns;
        t.max_ns = t.max_ns.max(ns);
        if ns as f64 >= STALL_MS * 1e6 && self.stalls.len() < MAX_RAW_STALLS {
            self.stalls.push((i, tid, at_ns, ns));
        }
    }
}

/// The time of a switch record: its sample_id is {pid, tid, time} (TID | TIME).
fn switch_time(body: &[u8]) -> Option<u64> {
    Some(u64::from_ne_bytes(body.get(8..16)?.try_into().ok()?))
}

/// What descriptor `fd` of `pid` is: a path, `pipe`, `socket`, or the kernel's name.
fn fd_path(pid: i32, fd: u64) -> Option<String> {
    let p = std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok()?;
    let p = p.to_string_lossy();
    Some(if p.starts_with("socket:") {
        "socket".to_string()
    } else if p.starts_with("pipe:") {
        "pipe".to_string()
    } else {
        p.into_owned()
    })
}

/// From the gathered intervals to the Run's record.
fn classify(
    g: Gathered,
    threads_of: &BTreeMap<i32, u32>,
    duration_s: f64,
    origin_ns: u64,
) -> OffCpu {
    let named = symbolize(g.keys.iter().map(|k| (k.pid, k.chain.as_slice())));
    let whys: Vec<Why> = g
        .keys
        .iter()
        .map(|k| why(&named[&(k.pid, k.chain.clone())], k.preempted))
        .collect();
    let mut per_pid: BTreeMap<i32, BTreeMap<OffClass, f64>> = BTreeMap::new();
    // (pid, class, syscall, file, kernel function) → the wait, and its heaviest stack's
    // time (whose caller names it).
    type WaitKey = (
        i32,
        Option<OffClass>,
        Option<String>,
        Option<String>,
        Option<String>,
    );
    let mut waits: BTreeMap<WaitKey, (OffWait, u64)> = BTreeMap::new();
    let mut raw = Raw::new();
    for (i, (k, t)) in g.keys.iter().zip(&g.tally).enumerate() {
        let w = &whys[i];
        let ms = t.total_ns as f64 / 1e6;
        *per_pid
            .entry(k.pid)
            .or_default()
            .entry(w.class.unwrap_or(OffClass::Other))
            .or_default() += ms;
        if !matches!(w.class, Some(OffClass::Idle | OffClass::Runnable)) {
            *raw.entry((k.pid, k.chain.clone())).or_default() += t.total_ns / 1000;
        }
        let file = k.file.clone().filter(|_| takes_fd(w.syscall.as_deref()));
        let id = (
            k.pid,
            w.class,
            w.syscall.clone(),
            file.clone(),
            w.kernel_fn.clone(),
        );
        let (e, heaviest) = waits.entry(id).or_insert_with(|| {
            (
                OffWait {
                    pid: k.pid,
                    class: w.class,
                    syscall: w.syscall.clone(),
                    file,
                    kernel_fn: w.kernel_fn.clone(),
                    ..OffWait::default()
                },
                0,
            )
        });
        e.count += t.count;
        e.total_ms += ms;
        e.max_ms = e.max_ms.max(t.max_ns as f64 / 1e6);
        if t.total_ns > *heaviest {
            *heaviest = t.total_ns;
            e.caller = w.caller.clone();
        }
    }
    let mut waits: Vec<OffWait> = waits.into_values().map(|(w, _)| w).collect();
    waits.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
    let mut stalls: Vec<OffStall> = g
        .stalls
        .iter()
        .filter(|(i, ..)| whys[*i].class.is_some_and(OffClass::blocks))
        .map(|&(i, tid, at_ns, ns)| {
            let k = &g.keys[i];
            OffStall {
                pid: k.pid,
                tid,
                t_s: at_ns.saturating_sub(origin_ns) as f64 / 1e9,
                ms: ns as f64 / 1e6,
                class: whys[i].class,
                syscall: whys[i].syscall.clone(),
                file: k
                    .file
                    .clone()
                    .filter(|_| takes_fd(whys[i].syscall.as_deref())),
            }
        })
        .collect();
    if stalls.len() > MAX_STALLS {
        stalls.sort_by(|a, b| b.ms.total_cmp(&a.ms));
        stalls.truncate(MAX_STALLS);
    }
    stalls.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    let profile: Profile = fold(&raw, &mut Names::new());
    OffCpu {
        threads: threads_of.values().sum(),
        duration_s,
        lost: g.lost,
        watch_cpu_pct: g.cpu_pct,
        sampled_hz: None,
        processes: per_pid
            .into_iter()
            .map(|(pid, ms)| OffProcess {
                pid,
                threads: threads_of.get(&pid).copied().unwrap_or(1),
                ms,
            })
            .collect(),
        profile,
        waits,
        stalls,
    }
}

/// System calls whose first argument is the descriptor they wait on.
fn takes_fd(syscall: Option<&str>) -> bool {
    matches!(
        syscall,
        Some(
            "write"
                | "writev"
                | "pwrite64"
                | "pwritev"
                | "pwritev2"
                | "read"
                | "readv"
                | "pread64"
                | "preadv"
                | "preadv2"
                | "fsync"
                | "fdatasync"
                | "sync_file_range"
                | "sendfile64"
                | "sendto"
                | "sendmsg"
                | "recvfrom"
                | "recvmsg"
                | "connect"
                | "flock"
                | "fcntl"
                | "ftruncate"
                | "fallocate"
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This very process: a thread blocked writing into a pipe nobody reads for a while
    /// is seen off CPU in `write`, on the pipe, for about as long as it waited.
    #[test]
    fn a_thread_blocked_on_a_full_pipe_is_seen_there() {
        if unsafe { libc::geteuid() } != 0 && !matches!(paranoid().as_str(), "-1" | "0" | "1") {
            assert!(
                std::env::var_os("CI").is_none(),
                "off-CPU watch not permitted (perf_event_paranoid): CI runs as root"
            );
            eprintln!("SKIPPED: off-CPU watch not permitted here");
            return;
        }
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (r, w) = (fds[0], fds[1]);
        let (tx, rx) = std::sync::mpsc::channel();
        let (go, watched) = std::sync::mpsc::channel::<()>();
        let writer = std::thread::spawn(move || {
            let tid = unsafe { libc::gettid() };
            tx.send(tid).unwrap();
            // Once watched, fill the pipe (64 KiB) and block on the rest.
            watched.recv().unwrap();
            let buf = vec![b'x'; 256 * 1024];
            let n = unsafe { libc::write(w, buf.as_ptr().cast(), buf.len()) };
            unsafe { libc::close(w) };
            n
        });
        let tid = rx.recv().unwrap();
        let watch = OffCpuWatch::start_threads(&[(std::process::id() as i32, tid)])
            .unwrap_or_else(|e| panic!("{e}"));
        let origin = monotonic_ns();
        go.send(()).unwrap();
        // Once the writer sleeps in pipe_write, keep it there 300 ms, then drain.
        let wchan = format!("/proc/self/task/{tid}/wchan");
        for _ in 0..1000 {
            if std::fs::read_to_string(&wchan).is_ok_and(|w| w.contains("pipe_write")) {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        std::thread::sleep(Duration::from_millis(300));
        let mut buf = vec![0u8; 256 * 1024];
        let mut got = 0;
        while got < 256 * 1024 {
            let n = unsafe { libc::read(r, buf.as_mut_ptr().cast(), buf.len()) };
            if n <= 0 {
                break;
            }
            got += n as usize;
        }
        assert_eq!(writer.join().unwrap(), 256 * 1024);
        let off = watch.finish(origin);
        unsafe { libc::close(r) };
        let pipe = off
            .waits
            .iter()
            .find(|w| w.class == Some(OffClass::Pipe))
            .unwrap_or_else(|| panic!("{:#?}", off.waits));
        assert_eq!(pipe.syscall.as_deref(), Some("write"), "{pipe:?}");
        assert_eq!(pipe.file.as_deref(), Some("pipe"), "{pipe:?}");
        assert!(pipe.max_ms >= 200.0, "{pipe:?}");
        let stall = off
            .stalls
            .iter()
            .find(|s| s.class == Some(OffClass::Pipe))
            .expect("the long wait kept as a stall");
        assert!(stall.ms >= 200.0 && stall.t_s > 0.0, "{stall:?}");
    }
}
