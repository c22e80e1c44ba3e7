//! One worker thread over io_uring (plain-text HTTP/1.1; TLS and HTTP/2 stay on epoll).
//!
//! What makes it cheaper than the epoll loop, per loop iteration and per response:
//! - one `io_uring_enter` per iteration submits every send, connect and close queued by the
//!   previous batch and waits for the next completions (epoll costs a `read` and a
//!   `write` per response plus `epoll_wait`);
//! - a multishot receive is armed once per connection and fills buffers the kernel picks
//!   from a provided-buffer ring (`bufring.rs`): no read buffer per connection, so memory
//!   follows the bytes in flight, not the connection count;
//! - sends go straight from the prebuilt request bytes with `MSG_WAITALL` and post no
//!   completion unless they fail;
//! - with `--connreqs`, connect and close go through the ring too (after a `socket()`).
//!
//! DESIGN: TLS and HTTP/2 stay on epoll. rustls wants to own the reads and writes of its
//! records; feeding it from ring completions means a copy per record and a second buffer
//! per connection, which is most of what io_uring saves, and TLS's own CPU (the
//! ciphers) dwarfs the system calls anyway. HTTP/2 multiplexes many requests per
//! connection, so it already makes few system calls per response. Both are recorded in
//! the Run (`results.io`, and `io_note` when io_uring was asked for by name).
//!
//! The bookkeeping (budget, timing, counting, timeline) is the epoll loop's own
//! (`worker.rs`, `h1.rs`), shared through `Loop`. A stale completion (its connection
//! was replaced since) is recognised by the slot's generation in its user data.

mod bufring;
mod recv;
mod sys;

use std::io;
use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::arrival::clocks;
use super::conn::{Conn, Next, Phase};
use super::stats::{ErrorKind, ThreadStats};
use super::transport::Plain;
use super::worker::{Loop, Overdue, Worker, SWEEP, TICK};
use bufring::BufRing;
use sys::{build, no_iowait, set_flag, sockaddr, GetEventsArg, OneShot, ENTER_NO_IOWAIT};

const CONNECT: u8 = 1;
const RECV: u8 = 2;
const SEND: u8 = 3;
const DISCARD: u8 = 4;
const HEAD: u8 = 5;
/// A Content-Length body with at least this much still to come is discarded unread.
const DISCARD_MIN: u64 = 16 * 1024;
/// What a head's one-shot receive copies at most (the head and the body's first bytes).
const HEAD_LEN: usize = 4096;
/// Completions nobody waits for (a failed cancel or close).
const IGNORED: u64 = u64::MAX;
/// The final cancellation of everything in flight.
const QUIESCE: u64 = u64::MAX - 1;
/// Receive buffers: large enough that a loopback segment (up to 64 KiB) fills one.
const BUFFER: usize = 64 * 1024;
/// How long the end of the run waits for the kernel to hand back every buffer.
const QUIESCE_WAIT: Duration = Duration::from_secs(1);

/// Whether a completion of operation `op` ends one that writes into our memory (a
/// multishot receive's last completion, or a one-shot receive's only one): counted
/// down in `Uring::armed`.
fn ends_writer(op: u8, flags: u32) -> bool {
    (op == RECV && !cqueue::more(flags)) || op == DISCARD || op == HEAD
}

fn user_data(slot: usize, gen: u32, op: u8) -> u64 {
    ((slot as u64) << 32) | (((gen & 0xFF_FFFF) as u64) << 8) | op as u64
}

pub use sys::probe;

/// A body's rest discarded unread: first the multishot receive is stopped (its last
/// completion says no more bytes will be copied by it), then one receive discards what
/// is left. Two steps, because a receive the kernel has already begun cannot be
/// cancelled, and two receives on one socket would split the stream.
#[derive(Default, Clone, Copy, PartialEq, Eq)]
enum Discarding {
    #[default]
    No,
    /// The multishot receive was asked to stop.
    Stopping,
    /// The discarding receive is in flight.
    Active,
}

