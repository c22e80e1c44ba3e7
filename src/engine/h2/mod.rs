//! HTTP/2 in the worker's own event loop: up to `--max-concurrent-streams` requests in
//! flight on each connection, like h2load's `-m`.
//!
//! DESIGN: the engine is a mio event loop per worker thread, with no async runtime. The
//! `h2` crate drives its connections through tokio's I/O traits, so using it would mean
//! a tokio runtime per worker on a separate path: a second loop with its own timers,
//! wakers, a task and a channel per request, and allocations per stream — against the
//! hot-path rules (STYLE.md) and the goal of costing no more client CPU than h2load.
//! A client that only loads a server needs a small part of the protocol, so it is
//! written here sans-I/O over the same `Transport` (plain for h2c with prior knowledge,
//! rustls with ALPN `h2`): the preface and SETTINGS (+ACK), HEADERS and CONTINUATION,
//! DATA, WINDOW_UPDATE (we open a 1 GiB receive window and refill it at half; a request
//! body goes in DATA frames as the server's stream and connection windows allow: at
//! once when they do, else as its WINDOW_UPDATEs arrive, at most 256 KiB queued at a
//! time; a stream answered before its body is all sent is reset by us), PING (+ACK),
//! RST_STREAM (counted as an error of its request, the connection goes on) and GOAWAY
//! (counted; streams the server did not process are sent again on a new connection).
//! HPACK: the request's header block is encoded once before the run by the
//! `httlib-hpack` crate (see `frame.rs`); responses are decoded by our own `hpack.rs`,
//! which reads only `:status` and keeps the connection's dynamic table in step without
//! copying a field. The loop allocates nothing per request: a connection's streams,
//! write buffer, HPACK table and header-block buffers are sized when it is first set up
//! and reused. (`httlib-hpack`'s decoder, used before, allocated every field: 30% of
//! the client's CPU against nginx; `hpack` and its forks `loona-hpack` and
//! `fluke-hpack` build a 257-entry HashMap for every Huffman-coded string, 150 µs of
//! CPU per nginx response.)
//!
//! Per response the same counts and histograms as HTTP/1.1 are recorded: latency (from
//! the stream's start), time to first byte (its first HEADERS), body (first HEADERS to
//! END_STREAM), status code, bytes read (every byte of the connection, frames included).

pub mod frame;
pub(in crate::engine) mod hpack;
pub(in crate::engine) mod huffman;
pub(super) mod state;
#[cfg(test)]
mod testutil;

use std::io;
use std::time::Instant;

use frame::{FrameHead, HEAD, RECV_WINDOW};
use state::{H2Conn, Stream};

use super::conn::{Conn, Next, Phase};
use super::stats::{us_between, ErrorKind};
use super::transport::Transport;
use super::worker::{Loop, UNCOUNTED};

/// RST_STREAM's error code for a stream the server did not process.
const REFUSED_STREAM: u32 = 0x7;

