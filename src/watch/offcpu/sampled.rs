//! Where the server's threads slept when perf may not watch their context switches
//! (not root, no CAP_PERFMON, `perf_event_paranoid` ≥ 2): each thread's state, system
//! call and kernel wait channel read from `/proc/PID/task/TID/{stat,syscall,wchan}` at
//! [`HZ`], and its time waiting for a CPU from `schedstat` (exact, kept by the
//! scheduler). What it can and cannot say: the class of each wait, the call, the file
//! (`/proc/PID/fd`) and the kernel function where the kernel shows them — no stacks, and
//! waits shorter than a sample are seen in proportion, not one by one. Reading another
//! user's `syscall` needs ptrace rights: then this fallback refuses, and the note says so.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::classify::why;
use super::syscalls::{parse_syscall, syscall_name};
use super::{takes_fd, MAX_STALLS, MAX_THREADS};
use crate::run::{OffClass, OffCpu, OffProcess, OffStall, OffWait, Profile, KERNEL_SUFFIX};
use crate::sys::thread_cpu::ThreadCpuSample;

/// Samples per second of each thread's state, at most.
pub const HZ: u32 = 100;
/// The most CPU the sampling may use, percent of one core: it is on in every run, so it
/// must cost the server's machine next to nothing. Each sample of a thread costs a few
/// `/proc` reads (stat; for a waiting thread syscall, wchan and the fd's link): ~25 µs,
/// so 100 Hz holds ≤ 1% for a handful of threads (measured: `bench/watch-overhead`);
/// with more threads the rate is lowered each second to stay under it.
pub const BUDGET_PCT: f64 = 1.0;
/// The rate is never lowered below this: a wait of a few sample periods (≥ 100 ms here)
/// is still seen as one.
pub const MIN_HZ: u32 = 10;

/// (pid, class, syscall, file, kernel function): what a sample found a thread in.
type Key = (
    i32,
    OffClass,
    Option<String>,
    Option<String>,
    Option<String>,
);

struct Thread {
    pid: i32,
    tid: i32,
    /// Its `stat`, `syscall` and `wchan`, held open and read again from offset 0 at
    /// each sample (a `/proc` file is generated anew at each read): one system call per
    /// file instead of open, read and close.
    files: Option<ProcFiles>,
    /// `schedstat` at the start: (ns on CPU, ns waiting for one).
    sched0: (u64, u64),
    /// The wait it is in: its key, since when (ns from the start), seen last.
    current: Option<(Key, u64, u64)>,
}

#[derive(Default)]
struct Tally {
    /// Waits seen (a wait spans consecutive samples).
    waits: u64,
    ns: u64,
    longest_ns: u64,
}

#[derive(Default)]
struct Gathered {
    /// Samples taken, and the current period between them, ns.
    samples: u64,
    period_ns: f64,
    tally: BTreeMap<Key, Tally>,
    /// (key, tid, start ns, length ns) of waits ≥ the stall threshold.
    stalls: Vec<(Key, i32, u64, u64)>,
    /// Per thread: (pid, ns waiting for a CPU over the watch).
    runnable: Vec<(i32, u64)>,
    cpu_pct: f64,
}

/// A running sampled watch.
pub struct SampledWatch {
    per_pid: BTreeMap<i32, u32>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Gathered>,
    started: Instant,
}

