//! Listening sockets from netlink sock_diag (sock_diag(7)): for a TCP listener INET_DIAG
//! reports the accept queue now (`idiag_rqueue`) and its limit, the effective backlog
//! (`idiag_wqueue` = min(listen() backlog, net.core.somaxconn)); for a unix listener
//! (php-fpm's socket) UNIX_DIAG_RQLEN gives the same pair. `ss -ltn` shows these as
//! Recv-Q and Send-Q.
//!
//! A netlink socket answers for the network namespace it was created in: to watch a
//! server in another namespace (the lab), the sampler thread first joins that namespace
//! with [`enter_netns_of`] (setns(2), needs CAP_SYS_ADMIN).

use std::io;
use std::net::IpAddr;

use netlink_packet_core::{
    NetlinkHeader, NetlinkMessage, NetlinkPayload, NLM_F_DUMP, NLM_F_REQUEST,
};
use netlink_packet_sock_diag::{
    constants::{AF_INET, AF_INET6, IPPROTO_TCP, IPPROTO_UDP},
    inet::{self, ExtensionFlags, InetRequest, SocketId, StateFlags},
    unix::{self, ShowFlags, UnixRequest},
    SockDiagMessage,
};
use netlink_sys::{protocols::NETLINK_SOCK_DIAG, Socket, SocketAddr};

use crate::run::Listener;

/// One TCP connection's buffers and send-time chronograph (`ss -tim`: `skmem tb`,
/// `snd_wnd`, `rtt`, `busy`, `rwnd_limited`, `sndbuf_limited`).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ConnStats {
    /// The socket's identity while it lives (`idiag_cookie`).
    pub cookie: u64,
    /// `sk_sndbuf`: what the socket may hold unsent or unacknowledged, bytes.
    pub send_buffer: u32,
    /// The peer's advertised receive window, bytes (0 on kernels before 6.2).
    pub peer_window: u32,
    /// Smoothed round-trip time, µs.
    pub rtt_us: u32,
    /// Time with data to send, µs: of it, limited by the peer's receive window, and by
    /// the socket's own send buffer.
    pub busy_us: u64,
    pub rwnd_limited_us: u64,
    pub sndbuf_limited_us: u64,
}

impl ConnStats {
    /// Reads the fields of `struct tcp_info` (linux/tcp.h) at their fixed offsets; a
    /// shorter struct from an older kernel leaves the fields it lacks at 0.
    fn read_tcp_info(&mut self, raw: &[u8]) {
        let u32_at = |off: usize| {
            raw.get(off..off + 4)
                .map_or(0, |b| u32::from_ne_bytes(b.try_into().unwrap()))
        };
        let u64_at = |off: usize| {
            raw.get(off..off + 8)
                .map_or(0, |b| u64::from_ne_bytes(b.try_into().unwrap()))
        };
        self.rtt_us = u32_at(TCPI_RTT);
        self.busy_us = u64_at(TCPI_BUSY_TIME);
        self.rwnd_limited_us = u64_at(TCPI_RWND_LIMITED);
        self.sndbuf_limited_us = u64_at(TCPI_SNDBUF_LIMITED);
        self.peer_window = u32_at(TCPI_SND_WND);
    }
}

/// One UDP socket's queues and drops (`ss -uamn`: Recv-Q, Send-Q, `skmem:(r…,rb…,t…,tb…,…,d…)`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct UdpSock {
    pub addr: String,
    pub port: u16,
    pub inode: u64,
    /// Bytes waiting to be read (`sk_rmem_alloc`) and the receive buffer (`sk_rcvbuf`).
    pub receive_queue: u32,
    pub rcvbuf: u32,
    /// Bytes waiting to be sent (`sk_wmem_alloc`) and the send buffer (`sk_sndbuf`).
    pub send_queue: u32,
    pub sndbuf: u32,
    /// Datagrams dropped since the socket was made (`sk_drops`): a full receive buffer
    /// above all.
    pub drops: u32,
}