impl<T: Transport> Loop<'_, T> {
    /// Set-up is done on a connection that speaks HTTP/2: send the preface and the
    /// first streams. `Some` when there is nothing to do (budget spent).
    pub(super) fn h2_start(&mut self, c: &mut Conn<T>, now: Instant) -> Option<Next> {
        let frames = self.w.h2.as_ref().expect("an HTTP/2 run");
        let m = self.w.streams as usize;
        let h =
            c.h2.get_or_insert_with(|| Box::new(H2Conn::new(m, frames.max_bytes)));
        h.reset();
        // Responses end at their kernel arrival time (the loop may let them gather).
        if let Some(t) = c.transport.as_mut() {
            t.stamp_arrivals();
        }
        frame::preface(&mut h.out);
        c.phase = Phase::H2;
        c.since = now;
        self.h2_fill(c, now)
    }

    /// Starts streams until the connection has as many in flight as allowed (in open
    /// loop: as many as are due, the rest when they are due). `Some` when the connection
    /// is finished with (nothing in flight and nothing to start).
    fn h2_fill(&mut self, c: &mut Conn<T>, now: Instant) -> Option<Next> {
        let w = self.w;
        let all = w.h2.as_deref().expect("an HTTP/2 run");
        let h = c.h2.as_deref_mut().expect("HTTP/2 state");
        let limit = (self.w.streams).min(h.peer_max_streams) as usize;
        let mut spent = false;
        while h.streams.len() < limit
            && !h.goaway
            && h.next_id < i32::MAX as u32
            && self.w.connreqs.is_none_or(|n| h.started < n)
            && (all.max_body == 0 || h.send_window > 0)
            && (self.w.pace.is_none() || c.due <= now)
        {
            let mut ordinal = UNCOUNTED;
            if c.permit {
                c.permit = false;
                ordinal = c.ordinal;
            } else if h.permits > 0 {
                // Sent again (GOAWAY, REFUSED_STREAM): by this connection's own count.
                h.permits -= 1;
            } else if let Some(o) = w.budget.claim() {
                ordinal = o;
            } else {
                spent = true;
                break;
            }
            c.ordinal = ordinal;
            let target = self.next_target_of(&mut c.ordinal, &mut c.seq, 0);
            let frames = &all.each[target as usize];
            let mut intended = now;
            if let Some(pace) = self.w.pace {
                // A request due while every stream was busy waited for one: its latency
                // counts from when it was due (no coordinated omission).
                intended = c.due;
                c.due += pace;
            }
            let window = h.peer_window as i64;
            let whole = frames.fits(window.min(h.send_window));
            h.streams.push(Stream {
                id: h.next_id,
                since: now,
                intended,
                first_at: None,
                status: 0,
                recv: 0,
                body_at: 0,
                window,
                target,
            });
            if whole {
                frames.write(&mut h.out, h.next_id);
                let s = h.streams.last_mut().expect("just pushed");
                s.body_at = frames.body_len as u32;
                s.window -= frames.body_len as i64;
                h.send_window -= frames.body_len as i64;
            } else {
                frames.write_headers(&mut h.out, h.next_id);
                h.push_body(all, h.streams.len() - 1);
            }
            h.next_id += 2;
            h.started += 1;
        }
        if spent {
            if h.streams.is_empty() {
                self.finish(c);
                return Some(Next::Wait);
            }
            return None;
        }
        // Open loop: woken when the next request is due (unless a stream must end first).
        if self.w.pace.is_some()
            && c.due > now
            && h.streams.len() < limit
            && h.scheduled != Some(c.due)
        {
            h.scheduled = Some(c.due);
            self.paced.push(std::cmp::Reverse((c.due, c.idx)));
        }
        if !h.streams.is_empty() {
            return None;
        }
        if h.goaway
            || h.next_id >= i32::MAX as u32
            || self.w.connreqs.is_some_and(|n| h.started >= n)
        {
            return Some(Next::Reopen);
        }
        // Waiting for the next due time, or for the server's SETTINGS or WINDOW_UPDATE
        // to allow a stream.
        None
    }

    /// Open loop: the connection's next request is due.
    pub(super) fn h2_due(&mut self, c: &mut Conn<T>, now: Instant) -> Next {
        if let Some(h) = c.h2.as_deref_mut() {
            h.scheduled = None;
        }
        if let Some(next) = self.h2_fill(c, now) {
            return next;
        }
        self.h2_send(c)
    }

    /// Writes what is queued, then waits for the next event.
    fn h2_send(&mut self, c: &mut Conn<T>) -> Next {
        match self.h2_flush(c) {
            Ok(()) => Next::Wait,
            Err(k) => self.h2_fail(c, k),
        }
    }

    /// The run is over: what the server already sent is read and dropped, so that
    /// closing the socket sends a FIN, not a reset. (A reset can make the server's
    /// kernel drop requests it had not yet read: streams counted in flight that the
    /// server would never see.)
    pub(super) fn h2_drain(c: &mut Conn<T>) {
        let Some(t) = c.transport.as_mut() else {
            return;
        };
        for _ in 0..64 {
            match t.read(&mut c.buf) {
                Ok(n) if n > 0 => {}
                _ => return,
            }
        }
    }

    /// Every stream in flight failed with the connection.
    pub(super) fn h2_fail(&mut self, c: &mut Conn<T>, kind: ErrorKind) -> Next {
        if let Some(h) = c.h2.as_deref_mut() {
            let n = h.streams.len() as u64;
            for s in &h.streams {
                self.stats
                    .endpoint_error(self.w.request.endpoint[s.target as usize]);
            }
            h.streams.clear();
            self.stats.errors[kind as usize] += n;
            self.interval_errors += n;
        }
        Next::Reopen
    }

    /// Writes queued frames until done or the socket is full; request bodies longer than
    /// a queue's worth go on as it empties.
    fn h2_flush(&self, c: &mut Conn<T>) -> Result<(), ErrorKind> {
        let (Some(t), Some(h)) = (c.transport.as_mut(), c.h2.as_deref_mut()) else {
            return Ok(());
        };
        loop {
            while h.out_at < h.out.len() {
                match t.write(&h.out[h.out_at..]) {
                    Ok(0) => return Err(ErrorKind::Write),
                    Ok(n) => h.out_at += n,
                    Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => return Err(ErrorKind::Write),
                }
            }
            h.out.clear();
            h.out_at = 0;
            h.push_bodies(self.w.h2.as_deref().expect("an HTTP/2 run"));
            if h.out.is_empty() {
                break;
            }
        }
        t.flush().map(|_| ()).map_err(|_| ErrorKind::Write)
    }

    /// Drives an HTTP/2 connection until the socket would block.
    pub(super) fn h2_step(&mut self, c: &mut Conn<T>, now: Instant) -> Next {
        loop {
            if let Err(k) = self.h2_flush(c) {
                return self.h2_fail(c, k);
            }
            let Some(t) = c.transport.as_mut() else {
                return Next::Wait;
            };
            let space = c.buf.len() - c.pending;
            let (n, arrived) = match t.read_stamped(&mut c.buf[c.pending..]) {
                Ok(r) => r,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Next::Wait,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(_) => return self.h2_fail(c, ErrorKind::Read),
            };
            let drained = t.drained(n < space);
            self.stats.bytes_read += n as u64;
            self.interval_bytes += n as u64;
            if n == 0 {
                // The server closed: whatever was in flight is lost with it.
                return self.h2_fail(c, ErrorKind::Read);
            }
            let end = c.pending + n;
            // The frames end (responses, first bytes) when their bytes arrived.
            let when = arrived.unwrap_or(now);
            let before = self.stats.responses;
            let mut at = 0;
            while end - at >= HEAD {
                let f = FrameHead::parse(&c.buf[at..end]);
                if f.len > frame::MAX_FRAME {
                    // We never allowed frames larger than the default.
                    return self.h2_fail(c, ErrorKind::Parse);
                }
                if end - at < HEAD + f.len {
                    break;
                }
                let payload = at + HEAD..at + HEAD + f.len;
                at = payload.end;
                let h = c.h2.as_deref_mut().expect("HTTP/2 state");
                if let Err(k) = self.h2_frame(h, f, &c.buf[payload], when) {
                    return self.h2_fail(c, k);
                }
            }
            if arrived.is_some() {
                // How long the responses waited in the socket for the loop.
                let done = self.stats.responses - before;
                if done > 0 {
                    let held = us_between(when, now);
                    self.stats.phases.held.saturating_record_n(held, done);
                }
            }
            c.buf.copy_within(at..end, 0);
            c.pending = end - at;
            if let Some(next) = self.h2_fill(c, now) {
                return next;
            }
            c.since = now;
            if drained && !c.hup {
                // The socket is empty (see `Transport::drained`): send what
                // the frames asked for and wait for the next event.
                return self.h2_send(c);
            }
        }
    }

    /// Acts on one frame, whose bytes arrived at `arrived` (a response ends then).
    fn h2_frame(
        &mut self,
        h: &mut H2Conn,
        f: FrameHead,
        p: &[u8],
        arrived: Instant,
    ) -> Result<(), ErrorKind> {
        if h.block_stream != 0 && f.ty != frame::CONTINUATION {
            // A header block must not be interrupted (RFC 9113 §6.10).
            return Err(ErrorKind::Parse);
        }
        match f.ty {
            frame::DATA => {
                let len = f.len as u32;
                h.recv_unacked += len;
                if h.recv_unacked >= RECV_WINDOW / 2 {
                    frame::window_update(&mut h.out, 0, h.recv_unacked);
                    h.recv_unacked = 0;
                }
                if let Some(i) = h.find(f.stream) {
                    let s = &mut h.streams[i];
                    s.recv += len;
                    if s.recv >= RECV_WINDOW / 2 && f.flags & frame::END_STREAM == 0 {
                        frame::window_update(&mut h.out, s.id, s.recv);
                        s.recv = 0;
                    }
                    if f.flags & frame::END_STREAM != 0 {
                        self.h2_complete(h, i, arrived);
                    }
                }
            }
            frame::HEADERS => {
                let mut frag = p;
                if f.flags & frame::PADDED != 0 {
                    let pad = *frag.first().ok_or(ErrorKind::Parse)? as usize;
                    if pad + 1 > frag.len() {
                        return Err(ErrorKind::Parse);
                    }
                    frag = &frag[1..frag.len() - pad];
                }
                if f.flags & frame::PRIORITY_FLAG != 0 {
                    frag = frag.get(5..).ok_or(ErrorKind::Parse)?;
                }
                let ends = f.flags & frame::END_STREAM != 0;
                if f.flags & frame::END_HEADERS != 0 {
                    let status = h.decode_status(frag)?;
                    self.h2_headers(h, f.stream, status, ends, arrived);
                } else {
                    h.block.clear();
                    h.block.extend_from_slice(frag);
                    h.block_stream = f.stream;
                    h.block_ends_stream = ends;
                }
            }
            frame::CONTINUATION => {
                if h.block_stream == 0 || f.stream != h.block_stream {
                    return Err(ErrorKind::Parse);
                }
                h.block.extend_from_slice(p);
                if f.flags & frame::END_HEADERS != 0 {
                    let block = std::mem::take(&mut h.block);
                    let status = h.decode_status(&block);
                    h.block = block;
                    let (id, ends) = (h.block_stream, h.block_ends_stream);
                    h.block_stream = 0;
                    self.h2_headers(h, id, status?, ends, arrived);
                }
            }
            frame::RST_STREAM => {
                if let Some(i) = h.find(f.stream) {
                    let s = h.streams.swap_remove(i);
                    if p.get(..4) == Some(&REFUSED_STREAM.to_be_bytes()[..]) {
                        // Refused before any processing (RFC 9113 §8.7): sent again.
                        h.permits += 1;
                    } else {
                        self.stats
                            .endpoint_error(self.w.request.endpoint[s.target as usize]);
                        self.stats.errors[ErrorKind::Reset as usize] += 1;
                        self.interval_errors += 1;
                    }
                }
            }
            frame::SETTINGS if f.flags & frame::ACK == 0 => {
                if !h.settings_seen {
                    h.settings_seen = true;
                    h.peer_max_streams = u32::MAX;
                }
                for s in p.chunks_exact(6) {
                    let v = u32::from_be_bytes([s[2], s[3], s[4], s[5]]);
                    match u16::from_be_bytes([s[0], s[1]]) {
                        0x3 => h.peer_max_streams = v,
                        0x4 if v > i32::MAX as u32 => return Err(ErrorKind::Parse),
                        0x4 => {
                            // Every open stream's window moves by the change (§6.9.2).
                            let change = v as i64 - h.peer_window as i64;
                            h.streams.iter_mut().for_each(|s| s.window += change);
                            h.peer_window = v;
                        }
                        _ => {}
                    }
                }
                frame::head(&mut h.out, 0, frame::SETTINGS, frame::ACK, 0);
                h.push_bodies(self.w.h2.as_deref().expect("an HTTP/2 run"));
            }
            frame::PING if f.flags & frame::ACK == 0 => {
                frame::head(&mut h.out, p.len(), frame::PING, frame::ACK, 0);
                h.out.extend_from_slice(p);
            }
            frame::GOAWAY => {
                let last = p
                    .get(..4)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & 0x7fff_ffff)
                    .ok_or(ErrorKind::Parse)?;
                h.goaway = true;
                self.stats.goaway += 1;
                // Streams above `last` were never processed: sent again elsewhere.
                let before = h.streams.len();
                h.streams.retain(|s| s.id <= last);
                h.permits += (before - h.streams.len()) as u32;
            }
            frame::WINDOW_UPDATE => {
                let inc = p
                    .get(..4)
                    .map(|b| u32::from_be_bytes([b[0], b[1], b[2], b[3]]) & 0x7fff_ffff)
                    .ok_or(ErrorKind::Parse)?;
                let frames = self.w.h2.as_deref().expect("an HTTP/2 run");
                if f.stream == 0 {
                    h.send_window += inc as i64;
                    h.push_bodies(frames);
                } else if let Some(i) = h.find(f.stream) {
                    h.streams[i].window += inc as i64;
                    h.push_body(frames, i);
                }
            }
            // We said SETTINGS_ENABLE_PUSH = 0.
            frame::PUSH_PROMISE => return Err(ErrorKind::Parse),
            // PRIORITY, ACKs and unknown types are ignored, as RFC 9113 §4.1 asks.
            _ => {}
        }
        Ok(())
    }

    /// A header block for stream `id` is decoded.
    fn h2_headers(&mut self, h: &mut H2Conn, id: u32, status: u16, ends: bool, now: Instant) {
        let Some(i) = h.find(id) else { return };
        let s = &mut h.streams[i];
        if s.first_at.is_none() {
            s.first_at = Some(now);
            let us = us_between(s.since, now).max(1);
            self.stats.phases.ttfb.saturating_record(us);
        }
        // The first final status; 1xx interim responses and trailers keep it.
        if s.status == 0 && status >= 200 {
            s.status = status;
        }
        if ends {
            self.h2_complete(h, i, now);
        }
    }

    /// Stream `i` has ended: record its response.
    fn h2_complete(&mut self, h: &mut H2Conn, i: usize, now: Instant) {
        let s = h.streams.swap_remove(i);
        let body_len = self
            .w
            .h2
            .as_ref()
            .map_or(0, |f| f.each[s.target as usize].body_len);
        if (s.body_at as usize) < body_len {
            // Answered before its whole body was sent: the rest is not sent, and the
            // stream is closed from our side too, or the server would count it open.
            frame::rst_stream(&mut h.out, s.id, frame::CANCEL);
        }
        if s.status == 0 {
            // Ended without a final status: not a response.
            self.stats.errors[ErrorKind::Parse as usize] += 1;
            self.interval_errors += 1;
            self.stats
                .endpoint_error(self.w.request.endpoint[s.target as usize]);
            return;
        }
        let us = us_between(s.intended, now).max(1);
        self.stats.latency.saturating_record(us);
        self.interval.saturating_record(us);
        if let Some(first) = s.first_at {
            self.stats
                .phases
                .body
                .saturating_record(us_between(first, now));
        }
        self.stats.responses += 1;
        self.interval_responses += 1;
        self.stats.status(s.status);
        self.stats
            .endpoint_response(self.w.request.endpoint[s.target as usize], s.status, us);
    }
}
