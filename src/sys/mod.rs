//! The operating system's sources, one module per kind: pure parsers of /proc text
//! ([`procfs`]), netlink sock_diag ([`sockdiag`]), the cgroup ([`cgroup`]), a thread's
//! own CPU use ([`thread_cpu`]). They read and parse; they do not decide what to watch
//! (that is `watch`) or what it means (that is `diagnose`).

pub mod cgroup;
pub mod procfs;
pub mod sockdiag;
pub mod thread_cpu;