/// Offsets in `struct tcp_info`: tcpi_rtt, tcpi_busy_time, tcpi_rwnd_limited,
/// tcpi_sndbuf_limited (Linux 4.10), tcpi_snd_wnd (6.2).
const TCPI_RTT: usize = 68;
const TCPI_BUSY_TIME: usize = 168;
const TCPI_RWND_LIMITED: usize = 176;
const TCPI_SNDBUF_LIMITED: usize = 184;
const TCPI_SND_WND: usize = 228;

/// A sock_diag netlink socket bound to one network namespace.
pub struct Diag {
    socket: Socket,
    buf: Vec<u8>,
}

impl Diag {
    /// A socket for the calling thread's network namespace.
    pub fn open() -> io::Result<Diag> {
        Ok(Diag {
            socket: new_socket()?,
            buf: vec![0; 64 * 1024],
        })
    }

    /// TCP listeners (IPv4 and IPv6), optionally only those on `port`.
    pub fn tcp_listeners(&mut self, port: Option<u16>) -> io::Result<Vec<Listener>> {
        let mut out = Vec::new();
        for family in [AF_INET, AF_INET6] {
            let req = tcp_dump(family, StateFlags::LISTEN, ExtensionFlags::empty());
            self.dump(req, |m| {
                if let SockDiagMessage::InetResponse(r) = m {
                    let id = &r.header.socket_id;
                    if port.is_some_and(|p| p != id.source_port) {
                        return;
                    }
                    out.push(Listener {
                        addr: match id.source_address {
                            IpAddr::V6(a) => format!("[{a}]:{}", id.source_port),
                            a => format!("{a}:{}", id.source_port),
                        },
                        port: id.source_port,
                        inode: r.header.inode as u64,
                        queue: r.header.recv_queue,
                        backlog: r.header.send_queue,
                        // The kernel adds it to every IPv6 socket's answer.
                        v6only: r
                            .nlas
                            .iter()
                            .any(|n| matches!(n, inet::nlas::Nla::SkV6Only(true))),
                    });
                }
            })?;
        }
        Ok(out)
    }

    /// The established TCP connections on local `port` (the server's side of its
    /// clients' connections), with their buffers and send-time chronograph. Each
    /// family's dump walks the kernel's whole established hash, so only the families of
    /// the port's `listeners` are dumped (both when none is known).
    pub fn tcp_connections(
        &mut self,
        port: u16,
        listeners: &[Listener],
    ) -> io::Result<Vec<ConnStats>> {
        let mut out = Vec::new();
        for family in families_accepting(listeners) {
            let req = tcp_dump(
                family,
                StateFlags::ESTABLISHED,
                ExtensionFlags::INFO | ExtensionFlags::SKMEMINFO,
            );
            self.dump(req, |m| {
                let SockDiagMessage::InetResponse(r) = m else {
                    return;
                };
                if r.header.socket_id.source_port != port {
                    return;
                }
                let mut c = ConnStats {
                    cookie: u64::from_ne_bytes(r.header.socket_id.cookie),
                    ..ConnStats::default()
                };
                for nla in &r.nlas {
                    match nla {
                        inet::nlas::Nla::MemInfo(m) => c.send_buffer = m.send_queue_max,
                        inet::nlas::Nla::TcpInfo(raw) => c.read_tcp_info(raw),
                        _ => {}
                    }
                }
                out.push(c);
            })?;
        }
        Ok(out)
    }

    /// How many established TCP connections have local `port` (a count only: no
    /// socket's details are asked for). The connections on an upstream's port are the
    /// requests the front has in it (without upstream keep-alive, one per request).
    pub fn tcp_established_count(&mut self, port: u16, listeners: &[Listener]) -> io::Result<u32> {
        let mut n = 0;
        for family in families_accepting(listeners) {
            let req = tcp_dump(family, StateFlags::ESTABLISHED, ExtensionFlags::empty());
            self.dump(req, |m| {
                if let SockDiagMessage::InetResponse(r) = m {
                    if r.header.socket_id.source_port == port {
                        n += 1;
                    }
                }
            })?;
        }
        Ok(n)
    }