impl SampledWatch {
    /// Starts sampling the threads `(pid, tid)`. Err: why it cannot (a thread's system
    /// call is not readable: another user's process, without ptrace rights).
    pub fn start(threads: &[(i32, i32)]) -> Result<SampledWatch, String> {
        let mut watched = Vec::new();
        for &(pid, tid) in threads.iter().take(MAX_THREADS) {
            let path = format!("/proc/{pid}/task/{tid}/syscall");
            if let Err(e) = std::fs::read_to_string(&path) {
                return Err(format!(
                    "{path} is not readable ({e}): the server runs as another user; run loadlens as root, with CAP_PERFMON, or as the server's user"
                ));
            }
            watched.push(Thread {
                pid,
                tid,
                sched0: schedstat(pid, tid).unwrap_or_default(),
                files: ProcFiles::open(pid, tid),
                current: None,
            });
        }
        if watched.is_empty() {
            return Err("no server thread to watch".into());
        }
        let mut per_pid = BTreeMap::new();
        for t in &watched {
            *per_pid.entry(t.pid).or_insert(0) += 1;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let started = Instant::now();
        let thread = std::thread::Builder::new()
            .name("loadlens-offcpu".into())
            .spawn(move || sample(watched, &flag, started))
            .map_err(|e| format!("cannot start its thread ({e})"))?;
        Ok(SampledWatch {
            per_pid,
            stop,
            thread,
            started,
        })
    }

    /// Stops sampling; `origin` is the watch's start (stalls go on the samples' clock).
    pub fn finish(self, origin: Instant) -> OffCpu {
        self.stop.store(true, Ordering::Relaxed);
        let g = self.thread.join().unwrap_or_default();
        let duration_s = self.started.elapsed().as_secs_f64();
        let shift_s = self.started.saturating_duration_since(origin).as_secs_f64();
        summarize(g, &self.per_pid, duration_s, shift_s)
    }
}

fn sample(mut threads: Vec<Thread>, stop: &AtomicBool, started: Instant) -> Gathered {
    let cpu0 = ThreadCpuSample::now();
    let mut hz = HZ as f64;
    let mut g = Gathered {
        period_ns: 1e9 / hz,
        ..Gathered::default()
    };
    let mut next = started;
    let mut last_ns = 0;
    // The budget's check: the CPU used since the last one, once a second.
    let mut check = (Instant::now(), ThreadCpuSample::now());
    while !stop.load(Ordering::Relaxed) {
        if check.0.elapsed() >= Duration::from_secs(1) {
            let used = ThreadCpuSample::now()
                .since(&check.1, check.0.elapsed())
                .busy_pct;
            hz = rate_within_budget(hz, used);
            g.period_ns = 1e9 / hz;
            check = (Instant::now(), ThreadCpuSample::now());
        }
        g.samples += 1;
        next += Duration::from_secs_f64(1.0 / hz);
        std::thread::sleep(next.saturating_duration_since(Instant::now()));
        let now_ns = started.elapsed().as_nanos() as u64;
        // The time this sample stands for: since the last one (a late wake-up counts
        // what it covered, not one period).
        let span = now_ns - last_ns;
        last_ns = now_ns;
        for t in threads.iter_mut() {
            let key = match &mut t.files {
                Some(f) => f.waiting_in(t.pid),
                None => waiting_in(t.pid, t.tid),
            };
            if t.current.as_ref().map(|c| &c.0) != key.as_ref() {
                end_wait(&mut g, t);
            }
            let Some(key) = key else { continue };
            let e = g.tally.entry(key.clone()).or_default();
            e.ns += span;
            match &mut t.current {
                Some(c) => c.2 = now_ns,
                None => t.current = Some((key, now_ns.saturating_sub(span), now_ns)),
            }
        }
    }
    for t in threads.iter_mut() {
        end_wait(&mut g, t);
        let (_, wait1) = schedstat(t.pid, t.tid).unwrap_or(t.sched0);
        g.runnable.push((t.pid, wait1.saturating_sub(t.sched0.1)));
    }
    g.cpu_pct = ThreadCpuSample::now()
        .since(&cpu0, started.elapsed())
        .busy_pct;
    g
}

/// The sampling rate for the next second, after the last one used `used_pct` of a core
/// at `hz`: lowered in proportion (with a margin) when over the budget, raised back
/// towards `HZ` when well under it, never below `MIN_HZ`.
fn rate_within_budget(hz: f64, used_pct: f64) -> f64 {
    let target = 0.8 * BUDGET_PCT;
    let scaled = if used_pct > BUDGET_PCT || used_pct < 0.5 * target {
        hz * target / used_pct.max(1e-3)
    } else {
        hz
    };
    scaled.clamp(MIN_HZ as f64, HZ as f64)
}

/// A wait has ended (the thread runs again or waits on something else): its length,
/// kept one by one when long and delaying connections.
fn end_wait(g: &mut Gathered, t: &mut Thread) {
    let Some((key, from, last)) = t.current.take() else {
        return;
    };
    let ns = last - from;
    if let Some(e) = g.tally.get_mut(&key) {
        e.waits += 1;
        e.longest_ns = e.longest_ns.max(ns);
    }
    // Seen in one sample, a wait may have been far shorter than the period it stands
    // for: one is kept as a stall only when samples saw it for the threshold's length.
    let seen_ns = ns.saturating_sub(g.period_ns as u64);
    if key.1.blocks() && seen_ns as f64 >= crate::run::STALL_MS * 1e6 && g.stalls.len() < MAX_STALLS
    {
        g.stalls.push((key, t.tid, from, ns));
    }
}

/// A thread's `/proc` files, open, and the buffer they are read into.
struct ProcFiles {
    stat: std::fs::File,
    syscall: std::fs::File,
    wchan: std::fs::File,
    buf: Vec<u8>,
}

impl ProcFiles {
    fn open(pid: i32, tid: i32) -> Option<ProcFiles> {
        let f = |name: &str| std::fs::File::open(format!("/proc/{pid}/task/{tid}/{name}")).ok();
        Some(ProcFiles {
            stat: f("stat")?,
            syscall: f("syscall")?,
            wchan: f("wchan")?,
            buf: vec![0; 4096],
        })
    }

