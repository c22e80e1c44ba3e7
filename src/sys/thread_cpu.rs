//! The calling thread's own CPU use: what the load workers and the sampler measure of
//! themselves (the client self-check, the cost of watching).

use std::time::Duration;

use crate::run::ThreadCpu;

/// The calling thread's CPU times and run-queue delay at one moment.
pub struct ThreadCpuSample {
    tid: i32,
    user: Duration,
    system: Duration,
    run_delay_ns: Option<u64>,
}

impl ThreadCpuSample {
    /// `getrusage(RUSAGE_THREAD)` gives the same user/system split as
    /// /proc/self/task/TID/stat at µs rather than clock-tick resolution; the run-queue
    /// delay comes from /proc/thread-self/schedstat (second field, ns).
    pub fn now() -> ThreadCpuSample {
        // SAFETY: getrusage writes into the zeroed struct we own; gettid has no arguments.
        let (ru, tid) = unsafe {
            let mut ru: libc::rusage = std::mem::zeroed();
            libc::getrusage(libc::RUSAGE_THREAD, &mut ru);
            (ru, libc::gettid())
        };
        let tv = |t: libc::timeval| {
            Duration::from_secs(t.tv_sec as u64) + Duration::from_micros(t.tv_usec as u64)
        };
        let run_delay_ns = std::fs::read_to_string("/proc/thread-self/schedstat")
            .ok()
            .and_then(|s| s.split_whitespace().nth(1)?.parse().ok());
        ThreadCpuSample {
            tid,
            user: tv(ru.ru_utime),
            system: tv(ru.ru_stime),
            run_delay_ns,
        }
    }

    pub fn since(&self, before: &ThreadCpuSample, wall: Duration) -> ThreadCpu {
        let user = self.user.saturating_sub(before.user).as_secs_f64();
        let system = self.system.saturating_sub(before.system).as_secs_f64();
        let wall = wall.as_secs_f64().max(1e-9);
        ThreadCpu {
            tid: self.tid,
            user_s: user,
            system_s: system,
            busy_pct: (user + system) * 100.0 / wall,
            run_delay_ms: match (self.run_delay_ns, before.run_delay_ns) {
                (Some(a), Some(b)) => Some(a.saturating_sub(b) as f64 / 1e6),
                _ => None,
            },
        }
    }
}
