//! One connection's state in a worker's event loop: its phase, its buffer and parser,
//! and what driving it until it would block decided.

use std::time::Instant;

use super::http::ResponseParser;

/// Where a connection is in its request/response cycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Phase {
    /// Waiting to retry a failed connect.
    Retry,
    /// Open loop: waiting for the next request's scheduled time.
    Paced,
    /// TCP connect / TLS handshake in progress.
    Connecting,
    /// Writing the request.
    Writing,
    /// Reading the response.
    Reading,
    /// The last response on this connection is in; waiting for the server's FIN so the
    /// server, which was asked to close, is the side that keeps TIME_WAIT.
    Draining,
    /// An HTTP/2 connection, set up: its streams carry the requests.
    H2,
    /// No more requests to send (budget spent).
    Done,
}

pub(super) struct Conn<T> {
    pub(super) transport: Option<T>,
    pub(super) phase: Phase,
    pub(super) parser: ResponseParser,
    pub(super) buf: Box<[u8]>,
    /// Unconsumed bytes at the front of `buf` (an incomplete head or line).
    pub(super) pending: usize,
    pub(super) written: usize,
    /// The request in flight was sent with `Connection: close`.
    pub(super) last: bool,
    /// Requests sent on this connection.
    pub(super) sent: u32,
    /// A claimed budget unit not yet spent on a request.
    pub(super) permit: bool,
    /// The last read left the socket empty (see `Transport::drained`).
    pub(super) drained: bool,
    /// The poller reported the peer's FIN or an error on this socket.
    pub(super) hup: bool,
    /// When the current phase began: connect start, request start, or retry time.
    pub(super) since: Instant,
    /// When the request in flight was meant to be sent: latency is measured from here
    /// (equal to its actual start in closed loop).
    pub(super) intended: Instant,
    /// Open loop: when the next request is due.
    pub(super) due: Instant,
    /// The TCP connect of this connection has finished (its time is recorded).
    pub(super) tcp_up: bool,
    /// When the TCP connect finished: the TLS handshake is timed from here.
    pub(super) tcp_at: Instant,
    /// The first byte of the response in flight has been read, at `first_at`.
    pub(super) got_first: bool,
    pub(super) first_at: Instant,
    /// HTTP/2 state, made when the slot's first HTTP/2 connection is set up and reused.
    pub(super) h2: Option<Box<super::h2::state::H2Conn>>,
    /// This connection's slot, to find it from the pacing queue.
    pub(super) idx: usize,
    /// The request in flight: an index into the worker's `Requests`.
    pub(super) target: u32,
    /// The ordinal of the budget unit this connection holds (`worker::UNCOUNTED`: none,
    /// or a run without `-n`).
    pub(super) ordinal: u64,
    /// Without `-n`: this connection's own count through the order.
    pub(super) seq: u64,
}

/// The outcome of driving one connection until it would block.
pub(super) enum Next {
    Wait,
    Reopen,
    Retry,
}

impl<T> Conn<T> {
    /// Open loop: its request claimed and parked for a due time before `end`, and not
    /// sent by then (the run's end: the client behind its schedule).
    pub(super) fn parked_before(&self, end: std::time::Instant) -> bool {
        self.phase == Phase::Paced && self.due < end
    }

    /// The UDP port of the HTTP/3 this slot's responses offered (`Alt-Svc: h3`).
    pub(super) fn alt_svc_h3(&self) -> Option<u16> {
        self.parser
            .alt_svc_h3
            .or_else(|| self.h2.as_ref().and_then(|h| h.alt_svc_h3()))
    }
}
