//! Receives of the io_uring loop, and its completions: connects, receives (payload and
//! arrival time out of a `recvmsg`'s buffer, fed to the response parser), failed sends.
//!
//! A connection's bytes come in one of three ways:
//! - a multishot `recvmsg`, armed once, that copies whatever arrives (small responses);
//! - once a response to a target had a body large enough to discard, the next responses
//!   to that target come head first: a one-shot `recvmsg` of at most `HEAD_LEN` bytes,
//!   so that a large body is not copied before its head says how long it is (a multishot
//!   receive copies all that is queued, a whole 91 KiB response, before the loop sees
//!   its head);
//! - a discard of a Content-Length body's rest (`MSG_TRUNC`): counted, never copied.

use std::io;
use std::time::Instant;

use io_uring::{cqueue, opcode, squeue, types};

use super::super::arrival::{arrival_ns, on_clock};
use super::super::conn::{Next, Phase};
use super::super::http::Complete;
use super::super::stats::{us_between, ErrorKind};
use super::{
    ends_writer, user_data, Discarding, OneShot, Uring, CONNECT, DISCARD, DISCARD_MIN, HEAD,
    HEAD_LEN, IGNORED, QUIESCE, RECV, SEND,
};

impl Uring<'_> {
    /// One completion.
    pub(super) fn complete(&mut self, ud: u64, res: i32, flags: u32) {
        if ud == IGNORED || ud == QUIESCE {
            return;
        }
        let (i, gen, op) = ((ud >> 32) as usize, (ud >> 8) as u32 & 0xFF_FFFF, ud as u8);
        let bid = cqueue::buffer_select(flags);
        if ends_writer(op, flags) {
            self.armed -= 1;
        }
        let slot = &mut self.slots[i];
        let current = slot.fd.is_some() && slot.gen & 0xFF_FFFF == gen;
        if current {
            let now = Instant::now();
            match op {
                CONNECT => {
                    slot.connecting = false;
                    self.connected(i, res, now)
                }
                RECV | HEAD => {
                    if op == HEAD || !cqueue::more(flags) {
                        slot.recv = false;
                    }
                    let data = match (res, bid) {
                        (n, Some(bid)) if n > 0 && op == RECV => self.unpack(bid, n as usize),
                        (n, Some(bid)) if n > 0 => Some(self.unpack_head(i, bid, n as usize)),
                        _ => None,
                    };
                    let next = match (res, data) {
                        (_, Some((_, _, 0, _))) | (0, _) => self.eof(i, now),
                        (_, Some((bid, start, len, at))) => {
                            self.received(i, bid, start..start + len, at)
                        }
                        // Out of buffers (armed again below), or stopped for a discard.
                        (e, _) if e == -libc::ENOBUFS || e == -libc::ECANCELED => Next::Wait,
                        (e, _) => self.read_error(i, -e, now),
                    };
                    self.apply(i, next, now);
                    let slot = &self.slots[i];
                    if !cqueue::more(flags) && slot.discarding == Discarding::Stopping {
                        // Stopped for a discard: nothing more will be copied by it.
                        self.discard_rest(i);
                    }
                    // A receive that ended (buffers ran out, the kernel stopped it, or a
                    // head's) is armed again.
                    if res != 0 {
                        self.rearm(i);
                    }
                }
                DISCARD => {
                    self.slots[i].discarding = Discarding::No;
                    let next = self.discarded(i, res, now);
                    self.apply(i, next, now);
                    self.rearm(i);
                }
                SEND if res < 0 => {
                    let next = self
                        .lp
                        .request_failed(self.conns[i].target, ErrorKind::Write);
                    self.apply(i, next, now);
                }
                _ => {}
            }
        }
        if let Some(bid) = bid {
            self.bufs.recycle(bid);
        }
    }

    /// A receive of slot `i` has ended: another is armed while the connection still
    /// expects bytes, unless the body's rest is to be discarded.
    fn rearm(&mut self, i: usize) {
        if !self.slots[i].discard_queued
            && matches!(
                self.conns[i].phase,
                Phase::Reading | Phase::Draining | Phase::Paced
            )
        {
            self.arm_recv(i);
        }
    }

    fn connected(&mut self, i: usize, res: i32, now: Instant) {
        let c = &mut self.conns[i];
        if res < 0 {
            self.lp
                .connect_failed(c, &io::Error::from_raw_os_error(-res), now);
            self.close(i);
            return;
        }
        c.tcp_up = true;
        c.tcp_at = now;
        let us = us_between(c.since, now).max(1);
        self.lp.stats.phases.tcp_connect.saturating_record(us);
        self.lp.count_established(c, now);
        if !self.lp.start_request(c, now) {
            self.lp.finish(c);
        }
        self.settle(i);
        if self.conns[i].phase == Phase::Paced {
            self.arm_recv(i);
        }
    }

    /// Where the payload of a receive's buffer lies, and when it arrived (the kernel's
    /// timestamp on the loop's clock, else the end of the last wait):
    /// `(bid, start, len, at)`; `None` when the buffer is not a message (it then counts
    /// as a read error).
    fn unpack(&self, bid: u16, n: usize) -> Option<(u16, usize, usize, Instant)> {
        let buf = self.bufs.get(bid, n);
        let out = types::RecvMsgOut::parse(buf, &self.msghdr).ok()?;
        let payload = out.payload_data();
        let start = payload.as_ptr() as usize - buf.as_ptr() as usize;
        let at = self.arrival(out.control_data()).unwrap_or(self.clock.0);
        Some((bid, start, payload.len(), at))
    }

    /// The same for a head's one-shot receive: its payload fills the buffer from the
    /// start, and its arrival time is in the slot's message.
    fn unpack_head(&self, i: usize, bid: u16, n: usize) -> (u16, usize, usize, Instant) {
        (bid, 0, n, self.oneshot_arrival(i).unwrap_or(self.clock.0))
    }

    /// The arrival time in a receive's control messages, on the loop's clock.
    fn arrival(&self, control: &[u8]) -> Option<Instant> {
        arrival_ns(control).map(|ns| self.instant_of(ns))
    }

    /// The arrival time the last one-shot receive of slot `i` (head or discard) left.
    fn oneshot_arrival(&self, i: usize) -> Option<Instant> {
        let m = self.slots[i].oneshot.as_ref()?;
        self.arrival(m.control())
    }

    /// Bytes of the connection's stream arrived at `now` in buffer `bid`, at `range`.
    fn received(
        &mut self,
        i: usize,
        bid: u16,
        range: std::ops::Range<usize>,
        now: Instant,
    ) -> Next {
        let n = range.len();
        let c = &mut self.conns[i];
        match c.phase {
            Phase::Reading => {}
            // Bytes after the last response are ignored; we only wait for the FIN.
            Phase::Draining => return Next::Wait,
            // Bytes nobody asked for, between requests: the server's protocol error.
            _ => {
                self.lp.stats.unsolicited += 1;
                return if c.phase == Phase::Done {
                    Next::Wait
                } else {
                    Next::Reopen
                };
            }
        }
        let lp = &mut self.lp;
        lp.count_read(c, n, now);
        let data = &self.bufs.get(bid, range.end)[range.start..];
        let carry = &mut self.slots[i].carry;
        let carried = !carry.is_empty();
        if carried {
            carry.extend_from_slice(data);
        }
        let input: &[u8] = if carried { carry } else { data };
        let fed = match c.parser.feed(input) {
            Ok(fed) => fed,
            Err(_) => return lp.request_failed(c.target, ErrorKind::Parse),
        };
        let left = input.len() - fed.consumed;
        match fed.complete {
            Some(done) => {
                carry.clear();
                self.responded(i, done, left, now)
            }
            None => {
                if carried {
                    carry.drain(..fed.consumed);
                } else {
                    carry.extend_from_slice(&data[fed.consumed..]);
                }
                c.pending = carry.len();
                if carry.len() >= self.max_carry {
                    // A head or line larger than the epoll loop's whole buffer.
                    return lp.request_failed(c.target, ErrorKind::Parse);
                }
                let slot = &mut self.slots[i];
                if self.deferred
                    && !slot.discard_queued
                    && c.parser.body_remaining().is_some_and(|r| r >= DISCARD_MIN)
                {
                    slot.discard_queued = true;
                    slot.large = true;
                    self.discards.push(i);
                }
                Next::Wait
            }
        }
    }

    /// Arms slot `i`'s receive, unless one is armed or a discard is under way: head
    /// first at the start of a response to a target whose last body was large, else
    /// multishot.
    pub(super) fn arm_recv(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        let Some(fd) = slot.fd else {
            return;
        };
        if slot.recv || slot.discarding != Discarding::No {
            return;
        }
        slot.recv = true;
        self.armed += 1;
        let c = &self.conns[i];
        let head = self.large[c.target as usize] && c.pending == 0 && c.parser.is_idle();
        slot.multishot = !head;
        let sqe = if head {
            let m = slot.oneshot.get_or_insert_with(OneShot::new);
            m.set_len(HEAD_LEN);
            opcode::RecvMsg::new(types::Fd(fd), &mut m.hdr)
                .buf_group(self.bufs.group())
                .build()
                .flags(squeue::Flags::BUFFER_SELECT)
                .user_data(user_data(i, slot.gen, HEAD))
        } else {
            opcode::RecvMsgMulti::new(types::Fd(fd), &*self.msghdr, self.bufs.group())
                .build()
                .user_data(user_data(i, slot.gen, RECV))
        };
        self.push(sqe);
    }

    /// Slot `i` is inside a Content-Length body with much still to come: its multishot
    /// receive is asked to stop, and when it has (`discard_rest`) one receive discards
    /// the rest unread.
    pub(super) fn discard(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        slot.discard_queued = false;
        let c = &self.conns[i];
        let rest = c.parser.body_remaining().unwrap_or(0);
        if slot.fd.is_none()
            || c.phase != Phase::Reading
            || slot.discarding != Discarding::No
            || rest < DISCARD_MIN
        {
            return;
        }
        if !slot.recv {
            self.discard_rest(i);
            return;
        }
        self.stop_multishot(i);
    }

    /// Asks slot `i`'s multishot receive to stop; its last completion then calls
    /// `discard_rest` (which discards a large body's rest, if any) and arms the next
    /// receive. Nothing else is armed on the slot meanwhile (`Discarding::Stopping`).
    pub(super) fn stop_multishot(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        slot.discarding = Discarding::Stopping;
        let stop = opcode::AsyncCancel::new(user_data(i, slot.gen, RECV))
            .build()
            .flags(squeue::Flags::SKIP_SUCCESS)
            .user_data(IGNORED);
        self.push(stop);
    }

    /// No receive is armed on slot `i` (a multishot one has stopped): discard what is
    /// left of the body (if the response is still incomplete).
    pub(super) fn discard_rest(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        slot.discarding = Discarding::No;
        let c = &self.conns[i];
        let (Some(fd), Some(rest)) = (slot.fd, c.parser.body_remaining()) else {
            return;
        };
        if c.phase != Phase::Reading || rest == 0 {
            return;
        }
        slot.discarding = Discarding::Active;
        slot.large = true;
        let d = slot.oneshot.get_or_insert_with(OneShot::new);
        d.set_len(rest.min(1 << 30) as usize);
        let sqe = opcode::RecvMsg::new(types::Fd(fd), &mut d.hdr)
            .flags((libc::MSG_TRUNC | libc::MSG_WAITALL) as u32)
            .build()
            .user_data(user_data(i, slot.gen, DISCARD));
        self.armed += 1;
        self.push(sqe);
    }

    /// A discarding receive ended: `res` bytes of the body were dropped unread (fewer
    /// than asked only when the connection ended), or it failed.
    fn discarded(&mut self, i: usize, res: i32, now: Instant) -> Next {
        if res < 0 {
            return self.read_error(i, -res, now);
        }
        let n = res as u64;
        let at = self.oneshot_arrival(i).unwrap_or(now);
        let c = &mut self.conns[i];
        self.lp.count_read(c, res as usize, at);
        match c.parser.skip(n) {
            Some(done) => self.responded(i, done, 0, at),
            // The server closed before the body ended.
            None if n == 0 => self.lp.on_eof(c, at),
            // A receive may end early (MSG_WAITALL is not kept when nothing is copied):
            // discard the rest with another.
            None => {
                self.discard_rest(i);
                Next::Wait
            }
        }
    }

    /// Slot `i`'s response is complete, its last bytes in at `at`, with `left` bytes
    /// after it: how long it waited to be handled (`held`), then the shared handling.
    fn responded(&mut self, i: usize, done: Complete, left: usize, at: Instant) -> Next {
        let target = self.conns[i].target as usize;
        self.large[target] = self.slots[i].large;
        if left == 0 {
            let held = us_between(at, self.clock.0);
            self.lp.stats.phases.held.saturating_record(held);
        }
        let c = &mut self.conns[i];
        self.lp.response_in(c, done, left, at).unwrap_or(Next::Wait)
    }

    /// A kernel arrival time (ns since the epoch) on the loop's clock.
    fn instant_of(&self, ns: i128) -> Instant {
        // Never after the clocks were read: the completion was seen after that.
        on_clock(self.clock, ns).min(self.clock.0)
    }

    /// The server closed its side.
    fn eof(&mut self, i: usize, now: Instant) -> Next {
        let c = &mut self.conns[i];
        match c.phase {
            Phase::Reading => self.lp.on_eof(c, now),
            // Done: nothing more to send; the close follows.
            Phase::Done => Next::Wait,
            // Draining: the FIN we waited for. Paced: the server ended keep-alive between
            // requests; the next one goes on a new connection.
            _ => Next::Reopen,
        }
    }

    fn read_error(&mut self, i: usize, errno: i32, now: Instant) -> Next {
        let c = &mut self.conns[i];
        match c.phase {
            // A reset instead of a FIN before any byte of the response on a reused
            // connection: the same end of keep-alive as an EOF there.
            Phase::Reading
                if errno == libc::ECONNRESET
                    && c.sent > 1
                    && c.pending == 0
                    && c.parser.is_idle() =>
            {
                self.lp.on_eof(c, now)
            }
            Phase::Reading => self.lp.request_failed(c.target, ErrorKind::Read),
            Phase::Done => Next::Wait,
            _ => Next::Reopen,
        }
    }
}