/// The io_uring side of one connection slot.
#[derive(Default)]
struct Slot {
    /// The socket, while the connection is open.
    fd: Option<RawFd>,
    /// Bumped when the socket is closed, so its late completions are ignored.
    gen: u32,
    /// A receive is armed on the socket: multishot, or a head's one-shot (`HEAD`).
    recv: bool,
    /// The receive armed is the multishot one.
    multishot: bool,
    /// Bytes of an incomplete head or chunk line carried to the next completion.
    carry: Vec<u8>,
    /// Where a discard of a body's rest stands.
    discarding: Discarding,
    /// Its connect has not completed.
    connecting: bool,
    /// The slot is in `Uring::discards`.
    discard_queued: bool,
    /// The response in flight has a body large enough to discard (`DISCARD_MIN` still
    /// to come after a receive): its rest is being, or was, discarded unread.
    large: bool,
    /// The one-shot receives' message (discard or head), made on first use.
    oneshot: Option<Box<OneShot>>,
}

struct Uring<'a> {
    lp: Loop<'a, Plain>,
    conns: Vec<Conn<()>>,
    slots: Vec<Slot>,
    ring: IoUring,
    bufs: BufRing,
    /// Multishot receives whose final completion has not come (the kernel may still
    /// write into the buffers), and discarding receives (into their slot's `Discard`).
    armed: usize,
    /// The ring runs completions only when this thread waits (`sys::build`).
    deferred: bool,
    /// The waits are entered with `IORING_ENTER_NO_IOWAIT` (`sys::ENTER_NO_IOWAIT`);
    /// without it each wait's CPU is marked in `ThreadStats::iowait_cpus`.
    no_iowait: bool,
    /// Slots inside a large body: at the next wait, the rest is discarded unread.
    discards: Vec<usize>,
    /// Per target (`Requests::len` of them): its last response had a large body, so its next
    /// requests are received head first (`recv.rs`) and a large body is not copied
    /// before its head is seen. Per target, not per run: one small response (a
    /// connection's first, copied whole by a multishot receive armed before anything
    /// was known) must not turn every connection back to copying.
    large: Vec<bool>,
    addr: Box<libc::sockaddr_storage>,
    addr_len: libc::socklen_t,
    domain: i32,
    /// Requests longer than a segment are sent with Nagle off (a short request leaves in
    /// one segment anyway, and the option costs a system call per connection). Such a
    /// request may also still be sending when its connection is closed.
    nodelay: bool,
    /// A head or line longer than this is a parse error, as in the epoll loop.
    max_carry: usize,
    /// The receive's message header: no address, room for the arrival timestamp.
    msghdr: Box<libc::msghdr>,
    /// Both clocks read together after the last wait, to place the kernel's arrival
    /// timestamps (wall clock) on the loop's monotonic clock.
    clock: (Instant, i128),
    /// Slots whose request was queued in this iteration: it leaves at the next enter,
    /// and its time is taken then.
    queued: Vec<usize>,
    /// Completions per microsecond lately, and when/at what count it was last measured.
    rate: f64,
    rate_at: (Instant, u64),
    /// Completions handled so far (the rate above counts these: a response on a new
    /// connection brings several — connect, data, end).
    completions: u64,
}

/// Room for one `SCM_TIMESTAMPNS` control message.
const CONTROL: usize = 32;
/// How long, at the recent response rate, the loop lets completions gather before it
/// wakes (the latency is not affected: it is taken from the kernel's arrival time).
const HOLD_US: f64 = 300.0;
/// The most a wait for a batch may last when fewer responses come than expected.
const HOLD_MAX: Duration = Duration::from_millis(1);

