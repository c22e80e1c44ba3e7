//! The HTTP/3 closed loop (no `-R`/`--replay` pacing, no `--connreqs`, no 0-RTT) on
//! `quinn-proto` driven by the worker's own loop: one non-blocking UDP socket per
//! worker, connected to the server (`udp.rs`: recvmmsg with GRO, one sendmmsg per wake
//! with GSO), every datagram waiting handled, the next requests written, each
//! connection's packets drained — so ACKs ride on request packets — and sent together,
//! then `ppoll` until a datagram, the next QUIC timer, tick or deadline — after a
//! wake that brought few responses from a quick server, a hold first (`gather.rs`), so
//! that more come in one receive; responses end at their last datagram's kernel
//! arrival time, so the hold is in no latency (`bench/h3-cost`: 0.54× the client CPU
//! per response without it at load ~3). HTTP/3 on top
//! is small: a control stream with an empty SETTINGS (no QPACK dynamic table, so no
//! QPACK streams), the server's control stream read for GOAWAY (no new request on that
//! connection; a new one once its requests are answered), and the request streams of
//! `wire.rs`.
//!
//! DESIGN: measured against quinn's tokio tasks (`bench/h3-cost`, `LOADLENS_H3_QUINN=1`
//! keeps that path for the bench): a quarter less client CPU per response, mostly fewer
//! system calls (one `ppoll`, one `recvmmsg` and one `sendmmsg` per wake instead of the
//! endpoint and connection driver tasks' each) and fewer bare ACKs. The open loop,
//! `--connreqs` and `--resume 0rtt` stay on quinn (`mod.rs`).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use quinn_proto::{
    ConnectionError, ConnectionHandle, DatagramEvent, Dir, Endpoint, EndpointConfig, Event,
    ReadError, StreamEvent, StreamId,
};

use super::resume::Handshake;
use super::stream::{pick, Done};
use super::udp::{Datagram, Udp};
use super::{tick, wire, Counts, H3Worker, H3_NO_ERROR, RETRY_AFTER, WATCH};
use crate::engine::gather::Gather;
use crate::engine::stats::{us_between, ErrorKind, ThreadStats};
use crate::engine::worker::{slice_of, TICK};

/// The control stream's bytes: stream type 0 and an empty SETTINGS frame (every setting
/// at its default: QPACK dynamic table 0, no blocked streams).
const CONTROL: [u8; 3] = [0x00, 0x04, 0x00];
/// How long the run's end waits for its connections' closes to be sent.
const CLOSE_WAIT: Duration = Duration::from_millis(100);
/// HTTP/3's GOAWAY frame type (RFC 9114 §7.2.6).
const GOAWAY: u64 = 0x7;

/// A request on its stream.
struct Req {
    id: StreamId,
    target: u32,
    sent: Instant,
    /// Bytes of the request written so far (its stream's flow control may hold some).
    offset: usize,
    reader: wire::Reader,
    first: Option<Instant>,
}

/// A server's unidirectional stream: its control stream is read for GOAWAY, the others
/// (QPACK's, unknown ones) are read and dropped.
struct PeerUni {
    id: StreamId,
    /// Bytes not yet parsed, while the stream's type or a frame is incomplete.
    buf: Vec<u8>,
    control: Option<bool>,
}

/// One connection slot's QUIC connection.
struct Conn {
    handle: ConnectionHandle,
    q: quinn_proto::Connection,
    began: Instant,
    certificate: Arc<AtomicBool>,
    connected: bool,
    /// Lost while its datagrams were handled: closed in the wake's connection pass.
    lost: bool,
    /// The server's GOAWAY: no new request on this connection.
    goaway: bool,
    reqs: Vec<Req>,
    peer: Vec<PeerUni>,
    /// Budget claims held for this connection's next requests.
    held: Vec<u64>,
}

