//! The HTTP/1.1 side of a worker's loop: one request in flight per connection, driven
//! until the socket would block. Set-up (connect, TLS) is timed here too, as it ends in
//! the first request.

use std::io;
use std::time::Instant;

use super::conn::{Conn, Next, Phase};
use super::http::Complete;
use super::stats::{us_between, ErrorKind};
use super::transport::Transport;
use super::worker::Loop;

impl<T: Transport> Loop<'_, T> {
    /// Drives one connection until it must wait for the socket.
    pub(super) fn step(&mut self, c: &mut Conn<T>, now: Instant) -> Next {
        loop {
            let Some(t) = c.transport.as_mut() else {
                return Next::Wait;
            };
            match c.phase {
                Phase::Retry | Phase::Done | Phase::Paced => return Next::Wait,
                Phase::H2 => return self.h2_step(c, now),
                Phase::Connecting => match t.establish() {
                    Ok(up) if !c.tcp_up && t.tcp_up() => {
                        // The TCP connect is its own phase, timed when the poller first
                        // shows it done; the TLS handshake (if any) is timed from here.
                        c.tcp_up = true;
                        c.tcp_at = now;
                        let us = us_between(c.since, now).max(1);
                        self.stats.phases.tcp_connect.saturating_record(us);
                        if !up {
                            return Next::Wait;
                        }
                        if let Some(next) = self.established(c, now) {
                            return next;
                        }
                    }
                    Ok(false) => return Next::Wait,
                    Ok(true) => {
                        if let Some(next) = self.established(c, now) {
                            return next;
                        }
                    }
                    Err(e) => {
                        self.connect_failed(c, &e, now);
                        return Next::Retry;
                    }
                },
                Phase::Writing => {
                    let req = self.w.request.bytes(c.target, c.last);
                    if c.written < req.len() {
                        match t.write(&req[c.written..]) {
                            Ok(0) => return self.request_failed(c.target, ErrorKind::Write),
                            Ok(n) => c.written += n,
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(_) => return self.request_failed(c.target, ErrorKind::Write),
                        }
                    } else {
                        match t.flush() {
                            Ok(true) => {
                                c.phase = Phase::Reading;
                                // Nothing can be waiting yet: the response to this
                                // request will arrive as a new event.
                                if c.drained {
                                    return Next::Wait;
                                }
                            }
                            Ok(false) => return Next::Wait,
                            Err(_) => return self.request_failed(c.target, ErrorKind::Write),
                        }
                    }
                }
                Phase::Reading => {
                    let space = c.buf.len() - c.pending;
                    let (n, arrived) = match t.read_stamped(&mut c.buf[c.pending..]) {
                        Ok(r) => r,
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        // A reset instead of a FIN before any byte of the response on
                        // a reused connection (our request reached a socket the server
                        // was closing): the same end of keep-alive as an EOF there.
                        Err(e)
                            if e.kind() == io::ErrorKind::ConnectionReset
                                && c.sent > 1
                                && c.pending == 0
                                && c.parser.is_idle() =>
                        {
                            return self.on_eof(c, now);
                        }
                        Err(_) => return self.request_failed(c.target, ErrorKind::Read),
                    };
                    c.drained = t.drained(n < space) && !c.hup;
                    // The response's times end when its bytes arrived, where the
                    // transport can tell (TLS; see `arrival.rs`).
                    let at = arrived.unwrap_or(now);
                    self.count_read(c, n, at);
                    if n == 0 {
                        return self.on_eof(c, now);
                    }
                    let end = c.pending + n;
                    match c.parser.feed(&c.buf[..end]) {
                        Err(_) => return self.request_failed(c.target, ErrorKind::Parse),
                        Ok(fed) => {
                            let left = end - fed.consumed;
                            match fed.complete {
                                Some(done) => {
                                    if arrived.is_some() && left == 0 {
                                        let held = us_between(at, now);
                                        self.stats.phases.held.saturating_record(held);
                                    }
                                    let next = self.response_in(c, done, left, at);
                                    // The next request leaves now, not when the last
                                    // response arrived.
                                    c.since = now;
                                    if self.w.pace.is_none() {
                                        c.intended = now;
                                    }
                                    if let Some(next) = next {
                                        return next;
                                    }
                                }
                                None => {
                                    if left == c.buf.len() {
                                        // A head or line larger than the whole buffer.
                                        return self.request_failed(c.target, ErrorKind::Parse);
                                    }
                                    c.buf.copy_within(fed.consumed..end, 0);
                                    c.pending = left;
                                    if c.drained {
                                        return Next::Wait;
                                    }
                                }
                            }
                        }
                    }
                }
                Phase::Draining => match t.read(&mut c.buf) {
                    Ok(0) => return Next::Reopen,
                    // Bytes after the last response are ignored; we only wait for the FIN.
                    Ok(_) => {}
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return Next::Reopen,
                },
            }
        }
    }

    /// Connection set-up is done: count it, time it, start the first request.
    /// `Some` when the connection has nothing to do (budget spent).
    fn established(&mut self, c: &mut Conn<T>, now: Instant) -> Option<Next> {
        if self.w.h2.is_some()
            && T::TLS
            && c.transport.as_ref().and_then(|t| t.alpn()) != Some(b"h2".as_slice())
        {
            // ALPN offered only h2 (the probe saw the server choose it): a server that
            // now declines fails this connection.
            let e = io::Error::from_raw_os_error(libc::EPROTO);
            self.connect_failed(c, &e, now);
            return Some(Next::Retry);
        }
        self.count_established(c, now);
        if T::TLS {
            let us = us_between(c.tcp_at, now).max(1);
            self.stats.phases.tls_handshake.saturating_record(us);
            // Responses end at their arrival time (the loop may let them gather, see
            // `gather.rs`); and what the handshake's reads left is unknown.
            if let Some(t) = c.transport.as_mut() {
                t.stamp_arrivals();
            }
            c.drained = false;
        }
        if self.w.h2.is_some() {
            return self.h2_start(c, now);
        }
        if self.start_request(c, now) {
            None
        } else {
            self.finish(c);
            Some(Next::Wait)
        }
    }

    /// `n` bytes of the response in flight were read at `now`: counted, and the first
    /// of them timed (time to first byte).
    pub(super) fn count_read<S>(&mut self, c: &mut Conn<S>, n: usize, now: Instant) {
        self.stats.bytes_read += n as u64;
        self.interval_bytes += n as u64;
        if n > 0 && !c.got_first {
            c.got_first = true;
            c.first_at = now;
            let us = us_between(c.since, now).max(1);
            self.stats.phases.ttfb.saturating_record(us);
        }
    }

    /// The parser completed a response with `left` bytes after it. `None`: keep going
    /// on this connection (see `on_response`).
    pub(super) fn response_in<S>(
        &mut self,
        c: &mut Conn<S>,
        done: Complete,
        left: usize,
        now: Instant,
    ) -> Option<Next> {
        c.pending = 0;
        if left > 0 {
            // Bytes after the response to the only request in flight (two responses for
            // one request): the response counts, the extra is the server's protocol
            // error, and the framing is lost.
            self.record(c, &done, now);
            self.stats.unsolicited += 1;
            return Some(Next::Reopen);
        }
        self.on_response(c, done, now)
    }

    /// Records a complete response and decides what the connection does next.
    /// `None` means: keep going on this connection (the next request was started).
    pub(super) fn on_response<S>(
        &mut self,
        c: &mut Conn<S>,
        done: Complete,
        now: Instant,
    ) -> Option<Next> {
        self.record(c, &done, now);
        if c.last || !done.keep_alive {
            c.phase = Phase::Draining;
            c.since = now;
            return None;
        }
        if self.start_request(c, now) {
            None
        } else {
            self.finish(c);
            Some(Next::Wait)
        }
    }

    /// Counts a complete response: its latency, body time and status.
    pub(super) fn record<S>(&mut self, c: &Conn<S>, done: &Complete, now: Instant) {
        let us = us_between(c.intended, now);
        self.stats.latency.saturating_record(us.max(1));
        if c.got_first {
            let body = us_between(c.first_at, now);
            self.stats.phases.body.saturating_record(body);
        }
        self.interval.saturating_record(us.max(1));
        self.stats.responses += 1;
        self.interval_responses += 1;
        self.stats.status(done.status);
        let e = self.w.request.endpoint[c.target as usize];
        self.stats.endpoint_response(e, done.status, us.max(1));
    }

    pub(super) fn on_eof<S>(&mut self, c: &mut Conn<S>, now: Instant) -> Next {
        if c.pending > 0 {
            return self.request_failed(c.target, ErrorKind::Parse);
        }
        match c.parser.eof() {
            Ok(Some(done)) => {
                // The connection is closed either way: the response ended with it.
                self.on_response(c, done, now);
                Next::Reopen
            }
            // Closed before any byte of the response on a reused connection: the server
            // ended keep-alive (idle timeout, keepalive_requests) without saying so.
            // Not a failure: retried once on a new connection, as browsers do for
            // idempotent requests (the budget unit is kept for it).
            Ok(None) if c.sent > 1 => {
                self.stats.keepalive_closed += 1;
                c.permit = true;
                // The same request again, on the new connection.
                c.ordinal = super::worker::RESEND;
                Next::Reopen
            }
            // Closed before any byte of the first response: the server dropped the
            // connection (wrk counts this as a read error too).
            Ok(None) => self.request_failed(c.target, ErrorKind::Read),
            Err(_) => self.request_failed(c.target, ErrorKind::Parse),
        }
    }
}
