//! The system side of the io_uring loop: whether the kernel allows it, the ring's
//! set-up and wait, socket addresses and options. (The clocks that place the kernel's
//! arrival timestamps on the loop's time line are `engine/arrival.rs`, shared with the
//! epoll loop's HTTP/2.)

use std::io;
use std::net::SocketAddr;
use std::os::fd::RawFd;

use io_uring::{opcode, IoUring};

use super::bufring::BufRing;

/// Why io_uring cannot drive this run's connections here, or `Ok` when it can.
/// `LOADLENS_NO_IO_URING=1` simulates a kernel that refuses the ring.
pub fn probe() -> Result<(), String> {
    if std::env::var_os("LOADLENS_NO_IO_URING").is_some_and(|v| v != "0") {
        return Err("disabled by LOADLENS_NO_IO_URING".into());
    }
    let (ring, _) = build(8, 16).map_err(|e| match e.raw_os_error() {
        Some(libc::EPERM) | Some(libc::EACCES) => {
            "the kernel refuses it (kernel.io_uring_disabled, or a seccomp filter)".to_string()
        }
        Some(libc::ENOSYS) => "this kernel has no io_uring".to_string(),
        _ => format!("cannot create a ring: {e}"),
    })?;
    let mut ops = io_uring::Probe::new();
    ring.submitter()
        .register_probe(&mut ops)
        .map_err(|e| format!("cannot probe its operations: {e}"))?;
    for (code, name) in [
        (opcode::Connect::CODE, "connect"),
        (opcode::Recv::CODE, "recv"),
        (opcode::Send::CODE, "send"),
        (opcode::Close::CODE, "close"),
        (opcode::AsyncCancel::CODE, "cancel"),
    ] {
        if !ops.is_supported(code) {
            return Err(format!("this kernel's io_uring has no {name}"));
        }
    }
    if !kernel_at_least(6, 0) {
        return Err("multishot receive needs Linux 6.0".into());
    }
    BufRing::new(&ring.submitter(), 1, 4096, 0)
        .map(drop)
        .map_err(|e| format!("no provided-buffer rings: {e}"))
}

fn kernel_at_least(major: u32, minor: u32) -> bool {
    let Ok(release) = std::fs::read_to_string("/proc/sys/kernel/osrelease") else {
        return false;
    };
    let mut parts = release.trim().split(['.', '-']);
    let mut next = || {
        parts
            .next()
            .and_then(|p| p.parse::<u32>().ok())
            .unwrap_or(0)
    };
    (next(), next()) >= (major, minor)
}

/// A ring for one thread: completions run in that thread only when it enters the ring
/// (Linux ≥ 6.1), which saves the interrupts of task work; plain where that is refused.
/// `true` with it: then nothing is received between two waits, which the discarding
/// receive relies on (`Uring::discard`).
pub(super) fn build(entries: u32, cq: u32) -> io::Result<(IoUring, bool)> {
    match IoUring::builder()
        .setup_single_issuer()
        .setup_defer_taskrun()
        .setup_submit_all()
        .setup_cqsize(cq)
        .build(entries)
    {
        Ok(ring) => Ok((ring, true)),
        Err(_) => Ok((IoUring::builder().setup_cqsize(cq).build(entries)?, false)),
    }
}

/// `IORING_ENTER_NO_IOWAIT` (Linux 6.15, `include/uapi/linux/io_uring.h`: `1U << 7`): the
/// wait for completions is not accounted as iowait. Without it a thread parked in
/// `io_uring_enter` counts as "waiting for I/O", so an idle client's CPU shows ~100%
/// iowait in `/proc/stat` (and `mpstat`), which reads as a disk problem. Passed only
/// where the ring's features include `IORING_FEAT_NO_IOWAIT` (older kernels reject
/// unknown enter flags with EINVAL). The io-uring crate has the value but not as a
/// public constant.
pub(super) const ENTER_NO_IOWAIT: u32 = 1 << 7;

/// Whether a ring may be entered with `ENTER_NO_IOWAIT`.
/// `LOADLENS_IO_URING_IOWAIT=1` simulates a kernel without it (Linux < 6.15).
pub(super) fn no_iowait(ring: &IoUring) -> bool {
    ring.params().is_feature_no_iowait()
        && std::env::var_os("LOADLENS_IO_URING_IOWAIT").is_none_or(|v| v == "0")
}

#[repr(C)]
pub(super) struct GetEventsArg {
    pub(super) sigmask: u64,
    pub(super) sigmask_sz: u32,
    pub(super) min_wait_usec: u32,
    pub(super) ts: u64,
}

/// Turns a boolean socket option on (best effort: without it a socket still works).
pub(super) fn set_flag(fd: RawFd, level: libc::c_int, name: libc::c_int) {
    let one: libc::c_int = 1;
    // SAFETY: a plain system call on a descriptor we own; `one` outlives it.
    unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
}

/// `addr` as the kernel's socket address, boxed so its place is stable while a connect
/// refers to it.
pub(super) fn sockaddr(addr: SocketAddr) -> (Box<libc::sockaddr_storage>, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain data, valid when zeroed, and large and aligned
    // enough for both address families written into it below.
    let mut storage: Box<libc::sockaddr_storage> = Box::new(unsafe { std::mem::zeroed() });
    let len = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: see above.
            unsafe { std::ptr::write((&mut *storage as *mut libc::sockaddr_storage).cast(), sin) };
            std::mem::size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo().to_be(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: see above.
            unsafe { std::ptr::write((&mut *storage as *mut libc::sockaddr_storage).cast(), sin6) };
            std::mem::size_of::<libc::sockaddr_in6>()
        }
    };
    (storage, len as libc::socklen_t)
}

/// The message of a one-shot receive, with room for the arrival timestamp of its last
/// segment: a discard of a Content-Length body's bytes (`MSG_TRUNC` on TCP: the kernel
/// acknowledges and frees them without copying), or a response head's receive (into a
/// buffer of the ring, at most `HEAD` bytes). Boxed: the kernel holds pointers into it.
pub(super) struct OneShot {
    pub(super) hdr: libc::msghdr,
    iov: libc::iovec,
    control: [u8; super::CONTROL],
}

impl OneShot {
    pub(super) fn new() -> Box<OneShot> {
        // SAFETY: msghdr and iovec are plain data, valid when zeroed.
        let mut d: Box<OneShot> = Box::new(unsafe { std::mem::zeroed() });
        d.hdr.msg_iov = &mut d.iov;
        d.hdr.msg_iovlen = 1;
        d.hdr.msg_control = d.control.as_mut_ptr().cast();
        d.hdr.msg_controllen = super::CONTROL;
        d
    }

    /// At most `len` bytes: no buffer of ours (a discard, which the kernel never writes,
    /// or a receive into a buffer the kernel selects from the ring).
    pub(super) fn set_len(&mut self, len: usize) {
        self.iov.iov_base = std::ptr::null_mut();
        self.iov.iov_len = len;
        self.hdr.msg_controllen = super::CONTROL;
    }

    /// The control messages the last receive left.
    pub(super) fn control(&self) -> &[u8] {
        &self.control[..self.hdr.msg_controllen.min(super::CONTROL)]
    }
}
