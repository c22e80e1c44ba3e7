//! The direct loop's UDP socket (`direct.rs`): connected to the server, read with its
//! own `recvmmsg` (GRO; each message's ECN, destination and the kernel's arrival stamp,
//! SO_TIMESTAMPNS, from its control bytes: quinn-udp's `RecvMeta` has no timestamp)
//! into a shared arena, and written once per wake with one `sendmmsg` carrying every
//! connection's transmits (each with its GSO segment size).
//!
//! DESIGN: measured with `bench/h3-cost` and the system calls per response (perf's
//! syscall tracepoints) against quinn-udp's own `sendmsg` per transmit on an unconnected
//! socket: the kernel's route is looked up once at `connect` instead of per send, no
//! address is passed or copied per datagram, the transmits of all connections a wake
//! produced leave in one call, and a datagram received costs a copy into a 64 KiB arena
//! (`BytesMut::split`) instead of an allocation of its own. A transmit to any other
//! address than the server's (quinn-proto never sends one on a client, but a
//! migration would) and one the batch call refuses go through quinn-udp's `try_send`,
//! with its fallbacks (no GSO after EIO, no ECN after EINVAL).

use std::io;
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_udp::{Transmit, UdpSocketState};

use crate::engine::arrival;

/// Datagrams taken from the socket per receive call (recvmmsg), as quinn-udp batches.
const BATCH: usize = 32;
/// The arena datagrams are copied into: one allocation per this many bytes received
/// (reused in place once quinn has let go of every datagram in it).
const ARENA: usize = 64 * 1024;
/// Control bytes per sent message: IP_TOS (or IPV6_TCLASS) and UDP_SEGMENT, each a
/// `CMSG_SPACE` of at most 16 bytes.
const CONTROL: usize = 64;
/// Control bytes per received message: ECN (16), the destination (IPV6_PKTINFO, 40),
/// the GRO segment size (16) and the arrival time (SCM_TIMESTAMPNS, 32).
const RCONTROL: usize = 128;

/// A datagram received: where from, to which local address, its ECN bits, its bytes.
pub(super) struct Datagram {
    pub(super) from: SocketAddr,
    pub(super) to: Option<IpAddr>,
    pub(super) ecn: Option<quinn_proto::EcnCodepoint>,
    /// When it reached the socket (the kernel's stamp; one per GRO batch).
    pub(super) at: Option<Instant>,
    pub(super) data: BytesMut,
}

/// A transmit waiting for the wake's send: its place in `Udp::out` and how to send it.
struct Queued {
    start: usize,
    len: usize,
    segment: Option<usize>,
    ecn: Option<quinn_proto::EcnCodepoint>,
    to: SocketAddr,
    src_ip: Option<IpAddr>,
}

/// The worker's socket, connected to the server.
pub(super) struct Udp {
    sock: UdpSocket,
    state: UdpSocketState,
    peer: SocketAddr,
    /// Where quinn-proto builds a transmit (`poll_transmit`, `Endpoint::handle`).
    pub(super) buf: Vec<u8>,
    /// The wake's transmits, back to back, and where each one is.
    out: Vec<u8>,
    queued: Vec<Queued>,
    /// `sendmmsg`'s headers, their iovecs and control bytes, rebuilt per call.
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    ctrl: Vec<[u64; CONTROL / 8]>,
    /// The receive buffers (one GRO batch each), `recvmmsg`'s headers, their iovecs
    /// and control bytes.
    rbuf: Vec<u8>,
    stride: usize,
    rhdrs: Vec<libc::mmsghdr>,
    riovs: Vec<libc::iovec>,
    rctrl: Vec<[u64; RCONTROL / 8]>,
    arena: BytesMut,
    /// ECN bits set per datagram (IP_TOS/IPV6_TCLASS) until the kernel refused them.
    tos: bool,
    /// Whether the kernel was asked to stamp arrivals (SO_TIMESTAMPNS).
    pub(super) stamped: bool,
}

