//! Where the server's threads slept: off-CPU time of the watched server threads over
//! the window, from the kernel's context switches (perf events opened by loadlens: a
//! sample with the thread's stacks each time it leaves a CPU, a record each time it comes
//! back). Every interval off CPU is classified (waiting for work, waiting for a CPU,
//! blocked in I/O, a lock…), summed per process and per blocking call, and the long ones
//! are kept with their time. Filled by `watch::offcpu`; read by the rules (what blocked
//! a stall) and the views.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::Profile;

/// Off-CPU intervals at least this long are kept one by one as [`OffStall`]s.
pub const STALL_MS: f64 = 10.0;

/// Why a thread was off CPU.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum OffClass {
    /// Waiting for work: epoll_wait, poll, select, accept with nothing to do.
    Idle,
    /// Preempted while runnable: waiting for a CPU (or stopped by a CPU quota).
    Runnable,
    /// Blocked writing or reading a file, or waiting for the disk (fsync, page I/O).
    Disk,
    /// Blocked on a pipe or FIFO (a log reader that does not keep up).
    Pipe,
    /// Blocked on a socket: a full send buffer, a blocking receive or connect.
    Socket,
    /// Waiting for a kernel lock: a mutex or semaphore (a directory's, a file's).
    Lock,
    /// Waiting on a futex: a user-space lock, or a condition an idle thread of a pool
    /// waits on for work (the two look alike from the kernel), so not counted as
    /// blocked.
    Futex,
    /// Sleeping by its own choice (nanosleep, a timer).
    Sleep,
    /// Stopped by a signal (SIGSTOP, a debugger).
    Stopped,
    /// Anything else (named by the deepest kernel function).
    Other,
}

impl OffClass {
    /// Every class, in the order the views show them.
    pub const ALL: [OffClass; 10] = [
        OffClass::Idle,
        OffClass::Runnable,
        OffClass::Disk,
        OffClass::Pipe,
        OffClass::Socket,
        OffClass::Lock,
        OffClass::Futex,
        OffClass::Sleep,
        OffClass::Stopped,
        OffClass::Other,
    ];

    /// How the views name it.
    pub fn label(self) -> &'static str {
        match self {
            OffClass::Idle => "waiting for work",
            OffClass::Runnable => "waiting for a CPU",
            OffClass::Disk => "blocked: file or disk",
            OffClass::Pipe => "blocked: pipe",
            OffClass::Socket => "blocked: socket",
            OffClass::Lock => "blocked: kernel lock",
            OffClass::Futex => "waiting on a futex",
            OffClass::Sleep => "sleeping",
            OffClass::Stopped => "stopped",
            OffClass::Other => "off CPU, other",
        }
    }

    /// Time that delays the connections a thread holds (all but waiting for work, on a
    /// futex — a pool's idle threads wait there — and chosen sleep).
    pub fn blocks(self) -> bool {
        !matches!(self, OffClass::Idle | OffClass::Futex | OffClass::Sleep)
    }
}

/// Off-CPU time of the server threads over the window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OffCpu {
    /// Threads watched.
    pub threads: u32,
    /// Seconds the threads were watched (the window).
    pub duration_s: f64,
    /// Context switches the kernel could not record (ring buffer full): their time is
    /// missing.
    pub lost: u64,
    /// CPU loadlens's own off-CPU thread used reading the switches, percent of one
    /// core (its cost on the machine).
    #[serde(default)]
    pub watch_cpu_pct: f64,
    /// Where perf could not watch the context switches (not permitted): the threads'
    /// states, calls and wait channels were sampled from `/proc` this many times a
    /// second instead — no stacks, and waits are seen to within a sample. `None`: from
    /// the context switches.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampled_hz: Option<u32>,
    /// Per process: off-CPU milliseconds by class.
    pub processes: Vec<OffProcess>,
    /// Off-CPU stacks weighted by microseconds (frames root first; the stacks' `count`
    /// is microseconds off CPU, not samples). Waiting for work and for a CPU are left
    /// out.
    pub profile: Profile,
    /// What blocked, per process, call and file: most time first.
    pub waits: Vec<OffWait>,
    /// Intervals of at least [`STALL_MS`] a thread was off CPU for a reason that delays
    /// its connections, on the watch's clock (the samples' `t_s`); at most 1000, the
    /// longest kept.
    pub stalls: Vec<OffStall>,
}

/// One process's off-CPU time.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct OffProcess {
    pub pid: i32,
    /// Its threads watched.
    #[serde(default)]
    pub threads: u32,
    /// Milliseconds off CPU by class, summed over the process's threads.
    pub ms: BTreeMap<OffClass, f64>,
}

impl OffProcess {
    /// Milliseconds of `class`.
    pub fn of(&self, class: OffClass) -> f64 {
        self.ms.get(&class).copied().unwrap_or(0.0)
    }
}

/// Time blocked in one call of one process, on one file.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct OffWait {
    pub pid: i32,
    pub class: Option<OffClass>,
    /// The system call it was in (`write`, `fsync`, `futex`…), when the kernel stack
    /// names one.
    pub syscall: Option<String>,
    /// The file the call was on (`/proc/PID/fd`, read while the run was going), when
    /// its first argument was a descriptor.
    pub file: Option<String>,
    /// The kernel function it slept in (the deepest frame below `schedule`).
    pub kernel_fn: Option<String>,
    /// Times it blocked, their total and the longest, milliseconds.
    pub count: u64,
    pub total_ms: f64,
    pub max_ms: f64,
    /// The user-space caller closest to the system call (e.g. `ngx_write_fd`).
    pub caller: Option<String>,
}

impl OffWait {
    /// "write() on /x/access.fifo (blocked: pipe, anon_pipe_write ← ngx_write_fd)".
    pub fn describe(&self) -> String {
        let call = self
            .syscall
            .as_deref()
            .map(|s| format!("{s}()"))
            .unwrap_or_else(|| "a call".into());
        let on = self
            .file
            .as_deref()
            .map(|f| format!(" on {f}"))
            .unwrap_or_default();
        let mut how = vec![self.class.map_or("off CPU", |k| k.label()).to_string()];
        match (&self.kernel_fn, &self.caller) {
            (Some(k), Some(u)) => how.push(format!("{k} ← {u}")),
            (Some(k), None) => how.push(k.clone()),
            (None, Some(u)) => how.push(u.clone()),
            (None, None) => {}
        }
        format!("{call}{on} ({})", how.join(", "))
    }
}

/// One long interval off CPU.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct OffStall {
    pub pid: i32,
    pub tid: i32,
    /// Start, seconds since the watch began (the samples' clock).
    pub t_s: f64,
    pub ms: f64,
    pub class: Option<OffClass>,
    pub syscall: Option<String>,
    pub file: Option<String>,
}

impl OffCpu {
    /// Milliseconds off CPU of `pids` in `class`.
    pub fn ms_of(&self, pids: &[i32], class: OffClass) -> f64 {
        self.processes
            .iter()
            .filter(|p| pids.contains(&p.pid))
            .map(|p| p.of(class))
            .sum()
    }

    /// The waits of `pids` that delay connections, most time first.
    pub fn blocking_waits<'a>(&'a self, pids: &'a [i32]) -> impl Iterator<Item = &'a OffWait> {
        self.waits.iter().filter(move |w| {
            pids.contains(&w.pid)
                && w.class
                    .is_some_and(|c| c.blocks() && c != OffClass::Runnable)
        })
    }
}