    /// [`waiting_in`], from the open files.
    fn waiting_in(&mut self, pid: i32) -> Option<Key> {
        let stat = read_at0(&self.stat, &mut self.buf)?;
        let state = state_of(&stat)?.to_string();
        if state == "R" {
            return None;
        }
        let syscall = read_at0(&self.syscall, &mut self.buf);
        let wchan = read_at0(&self.wchan, &mut self.buf);
        waiting(pid, &state, syscall, wchan)
    }
}

/// The whole of a `/proc` file read from its start (they fit a page).
fn read_at0(f: &std::fs::File, buf: &mut [u8]) -> Option<String> {
    use std::os::unix::fs::FileExt;
    let n = f.read_at(buf, 0).ok()?;
    Some(String::from_utf8_lossy(&buf[..n]).into_owned())
}

/// A thread's state letter from its `stat`: it follows the command name, which is in
/// parentheses and may hold any byte.
fn state_of(stat: &str) -> Option<&str> {
    stat.rsplit_once(')')?.1.split_whitespace().next()
}

/// What the thread is waiting in, or `None` when it is on a CPU or runnable (that time
/// comes from `schedstat`).
fn waiting_in(pid: i32, tid: i32) -> Option<Key> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/stat")).ok()?;
    let state = state_of(&stat)?;
    if state == "R" {
        return None;
    }
    let syscall = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/syscall")).ok();
    let wchan = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/wchan")).ok();
    waiting(pid, state, syscall, wchan)
}

/// What a thread in `state` (not running) waits in, from its `syscall` and `wchan`.
fn waiting(pid: i32, state: &str, syscall: Option<String>, wchan: Option<String>) -> Option<Key> {
    let (nr, arg0) = syscall
        .as_deref()
        .map(parse_syscall)
        .unwrap_or((None, None));
    let name = nr.and_then(syscall_name);
    let wchan = wchan.filter(|w| !w.is_empty() && w != "0");
    let file = arg0
        .filter(|_| takes_fd(name))
        .and_then(|fd| std::fs::read_link(format!("/proc/{pid}/fd/{fd}")).ok())
        .map(|p| p.display().to_string());
    Some(classify(pid, state, name, wchan, file))
}

fn classify(
    pid: i32,
    state: &str,
    name: Option<&str>,
    wchan: Option<String>,
    file: Option<String>,
) -> Key {
    // The frames the stack classifier knows: the system call's entry and the wait
    // channel, as kernel frames.
    let mut frames: Vec<String> = Vec::new();
    if let Some(n) = name {
        frames.push(format!("__x64_sys_{n}{KERNEL_SUFFIX}"));
    }
    if let Some(w) = &wchan {
        frames.push(format!("{w}{KERNEL_SUFFIX}"));
    }
    let mut class = match name {
        Some(n) if IDLE_CALLS.contains(&n) => OffClass::Idle,
        _ => why(&frames, false).class.unwrap_or(OffClass::Other),
    };
    if matches!(class, OffClass::Other) {
        // No telling frame: the kind of file the call waits on, or the state.
        class = match (file.as_deref(), state) {
            (Some(f), _) if f.starts_with("pipe:") => OffClass::Pipe,
            (Some(f), _) if f.starts_with("socket:") => OffClass::Socket,
            (Some(f), _) if f.starts_with('/') => OffClass::Disk,
            (_, "D") => OffClass::Disk,
            (_, "T" | "t") => OffClass::Stopped,
            _ => OffClass::Other,
        };
    }
    (pid, class, name.map(str::to_string), file, wchan)
}

