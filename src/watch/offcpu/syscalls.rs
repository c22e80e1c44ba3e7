//! A thread's system call as `/proc/PID/task/TID/syscall` shows it: its number and
//! first argument, and the names of the calls a server thread waits in (read by the
//! sampled off-CPU watch, `sampled.rs`).

/// `/proc/PID/task/TID/syscall`: "NR ARG0 … SP PC" in a call, "-1 SP PC" between
/// calls, "running" on a CPU.
pub(super) fn parse_syscall(s: &str) -> (Option<i64>, Option<u64>) {
    let mut f = s.split_whitespace();
    let nr = f
        .next()
        .and_then(|n| n.parse::<i64>().ok())
        .filter(|&n| n >= 0);
    let arg0 = f
        .next()
        .and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok());
    (nr, arg0)
}

/// The calls a server thread waits in, by number on this architecture.
pub(super) fn syscall_name(nr: i64) -> Option<&'static str> {
    Some(match nr {
        libc::SYS_read => "read",
        libc::SYS_write => "write",
        libc::SYS_readv => "readv",
        libc::SYS_writev => "writev",
        libc::SYS_pread64 => "pread64",
        libc::SYS_pwrite64 => "pwrite64",
        libc::SYS_fsync => "fsync",
        libc::SYS_fdatasync => "fdatasync",
        libc::SYS_sendto => "sendto",
        libc::SYS_recvfrom => "recvfrom",
        libc::SYS_sendmsg => "sendmsg",
        libc::SYS_recvmsg => "recvmsg",
        libc::SYS_sendfile => "sendfile64",
        libc::SYS_connect => "connect",
        libc::SYS_accept4 => "accept4",
        libc::SYS_epoll_pwait => "epoll_pwait",
        libc::SYS_ppoll => "ppoll",
        libc::SYS_pselect6 => "pselect6",
        libc::SYS_futex => "futex",
        libc::SYS_clock_nanosleep => "clock_nanosleep",
        libc::SYS_nanosleep => "nanosleep",
        libc::SYS_openat => "openat",
        libc::SYS_flock => "flock",
        libc::SYS_io_uring_enter => "io_uring_enter",
        libc::SYS_wait4 => "wait4",
        libc::SYS_rt_sigsuspend => "rt_sigsuspend",
        #[cfg(target_arch = "x86_64")]
        libc::SYS_epoll_wait => "epoll_wait",
        #[cfg(target_arch = "x86_64")]
        libc::SYS_accept => "accept",
        #[cfg(target_arch = "x86_64")]
        libc::SYS_poll => "poll",
        #[cfg(target_arch = "x86_64")]
        libc::SYS_select => "select",
        #[cfg(target_arch = "x86_64")]
        libc::SYS_pause => "pause",
        _ => return None,
    })
}