    /// Every UDP socket (IPv4 and IPv6, bound or connected) with its memory: a QUIC
    /// server's listener and the sockets it connected per client. UDP's hash is small
    /// (a socket per port), so the dump is cheap.
    pub fn udp_sockets(&mut self) -> io::Result<Vec<UdpSock>> {
        let mut out = Vec::new();
        for family in [AF_INET, AF_INET6] {
            let req = SockDiagMessage::InetRequest(InetRequest {
                family,
                protocol: IPPROTO_UDP,
                extensions: ExtensionFlags::SKMEMINFO,
                states: StateFlags::all(),
                socket_id: if family == AF_INET {
                    SocketId::new_v4()
                } else {
                    SocketId::new_v6()
                },
            });
            self.dump(req, |m| {
                let SockDiagMessage::InetResponse(r) = m else {
                    return;
                };
                let id = &r.header.socket_id;
                let mut u = UdpSock {
                    addr: match id.source_address {
                        IpAddr::V6(a) => format!("[{a}]:{}", id.source_port),
                        a => format!("{a}:{}", id.source_port),
                    },
                    port: id.source_port,
                    inode: r.header.inode as u64,
                    ..UdpSock::default()
                };
                for nla in &r.nlas {
                    if let inet::nlas::Nla::MemInfo(mi) = nla {
                        u.receive_queue = mi.receive_queue;
                        u.rcvbuf = mi.receive_queue_max;
                        u.send_queue = mi.send_queue;
                        u.sndbuf = mi.send_queue_max;
                        u.drops = mi.drops;
                    }
                }
                out.push(u);
            })?;
        }
        Ok(out)
    }

    /// The established TCP connections (IPv4 and IPv6) of the sockets `inodes`: each
    /// one's local and remote address. Each family's dump walks the kernel's whole
    /// established hash: the watch asks this once a second at most.
    pub fn tcp_connections_of(
        &mut self,
        inodes: &std::collections::BTreeSet<u64>,
    ) -> io::Result<Vec<(std::net::SocketAddr, std::net::SocketAddr)>> {
        let mut out = Vec::new();
        for family in [AF_INET, AF_INET6] {
            let req = tcp_dump(family, StateFlags::ESTABLISHED, ExtensionFlags::empty());
            self.dump(req, |m| {
                let SockDiagMessage::InetResponse(r) = m else {
                    return;
                };
                if !inodes.contains(&(r.header.inode as u64)) {
                    return;
                }
                let id = &r.header.socket_id;
                out.push((
                    std::net::SocketAddr::new(id.source_address, id.source_port),
                    std::net::SocketAddr::new(id.destination_address, id.destination_port),
                ));
            })?;
        }
        Ok(out)
    }

    /// Every connected unix socket: its inode, its peer's inode and its name (an
    /// accepted socket carries its listener's path: the end of a connection that a
    /// server accepted names the server's socket).
    pub fn unix_connected(&mut self) -> io::Result<Vec<(u64, u64, String)>> {
        let mut out = Vec::new();
        let req = SockDiagMessage::UnixRequest(UnixRequest {
            state_flags: unix::StateFlags::ESTABLISHED,
            inode: 0,
            show_flags: ShowFlags::NAME | ShowFlags::PEER,
            cookie: [0xff; 8],
        });
        self.dump(req, |m| {
            if let SockDiagMessage::UnixResponse(r) = m {
                let mut peer = 0;
                let mut name = String::new();
                for nla in &r.nlas {
                    match nla {
                        unix::nlas::Nla::Name(n) => name = n.clone(),
                        unix::nlas::Nla::Peer(p) => peer = *p as u64,
                        _ => {}
                    }
                }
                out.push((r.header.inode as u64, peer, name));
            }
        })?;
        Ok(out)
    }