/// Runs the load until the deadline, the budget or the stop flag ends it.
pub fn run(w: &Worker<Plain>) -> io::Result<ThreadStats> {
    let n = w.connections.max(1);
    let entries = (2 * n).next_power_of_two().clamp(64, 4096) as u32;
    let (ring, deferred) = build(entries, entries * 4)?;
    let no_iowait = no_iowait(&ring);
    let count = n.next_power_of_two().clamp(16, 256) as u16;
    let bufs = BufRing::new(&ring.submitter(), count, BUFFER, 0)?;
    let (addr, addr_len) = sockaddr(w.addr);
    let mut u = Uring {
        lp: Loop::new(w, None),
        conns: (0..w.connections).map(|i| w.new_conn(i, 0)).collect(),
        slots: (0..w.connections).map(|_| Slot::default()).collect(),
        ring,
        bufs,
        armed: 0,
        deferred,
        no_iowait,
        discards: Vec::new(),
        large: vec![false; w.request.len()],
        addr,
        addr_len,
        domain: if w.addr.is_ipv4() {
            libc::AF_INET
        } else {
            libc::AF_INET6
        },
        nodelay: w.request.max_len > 1400,
        max_carry: w.read_buffer,
        msghdr: {
            // SAFETY: msghdr is plain data, valid when zeroed (no name, no iovec).
            let mut m: Box<libc::msghdr> = Box::new(unsafe { std::mem::zeroed() });
            m.msg_controllen = CONTROL;
            m
        },
        clock: clocks(),
        queued: Vec::with_capacity(w.connections),
        rate: 0.0,
        rate_at: (Instant::now(), 0),
        completions: 0,
    };
    let now = Instant::now();
    for i in 0..u.conns.len() {
        u.open(i, now);
    }
    let next_tick = u.run_loop()?;
    let quiet = u.quiesce();
    let Uring {
        lp,
        conns,
        ring,
        bufs,
        ..
    } = u;
    drop(ring);
    if !quiet {
        // The kernel may still write into them: leaked, never freed under it.
        std::mem::forget(bufs);
    }
    Ok(lp.end(&conns, next_tick))
}

