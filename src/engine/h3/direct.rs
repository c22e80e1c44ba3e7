//! EXPERIMENTAL (`LOADLENS_H3_DIRECT=1`, closed loop only): the HTTP/3 worker on
//! `quinn-proto` driven by the worker's own loop instead of quinn's tokio tasks — one
//! non-blocking UDP socket per worker (quinn-udp: GRO, recvmmsg, GSO), every readable
//! datagram handled, the next requests written, and only then the packets drained, so
//! ACKs ride on request packets. HTTP/3 itself is a control stream with an empty
//! SETTINGS (QPACK dynamic table 0: no QPACK streams), the server's streams read (a
//! GOAWAY on its control stream stops new requests on that connection), and the request
//! streams of `wire.rs`.

use std::io::{self, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use quinn_proto::{
    ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, Event, ReadError, StreamEvent,
    StreamId,
};
use quinn_udp::{RecvMeta, Transmit, UdpSocketState};

use super::resume::Handshake;
use super::stream::{pick, Done};
use super::{tick, Counts, H3Worker, QuicSum, H3_NO_ERROR, RETRY_AFTER, WATCH};
use crate::engine::stats::{latency_histogram, us_between, ErrorKind, ThreadStats};
use crate::engine::worker::{slice_of, TICK};

/// Datagrams taken from the socket per receive call (recvmmsg), as quinn-udp batches.
const BATCH: usize = 32;

/// A request on its stream.
struct Req {
    id: StreamId,
    target: u32,
    sent: Instant,
    /// Bytes of the request still to write (its stream's flow control).
    offset: usize,
    reader: super::wire::Reader,
    first: Option<Instant>,
}

/// One connection slot's QUIC connection.
struct Conn {
    handle: ConnectionHandle,
    q: quinn_proto::Connection,
    began: Instant,
    certificate: Arc<AtomicBool>,
    connected: bool,
    /// The server's GOAWAY: no new request on this connection.
    goaway: bool,
    reqs: Vec<Req>,
    /// The server's unidirectional streams (control, QPACK), read and dropped.
    peer_uni: Vec<StreamId>,
    /// Claims held for this connection's next requests.
    held: Vec<u64>,
    seq: u64,
}

/// The control stream's bytes: stream type 0 and an empty SETTINGS frame (every
/// setting at its default: no QPACK dynamic table, no blocked streams).
const CONTROL: [u8; 3] = [0x00, 0x04, 0x00];

impl H3Worker {
    /// The closed loop on quinn-proto (see the module note).
    pub(super) fn run_direct(self) -> io::Result<ThreadStats> {
        let max = self.timeout * 2 + Duration::from_secs(1);
        let mut c = Counts {
            stats: ThreadStats::new(max, self.order.endpoints),
            interval: latency_histogram(max),
            interval_responses: 0,
            interval_errors: 0,
            interval_bytes: 0,
            in_flight: 0,
            waiting: Vec::new(),
            quic: QuicSum::default(),
        };
        let bind: SocketAddr = match self.addr {
            SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let sock = UdpSocket::bind(bind)?;
        let state = UdpSocketState::new((&sock).into())?;
        sock.set_nonblocking(true)?;
        let mut ep = Endpoint::new(
            Arc::new(EndpointConfig::default()),
            None,
            !state.may_fragment(),
            None,
        );
        let segments = state.max_gso_segments();
        let stride = 1500 * state.gro_segments().max(1);
        let mut rbuf = vec![0u8; stride * BATCH];
        let mut meta = [RecvMeta::default(); BATCH];
        let mut tbuf = Vec::with_capacity(1500 * segments);
        let mut conns: Vec<Option<Conn>> = (0..self.connections).map(|_| None).collect();
        let mut retry: Vec<Option<Instant>> = vec![Some(self.start); self.connections];
        let mut next_tick = self.start + TICK;
        let mut drained_budget = false;
        loop {
            let now = Instant::now();
            if self.stop.load(Ordering::Relaxed) || self.deadline.is_some_and(|d| now >= d) {
                break;
            }
            if now >= next_tick {
                tick(&self, &mut c, slice_of(self.start, next_tick), false);
                while next_tick <= now {
                    next_tick += TICK;
                }
                self.live
                    .responses
                    .store(c.stats.responses, Ordering::Relaxed);
                self.live
                    .errors
                    .store(c.stats.error_total(), Ordering::Relaxed);
            }
            // New connections for the slots without one.
            for (i, slot) in conns.iter_mut().enumerate() {
                if slot.is_some() || retry[i].is_none_or(|at| at > now) || drained_budget {
                    continue;
                }
                let Some(first) = self.budget.claim() else {
                    drained_budget = true;
                    break;
                };
                let (cfg, certificate) = self.cfg.connection();
                match ep.connect(now, cfg, self.addr, &self.host) {
                    Ok((handle, q)) => {
                        retry[i] = None;
                        *slot = Some(Conn {
                            handle,
                            q,
                            began: now,
                            certificate,
                            connected: false,
                            goaway: false,
                            reqs: Vec::new(),
                            peer_uni: Vec::new(),
                            held: vec![first],
                            seq: (self.id as u64) << 32 | (i as u64 * 7919),
                        });
                    }
                    Err(_) => {
                        c.connect_failed(libc::EINVAL);
                        retry[i] = Some(now + RETRY_AFTER);
                    }
                }
            }
            // Every datagram waiting.
            loop {
                let mut bufs: Vec<IoSliceMut> =
                    rbuf.chunks_mut(stride).map(IoSliceMut::new).collect();
                let n = match state.recv((&sock).into(), &mut bufs, &mut meta) {
                    Ok(n) => n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                    Err(_) => break,
                };
                drop(bufs);
                // Fewer than a batch: the queue is empty (no call just to hear EAGAIN).
                let more = n == BATCH;
                for (m, buf) in meta[..n].iter().zip(rbuf.chunks(stride)) {
                    let ecn = m
                        .ecn
                        .and_then(|e| quinn_proto::EcnCodepoint::from_bits(e as u8));
                    for seg in buf[..m.len].chunks(m.stride.max(1)) {
                        match ep.handle(now, m.addr, m.dst_ip, ecn, BytesMut::from(seg), &mut tbuf)
                        {
                            Some(DatagramEvent::ConnectionEvent(h, ev)) => {
                                if let Some(conn) =
                                    conns.iter_mut().flatten().find(|x| x.handle == h)
                                {
                                    conn.q.handle_event(ev);
                                }
                            }
                            Some(DatagramEvent::Response(t)) => {
                                send(&state, &sock, &t, &tbuf);
                                tbuf.clear();
                            }
                            _ => tbuf.clear(),
                        }
                    }
                }
                if !more {
                    break;
                }
            }
            // Timers, the connections' events and their next requests, then the packets.
            let now = Instant::now();
            for i in 0..conns.len() {
                let Some(conn) = conns[i].as_mut() else {
                    continue;
                };
                if conn.q.poll_timeout().is_some_and(|t| t <= now) {
                    conn.q.handle_timeout(now);
                }
                let lost = self.events(conn, &mut c, now);
                while let Some(ev) = conn.q.poll_endpoint_events() {
                    if let Some(ev) = ep.handle_event(conn.handle, ev) {
                        conn.q.handle_event(ev);
                    }
                }
                if !lost {
                    self.fill(conn, &mut c, now, &mut drained_budget);
                }
                while let Some(t) = conn.q.poll_transmit(now, segments, &mut tbuf) {
                    send(&state, &sock, &t, &tbuf);
                    tbuf.clear();
                }
                while let Some(ev) = conn.q.poll_endpoint_events() {
                    let _ = ep.handle_event(conn.handle, ev);
                }
                let idle = conn.connected && conn.reqs.is_empty() && drained_budget;
                if conn.q.is_drained() || lost || idle {
                    let conn = conns[i].take().expect("there");
                    self.gone(conn, &mut c, &mut ep, lost);
                    retry[i] = Some(now + if lost { RETRY_AFTER } else { Duration::ZERO });
                }
            }
            if drained_budget && conns.iter().all(Option::is_none) {
                break;
            }
            // Wait for a datagram, the next timer, tick or deadline.
            let mut wake = next_tick.min(now + WATCH);
            if let Some(d) = self.deadline {
                wake = wake.min(d);
            }
            for conn in conns.iter_mut().flatten() {
                if let Some(t) = conn.q.poll_timeout() {
                    wake = wake.min(t);
                }
            }
            for at in retry.iter().flatten() {
                wake = wake.min(*at);
            }
            let wait = wake.saturating_duration_since(Instant::now());
            let ts = libc::timespec {
                tv_sec: wait.as_secs() as libc::time_t,
                tv_nsec: wait.subsec_nanos() as libc::c_long,
            };
            let mut pfd = libc::pollfd {
                fd: sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd, a valid timespec, no signal mask.
            unsafe { libc::ppoll(&mut pfd, 1, &ts, std::ptr::null()) };
        }
        let now = Instant::now();
        for conn in conns.iter_mut().flatten() {
            conn.q.close(now, H3_NO_ERROR.into(), Bytes::new());
            while let Some(t) = conn.q.poll_transmit(now, segments, &mut tbuf) {
                send(&state, &sock, &t, &tbuf);
                tbuf.clear();
            }
            c.quic.add(&conn.q.stats(), max);
            c.in_flight += conn.reqs.len() as u64;
        }
        c.stats.in_flight = c.in_flight;
        self.quic
            .lock()
            .expect("no worker panicked")
            .merge(std::mem::take(&mut c.quic));
        let end = self.deadline.unwrap_or(now).min(now);
        tick(
            &self,
            &mut c,
            slice_of(self.start, next_tick.min(end + TICK)),
            true,
        );
        Ok(c.stats)
    }

    /// The connection's events: the handshake done, streams readable or writable, the
    /// server's streams; `true` when the connection is lost.
    fn events(&self, conn: &mut Conn, c: &mut Counts, now: Instant) -> bool {
        while let Some(ev) = conn.q.poll() {
            match ev {
                Event::Connected => {
                    conn.connected = true;
                    let us = us_between(conn.began, now).max(1);
                    c.stats.connections += 1;
                    c.stats.connect_time.saturating_record(us);
                    let kind = Handshake::of(conn.certificate.load(Ordering::Relaxed), false);
                    c.quic
                        .handshake(kind, us, self.timeout * 2 + Duration::from_secs(1));
                    if let Some(id) = conn.q.streams().open(Dir::Uni) {
                        let _ = conn.q.send_stream(id).write(&CONTROL);
                    }
                }
                Event::ConnectionLost { .. } => {
                    for _ in conn.reqs.drain(..) {
                        c.in_flight -= 1;
                        c.failed(0, ErrorKind::Read);
                    }
                    if !conn.connected {
                        c.connect_failed(libc::ECONNREFUSED);
                    }
                    return true;
                }
                Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => {
                    while let Some(id) = conn.q.streams().accept(Dir::Uni) {
                        conn.peer_uni.push(id);
                        self.drain_uni(conn, id);
                    }
                }
                Event::Stream(StreamEvent::Readable { id }) => {
                    if conn.peer_uni.contains(&id) {
                        self.drain_uni(conn, id);
                    } else if let Some(k) = conn.reqs.iter().position(|r| r.id == id) {
                        self.read(conn, k, c);
                    }
                }
                Event::Stream(StreamEvent::Writable { id }) => {
                    if let Some(r) = conn.reqs.iter_mut().find(|r| r.id == id) {
                        let wire = &self.requests[r.target as usize].wire;
                        write(&mut conn.q, r, wire);
                    }
                }
                _ => {}
            }
        }
        false
    }

    /// The server's unidirectional stream read to its end; a GOAWAY frame (type 7)
    /// anywhere in it ends new requests (a rough scan: the prototype's).
    fn drain_uni(&self, conn: &mut Conn, id: StreamId) {
        let mut s = conn.q.recv_stream(id);
        let Ok(mut chunks) = s.read(true) else {
            return;
        };
        while let Ok(Some(chunk)) = chunks.next(usize::MAX) {
            if chunk.offset > 0 && chunk.bytes.first() == Some(&0x07) {
                conn.goaway = true;
            }
        }
        let _ = chunks.finalize();
    }

    /// Request `k`'s response: what has come of it; recorded when whole.
    fn read(&self, conn: &mut Conn, k: usize, c: &mut Counts) {
        let r = &mut conn.reqs[k];
        let mut s = conn.q.recv_stream(r.id);
        let Ok(mut chunks) = s.read(true) else {
            return;
        };
        let mut end = None;
        loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => match r.reader.take(&chunk.bytes) {
                    Ok(Some(_)) => r.first = Some(Instant::now()),
                    Ok(None) => {}
                    Err(_) => {
                        end = Some(Err(ErrorKind::Parse));
                        break;
                    }
                },
                Ok(None) => {
                    end = Some(Ok(()));
                    break;
                }
                Err(ReadError::Blocked) => break,
                Err(ReadError::Reset(_)) => {
                    end = Some(Err(ErrorKind::Reset));
                    break;
                }
            }
        }
        let _ = chunks.finalize();
        let Some(end) = end else {
            return;
        };
        let r = conn.reqs.swap_remove(k);
        c.in_flight -= 1;
        let e = self.order.endpoint[r.target as usize];
        let at = Instant::now();
        match end.and_then(|()| r.reader.end().map_err(|_| ErrorKind::Parse)) {
            Ok(head) => {
                let done = Done {
                    status: head.status,
                    first: r.first.unwrap_or(at),
                    end: at,
                    bytes: head.bytes + r.reader.body,
                };
                c.record(e, r.sent, r.sent, &done);
            }
            Err(kind) => c.failed(e, kind),
        }
    }

    /// Requests sent until the connection has `--max-concurrent-streams` in flight or
    /// the server allows no more streams now.
    fn fill(&self, conn: &mut Conn, c: &mut Counts, now: Instant, drained: &mut bool) {
        if !conn.connected || conn.goaway {
            return;
        }
        while conn.reqs.len() < self.streams as usize {
            let ordinal = match conn.held.pop() {
                Some(o) => o,
                None if *drained => return,
                None => match self.budget.claim() {
                    Some(o) => o,
                    None => {
                        *drained = true;
                        return;
                    }
                },
            };
            let Some(id) = conn.q.streams().open(Dir::Bi) else {
                conn.held.push(ordinal);
                return;
            };
            let mut seq = std::cell::Cell::new(conn.seq);
            let target = pick(&self.order, ordinal, &seq);
            conn.seq = *seq.get_mut();
            let mut r = Req {
                id,
                target,
                sent: now,
                offset: 0,
                reader: super::wire::Reader::new(),
                first: None,
            };
            write(&mut conn.q, &mut r, &self.requests[target as usize].wire);
            c.in_flight += 1;
            conn.reqs.push(r);
        }
    }

    /// A connection ended (drained, lost, or done with the budget): its counts.
    fn gone(&self, mut conn: Conn, c: &mut Counts, ep: &mut Endpoint, lost: bool) {
        if !lost && !conn.q.is_drained() {
            conn.q
                .close(Instant::now(), H3_NO_ERROR.into(), Bytes::new());
        }
        c.quic
            .add(&conn.q.stats(), self.timeout * 2 + Duration::from_secs(1));
        // The endpoint forgets it (its Drained event).
        while let Some(ev) = conn.q.poll_endpoint_events() {
            let _ = ep.handle_event(conn.handle, ev);
        }
    }
}

/// The rest of request `r` written on its stream, with its FIN once all is written.
fn write(q: &mut quinn_proto::Connection, r: &mut Req, wire: &Bytes) {
    let mut s = q.send_stream(r.id);
    if let Ok(n) = s.write(&wire[r.offset..]) {
        r.offset += n;
    }
    if r.offset == wire.len() {
        let _ = s.finish();
    }
}

fn send(state: &UdpSocketState, sock: &UdpSocket, t: &quinn_proto::Transmit, buf: &[u8]) {
    let _ = state.try_send(
        sock.into(),
        &Transmit {
            destination: t.destination,
            ecn: t
                .ecn
                .and_then(|e| quinn_udp::EcnCodepoint::from_bits(e as u8)),
            contents: &buf[..t.size],
            segment_size: t.segment_size,
            src_ip: t.src_ip,
        },
    );
}
