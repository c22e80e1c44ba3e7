//! The kernel's arrival timestamps (`SO_TIMESTAMPNS`, socket(7)) on the loop's
//! monotonic clock: the time a response's last bytes reached the socket, however long
//! the loop took to get to them. The io_uring loop gathers completions into batches and
//! the epoll loop's HTTP/2 lets responses gather between waits (`worker.rs`, `HOLD`);
//! both end latency, time to first byte and body time here, not when they looked.
//!
//! For TCP the timestamp a `recvmsg` returns is that of the last segment it read
//! (`tcp_recvmsg` keeps the latest), so bytes that arrived earlier in the same read are
//! dated as late as the last.

use std::io;
use std::os::fd::RawFd;
use std::time::{Duration, Instant};

/// The monotonic and the wall clock (ns since the epoch), read together.
pub(super) fn clocks() -> (Instant, i128) {
    let wall = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i128);
    (Instant::now(), wall)
}

/// The control messages `recvmsg` left in `control`: (level, type, data), walked as
/// `CMSG_NXTHDR` does (each padded to 8 bytes); a truncated one ends the walk.
pub(super) fn cmsgs(control: &[u8]) -> impl Iterator<Item = (i32, i32, &[u8])> {
    const HDR: usize = std::mem::size_of::<libc::cmsghdr>();
    let mut rest = control;
    std::iter::from_fn(move || {
        if rest.len() < HDR {
            return None;
        }
        // SAFETY: at least one header's bytes; read unaligned.
        let h = unsafe { rest.as_ptr().cast::<libc::cmsghdr>().read_unaligned() };
        #[allow(clippy::unnecessary_cast)] // cmsg_len is u32 on some targets
        let len = (h.cmsg_len as usize).min(rest.len());
        if len < HDR {
            return None;
        }
        let data = &rest[HDR..len];
        rest = rest.get((len + 7) & !7..).unwrap_or(&[]);
        Some((h.cmsg_level, h.cmsg_type, data))
    })
}

/// The arrival time in an `SCM_TIMESTAMPNS` control message, in ns since the epoch.
pub(super) fn arrival_ns(control: &[u8]) -> Option<i128> {
    cmsgs(control).find_map(|(level, kind, data)| {
        let stamp = level == libc::SOL_SOCKET && kind == libc::SCM_TIMESTAMPNS;
        if !stamp || data.len() < std::mem::size_of::<libc::timespec>() {
            return None;
        }
        // SAFETY: a whole timespec's bytes, read unaligned.
        let ts = unsafe { data.as_ptr().cast::<libc::timespec>().read_unaligned() };
        Some(ts.tv_sec as i128 * 1_000_000_000 + ts.tv_nsec as i128)
    })
}

/// A kernel arrival time (ns since the epoch) on the monotonic clock, given both clocks
/// read together (`clocks`); within ±10 s of them.
pub(super) fn on_clock((mono, wall): (Instant, i128), ns: i128) -> Instant {
    let ago = (wall - ns).clamp(-10_000_000_000, 10_000_000_000);
    if ago >= 0 {
        mono.checked_sub(Duration::from_nanos(ago as u64))
            .unwrap_or(mono)
    } else {
        mono + Duration::from_nanos(ago.unsigned_abs() as u64)
    }
}

/// Asks the kernel to timestamp the bytes arriving on socket `fd`.
pub(super) fn enable(fd: RawFd) -> io::Result<()> {
    let one: libc::c_int = 1;
    // SAFETY: a plain system call on a descriptor the caller owns; `one` outlives it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// `read(2)` on socket `fd` through `recvmsg`, with the arrival time of the last bytes
/// read when the socket timestamps them (`enable`).
pub(super) fn recv(fd: RawFd, buf: &mut [u8]) -> io::Result<(usize, Option<Instant>)> {
    // Room for one SCM_TIMESTAMPNS message, aligned as a cmsghdr must be.
    let mut control = [0u64; 8];
    let mut iov = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    // SAFETY: msghdr is plain data, valid when zeroed; the pointers set below outlive
    // the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = std::mem::size_of_val(&control) as _;
    // SAFETY: `buf` and `control` are valid for the lengths given.
    let n = unsafe { libc::recvmsg(fd, &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    #[allow(clippy::unnecessary_cast)] // msg_controllen is u32 on some targets
    let len = (msg.msg_controllen as usize).min(std::mem::size_of_val(&control));
    // SAFETY: the first `len` bytes of `control` are initialised (it was zeroed).
    let bytes = unsafe { std::slice::from_raw_parts(control.as_ptr().cast::<u8>(), len) };
    let at = arrival_ns(bytes).map(|ns| on_clock(clocks(), ns));
    Ok((n as usize, at))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::fd::AsRawFd;

    /// Waits until `fd` has bytes to read (at most 5 s).
    fn readable(fd: RawFd) {
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        let n = unsafe { libc::poll(&mut p, 1, 5000) };
        assert_eq!(n, 1, "nothing arrived in 5 s");
    }

    #[test]
    fn arrival_times_fall_between_the_send_and_the_read() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let mut a = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        let fd = b.as_raw_fd();
        enable(fd).unwrap();
        // The first socket of the machine to ask for timestamps turns them on through a
        // work queue (the kernel's `net_enable_timestamp`): until it has run, segments
        // come unstamped. Wait for the first stamped one (at most 200 probes).
        let mut buf = [0u8; 16];
        let stamped = (0..200).any(|_| {
            a.write_all(b"p").unwrap();
            readable(fd);
            let (n, at) = recv(fd, &mut buf).unwrap();
            assert_eq!(&buf[..n], b"p");
            at.is_some() || {
                std::thread::sleep(Duration::from_millis(10));
                false
            }
        });
        assert!(stamped, "the kernel never timestamped a segment");
        let before = Instant::now();
        a.write_all(b"hello").unwrap();
        readable(fd);
        // Seen readable: the bytes had arrived by then. Read them well after.
        let seen = Instant::now();
        std::thread::sleep(Duration::from_millis(20));
        let (n, at) = recv(fd, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"hello");
        let at = at.expect("timestamped");
        assert!(at >= before - Duration::from_millis(1), "{:?}", before - at);
        assert!(
            at <= seen + Duration::from_millis(1),
            "{:?} after it was seen",
            at - seen
        );
    }

    #[test]
    fn on_clock_places_past_and_future_times() {
        let mono = Instant::now();
        let c = (mono, 5_000_000_000i128);
        assert_eq!(on_clock(c, 4_000_000_000), mono - Duration::from_secs(1));
        assert_eq!(
            on_clock(c, 5_000_500_000),
            mono + Duration::from_micros(500)
        );
    }
}