impl Udp {
    /// A non-blocking socket on the wildcard address of `peer`'s family, connected to it.
    pub(super) fn connect(peer: SocketAddr) -> io::Result<Udp> {
        let bind: SocketAddr = match peer {
            SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let sock = UdpSocket::bind(bind)?;
        let state = UdpSocketState::new((&sock).into())?;
        sock.connect(peer)?;
        sock.set_nonblocking(true)?;
        // Arrival times for the loop's hold (`direct.rs`); without them, none is held.
        let stamped = arrival::enable(sock.as_raw_fd()).is_ok();
        let stride = 1500 * state.gro_segments().max(1);
        Ok(Udp {
            buf: Vec::with_capacity(1500 * state.max_gso_segments()),
            sock,
            state,
            peer,
            out: Vec::new(),
            queued: Vec::new(),
            hdrs: Vec::new(),
            iovs: Vec::new(),
            ctrl: Vec::new(),
            rbuf: vec![0u8; stride * BATCH],
            stride,
            rhdrs: Vec::with_capacity(BATCH),
            riovs: Vec::with_capacity(BATCH),
            rctrl: vec![[0; RCONTROL / 8]; BATCH],
            stamped,
            arena: BytesMut::new(),
            tos: true,
        })
    }

    /// `ppoll` on the socket until `events` (POLLIN, POLLOUT) or `wait` has passed.
    pub(super) fn wait(&self, events: libc::c_short, wait: Duration) {
        let ts = libc::timespec {
            tv_sec: wait.as_secs() as libc::time_t,
            tv_nsec: wait.subsec_nanos() as libc::c_long,
        };
        let mut pfd = libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events,
            revents: 0,
        };
        // SAFETY: one valid pollfd, a valid timespec, no signal mask.
        unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
    }

    /// Whether the path may fragment (quinn-proto's endpoint wants to know).
    pub(super) fn may_fragment(&self) -> bool {
        self.state.may_fragment()
    }

    /// Datagrams per transmit quinn-proto may build (GSO; 1 once the kernel refused it).
    pub(super) fn segments(&self) -> usize {
        self.state.max_gso_segments()
    }

    /// Every datagram waiting (GRO batches split into their datagrams), into `got`,
    /// each with the kernel's arrival time of its batch.
    pub(super) fn receive(&mut self, got: &mut Vec<Datagram>) {
        loop {
            let n = match self.recvmmsg() {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return,
            };
            let clocks = (n > 0).then(arrival::clocks);
            for i in 0..n {
                let len = self.rhdrs[i].msg_len as usize;
                #[allow(clippy::unnecessary_cast)] // msg_controllen is u32 on some targets
                let clen = (self.rhdrs[i].msg_hdr.msg_controllen as usize).min(RCONTROL);
                // SAFETY: the kernel wrote `clen` bytes of the message's control buffer
                // (zeroed before the call).
                let bytes = unsafe {
                    std::slice::from_raw_parts(self.rctrl[i].as_ptr().cast::<u8>(), clen)
                };
                let m = Control::parse(bytes);
                let at = m.ns.zip(clocks).map(|(ns, c)| arrival::on_clock(c, ns));
                let buf = &self.rbuf[i * self.stride..i * self.stride + len];
                for seg in buf.chunks(m.stride.unwrap_or(len).max(1)) {
                    if self.arena.capacity() < seg.len() {
                        self.arena.reserve(ARENA.max(seg.len()));
                    }
                    self.arena.extend_from_slice(seg);
                    got.push(Datagram {
                        from: self.peer,
                        to: m.dst_ip,
                        ecn: m.ecn,
                        at,
                        data: self.arena.split(),
                    });
                }
            }
            // Fewer than a batch: the queue is empty (no call just to hear EAGAIN).
            if n < BATCH {
                return;
            }
        }
    }

