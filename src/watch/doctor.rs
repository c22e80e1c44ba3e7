//! `loadlens doctor`: which evidence this machine gives loadlens, why not where it does
//! not, and what adds noise to a measurement — each with the command that changes it.
//! Two steps: [`Facts::read`] reads what the machine says (/proc, /sys, a sock_diag
//! socket, a server's /proc files); [`assess`] is a pure function of those facts, tested
//! on facts written by hand.

use crate::sys::procfs;

/// What the machine said, read once.
#[derive(Debug, Clone)]
pub struct Facts {
    /// Effective user id.
    pub euid: u32,
    /// Effective capabilities (`CapEff` of /proc/self/status).
    pub cap_eff: u64,
    /// `kernel.perf_event_paranoid`; `None` when the kernel has no perf events.
    pub perf_paranoid: Option<i32>,
    /// Where tracefs is mounted and readable.
    pub tracefs: Option<String>,
    /// `/proc/self/schedstat` readable (run-queue delay per task).
    pub schedstat: bool,
    /// 2 for the unified hierarchy, 1 for v1 (cpu controller), 0 when neither is found.
    pub cgroup_version: u8,
    /// A sock_diag socket opened and answered: Err, why not.
    pub sock_diag: Result<(), String>,
    /// The server `--pid` given: its pid, owner, and whether its threads' system calls
    /// and open files can be read (the off-CPU sampler's and the discovery's needs).
    pub server: Option<ServerAccess>,
    /// io_uring for the load: Err, why not (filled by the caller: the engine probes it).
    pub io_uring: Result<(), String>,
    /// Processes other than this one using ≥ `BUSY_PCT` of a core over the look.
    pub busy: Vec<(String, i32, f64)>,
    /// Each CPU's frequency governor (`cpufreq/scaling_governor`); empty where the
    /// kernel does not control the frequency (a VM, a container without /sys).
    pub governors: Vec<String>,
    /// Simultaneous multithreading active (`/sys/devices/system/cpu/smt/active`).
    pub smt: Option<bool>,
    /// `kernel.yama.ptrace_scope`, where Yama is built in.
    pub ptrace_scope: Option<i32>,
}

/// Whether loadlens may read a server process's threads.
#[derive(Debug, Clone)]
pub struct ServerAccess {
    pub pid: i32,
    pub comm: String,
    pub uid: Option<u32>,
    /// `/proc/PID/task/PID/syscall` read: Err, the error.
    pub syscall: Result<(), String>,
    /// `/proc/PID/fd` listed: Err, the error.
    pub fds: Result<(), String>,
}

/// A process at or above this share of a core during the look is noise beside a load.
pub const BUSY_PCT: f64 = 20.0;

const CAP_SYS_PTRACE: u64 = 1 << 19;
const CAP_SYS_ADMIN: u64 = 1 << 21;
const CAP_PERFMON: u64 = 1 << 38;

/// One line of the doctor's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Check {
    /// What is checked: "perf events", "tracefs", …
    pub what: &'static str,
    pub status: Status,
    /// What the machine says, in a few words.
    pub says: String,
    /// The command (or change) that makes it better; empty when nothing needs doing.
    pub fix: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The evidence is there.
    Yes,
    /// The evidence is not given; the runs degrade without it.
    No,
    /// Something that adds noise to a measurement.
    Noise,
    /// Fine, nothing to say beyond the fact.
    Quiet,
}

impl Status {
    pub fn label(self) -> &'static str {
        match self {
            Status::Yes => "yes",
            Status::No => "no",
            Status::Noise => "noise",
            Status::Quiet => "ok",
        }
    }
}