impl Uring<'_> {
    fn run_loop(&mut self) -> io::Result<Instant> {
        let w = self.lp.w;
        let mut cqes: Vec<(u64, i32, u32)> = Vec::with_capacity(1024);
        let mut next_sweep = Instant::now() + SWEEP;
        let mut next_tick = w.start + TICK;
        loop {
            let now = Instant::now();
            if self.lp.live == 0 || w.stop.load(Ordering::Relaxed) {
                break;
            }
            if w.deadline.is_some_and(|d| now >= d) {
                break;
            }
            let mut wake = next_sweep.min(next_tick);
            if let Some(std::cmp::Reverse((due, _))) = self.lp.paced.peek() {
                wake = wake.min(*due);
            }
            if let Some(d) = w.deadline {
                wake = wake.min(d);
            }
            // The one system call of the iteration: submit, then wait for a completion
            // or the next timer (nanosecond resolution: a paced request leaves on time).
            let want = self.want();
            if want > 1 {
                wake = wake.min(now + HOLD_MAX);
            }
            for k in 0..self.discards.len() {
                let i = self.discards[k];
                self.discard(i);
            }
            self.discards.clear();
            // The requests queued in this iteration leave now: their time starts here.
            let now = Instant::now();
            for &i in &self.queued {
                let c = &mut self.conns[i];
                c.since = now;
                if w.pace.is_none() {
                    c.intended = now;
                }
            }
            self.queued.clear();
            match self.enter(want, wake.saturating_duration_since(now)) {
                Ok(_) => {}
                Err(e)
                    if matches!(
                        e.raw_os_error(),
                        Some(libc::ETIME) | Some(libc::EINTR) | Some(libc::EBUSY)
                    ) => {}
                Err(e) => return Err(e),
            }
            self.clock = clocks();
            cqes.extend(
                self.ring
                    .completion()
                    .map(|c| (c.user_data(), c.result(), c.flags())),
            );
            self.completions += cqes.len() as u64;
            for &(ud, res, flags) in &cqes {
                self.complete(ud, res, flags);
            }
            cqes.clear();
            self.bufs.publish();
            w.live.publish(&self.lp.stats);
            let now = Instant::now();
            while let Some(&std::cmp::Reverse((due, i))) = self.lp.paced.peek() {
                if due > now {
                    break;
                }
                self.lp.paced.pop();
                let c = &mut self.conns[i];
                if c.phase == Phase::Paced && c.due == due {
                    if !self.lp.start_request(c, now) {
                        self.lp.finish(c);
                    }
                    self.settle(i);
                }
            }
            if now >= next_sweep {
                let (at, count) = self.rate_at;
                let us = now.saturating_duration_since(at).as_secs_f64() * 1e6;
                self.rate = (self.completions - count) as f64 / us.max(1.0);
                self.rate_at = (now, self.completions);
                for i in 0..self.conns.len() {
                    self.sweep(i, now);
                }
                next_sweep = now + SWEEP;
            }
            if now >= next_tick {
                self.lp
                    .tick(super::worker::slice_of(w.start, next_tick), false);
                while next_tick <= now {
                    next_tick += TICK;
                }
            }
        }
        Ok(next_tick)
    }

    /// How many completions to wait for: as many as arrive in `HOLD_US` at the recent
    /// rate, at most a quarter of the requests in flight; one in open loop, whose
    /// requests must leave on time.
    fn want(&self) -> u32 {
        if self.lp.w.pace.is_some() {
            return 1;
        }
        let outstanding = self.lp.live.saturating_sub(self.lp.paced.len());
        ((self.rate * HOLD_US) as usize).clamp(1, (outstanding / 4).max(1)) as u32
    }

    fn enter(&mut self, want: u32, timeout: Duration) -> io::Result<usize> {
        let ts = types::Timespec::from(timeout);
        let arg = GetEventsArg {
            sigmask: 0,
            sigmask_sz: 0,
            min_wait_usec: 0,
            ts: (&ts as *const types::Timespec) as u64,
        };
        let to_submit = self.ring.submission().len() as u32;
        // IORING_ENTER_GETEVENTS | IORING_ENTER_EXT_ARG.
        let mut flags = 1 | 8;
        if self.no_iowait {
            flags |= ENTER_NO_IOWAIT;
        } else {
            // This wait counts as iowait on the CPU the thread waits on: say which, so
            // the report does not read loadlens's own waits as the disk's. getcpu is a
            // vDSO call (no system call), once per loop iteration.
            // SAFETY: no arguments, no memory.
            let cpu = unsafe { libc::sched_getcpu() };
            if cpu >= 0 {
                self.lp.stats.mark_iowait_cpu(cpu as u32);
            }
        }
        unsafe {
            self.ring
                .submitter()
                .enter(to_submit, want, flags, Some(&arg))
        }
    }

    /// Queues one submission, making room by submitting what is queued when full.
    fn push(&mut self, sqe: squeue::Entry) {
        loop {
            // SAFETY: every pointer in our entries (request bytes, the address) outlives
            // the operation: both live as long as the worker, which outlives the ring.
            if unsafe { self.ring.submission().push(&sqe) }.is_ok() {
                return;
            }
            if self.ring.submit().is_err() {
                // Nothing could be submitted; let the kernel drain completions first.
                let _ = self.ring.submit_and_wait(1);
            }
        }
    }

    /// Opens a new connection on slot `i` (socket now, connect through the ring).
    fn open(&mut self, i: usize, now: Instant) {
        debug_assert!(self.slots[i].fd.is_none());
        let c = &mut self.conns[i];
        if !self.lp.begin_open(c, now) {
            return;
        }
        // SAFETY: plain system calls on a descriptor we own.
        let fd = unsafe { libc::socket(self.domain, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            self.lp.connect_failed(c, &io::Error::last_os_error(), now);
            return;
        }
        // Arrival times of the response bytes, taken by the kernel as they come, so the
        // latency does not include how long the completion waited to be seen.
        set_flag(fd, libc::SOL_SOCKET, libc::SO_TIMESTAMPNS);
        if self.nodelay {
            set_flag(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY);
        }
        c.phase = Phase::Connecting;
        let slot = &mut self.slots[i];
        slot.fd = Some(fd);
        slot.connecting = true;
        let ud = user_data(i, slot.gen, CONNECT);
        let addr = (&*self.addr as *const libc::sockaddr_storage).cast();
        let sqe = opcode::Connect::new(types::Fd(fd), addr, self.addr_len)
            .build()
            .user_data(ud);
        self.push(sqe);
    }

    /// Closes slot `i`'s socket through the ring: its operations in flight are
    /// cancelled first, and their completions will be stale.
    fn close(&mut self, i: usize) {
        let slot = &mut self.slots[i];
        let Some(fd) = slot.fd.take() else {
            return;
        };
        // Operations still in flight on the socket hold it open: cancel them first. A
        // request that fits the socket's buffer was sent when it was submitted, so after
        // a response that ended with the server's FIN (one request per connection)
        // nothing is left and the cancel is saved.
        let busy =
            slot.recv || slot.connecting || slot.discarding != Discarding::No || self.nodelay;
        slot.gen = slot.gen.wrapping_add(1);
        slot.recv = false;
        slot.connecting = false;
        slot.discarding = Discarding::No;
        slot.carry.clear();
        if busy {
            let cancel = opcode::AsyncCancel2::new(types::CancelBuilder::fd(types::Fd(fd)).all())
                .build()
                .flags(squeue::Flags::IO_HARDLINK | squeue::Flags::SKIP_SUCCESS)
                .user_data(IGNORED);
            self.push(cancel);
        }
        let close = opcode::Close::new(types::Fd(fd))
            .build()
            .flags(squeue::Flags::SKIP_SUCCESS)
            .user_data(IGNORED);
        self.push(close);
    }

    fn reopen(&mut self, i: usize, now: Instant) {
        self.close(i);
        self.open(i, now);
    }

    /// Applies what the connection's phase asks for after an event: send the request
    /// just begun, or close a connection that is done or must retry.
    fn settle(&mut self, i: usize) {
        match self.conns[i].phase {
            Phase::Writing => self.send(i),
            Phase::Done | Phase::Retry => self.close(i),
            _ => {}
        }
    }

    fn apply(&mut self, i: usize, next: Next, now: Instant) {
        match next {
            Next::Wait => self.settle(i),
            Next::Reopen => self.reopen(i, now),
            Next::Retry => {
                self.close(i);
                let c = &mut self.conns[i];
                c.phase = Phase::Retry;
                c.since = now;
            }
        }
    }

    fn send(&mut self, i: usize) {
        let Some(fd) = self.slots[i].fd else {
            return;
        };
        let c = &mut self.conns[i];
        let req = self.lp.w.request.bytes(c.target, c.last);
        let sqe = opcode::Send::new(types::Fd(fd), req.as_ptr(), req.len() as u32)
            .flags(libc::MSG_WAITALL | libc::MSG_NOSIGNAL)
            .build()
            .flags(squeue::Flags::SKIP_SUCCESS)
            .user_data(user_data(i, self.slots[i].gen, SEND));
        c.written = req.len();
        c.phase = Phase::Reading;
        let slot = &mut self.slots[i];
        slot.large = false;
        if slot.recv && slot.multishot && self.large[c.target as usize] {
            // A multishot receive left armed from a response that was copied whole
            // (a connection's first): stopped, so that this response comes head first.
            // When its last completion comes, the head's receive is armed (`rearm`).
            self.stop_multishot(i);
        }
        self.queued.push(i);
        self.push(sqe);
        self.arm_recv(i);
    }

    /// Time-based checks for slot `i`: request/connect timeouts and retries.
    fn sweep(&mut self, i: usize, now: Instant) {
        let c = &mut self.conns[i];
        match self.lp.overdue(c, now) {
            Overdue::No | Overdue::H2 => {}
            Overdue::Retry | Overdue::Drain => self.reopen(i, now),
            Overdue::Connect => {
                let e = io::Error::from_raw_os_error(libc::ETIMEDOUT);
                self.lp.connect_failed(c, &e, now);
                self.reopen(i, now);
            }
            Overdue::Request => {
                self.lp.request_failed(c.target, ErrorKind::Timeout);
                self.reopen(i, now);
            }
        }
    }

    /// Ends the run's I/O: every socket closed and everything in flight cancelled, and
    /// waits (bounded) until the kernel has handed back every receive, so no buffer is
    /// written after it is unmapped. If the kernel does not answer in time the buffers
    /// are leaked rather than freed under it.
    fn quiesce(&mut self) -> bool {
        for i in 0..self.slots.len() {
            self.close(i);
        }
        let all = opcode::AsyncCancel2::new(types::CancelBuilder::any())
            .build()
            .user_data(QUIESCE);
        self.push(all);
        let until = Instant::now() + QUIESCE_WAIT;
        let mut cancelled = false;
        while !(cancelled && self.armed == 0) {
            let now = Instant::now();
            if now >= until {
                return false;
            }
            let ts = types::Timespec::from(until - now);
            let args = types::SubmitArgs::new().timespec(&ts);
            let _ = self.ring.submitter().submit_with_args(1, &args);
            for c in self.ring.completion() {
                if c.user_data() == QUIESCE {
                    cancelled = true;
                }
                if ends_writer(c.user_data() as u8, c.flags()) {
                    self.armed -= 1;
                }
                if let Some(bid) = cqueue::buffer_select(c.flags()) {
                    self.bufs.recycle(bid);
                }
            }
        }
        let _ = self.ring.submitter().unregister_buf_ring(self.bufs.group());
        true
    }
}
