//! Why a thread left its CPU, from the stack it left with: the class of the wait
//! (waiting for work, for a CPU, blocked on a pipe, the disk, a lock…), the system call
//! it served, the kernel function it slept in and the user-space caller.

use crate::run::{split_frame, OffClass};

/// What a stack says about why it left the CPU.
#[derive(Debug, Clone, PartialEq, Default)]
pub(crate) struct Why {
    pub class: Option<OffClass>,
    pub syscall: Option<String>,
    pub kernel_fn: Option<String>,
    pub caller: Option<String>,
}

/// Scheduler frames: the way down to the switch, not the reason for it.
fn scheduler(f: &str) -> bool {
    f.starts_with("__schedule")
        || f.starts_with("schedule")
        || f.starts_with("preempt_schedule")
        || f.starts_with("io_schedule")
        || f == "__cond_resched"
        || f.starts_with("__traceiter")
        || f.starts_with("perf_")
}

/// Classifies a stack (names root first, kernel frames suffixed) left by a switch out.
pub(crate) fn why(names: &[String], preempted: bool) -> Why {
    let kernel: Vec<&str> = names
        .iter()
        .filter_map(|n| match split_frame(n) {
            (n, true) => Some(n),
            _ => None,
        })
        .collect();
    // The outermost function named after a system call (the entry points are often
    // inlined into do_syscall_64: `ksys_write`, `__sys_sendto`, `do_epoll_wait` remain).
    let syscall = kernel.iter().find_map(|f| {
        [
            "__x64_sys_",
            "__arm64_sys_",
            "__do_sys_",
            "__se_sys_",
            "ksys_",
            "__sys_",
        ]
        .iter()
        .find_map(|p| f.strip_prefix(p))
        .or(match *f {
            "do_epoll_wait" => Some("epoll_wait"),
            "do_fsync" => Some("fsync"),
            "do_sys_poll" => Some("poll"),
            "do_sys_openat2" => Some("openat"),
            _ => None,
        })
        .map(str::to_string)
    });
    let kernel_fn = kernel
        .iter()
        .rev()
        .find(|f| !scheduler(f))
        .map(|f| f.to_string());
    let caller = names
        .iter()
        .rev()
        .find(|n| !split_frame(n).1 && !libc_frame(n))
        .cloned();
    let has = |pat: &[&str]| kernel.iter().any(|f| pat.iter().any(|p| f.contains(p)));
    let class = if preempted {
        OffClass::Runnable
    } else if has(&["do_signal_stop", "ptrace_stop"]) {
        OffClass::Stopped
    } else if has(&[
        "ep_poll",
        "epoll_wait",
        "do_select",
        "do_sys_poll",
        "io_cqring_wait",
    ]) || has(&["inet_csk_accept", "unix_accept"])
    {
        OffClass::Idle
    } else if has(&[
        "pipe_write",
        "pipe_read",
        "pipe_wait",
        "wait_for_partner",
        "fifo_open",
    ]) {
        OffClass::Pipe
    } else if has(&[
        "sk_stream_wait_memory",
        "sk_wait_data",
        "wait_for_tcp_memory",
        "inet_wait_for_connect",
        "unix_wait_for_peer",
        "unix_stream_read_generic",
    ]) {
        OffClass::Socket
    } else if has(&["futex_wait", "futex_q_lock", "futex_do_wait"]) {
        OffClass::Futex
    } else if has(&[
        "folio_wait",
        "wait_on_page",
        "blk_",
        "jbd2",
        "fsync",
        "ext4_",
        "xfs_",
        "btrfs_",
        "filemap_",
        "submit_bio",
        "nfs_",
    ]) {
        OffClass::Disk
    } else if has(&["rwsem_down", "mutex_lock", "down_read", "down_write"]) {
        OffClass::Lock
    } else if has(&["nanosleep", "clock_nanosleep", "do_sys_pause", "sigsuspend"]) {
        OffClass::Sleep
    } else if kernel.is_empty() {
        // No kernel frames (not permitted): the user leaf is all there is.
        match caller_leaf(names) {
            Some(l) if l.contains("epoll_wait") || l.contains("poll") => OffClass::Idle,
            _ => OffClass::Other,
        }
    } else {
        OffClass::Other
    };
    Why {
        class: Some(class),
        syscall,
        kernel_fn,
        caller,
    }
}

