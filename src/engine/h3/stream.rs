//! A connection's streams: each a request at a time — its target picked, sent when
//! due in open loop, its response read whole — until the connection's `--connreqs` or
//! the budget is spent, or the connection fails.

use std::cell::Cell;
use std::rc::Rc;
use std::time::Instant;

use super::{pace, wire, Counts, Ctx, H3Worker, Open, H3_NO_ERROR};
use crate::engine::stats::{us_between, ErrorKind};
use crate::engine::worker::UNCOUNTED;
use crate::spec::Requests;

/// How a request ended, when it did not end with a response.
pub(super) enum Failed {
    /// The request was not sent (the connection was closing): send it on the next one.
    NotSent,
    /// It failed with this class; `true` when the connection is gone with it.
    Error(ErrorKind, bool),
}

/// One stream slot of a connection: a request at a time until the connection's
/// `--connreqs` or the budget is spent, or the connection fails. Returns the claims of
/// requests it could not send.
pub(super) async fn stream(ctx: Rc<Ctx>, open: Rc<Open>) -> Vec<u64> {
    let w = &ctx.w;
    loop {
        if open.left.get() == 0 {
            return Vec::new();
        }
        let claimed = open.held.borrow_mut().pop();
        let ordinal = match claimed {
            Some(o) => o,
            None => match w.budget.claim() {
                Some(o) => o,
                None => return Vec::new(),
            },
        };
        open.left.set(open.left.get() - 1);
        let t = pick(&w.order, ordinal, &open.seq);
        let intended = due(w, &open, ordinal);
        if let Some(at) = intended {
            ctx.c.borrow_mut().waiting.push(at);
            tokio::time::sleep_until(at.into()).await;
            let mut c = ctx.c.borrow_mut();
            if let Some(i) = c.waiting.iter().position(|&w| w == at) {
                c.waiting.swap_remove(i);
            }
        }
        let sent = Instant::now();
        // A request due while every stream was busy waited for one: its latency counts
        // from when it was due (no coordinated omission), as in the TCP engine.
        let began = intended.map_or(sent, |at| at.min(sent));
        ctx.c.borrow_mut().in_flight += 1;
        let outcome = tokio::time::timeout(w.timeout, exchange(&ctx, &open, t)).await;
        let mut c = ctx.c.borrow_mut();
        c.in_flight -= 1;
        let e = w.order.endpoint[t as usize];
        match outcome {
            Ok(Ok(done)) => c.record(e, began, sent, &done),
            Ok(Err(Failed::NotSent)) => return vec![ordinal],
            Ok(Err(Failed::Error(kind, gone))) => {
                c.failed(e, kind);
                if gone {
                    return Vec::new();
                }
            }
            Err(_) => {
                // The stream is reset as the future is dropped; the connection goes on
                // only if it still answers: close it, as the TCP loops replace theirs.
                c.failed(e, ErrorKind::Timeout);
                open.quic.close(H3_NO_ERROR.into(), b"timeout");
                return Vec::new();
            }
        }
    }
}

/// Open loop: when request `ordinal` is due — at its own time (`--replay` at a speed),
/// else the slot's next turn (`-R`); `None` in closed loop.
fn due(w: &H3Worker, open: &Open, ordinal: u64) -> Option<Instant> {
    let pace = w.pace?;
    if let Some(at) = pace::due_of(w.start, &w.order.due_us, w.stages.as_deref(), ordinal) {
        return Some(at);
    }
    let at = open.due.get();
    open.due.set(at + pace);
    Some(at)
}

/// The target of a request: by its `-n` ordinal, else by the slot's own count.
pub(super) fn pick(order: &Requests, ordinal: u64, seq: &Cell<u64>) -> u32 {
    if order.order.len() == 1 {
        return order.order[0];
    }
    let n = if ordinal == UNCOUNTED {
        seq.set(seq.get().wrapping_add(1));
        seq.get()
    } else {
        ordinal
    };
    order.pick(n)
}