impl Facts {
    /// Reads the machine; `server` is a server's pid to check access to.
    pub fn read(server: Option<i32>, io_uring: Result<(), String>) -> Facts {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let cap_eff = status
            .lines()
            .find_map(|l| l.strip_prefix("CapEff:"))
            .and_then(|v| u64::from_str_radix(v.trim(), 16).ok())
            .unwrap_or(0);
        let int = |p: &str| {
            std::fs::read_to_string(p)
                .ok()
                .and_then(|s| s.trim().parse::<i32>().ok())
        };
        let tracefs = ["/sys/kernel/tracing", "/sys/kernel/debug/tracing"]
            .into_iter()
            .find(|p| std::fs::read_dir(format!("{p}/events")).is_ok())
            .map(str::to_string);
        let cgroup_version = if std::path::Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
            2
        } else if std::path::Path::new("/sys/fs/cgroup/cpu").exists() {
            1
        } else {
            0
        };
        let sock_diag = crate::sys::sockdiag::Diag::open()
            .and_then(|mut d| d.tcp_listeners(None).map(drop))
            .map_err(|e| e.to_string());
        let governors = (0..1024)
            .map_while(|i| {
                std::fs::read_to_string(format!(
                    "/sys/devices/system/cpu/cpu{i}/cpufreq/scaling_governor"
                ))
                .ok()
            })
            .map(|g| g.trim().to_string())
            .collect();
        Facts {
            // SAFETY: geteuid has no arguments and cannot fail.
            euid: unsafe { libc::geteuid() },
            cap_eff,
            perf_paranoid: int("/proc/sys/kernel/perf_event_paranoid"),
            tracefs,
            schedstat: std::fs::read_to_string("/proc/self/schedstat").is_ok(),
            cgroup_version,
            sock_diag,
            server: server.map(server_access),
            io_uring,
            busy: busy_processes(),
            governors,
            smt: int("/sys/devices/system/cpu/smt/active").map(|v| v == 1),
            ptrace_scope: int("/proc/sys/kernel/yama/ptrace_scope"),
        }
    }
}

fn server_access(pid: i32) -> ServerAccess {
    let comm = std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .map(|c| c.trim().to_string())
        .unwrap_or_default();
    let uid = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|v| v.split_whitespace().nth(1)?.parse().ok())
        });
    ServerAccess {
        pid,
        comm,
        uid,
        syscall: std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/syscall"))
            .map(drop)
            .map_err(|e| e.to_string()),
        fds: std::fs::read_dir(format!("/proc/{pid}/fd"))
            .map(drop)
            .map_err(|e| e.to_string()),
    }
}

/// Other processes' CPU over a quarter of a second (this one left out).
fn busy_processes() -> Vec<(String, i32, f64)> {
    let me = std::process::id() as i32;
    let before = procfs::all_pid_stats();
    let t0 = std::time::Instant::now();
    std::thread::sleep(std::time::Duration::from_millis(250));
    let after = procfs::all_pid_stats();
    let wall = t0.elapsed().as_secs_f64();
    // SAFETY: sysconf has no side effects.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as f64;
    let mut busy: Vec<(String, i32, f64)> = after
        .values()
        .filter(|a| a.pid != me)
        .filter_map(|a| {
            let b = before.get(&a.pid)?;
            let ticks = (a.utime + a.stime).saturating_sub(b.utime + b.stime) as f64;
            let pct = ticks / hz / wall * 100.0;
            (pct >= BUSY_PCT).then(|| (a.comm.clone(), a.pid, pct))
        })
        .collect();
    busy.sort_by(|x, y| y.2.total_cmp(&x.2));
    busy
}