fn caller_leaf(names: &[String]) -> Option<&str> {
    names.last().map(String::as_str)
}

/// The C library's own wrappers, skipped when naming the caller.
fn libc_frame(n: &str) -> bool {
    n.starts_with('[') && n.contains("libc")
        || matches!(
            n,
            "__libc_write"
                | "__write"
                | "write"
                | "__GI___libc_write"
                | "__libc_pwrite"
                | "pwrite64"
                | "writev"
                | "__writev"
                | "fsync"
                | "fdatasync"
                | "__libc_read"
                | "read"
                | "__futex_abstimed_wait_common"
                | "__GI___futex_abstimed_wait_cancelable64"
                | "syscall"
                | "epoll_wait"
                | "__GI_epoll_wait"
        )
        || n.starts_with("__GI_")
        || n.starts_with("__internal_syscall")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(frames: &[&str]) -> Vec<String> {
        frames.iter().map(|s| s.to_string()).collect()
    }

    /// Stacks as the kernel gives them for the usual reasons to leave a CPU.
    #[test]
    fn stacks_are_classified_by_where_they_slept() {
        let write_to_fifo = names(&[
            "main",
            "ngx_http_log_handler",
            "ngx_write_fd",
            "__libc_write",
            "entry_SYSCALL_64_[k]",
            "do_syscall_64_[k]",
            "__x64_sys_write_[k]",
            "ksys_write_[k]",
            "vfs_write_[k]",
            "pipe_write_[k]",
            "schedule_[k]",
            "__schedule_[k]",
        ]);
        let w = why(&write_to_fifo, false);
        assert_eq!(w.class, Some(OffClass::Pipe));
        assert_eq!(w.syscall.as_deref(), Some("write"));
        assert_eq!(w.kernel_fn.as_deref(), Some("pipe_write"));
        assert_eq!(w.caller.as_deref(), Some("ngx_write_fd"));
        // The same stack preempted is a wait for a CPU, whatever it was doing.
        assert_eq!(why(&write_to_fifo, true).class, Some(OffClass::Runnable));
        let idle = names(&[
            "ngx_epoll_process_events",
            "epoll_wait",
            "__x64_sys_epoll_wait_[k]",
            "do_epoll_wait_[k]",
            "ep_poll_[k]",
            "schedule_hrtimeout_range_[k]",
            "schedule_[k]",
            "__schedule_[k]",
        ]);
        assert_eq!(why(&idle, false).class, Some(OffClass::Idle));
        let fsync = names(&[
            "__x64_sys_fsync_[k]",
            "do_fsync_[k]",
            "ext4_sync_file_[k]",
            "file_write_and_wait_range_[k]",
            "folio_wait_bit_common_[k]",
            "io_schedule_[k]",
            "schedule_[k]",
        ]);
        let w = why(&fsync, false);
        assert_eq!(w.class, Some(OffClass::Disk));
        assert_eq!(w.syscall.as_deref(), Some("fsync"));
        assert_eq!(w.kernel_fn.as_deref(), Some("folio_wait_bit_common"));
        let lock = names(&["__x64_sys_futex_[k]", "futex_wait_[k]", "schedule_[k]"]);
        assert_eq!(why(&lock, false).class, Some(OffClass::Futex));
        let dir_mutex = names(&[
            "__x64_sys_openat_[k]",
            "path_openat_[k]",
            "down_write_[k]",
            "rwsem_down_write_slowpath_[k]",
            "schedule_[k]",
        ]);
        assert_eq!(why(&dir_mutex, false).class, Some(OffClass::Lock));
        let stopped = names(&["get_signal_[k]", "do_signal_stop_[k]", "schedule_[k]"]);
        assert_eq!(why(&stopped, false).class, Some(OffClass::Stopped));
    }
}