impl H3Worker {
    /// The closed loop on quinn-proto (see the module note).
    pub(super) fn run_direct(self) -> io::Result<ThreadStats> {
        let max = self.timeout * 2 + Duration::from_secs(1);
        let mut c = Counts::new(max, self.order.endpoints);
        let mut io = Udp::connect(self.addr)?;
        let mut ep = Endpoint::new(
            Arc::new(EndpointConfig::default()),
            None,
            !io.may_fragment(),
            None,
        );
        let mut got: Vec<Datagram> = Vec::new();
        let mut conns: Vec<Option<Conn>> = (0..self.connections).map(|_| None).collect();
        // When each empty slot connects next, and the claims its last connection held.
        let mut retry: Vec<Option<Instant>> = vec![Some(self.start); self.connections];
        let mut carried: Vec<Vec<u64>> = vec![Vec::new(); self.connections];
        // Connections closed and not yet drained: their slots have new ones; these still
        // answer the server (its close, its retransmits) until the endpoint forgets them.
        let mut closing: Vec<Conn> = Vec::new();
        let mut seq: Vec<u64> = (0..self.connections)
            .map(|i| (self.id as u64) << 32 | (i as u64 * 7919))
            .collect();
        let mut next_tick = self.start + TICK;
        let mut spent = false;
        // Responses gather between waits when the server is quick (`gather.rs`): each
        // ends at its last datagram's kernel arrival time, so the hold is in no latency.
        let mut gather = (io.stamped && !no_hold())
            .then(|| Gather::new(self.start, self.connections * self.streams as usize));
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
                self.live.publish(&c.stats);
                if let Some(g) = gather.as_mut() {
                    g.measure(now, c.stats.responses);
                }
            }
            // A connection for each slot without one, claimed before connecting: none is
            // opened that could never send.
            for (i, slot) in conns.iter_mut().enumerate() {
                if slot.is_some() || retry[i].is_none_or(|at| at > now) {
                    continue;
                }
                let first = match carried[i].pop() {
                    Some(o) => o,
                    None if spent => continue,
                    None => match self.budget.claim() {
                        Some(o) => o,
                        None => {
                            spent = true;
                            continue;
                        }
                    },
                };
                let (cfg, certificate) = self.cfg.connection();
                match ep.connect(now, cfg, self.addr, &self.host) {
                    Ok((handle, q)) => {
                        retry[i] = None;
                        let mut held = std::mem::take(&mut carried[i]);
                        held.push(first);
                        *slot = Some(Conn {
                            handle,
                            q,
                            began: now,
                            certificate,
                            connected: false,
                            lost: false,
                            goaway: false,
                            reqs: Vec::new(),
                            peer: Vec::new(),
                            held,
                        });
                    }
                    Err(_) => {
                        c.connect_failed(libc::EINVAL);
                        retry[i] = Some(now + RETRY_AFTER);
                    }
                }
            }
            // Every datagram waiting, each connection's events handled after each of its
            // datagrams: a response ends at the arrival of the datagram that ended it.
            let batch_from = c.stats.responses;
            io.receive(&mut got);
            let seen = Instant::now();
            for d in got.drain(..) {
                let at = d.at.map(|at| at.min(seen));
                match ep.handle(now, d.from, d.to, d.ecn, d.data, &mut io.buf) {
                    Some(DatagramEvent::ConnectionEvent(h, ev)) => {
                        if let Some(conn) = conns.iter_mut().flatten().find(|x| x.handle == h) {
                            conn.q.handle_event(ev);
                            if !conn.lost && self.events(conn, &mut c, at, seen) {
                                conn.lost = true;
                            }
                        } else if let Some(conn) = closing.iter_mut().find(|x| x.handle == h) {
                            conn.q.handle_event(ev);
                        }
                    }
                    Some(DatagramEvent::Response(t)) => io.queue(&t),
                    _ => io.buf.clear(),
                }
            }
            // Timers, each connection's events and next requests, then its packets.
            let now = Instant::now();
            for i in 0..conns.len() {
                let Some(conn) = conns[i].as_mut() else {
                    continue;
                };
                if conn.q.poll_timeout().is_some_and(|t| t <= now) {
                    conn.q.handle_timeout(now);
                }
                let lost = conn.lost || self.events(conn, &mut c, None, now);
                let expired = !lost && self.expire(conn, &mut c, now);
                if !lost && !expired {
                    self.fill(conn, &mut c, now, &mut spent, &mut seq[i]);
                }
                // A connection done: told to go away, or with nothing left to send. One
                // closed leaves its slot at once for `closing`.
                let done = !lost
                    && !expired
                    && conn.connected
                    && conn.reqs.is_empty()
                    && (conn.goaway || (spent && conn.held.is_empty()));
                if done {
                    conn.q.close(now, H3_NO_ERROR.into(), Bytes::new());
                }
                io.flush(&mut conn.q, now);
                while let Some(ev) = conn.q.poll_endpoint_events() {
                    if let Some(ev) = ep.handle_event(conn.handle, ev) {
                        conn.q.handle_event(ev);
                    }
                }
                if lost || expired || done || conn.q.is_drained() {
                    let mut conn = conns[i].take().expect("the slot's connection");
                    c.quic.add(&conn.q.stats(), max);
                    carried[i].append(&mut conn.held);
                    let failed = lost && !conn.connected;
                    retry[i] = Some(now + if failed { RETRY_AFTER } else { Duration::ZERO });
                    if !conn.q.is_drained() {
                        closing.push(conn);
                    }
                }
            }
            closing.retain_mut(|conn| {
                if conn.q.poll_timeout().is_some_and(|t| t <= now) {
                    conn.q.handle_timeout(now);
                }
                while conn.q.poll().is_some() {}
                io.flush(&mut conn.q, now);
                while let Some(ev) = conn.q.poll_endpoint_events() {
                    if let Some(ev) = ep.handle_event(conn.handle, ev) {
                        conn.q.handle_event(ev);
                    }
                }
                !conn.q.is_drained()
            });
            // The wake's packets, all connections' in one call.
            io.send();
            if spent && conns.iter().all(Option::is_none) && carried.iter().all(Vec::is_empty) {
                break;
            }
            // Wait for a datagram, the next QUIC timer, tick, retry or the deadline.
            let mut wake = next_tick.min(now + WATCH);
            if let Some(d) = self.deadline {
                wake = wake.min(d);
            }
            for conn in conns.iter_mut().flatten().chain(&mut closing) {
                if let Some(t) = conn.q.poll_timeout() {
                    wake = wake.min(t);
                }
            }
            for at in retry.iter().flatten() {
                wake = wake.min(*at);
            }
            // A wake that brought few responses from a quick server: a pause before the
            // next, so that more come in one receive.
            let handled = c.stats.responses - batch_from;
            if let Some(hold) = gather.as_ref().and_then(|g| g.hold(handled)) {
                std::thread::sleep(hold.min(wake.saturating_duration_since(Instant::now())));
            }
            io.wait(libc::POLLIN, wake.saturating_duration_since(Instant::now()));
        }
        // The connections still open when the run ended: a close the server sees at
        // once, their counters; requests on the wire are in flight, neither response
        // nor error.
        let now = Instant::now();
        for conn in conns.iter_mut().flatten() {
            conn.q.close(now, H3_NO_ERROR.into(), Bytes::new());
            io.flush(&mut conn.q, now);
            c.quic.add(&conn.q.stats(), max);
        }
        // The closes handed to the kernel, waiting (<= 100 ms) for room in the socket's
        // buffer: a close dropped here would leave the server's side of its connection
        // open until its idle timeout.
        io.send_by(now + CLOSE_WAIT);
        c.stats.in_flight = c.in_flight;
        self.quic
            .lock()
            .expect("no worker panicked")
            .merge(std::mem::take(&mut c.quic));
        tick(&self, &mut c, slice_of(self.start, next_tick), true);
        Ok(c.stats)
    }

    /// The connection's events: the handshake done, streams readable or writable, the
    /// server's streams; `true` when the connection is lost. What came did at `at` (its
    /// datagram's kernel arrival time, when stamped) and the loop saw it at `now`.
    fn events(&self, conn: &mut Conn, c: &mut Counts, at: Option<Instant>, now: Instant) -> bool {
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
                Event::ConnectionLost { reason } => {
                    if !conn.connected {
                        // The request it was opened for is spent as a connect error.
                        conn.held.pop();
                        c.connect_failed(match reason {
                            ConnectionError::TimedOut => libc::ETIMEDOUT,
                            ConnectionError::ConnectionClosed(_) => libc::ECONNREFUSED,
                            ConnectionError::Reset => libc::ECONNRESET,
                            _ => libc::EPROTO,
                        });
                    }
                    for r in conn.reqs.drain(..) {
                        c.in_flight -= 1;
                        c.failed(self.order.endpoint[r.target as usize], ErrorKind::Read);
                    }
                    return true;
                }
                Event::Stream(StreamEvent::Opened { dir: Dir::Uni }) => {
                    while let Some(id) = conn.q.streams().accept(Dir::Uni) {
                        conn.peer.push(PeerUni {
                            id,
                            buf: Vec::new(),
                            control: None,
                        });
                        peer_stream(conn, id);
                    }
                }
                Event::Stream(StreamEvent::Readable { id }) => {
                    if let Some(k) = conn.reqs.iter().position(|r| r.id == id) {
                        self.read(conn, k, c, at, now);
                    } else {
                        peer_stream(conn, id);
                    }
                }
                Event::Stream(StreamEvent::Writable { id }) => {
                    if let Some(r) = conn.reqs.iter_mut().find(|r| r.id == id) {
                        write(&mut conn.q, r, &self.requests[r.target as usize].wire);
                    }
                }
                _ => {}
            }
        }
        false
    }

    /// Request `k`'s response: what has come of it; recorded when whole, ending `at` the
    /// arrival of the datagram that completed it (the loop saw it at `now`: the
    /// difference is `held`), or at `now` for an unstamped one.
    fn read(&self, conn: &mut Conn, k: usize, c: &mut Counts, at: Option<Instant>, now: Instant) {
        let stamped = at;
        let at = at.unwrap_or(now);
        let r = &mut conn.reqs[k];
        let mut s = conn.q.recv_stream(r.id);
        let Ok(mut chunks) = s.read(true) else {
            return;
        };
        let end = loop {
            match chunks.next(usize::MAX) {
                Ok(Some(chunk)) => match r.reader.take(&chunk.bytes) {
                    Ok(Some(_)) => r.first = Some(at),
                    Ok(None) => {}
                    Err(_) => break Some(Err(ErrorKind::Parse)),
                },
                Ok(None) => break Some(Ok(())),
                Err(ReadError::Blocked) => break None,
                // H3_REQUEST_REJECTED (RFC 9114 §4.1.1) too: a reset like the others.
                Err(ReadError::Reset(_)) => break Some(Err(ErrorKind::Reset)),
            }
        };
        let _ = chunks.finalize();
        let Some(end) = end else {
            return;
        };
        let r = conn.reqs.swap_remove(k);
        // A stream left unread (a malformed response): the server may stop sending it.
        let _ = conn.q.recv_stream(r.id).stop(H3_NO_ERROR.into());
        c.in_flight -= 1;
        let e = self.order.endpoint[r.target as usize];
        match end.and_then(|()| r.reader.end().map_err(|_| ErrorKind::Parse)) {
            Ok(head) => {
                let done = Done {
                    status: head.status,
                    first: r.first.unwrap_or(at),
                    end: at,
                    bytes: head.bytes + r.reader.body,
                };
                c.record(e, r.sent, r.sent, &done);
                if stamped.is_some() {
                    c.stats.phases.held.saturating_record(us_between(at, now));
                }
            }
            Err(kind) => c.failed(e, kind),
        }
    }

    /// Requests unanswered after the timeout: each an error, and the connection closed
    /// (the others on it lost with it), as the TCP loops replace theirs; `true` then.
    fn expire(&self, conn: &mut Conn, c: &mut Counts, now: Instant) -> bool {
        if !conn.reqs.iter().any(|r| now >= r.sent + self.timeout) {
            return false;
        }
        for r in conn.reqs.drain(..) {
            c.in_flight -= 1;
            let e = self.order.endpoint[r.target as usize];
            let late = now >= r.sent + self.timeout;
            c.failed(
                e,
                if late {
                    ErrorKind::Timeout
                } else {
                    ErrorKind::Read
                },
            );
        }
        conn.q
            .close(now, H3_NO_ERROR.into(), Bytes::from_static(b"timeout"));
        true
    }

    /// Requests sent until the connection has `--max-concurrent-streams` in flight or
    /// the server allows no more streams now.
    fn fill(&self, conn: &mut Conn, c: &mut Counts, now: Instant, spent: &mut bool, seq: &mut u64) {
        if !conn.connected || conn.goaway {
            return;
        }
        while conn.reqs.len() < self.streams as usize {
            let ordinal = match conn.held.pop() {
                Some(o) => o,
                None if *spent => return,
                None => match self.budget.claim() {
                    Some(o) => o,
                    None => {
                        *spent = true;
                        return;
                    }
                },
            };
            let Some(id) = conn.q.streams().open(Dir::Bi) else {
                // The server's stream limit: its MAX_STREAMS lets it go later.
                conn.held.push(ordinal);
                return;
            };
            let count = std::cell::Cell::new(*seq);
            let target = pick(&self.order, ordinal, &count);
            *seq = count.get();
            let mut r = Req {
                id,
                target,
                sent: now,
                offset: 0,
                reader: wire::Reader::new(),
                first: None,
            };
            write(&mut conn.q, &mut r, &self.requests[target as usize].wire);
            c.in_flight += 1;
            conn.reqs.push(r);
        }
    }
}