/// What the facts mean for loadlens's evidence, one check a line, in the order a
/// person reads them: the evidence first, then the noise.
pub fn assess(f: &Facts) -> Vec<Check> {
    let root = f.euid == 0;
    let cap = |c: u64| f.cap_eff & c != 0;
    let mut out = Vec::new();
    let mut check = |what, status, says: String, fix: &str| {
        out.push(Check {
            what,
            status,
            says,
            fix: fix.to_string(),
        })
    };
    // perf events: the on-CPU profile and the context switches with stacks.
    match f.perf_paranoid {
        None => check("perf events", Status::No, "this kernel has no perf events (no /proc/sys/kernel/perf_event_paranoid): no --profile, no off-CPU stacks".into(), "a kernel built with CONFIG_PERF_EVENTS"),
        Some(p) if root || cap(CAP_PERFMON) || cap(CAP_SYS_ADMIN) => check("perf events", Status::Yes, format!("permitted ({}; perf_event_paranoid={p}): --profile and the off-CPU stacks", if root { "root" } else { "CAP_PERFMON" }), ""),
        Some(p) if p <= 1 => check("perf events", Status::Yes, format!("permitted for other users' processes of yours (perf_event_paranoid={p}); another user's server needs root or CAP_PERFMON"), ""),
        Some(p) => check("perf events", Status::No, format!("not permitted (perf_event_paranoid={p}, not root, no CAP_PERFMON): --profile is refused, the off-CPU watch samples /proc instead (no stacks)"), "sudo sysctl -w kernel.perf_event_paranoid=1, or sudo setcap cap_perfmon+ep $(command -v loadlens), or run as root"),
    }
    match &f.tracefs {
        Some(p) => check("tracefs", Status::Yes, format!("readable at {p}"), ""),
        None => check("tracefs", Status::No, "not mounted or not readable (loadlens does not need it; perf and bcc tools for confirming by hand do)".into(), "sudo mount -t tracefs nodev /sys/kernel/tracing"),
    }
    if f.schedstat {
        check(
            "schedstat",
            Status::Yes,
            "/proc/PID/schedstat: each process's time waiting for a CPU (run-queue-delay)".into(),
            "",
        );
    } else {
        check(
            "schedstat",
            Status::No,
            "no /proc/PID/schedstat: run-queue delay is unknown (run-queue-delay cannot fire)"
                .into(),
            "a kernel with CONFIG_SCHED_INFO (most distributions' kernels)",
        );
    }
    match f.cgroup_version {
        2 => check(
            "cgroup",
            Status::Yes,
            "v2 (unified): CPU quotas and throttling read from cpu.max / cpu.stat".into(),
            "",
        ),
        1 => check(
            "cgroup",
            Status::Yes,
            "v1: CPU quotas and throttling read from cpu.cfs_quota_us / cpu.stat".into(),
            "",
        ),
        _ => check(
            "cgroup",
            Status::No,
            "no cgroup filesystem found: CPU quotas (cpu-quota) cannot be seen".into(),
            "mount cgroup2: sudo mount -t cgroup2 none /sys/fs/cgroup",
        ),
    }
    match &f.sock_diag {
        Ok(()) => check("sock_diag", Status::Yes, "listeners, accept queues and connections per port (netlink)".into(), ""),
        Err(e) => check("sock_diag", Status::No, format!("netlink sock_diag refused ({e}): no accept queues, the server is not found from its port (give --server-pid)"), "sudo modprobe inet_diag tcp_diag unix_diag"),
    }
    match &f.server {
        None => check("server access", Status::Quiet, "no --pid given: the server's threads were not checked".into(), "loadlens doctor --pid $(pgrep -o nginx)"),
        Some(s) => match (&s.syscall, &s.fds) {
            (Ok(()), Ok(())) => check("server access", Status::Yes, format!("{} (pid {}): its threads' calls and open files are readable (where its time went, its sockets)", s.comm, s.pid), ""),
            (sys, fds) => {
                let who = s.uid.map(|u| format!(", uid {u}")).unwrap_or_default();
                let why = sys.as_ref().err().or(fds.as_ref().err()).cloned().unwrap_or_default();
                let fix = if f.ptrace_scope.is_some_and(|p| p >= 2) {
                    "run loadlens as root (kernel.yama.ptrace_scope ≥ 2 allows nothing else)".to_string()
                } else if !root && !cap(CAP_SYS_PTRACE) {
                    format!("run loadlens as the server's user or as root (sudo loadlens run …), or sudo setcap cap_sys_ptrace+ep $(command -v loadlens){}", if s.uid == Some(f.euid) { "; the same user is refused by kernel.yama.ptrace_scope=1 only for non-descendants: sudo sysctl -w kernel.yama.ptrace_scope=0" } else { "" })
                } else {
                    String::new()
                };
                check(
                    "server access",
                    Status::No,
                    format!(
                        "{} (pid {}{who}): its threads' calls cannot be read ({why}): where its time went is not watched, its sockets are not followed",
                        s.comm, s.pid
                    ),
                    &fix,
                );
            }
        },
    }
    match &f.io_uring {
        Ok(()) => check(
            "io_uring",
            Status::Yes,
            "the load runs on io_uring (fewer system calls per response than epoll)".into(),
            "",
        ),
        Err(e) => check(
            "io_uring",
            Status::No,
            format!("{e}: the load runs on epoll (more client CPU per response)"),
            "sudo sysctl -w kernel.io_uring_disabled=0",
        ),
    }
    // Noise.
    if f.busy.is_empty() {
        check(
            "other busy processes",
            Status::Quiet,
            format!("none at ≥ {BUSY_PCT:.0}% of a core"),
            "",
        );
    } else {
        let list: Vec<String> = f
            .busy
            .iter()
            .take(5)
            .map(|(c, p, pct)| format!("{c} (pid {p}, {pct:.0}%)"))
            .collect();
        check("other busy processes", Status::Noise, format!("{}: they take CPUs from the server and the load", list.join(", ")), "stop them or run them idle-only while measuring: chrt --idle -p 0 PID; or pin the server and loadlens apart from them (taskset)");
    }
    if f.governors.is_empty() {
        check(
            "CPU frequency",
            Status::Quiet,
            "no cpufreq governor: the frequency is the firmware's or hypervisor's".into(),
            "",
        );
    } else if f.governors.iter().all(|g| g == "performance") {
        check(
            "CPU frequency",
            Status::Quiet,
            "governor performance on every CPU".into(),
            "",
        );
    } else {
        let mut g = f.governors.clone();
        g.dedup();
        check("CPU frequency", Status::Noise, format!("governor {}: the clock follows the load, so a run's speed depends on what ran before it", g.join(", ")), "sudo cpupower frequency-set -g performance");
    }
    match f.smt {
        Some(true) => check("SMT", Status::Noise, "on: two hardware threads share a core, so the load and the server can slow each other on one core".into(), "pin the server and loadlens to different cores (taskset -c), or echo off | sudo tee /sys/devices/system/cpu/smt/control"),
        Some(false) => check("SMT", Status::Quiet, "off".into(), ""),
        None => check("SMT", Status::Quiet, "not reported by this kernel".into(), ""),
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts() -> Facts {
        Facts {
            euid: 1000,
            cap_eff: 0,
            perf_paranoid: Some(2),
            tracefs: None,
            schedstat: true,
            cgroup_version: 2,
            sock_diag: Ok(()),
            server: None,
            io_uring: Ok(()),
            busy: Vec::new(),
            governors: Vec::new(),
            smt: None,
            ptrace_scope: None,
        }
    }

    fn line<'a>(c: &'a [Check], what: &str) -> &'a Check {
        c.iter().find(|c| c.what == what).unwrap()
    }

    #[test]
    fn perf_is_permitted_to_root_or_by_paranoia_and_says_how_otherwise() {
        let user = assess(&facts());
        let perf = line(&user, "perf events");
        assert_eq!(perf.status, Status::No);
        assert!(perf.fix.contains("perf_event_paranoid=1"), "{perf:?}");
        let root = assess(&Facts { euid: 0, ..facts() });
        assert_eq!(line(&root, "perf events").status, Status::Yes);
        let capped = assess(&Facts {
            cap_eff: CAP_PERFMON,
            ..facts()
        });
        assert_eq!(line(&capped, "perf events").status, Status::Yes);
        let lax = assess(&Facts {
            perf_paranoid: Some(1),
            ..facts()
        });
        assert_eq!(line(&lax, "perf events").status, Status::Yes);
    }

    #[test]
    fn a_server_of_another_user_is_refused_with_the_way_in() {
        let mut f = facts();
        f.server = Some(ServerAccess {
            pid: 42,
            comm: "nginx".into(),
            uid: Some(0),
            syscall: Err("Permission denied (os error 13)".into()),
            fds: Err("Permission denied (os error 13)".into()),
        });
        let c = assess(&f);
        let s = line(&c, "server access");
        assert_eq!(s.status, Status::No);
        assert!(s.says.contains("nginx (pid 42, uid 0)"), "{s:?}");
        assert!(s.fix.contains("cap_sys_ptrace"), "{s:?}");
        f.ptrace_scope = Some(3);
        assert!(line(&assess(&f), "server access").fix.contains("as root"));
    }

    #[test]
    fn noise_is_named_with_its_fix() {
        let mut f = facts();
        f.busy = vec![("rustc".into(), 7, 95.0)];
        f.governors = vec!["powersave".into(), "powersave".into()];
        f.smt = Some(true);
        let c = assess(&f);
        for what in ["other busy processes", "CPU frequency", "SMT"] {
            let l = line(&c, what);
            assert_eq!(l.status, Status::Noise, "{l:?}");
            assert!(!l.fix.is_empty(), "{l:?}");
        }
        assert!(line(&c, "CPU frequency").says.contains("powersave"));
        let quiet = assess(&facts());
        assert_eq!(line(&quiet, "other busy processes").status, Status::Quiet);
        assert_eq!(line(&quiet, "SMT").status, Status::Quiet);
    }

    #[test]
    fn missing_sources_say_what_degrades() {
        let mut f = facts();
        f.schedstat = false;
        f.cgroup_version = 0;
        f.sock_diag = Err("Operation not permitted".into());
        f.io_uring = Err("the kernel refuses it".into());
        let c = assess(&f);
        for what in ["schedstat", "cgroup", "sock_diag", "io_uring"] {
            assert_eq!(line(&c, what).status, Status::No, "{what}");
            assert!(!line(&c, what).fix.is_empty(), "{what}");
        }
    }
}