/// Calls a server waits for work in.
const IDLE_CALLS: [&str; 9] = [
    "epoll_wait",
    "epoll_pwait",
    "poll",
    "ppoll",
    "select",
    "pselect6",
    "accept",
    "accept4",
    "io_uring_enter",
];

/// `schedstat`: (ns on a CPU, ns runnable waiting for one).
fn schedstat(pid: i32, tid: i32) -> Option<(u64, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/task/{tid}/schedstat")).ok()?;
    let mut f = s.split_whitespace().map(|v| v.parse::<u64>().ok());
    Some((f.next()??, f.next()??))
}

fn summarize(g: Gathered, per_pid: &BTreeMap<i32, u32>, duration_s: f64, shift_s: f64) -> OffCpu {
    let mut ms: BTreeMap<i32, BTreeMap<OffClass, f64>> = BTreeMap::new();
    for &(pid, ns) in &g.runnable {
        *ms.entry(pid)
            .or_default()
            .entry(OffClass::Runnable)
            .or_default() += ns as f64 / 1e6;
    }
    let mut waits = Vec::new();
    for ((pid, class, syscall, file, wchan), t) in &g.tally {
        *ms.entry(*pid).or_default().entry(*class).or_default() += t.ns as f64 / 1e6;
        waits.push(OffWait {
            pid: *pid,
            class: Some(*class),
            syscall: syscall.clone(),
            file: file.clone(),
            kernel_fn: wchan.clone(),
            count: t.waits,
            total_ms: t.ns as f64 / 1e6,
            max_ms: t.longest_ns as f64 / 1e6,
            caller: None,
        });
    }
    waits.sort_by(|a, b| b.total_ms.total_cmp(&a.total_ms));
    let mut stalls: Vec<OffStall> = g
        .stalls
        .iter()
        .map(|((pid, class, syscall, file, _), tid, from, ns)| OffStall {
            pid: *pid,
            tid: *tid,
            t_s: shift_s + *from as f64 / 1e9,
            ms: *ns as f64 / 1e6,
            class: Some(*class),
            syscall: syscall.clone(),
            file: file.clone(),
        })
        .collect();
    stalls.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    OffCpu {
        threads: per_pid.values().sum(),
        duration_s,
        lost: 0,
        watch_cpu_pct: g.cpu_pct,
        sampled_hz: Some(((g.samples as f64 / duration_s.max(1e-9)).round() as u32).clamp(1, HZ)),
        processes: ms
            .into_iter()
            .map(|(pid, ms)| OffProcess {
                pid,
                threads: per_pid.get(&pid).copied().unwrap_or(1),
                ms,
            })
            .collect(),
        profile: Profile::default(),
        waits,
        stalls,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_syscall_lines_are_read() {
        // Captured on 6.18 x86_64: nginx's worker in write() on fd 4, between calls, on
        // a CPU.
        let w = "1 0x4 0x7f3c2a1b4000 0x10c 0x0 0x0 0x0 0x7ffd6c1e05a8 0x7f3c2b51a8e4";
        assert_eq!(parse_syscall(w), (Some(1), Some(4)));
        assert_eq!(
            parse_syscall("-1 0x7ffd6c1e05a8 0x7f3c2b51a8e4"),
            (None, Some(0x7ffd6c1e05a8))
        );
        assert_eq!(parse_syscall("running"), (None, None));
        assert_eq!(syscall_name(libc::SYS_write), Some("write"));
        assert_eq!(syscall_name(libc::SYS_epoll_pwait), Some("epoll_pwait"));
    }

    #[test]
    fn waits_are_classified_from_the_call_the_channel_and_the_file() {
        let k = |name, wchan: Option<&str>, file: Option<&str>| {
            classify(
                1,
                "S",
                name,
                wchan.map(str::to_string),
                file.map(str::to_string),
            )
            .1
        };
        assert_eq!(
            k(Some("epoll_wait"), Some("do_epoll_wait"), None),
            OffClass::Idle
        );
        assert_eq!(k(Some("epoll_pwait"), None, None), OffClass::Idle);
        assert_eq!(
            k(Some("write"), Some("anon_pipe_write"), Some("/x/log.fifo")),
            OffClass::Pipe
        );
        // No wait channel (hidden): the descriptor's kind decides.
        assert_eq!(k(Some("write"), None, Some("pipe:[4242]")), OffClass::Pipe);
        assert_eq!(
            k(Some("write"), None, Some("/var/log/a.log")),
            OffClass::Disk
        );
        assert_eq!(
            k(Some("sendto"), None, Some("socket:[77]")),
            OffClass::Socket
        );
        assert_eq!(
            k(Some("futex"), Some("futex_wait_queue"), None),
            OffClass::Futex
        );
        assert_eq!(
            k(Some("nanosleep"), Some("hrtimer_nanosleep"), None),
            OffClass::Sleep
        );
        assert_eq!(classify(1, "D", None, None, None).1, OffClass::Disk);
    }

    /// The rate follows the budget: lowered in proportion when over it, never below
    /// `MIN_HZ`; raised back when far under it, never above `HZ`.
    #[test]
    fn the_sampling_rate_stays_within_its_cpu_budget() {
        assert_eq!(rate_within_budget(100.0, 0.5), 100.0);
        let lowered = rate_within_budget(100.0, 4.0);
        assert!((19.0..=21.0).contains(&lowered), "{lowered}");
        assert_eq!(rate_within_budget(100.0, 400.0), MIN_HZ as f64);
        assert_eq!(rate_within_budget(20.0, 0.1), HZ as f64);
        let back = rate_within_budget(20.0, 0.3);
        assert!(back > 20.0 && back <= HZ as f64, "{back}");
    }

    /// This process's own thread blocked writing a full pipe is sampled there: the call,
    /// the pipe and a wait of about the time it blocked.
    #[test]
    fn a_thread_blocked_on_a_full_pipe_is_sampled_there() {
        let mut fds = [0; 2];
        assert_eq!(unsafe { libc::pipe(fds.as_mut_ptr()) }, 0);
        let (r, w) = (fds[0], fds[1]);
        let (tx, rx) = std::sync::mpsc::channel();
        let writer = std::thread::spawn(move || {
            let _ = tx.send(unsafe { libc::gettid() });
            let buf = [7u8; 4096];
            // 64 KiB fill the pipe; the next write blocks until the reader drains it.
            for _ in 0..32 {
                unsafe { libc::write(w, buf.as_ptr().cast(), buf.len()) };
            }
        });
        let tid = rx.recv().unwrap();
        let pid = std::process::id() as i32;
        let watch = SampledWatch::start(&[(pid, tid)]).unwrap();
        let origin = Instant::now();
        // Blocked until its pipe is read: wait for the sampler to see it there.
        let mut seen = false;
        for _ in 0..500 {
            if waiting_in(pid, tid).is_some_and(|k| k.1 == OffClass::Pipe) {
                seen = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        assert!(seen, "the writer never blocked on its pipe");
        // Blocked 600 ms, of which the sampler must see 150: it may itself wait for a CPU
        // on a busy host (beside other test binaries it saw 110 ms of a 200 ms block).
        std::thread::sleep(Duration::from_millis(600));
        // Read all it writes (a read past the end would wait for ever: this test holds
        // the write end too).
        let mut sink = vec![0u8; 1 << 20];
        let mut left = 32 * 4096;
        while left > 0 {
            let n = unsafe { libc::read(r, sink.as_mut_ptr().cast(), sink.len()) };
            assert!(n > 0, "read {n}");
            left -= n as usize;
        }
        writer.join().unwrap();
        let off = watch.finish(origin);
        let hz = off.sampled_hz.unwrap();
        assert!((MIN_HZ..=HZ).contains(&hz), "{hz} Hz");
        let wait = off
            .waits
            .iter()
            .find(|w| w.class == Some(OffClass::Pipe))
            .unwrap_or_else(|| panic!("{:?}", off.waits));
        assert_eq!(wait.syscall.as_deref(), Some("write"));
        assert!(
            wait.file.as_deref().unwrap_or("").starts_with("pipe:"),
            "{wait:?}"
        );
        assert!(wait.total_ms >= 150.0, "{wait:?}");
        assert!(off.stalls.iter().any(|s| s.ms >= 150.0), "{:?}", off.stalls);
        unsafe {
            libc::close(r);
            libc::close(w);
        }
    }
}