    /// Unix stream listeners (with a path or an abstract name).
    pub fn unix_listeners(&mut self) -> io::Result<Vec<Listener>> {
        let mut out = Vec::new();
        let req = SockDiagMessage::UnixRequest(UnixRequest {
            state_flags: unix::StateFlags::LISTEN,
            inode: 0,
            show_flags: ShowFlags::NAME | ShowFlags::RQLEN,
            cookie: [0xff; 8],
        });
        self.dump(req, |m| {
            if let SockDiagMessage::UnixResponse(r) = m {
                let mut l = Listener {
                    addr: String::new(),
                    port: 0,
                    inode: r.header.inode as u64,
                    queue: 0,
                    backlog: 0,
                    v6only: false,
                };
                for nla in &r.nlas {
                    match nla {
                        unix::nlas::Nla::Name(n) => l.addr = n.clone(),
                        unix::nlas::Nla::ReceiveQueueLength(q, b) => {
                            l.queue = *q;
                            l.backlog = *b;
                        }
                        _ => {}
                    }
                }
                out.push(l);
            }
        })?;
        Ok(out)
    }

    fn dump(
        &mut self,
        req: SockDiagMessage,
        mut each: impl FnMut(&SockDiagMessage),
    ) -> io::Result<()> {
        let mut hdr = NetlinkHeader::default();
        hdr.flags = NLM_F_REQUEST | NLM_F_DUMP;
        let mut packet = NetlinkMessage::new(hdr, req.into());
        packet.finalize();
        let mut out = vec![0; packet.buffer_len()];
        packet.serialize(&mut out);
        self.socket.send(&out, 0)?;
        loop {
            let n = self.socket.recv(&mut &mut self.buf[..], 0)?;
            let mut off = 0;
            while off < n {
                let msg = NetlinkMessage::<SockDiagMessage>::deserialize(&self.buf[off..n])
                    .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e.to_string()))?;
                let len = msg.header.length as usize;
                match msg.payload {
                    NetlinkPayload::Done(_) => return Ok(()),
                    NetlinkPayload::Error(e) => {
                        return Err(e.to_io());
                    }
                    NetlinkPayload::InnerMessage(m) => each(&m),
                    _ => {}
                }
                if len == 0 {
                    break;
                }
                off += len;
            }
        }
    }
}

/// A dump of the TCP sockets of `family` in `states`, with `extensions` in each answer.
fn tcp_dump(family: u8, states: StateFlags, extensions: ExtensionFlags) -> SockDiagMessage {
    SockDiagMessage::InetRequest(InetRequest {
        family,
        protocol: IPPROTO_TCP,
        extensions,
        states,
        socket_id: if family == AF_INET {
            SocketId::new_v4()
        } else {
            SocketId::new_v6()
        },
    })
}

/// The families of the connections the TCP `listeners` accept: a socket accepted on an
/// IPv6 listener is IPv6 even for an IPv4 client (an IPv4-mapped address), so an IPv6
/// listener's connections are all in the AF_INET6 dump. Both when no listener is known.
fn families_accepting(listeners: &[Listener]) -> Vec<u8> {
    let v6 = |l: &Listener| {
        l.addr
            .parse::<std::net::SocketAddr>()
            .is_ok_and(|a| a.is_ipv6())
    };
    let mut out = Vec::new();
    if listeners.is_empty() || listeners.iter().any(|l| !v6(l)) {
        out.push(AF_INET);
    }
    if listeners.is_empty() || listeners.iter().any(v6) {
        out.push(AF_INET6);
    }
    out
}

fn new_socket() -> io::Result<Socket> {
    let mut s = Socket::new(NETLINK_SOCK_DIAG)?;
    s.bind_auto()?;
    s.connect(&SocketAddr::new(0, 0))?;
    Ok(s)
}

/// Whether the calling thread is in the network namespace of `pid`.
pub fn in_netns_of(pid: i32) -> io::Result<bool> {
    use std::os::unix::fs::MetadataExt;
    let a = std::fs::metadata(format!("/proc/{pid}/ns/net"))?;
    let b = std::fs::metadata("/proc/thread-self/ns/net")?;
    Ok(a.ino() == b.ino() && a.dev() == b.dev())
}

