//! The direct loop's UDP socket (`direct.rs`): connected to the server, read with
//! quinn-udp (recvmmsg, GRO) into a shared arena, and written once per wake with one
//! `sendmmsg` carrying every connection's transmits (each with its GSO segment size).
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

use std::io::{self, IoSliceMut};
use std::net::{IpAddr, SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use bytes::BytesMut;
use quinn_udp::{RecvMeta, Transmit, UdpSocketState};

/// Datagrams taken from the socket per receive call (recvmmsg), as quinn-udp batches.
const BATCH: usize = 32;
/// The arena datagrams are copied into: one allocation per this many bytes received
/// (reused in place once quinn has let go of every datagram in it).
const ARENA: usize = 64 * 1024;
/// Control bytes per sent message: IP_TOS (or IPV6_TCLASS) and UDP_SEGMENT, each a
/// `CMSG_SPACE` of at most 16 bytes.
const CONTROL: usize = 64;

/// A datagram received: where from, to which local address, its ECN bits, its bytes.
pub(super) struct Datagram {
    pub(super) from: SocketAddr,
    pub(super) to: Option<IpAddr>,
    pub(super) ecn: Option<quinn_proto::EcnCodepoint>,
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
    /// The receive buffers (one GRO batch each) and their datagrams' metadata.
    rbuf: Vec<u8>,
    stride: usize,
    meta: [RecvMeta; BATCH],
    arena: BytesMut,
    /// ECN bits set per datagram (IP_TOS/IPV6_TCLASS) until the kernel refused them.
    tos: bool,
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
            meta: [RecvMeta::default(); BATCH],
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

    /// Every datagram waiting (GRO batches split into their datagrams), into `got`.
    pub(super) fn receive(&mut self, got: &mut Vec<Datagram>) {
        loop {
            let mut chunks = self.rbuf.chunks_mut(self.stride);
            let mut bufs: [IoSliceMut; BATCH] =
                std::array::from_fn(|_| IoSliceMut::new(chunks.next().expect("BATCH chunks")));
            let Ok(n) = self
                .state
                .recv((&self.sock).into(), &mut bufs, &mut self.meta)
            else {
                return;
            };
            for (m, buf) in self.meta[..n].iter().zip(bufs.iter()) {
                let ecn = m
                    .ecn
                    .and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8));
                for seg in buf[..m.len].chunks(m.stride.max(1)) {
                    if self.arena.capacity() < seg.len() {
                        self.arena.reserve(ARENA.max(seg.len()));
                    }
                    self.arena.extend_from_slice(seg);
                    got.push(Datagram {
                        from: m.addr,
                        to: m.dst_ip,
                        ecn,
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