/// A response read whole.
pub(super) struct Done {
    pub(super) status: u16,
    pub(super) first: Instant,
    pub(super) end: Instant,
    pub(super) bytes: u64,
}

/// Sends request `t` on a new stream of `open` and reads its response.
async fn exchange(ctx: &Ctx, open: &Open, t: u32) -> Result<Done, Failed> {
    let req = &ctx.w.requests[t as usize];
    let (mut send, mut recv) = match open.quic.open_bi().await {
        Ok(s) => s,
        // The connection has closed (the server's GOAWAY then close, an idle timeout)
        // before the request went: the next connection sends it.
        Err(_) => return Err(Failed::NotSent),
    };
    if let Err(e) = send.write_chunk(req.wire.clone()).await {
        return Err(match e {
            quinn::WriteError::Stopped(_) => Failed::Error(ErrorKind::Reset, false),
            quinn::WriteError::ConnectionLost(_) => Failed::Error(ErrorKind::Read, true),
            // 0-RTT data the server refused: the request never reached it.
            quinn::WriteError::ZeroRttRejected => Failed::NotSent,
            quinn::WriteError::ClosedStream => Failed::Error(ErrorKind::Parse, false),
        });
    }
    // The stream's end goes with its one write (a STREAM frame with FIN).
    let _ = send.finish();
    let mut reader = wire::Reader::new();
    let mut first = None;
    loop {
        match recv.read_chunk(usize::MAX, true).await {
            Ok(Some(chunk)) => {
                let head = reader
                    .take(&chunk.bytes)
                    .map_err(|_| Failed::Error(ErrorKind::Parse, false))?;
                if head.is_some() {
                    first = Some(Instant::now());
                }
            }
            Ok(None) => break,
            Err(e) => {
                return Err(match e {
                    // H3_REQUEST_REJECTED (RFC 9114 §4.1.1): not processed, may be sent
                    // again; as h3 did, a reset like the others.
                    quinn::ReadError::Reset(_) => Failed::Error(ErrorKind::Reset, false),
                    quinn::ReadError::ConnectionLost(_) => Failed::Error(ErrorKind::Read, true),
                    quinn::ReadError::ZeroRttRejected => Failed::NotSent,
                    _ => Failed::Error(ErrorKind::Parse, false),
                });
            }
        }
    }
    let head = reader
        .end()
        .map_err(|_| Failed::Error(ErrorKind::Parse, false))?;
    let end = Instant::now();
    Ok(Done {
        status: head.status,
        first: first.unwrap_or(end),
        end,
        bytes: head.bytes + reader.body,
    })
}

impl Counts {
    /// A response: its latency from `began` (when it was due, in open loop), its time
    /// to first byte from when it was `sent`.
    pub(super) fn record(&mut self, endpoint: u16, began: Instant, sent: Instant, d: &Done) {
        let us = us_between(began, d.end).max(1);
        self.stats.latency.saturating_record(us);
        self.interval.saturating_record(us);
        self.stats
            .phases
            .ttfb
            .saturating_record(us_between(sent, d.first));
        self.stats
            .phases
            .body
            .saturating_record(us_between(d.first, d.end));
        self.stats.responses += 1;
        self.interval_responses += 1;
        self.stats.bytes_read += d.bytes;
        self.interval_bytes += d.bytes;
        self.stats.status(d.status);
        self.stats.endpoint_response(endpoint, d.status, us);
    }

    pub(super) fn failed(&mut self, endpoint: u16, kind: ErrorKind) {
        self.stats.errors[kind as usize] += 1;
        self.interval_errors += 1;
        self.stats.endpoint_error(endpoint);
    }

    pub(super) fn connect_failed(&mut self, errno: i32) {
        self.stats.connect_error(errno);
        self.interval_errors += 1;
    }
}