/// Moves the calling thread into the network namespace of `pid` (setns(2), needs
/// CAP_SYS_ADMIN). Only this thread moves: /proc/thread-self/net, /proc/sys/net and
/// netlink sockets it creates then show that namespace.
pub fn enter_netns_of(pid: i32) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    let f = std::fs::File::open(format!("/proc/{pid}/ns/net"))?;
    // SAFETY: setns on a namespace fd we hold; affects only the calling thread.
    if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_connections_buffers_and_chronograph() {
        use std::io::Write;
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let _c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let (mut server, _) = l.accept().unwrap();
        server.write_all(&[7u8; 100_000]).unwrap();
        let mut d = Diag::open().unwrap();
        let listeners = d.tcp_listeners(Some(port)).unwrap();
        assert_eq!(families_accepting(&listeners), [AF_INET]);
        let found = d.tcp_connections(port, &listeners).unwrap();
        // The server's side only (the client's socket has the port as its peer's).
        assert_eq!(found.len(), 1, "{found:?}");
        let c = found[0];
        assert!(c.cookie != 0 && c.send_buffer > 0 && c.rtt_us > 0, "{c:?}");
        assert!(
            c.busy_us >= c.rwnd_limited_us + c.sndbuf_limited_us,
            "{c:?}"
        );
    }

    #[test]
    fn an_ipv4_client_of_a_dual_stack_listener_is_in_the_ipv6_dump() {
        // What every JVM server does: one [::] socket for both families.
        let Ok(l) = std::net::TcpListener::bind("[::]:0") else {
            eprintln!("no IPv6 here: skipped");
            return;
        };
        let port = l.local_addr().unwrap().port();
        let _c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let _server = l.accept().unwrap();
        let mut d = Diag::open().unwrap();
        let listeners = d.tcp_listeners(Some(port)).unwrap();
        assert_eq!(families_accepting(&listeners), [AF_INET6], "{listeners:?}");
        let found = d.tcp_connections(port, &listeners).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        // Nothing known of the port: both families, the same connection.
        assert_eq!(d.tcp_connections(port, &[]).unwrap().len(), 1);
    }

    #[test]
    fn finds_a_listener_with_its_backlog() {
        // std's listen() asks for a backlog of 128; the kernel caps it at somaxconn.
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let _c = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
        let mut d = Diag::open().unwrap();
        let found = d.tcp_listeners(Some(port)).unwrap();
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].addr, format!("127.0.0.1:{port}"));
        let somaxconn: u32 = std::fs::read_to_string("/proc/sys/net/core/somaxconn")
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert_eq!(found[0].backlog, 128.min(somaxconn));
        assert_eq!(found[0].queue, 1, "one connection waiting to be accepted");
        assert!(found[0].inode > 0);
    }

    #[test]
    fn a_full_udp_receive_buffer_counts_drops() {
        use std::os::fd::AsRawFd;
        let rx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        // The smallest buffer the kernel allows (it doubles the value and floors it
        // at SOCK_MIN_RCVBUF): a few datagrams fill it.
        let size: libc::c_int = 1;
        // SAFETY: setsockopt on a socket we own, with a c_int argument.
        unsafe {
            libc::setsockopt(
                rx.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                &size as *const _ as *const libc::c_void,
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        let port = rx.local_addr().unwrap().port();
        let tx = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        for _ in 0..200 {
            tx.send_to(&[0u8; 1200], ("127.0.0.1", port)).unwrap();
        }
        let mut d = Diag::open().unwrap();
        let all = d.udp_sockets().unwrap();
        let me = all
            .iter()
            .find(|u| u.port == port && u.addr.starts_with("127.0.0.1"))
            .expect("our socket");
        assert!(me.rcvbuf > 0 && me.rcvbuf < 10_000, "{me:?}");
        assert!(me.receive_queue > 0, "{me:?}");
        // Nothing was read: every datagram past the buffer was dropped.
        assert!(me.drops > 150, "{me:?}");
        assert!(me.inode > 0);
    }

    #[test]
    fn finds_unix_listeners() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s.sock");
        let _l = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let mut d = Diag::open().unwrap();
        let all = d.unix_listeners().unwrap();
        let me = all
            .iter()
            .find(|l| l.addr == path.to_string_lossy())
            .expect("our listener");
        assert_eq!(me.queue, 0);
        assert!(me.backlog > 0);
    }
}