/// A server's unidirectional stream read as far as it has come: its type, then on the
/// control stream each frame, a GOAWAY ending new requests on the connection.
fn peer_stream(conn: &mut Conn, id: StreamId) {
    let Some(p) = conn.peer.iter_mut().find(|p| p.id == id) else {
        return;
    };
    let mut s = conn.q.recv_stream(id);
    let Ok(mut chunks) = s.read(true) else {
        return;
    };
    while let Ok(Some(chunk)) = chunks.next(usize::MAX) {
        if p.control != Some(false) {
            p.buf.extend_from_slice(&chunk.bytes);
        }
    }
    let _ = chunks.finalize();
    if p.control.is_none() {
        let Some((kind, n)) = wire::varint(&p.buf) else {
            return;
        };
        p.control = Some(kind == 0);
        p.buf.drain(..n);
        if kind != 0 {
            p.buf = Vec::new();
        }
    }
    // Whole frames: type and length, then the payload.
    while p.control == Some(true) {
        let Some((kind, a)) = wire::varint(&p.buf) else {
            break;
        };
        let Some((len, b)) = wire::varint(&p.buf[a..]) else {
            break;
        };
        let whole = a + b + len as usize;
        if p.buf.len() < whole {
            break;
        }
        if kind == GOAWAY {
            conn.goaway = true;
        }
        p.buf.drain(..whole);
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

/// `LOADLENS_H3_HOLD=0`: no hold between waits (the bench's and the tests' comparison).
fn no_hold() -> bool {
    std::env::var_os("LOADLENS_H3_HOLD").is_some_and(|v| v == "0")
}