    /// One `recvmmsg` on the connected socket (no source address: it is the server's)
    /// into `rbuf`'s strides, with each message's control bytes: how many it took.
    fn recvmmsg(&mut self) -> io::Result<usize> {
        self.riovs.clear();
        self.rhdrs.clear();
        for chunk in self.rbuf.chunks_mut(self.stride).take(BATCH) {
            self.riovs.push(libc::iovec {
                iov_base: chunk.as_mut_ptr().cast(),
                iov_len: chunk.len(),
            });
        }
        for (iov, ctrl) in self.riovs.iter_mut().zip(self.rctrl.iter_mut()) {
            *ctrl = [0; RCONTROL / 8];
            // SAFETY: a zeroed msghdr is valid (no name, no iovec, no control yet).
            let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
            h.msg_iov = iov;
            h.msg_iovlen = 1;
            h.msg_control = ctrl.as_mut_ptr().cast();
            h.msg_controllen = RCONTROL as _;
            self.rhdrs.push(libc::mmsghdr {
                msg_hdr: h,
                msg_len: 0,
            });
        }
        // SAFETY: each header's iovec points into `rbuf` and its control at its own
        // RCONTROL bytes, all alive and unmoved during the call.
        let n = unsafe {
            libc::recvmmsg(
                self.sock.as_raw_fd(),
                self.rhdrs.as_mut_ptr(),
                self.rhdrs.len() as libc::c_uint,
                0,
                std::ptr::null_mut(),
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }

    /// The transmit quinn-proto just built in `buf`, kept for the wake's send.
    pub(super) fn queue(&mut self, t: &quinn_proto::Transmit) {
        self.queued.push(Queued {
            start: self.out.len(),
            len: t.size,
            segment: t.segment_size.filter(|&s| s < t.size),
            ecn: t.ecn,
            to: t.destination,
            src_ip: t.src_ip,
        });
        self.out.extend_from_slice(&self.buf[..t.size]);
        self.buf.clear();
    }

    /// Every packet connection `q` has to send now, queued.
    pub(super) fn flush(&mut self, q: &mut quinn_proto::Connection, now: Instant) {
        let segments = self.segments();
        while let Some(t) = q.poll_transmit(now, segments, &mut self.buf) {
            self.queue(&t);
        }
    }

    /// Every queued transmit sent: those to the server in `sendmmsg` calls, any other
    /// through quinn-udp. One the socket cannot take now is lost to QUIC's recovery,
    /// as on a full path.
    pub(super) fn send(&mut self) {
        self.send_queued();
        self.queued.clear();
        self.out.clear();
    }

    /// Every queued transmit sent, waiting (until `by`) while the socket's buffer is
    /// full: the run's last packets, its connections' closes, which no recovery resends.
    pub(super) fn send_by(&mut self, by: Instant) {
        loop {
            let sent = self.send_queued();
            self.queued.drain(..sent);
            let left = by.saturating_duration_since(Instant::now());
            if self.queued.is_empty() || left.is_zero() {
                break;
            }
            self.wait(libc::POLLOUT, left);
        }
        self.queued.clear();
        self.out.clear();
    }

    /// The queued transmits sent until the socket would block: how many left.
    fn send_queued(&mut self) -> usize {
        let mut k = 0;
        while k < self.queued.len() {
            let run = self.queued[k..]
                .iter()
                .take_while(|q| q.to == self.peer)
                .count();
            if run == 0 {
                self.send_one(k);
                k += 1;
                continue;
            }
            match self.sendmmsg(k, run) {
                Ok(n) => k += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                // Refused (GSO or ECN the path does not take): quinn-udp's fallbacks.
                Err(e) => {
                    if e.raw_os_error() == Some(libc::EINVAL) {
                        self.tos = false;
                    }
                    self.send_one(k);
                    k += 1;
                }
            }
        }
        k
    }

    /// Queued transmit `k` through quinn-udp's `sendmsg`, with its address.
    fn send_one(&mut self, k: usize) {
        let q = &self.queued[k];
        let _ = self.state.try_send(
            (&self.sock).into(),
            &Transmit {
                destination: q.to,
                ecn: q
                    .ecn
                    .and_then(|e| quinn_udp::EcnCodepoint::from_bits(e as u8)),
                contents: &self.out[q.start..q.start + q.len],
                segment_size: q.segment,
                src_ip: q.src_ip,
            },
        );
    }

    /// Queued transmits `k..k + count` (all to the server) in one `sendmmsg` on the
    /// connected socket: no address, the source the socket's own; how many were sent.
    fn sendmmsg(&mut self, k: usize, count: usize) -> io::Result<usize> {
        let v4 = self.peer.is_ipv4();
        let tos = self.tos;
        self.iovs.clear();
        self.ctrl.clear();
        self.hdrs.clear();
        for q in &self.queued[k..k + count] {
            self.iovs.push(libc::iovec {
                // SAFETY: `out` is not touched until the call below has returned.
                iov_base: self.out[q.start..].as_ptr() as *mut libc::c_void,
                iov_len: q.len,
            });
            self.ctrl.push([0; CONTROL / 8]);
        }
        for (i, q) in self.queued[k..k + count].iter().enumerate() {
            // SAFETY: a zeroed msghdr is valid (no name, no iovec, no control yet).
            let mut h: libc::msghdr = unsafe { std::mem::zeroed() };
            h.msg_iov = &mut self.iovs[i];
            h.msg_iovlen = 1;
            h.msg_control = self.ctrl[i].as_mut_ptr().cast();
            h.msg_controllen = CONTROL as _;
            let mut used = 0;
            // SAFETY: `h` points at CONTROL bytes of 8-aligned control buffer, room for
            // the two messages written (each CMSG_SPACE(4) = 16 bytes).
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&h);
                if tos {
                    let ecn = q.ecn.map_or(0, |e| e as libc::c_int);
                    let (level, kind) = if v4 {
                        (libc::IPPROTO_IP, libc::IP_TOS)
                    } else {
                        (libc::IPPROTO_IPV6, libc::IPV6_TCLASS)
                    };
                    put_cmsg(c, level, kind, ecn);
                    used += libc::CMSG_SPACE(4) as usize;
                    c = libc::CMSG_NXTHDR(&h, c);
                }
                if let Some(s) = q.segment {
                    put_cmsg(c, libc::SOL_UDP, libc::UDP_SEGMENT, s as u16);
                    used += libc::CMSG_SPACE(2) as usize;
                }
            }
            h.msg_controllen = used as _;
            if used == 0 {
                h.msg_control = std::ptr::null_mut();
            }
            self.hdrs.push(libc::mmsghdr {
                msg_hdr: h,
                msg_len: 0,
            });
        }
        // SAFETY: `count` headers, each with one iovec into `out` and its control
        // bytes, all alive and unmoved during the call.
        let n = unsafe {
            libc::sendmmsg(
                self.sock.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                count as libc::c_uint,
                0,
            )
        };
        if n < 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(n as usize)
    }
}

/// What a received message's control bytes say.
#[derive(Debug, Default, PartialEq)]
struct Control {
    ecn: Option<quinn_proto::EcnCodepoint>,
    dst_ip: Option<IpAddr>,
    /// The GRO segment size, when the buffer holds several datagrams.
    stride: Option<usize>,
    /// The arrival time, ns since the epoch.
    ns: Option<i128>,
}

impl Control {
    /// The control messages in `control`, as `recvmsg` left them.
    fn parse(control: &[u8]) -> Control {
        let mut out = Control {
            ns: arrival::arrival_ns(control),
            ..Control::default()
        };
        for (level, kind, data) in arrival::cmsgs(control) {
            let int = || {
                data.get(..4)
                    .map(|b| libc::c_int::from_ne_bytes(b.try_into().expect("4 bytes")))
            };
            match (level, kind) {
                (libc::IPPROTO_IP, libc::IP_TOS | libc::IP_RECVTOS) => {
                    out.ecn = data
                        .first()
                        .and_then(|&b| quinn_proto::EcnCodepoint::from_bits(b));
                }
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                    out.ecn = int().and_then(|t| quinn_proto::EcnCodepoint::from_bits(t as u8));
                }
                (libc::IPPROTO_IP, libc::IP_PKTINFO) if data.len() >= 12 => {
                    // in_pktinfo: ifindex, local address, destination address.
                    let a: [u8; 4] = data[8..12].try_into().expect("4 bytes");
                    out.dst_ip = Some(IpAddr::from(a));
                }
                (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO) if data.len() >= 16 => {
                    let a: [u8; 16] = data[..16].try_into().expect("16 bytes");
                    out.dst_ip = Some(IpAddr::from(a));
                }
                (libc::SOL_UDP, libc::UDP_GRO) => {
                    out.stride = int().filter(|&s| s > 0).map(|s| s as usize);
                }
                _ => {}
            }
        }
        out
    }
}

/// One control message of `value`'s size at `c`.
///
/// SAFETY: `c` points at a control header inside a buffer with room for
/// `CMSG_SPACE(size_of::<T>())` bytes.
unsafe fn put_cmsg<T: Copy>(
    c: *mut libc::cmsghdr,
    level: libc::c_int,
    kind: libc::c_int,
    value: T,
) {
    (*c).cmsg_level = level;
    (*c).cmsg_type = kind;
    (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<T>() as u32) as _;
    std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<T>(), value);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Control messages written as the kernel writes them, back to back.
    fn control(msgs: &[(libc::c_int, libc::c_int, &[u8])]) -> Vec<u8> {
        let mut out = Vec::new();
        for &(level, kind, data) in msgs {
            let mut h: libc::cmsghdr = unsafe { std::mem::zeroed() };
            h.cmsg_level = level;
            h.cmsg_type = kind;
            h.cmsg_len = (std::mem::size_of::<libc::cmsghdr>() + data.len()) as _;
            // SAFETY: a plain struct read as its bytes.
            let bytes = unsafe {
                std::slice::from_raw_parts(
                    (&h as *const libc::cmsghdr).cast::<u8>(),
                    std::mem::size_of::<libc::cmsghdr>(),
                )
            };
            out.extend_from_slice(bytes);
            out.extend_from_slice(data);
            out.resize((out.len() + 7) & !7, 0);
        }
        out
    }

    #[test]
    fn control_messages_give_ecn_destination_gro_size_and_arrival() {
        let mut ts = Vec::new();
        ts.extend_from_slice(&(1_700_000_000 as libc::time_t).to_ne_bytes());
        ts.extend_from_slice(&(250_000 as libc::c_long).to_ne_bytes());
        let mut pktinfo = vec![0u8; 12];
        pktinfo[..4].copy_from_slice(&7i32.to_ne_bytes());
        pktinfo[4..8].copy_from_slice(&[10, 0, 0, 9]);
        pktinfo[8..].copy_from_slice(&[127, 0, 0, 1]);
        let c = control(&[
            (libc::IPPROTO_IP, libc::IP_TOS, &[0b10]),
            (libc::IPPROTO_IP, libc::IP_PKTINFO, &pktinfo),
            (libc::SOL_UDP, libc::UDP_GRO, &1350i32.to_ne_bytes()),
            (libc::SOL_SOCKET, libc::SCM_TIMESTAMPNS, &ts),
        ]);
        assert_eq!(
            Control::parse(&c),
            Control {
                ecn: quinn_proto::EcnCodepoint::from_bits(0b10),
                dst_ip: Some(IpAddr::from([127, 0, 0, 1])),
                stride: Some(1350),
                ns: Some(1_700_000_000_000_250_000),
            }
        );
        // IPv6: the traffic class an int, the destination first in in6_pktinfo.
        let mut pk6 = vec![0u8; 20];
        pk6[15] = 1;
        let c = control(&[
            (libc::IPPROTO_IPV6, libc::IPV6_TCLASS, &3i32.to_ne_bytes()),
            (libc::IPPROTO_IPV6, libc::IPV6_PKTINFO, &pk6),
        ]);
        let m = Control::parse(&c);
        assert_eq!(m.ecn, quinn_proto::EcnCodepoint::from_bits(3));
        assert_eq!(m.dst_ip, Some(IpAddr::from(std::net::Ipv6Addr::LOCALHOST)));
        assert_eq!((m.stride, m.ns), (None, None));
        // Nothing, or a truncated header: nothing read, no panic.
        assert_eq!(Control::parse(&[]), Control::default());
        assert_eq!(Control::parse(&c[..10]), Control::default());
    }

    #[test]
    fn datagrams_from_the_server_come_with_their_arrival_time() {
        let server = UdpSocket::bind("127.0.0.1:0").unwrap();
        let mut udp = Udp::connect(server.local_addr().unwrap()).unwrap();
        assert!(udp.stamped);
        let client = udp.sock.local_addr().unwrap();
        // The first socket to ask for stamps turns them on through a work queue: until
        // it has run, datagrams come unstamped (arrival.rs). Wait for a stamped one.
        let mut got = Vec::new();
        let stamped = (0..200).any(|_| {
            server.send_to(b"p", client).unwrap();
            udp.wait(libc::POLLIN, Duration::from_secs(5));
            got.clear();
            udp.receive(&mut got);
            got.iter().any(|d| d.at.is_some()) || {
                std::thread::sleep(Duration::from_millis(10));
                false
            }
        });
        assert!(stamped, "the kernel never stamped a datagram");
        let before = Instant::now();
        for m in [&b"one"[..], b"two", b"three"] {
            server.send_to(m, client).unwrap();
        }
        udp.wait(libc::POLLIN, Duration::from_secs(5));
        let seen = Instant::now();
        std::thread::sleep(Duration::from_millis(20));
        got.clear();
        // All three are queued by now (loopback delivers within the send).
        udp.receive(&mut got);
        let data: Vec<&[u8]> = got.iter().map(|d| &d.data[..]).collect();
        assert_eq!(data, [&b"one"[..], b"two", b"three"]);
        for d in &got {
            let at = d.at.expect("stamped");
            assert!(at >= before - Duration::from_millis(1), "{:?}", before - at);
            assert!(at <= seen + Duration::from_millis(1), "{:?}", at - seen);
            assert_eq!(d.from, server.local_addr().unwrap());
        }
    }
}
