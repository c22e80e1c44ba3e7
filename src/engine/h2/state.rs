//! One HTTP/2 connection's state (streams, HPACK decoder, windows, queued frames), kept
//! in its connection's slot. The frame handling that changes it is in `mod.rs`.

use std::time::Instant;

use super::frame::{H2Requests, INITIAL_WINDOW};
use super::hpack;
use crate::engine::stats::ErrorKind;

/// Most bytes of request bodies queued for a connection's socket at a time: the rest
/// goes as the socket takes them (a 16 MiB body on 4 streams would otherwise be copied
/// whole into the queue of every connection whose windows allow it).
const QUEUE_MAX: usize = 256 * 1024;

/// A request in flight on a connection.
#[derive(Debug, Clone, Copy)]
pub(in crate::engine) struct Stream {
    pub(in crate::engine) id: u32,
    /// When it was sent (time to first byte is measured from here).
    pub(in crate::engine) since: Instant,
    /// When it was meant to be sent: latency is measured from here (in open loop the
    /// due time, however long it waited for a stream; else `since`).
    pub(in crate::engine) intended: Instant,
    pub(in crate::engine) first_at: Option<Instant>,
    pub(in crate::engine) status: u16,
    /// DATA bytes received since our last WINDOW_UPDATE for this stream.
    pub(in crate::engine) recv: u32,
    /// Request body bytes sent so far (the body is sent as the windows allow).
    pub(in crate::engine) body_at: u32,
    /// What the server still accepts of this stream's body (may go negative when the
    /// server lowers SETTINGS_INITIAL_WINDOW_SIZE, RFC 9113 §6.9.2).
    pub(in crate::engine) window: i64,
    /// The request: an index into the worker's `Requests`.
    pub(in crate::engine) target: u32,
}

/// One HTTP/2 connection's state, kept in its slot and reused by the connections that
/// follow on it.
pub(in crate::engine) struct H2Conn {
    /// The responses' HPACK state (its buffers kept across the slot's connections).
    decoder: hpack::Decoder,
    /// Streams in flight (at most `--max-concurrent-streams`; removed by swap).
    pub(in crate::engine) streams: Vec<Stream>,
    pub(in crate::engine) next_id: u32,
    /// Frames queued for the socket, and how much of them is written.
    pub(in crate::engine) out: Vec<u8>,
    pub(in crate::engine) out_at: usize,
    /// SETTINGS_MAX_CONCURRENT_STREAMS from the server: one stream until its first
    /// SETTINGS arrive (it may allow fewer than we want), unlimited if they say nothing.
    pub(in crate::engine) peer_max_streams: u32,
    pub(in crate::engine) settings_seen: bool,
    /// What the server still accepts of request bodies on this connection.
    pub(in crate::engine) send_window: i64,
    /// A new stream's send window as the server set it (SETTINGS_INITIAL_WINDOW_SIZE).
    pub(in crate::engine) peer_window: u32,
    /// DATA bytes received since our last connection WINDOW_UPDATE.
    pub(in crate::engine) recv_unacked: u32,
    /// A header block continued in CONTINUATION frames: its bytes, stream, END_STREAM.
    pub(in crate::engine) block: Vec<u8>,
    pub(in crate::engine) block_stream: u32,
    pub(in crate::engine) block_ends_stream: bool,
    /// GOAWAY received: no new streams on this connection.
    pub(in crate::engine) goaway: bool,
    /// Streams started on this connection (for `--connreqs`).
    pub(in crate::engine) started: u32,
    /// Budget units claimed for requests the server never processed (GOAWAY,
    /// REFUSED_STREAM), kept for the next connection.
    pub(in crate::engine) permits: u32,
    /// Open loop: the due time for which the connection sits in the loop's timer heap.
    pub(in crate::engine) scheduled: Option<Instant>,
}

impl H2Conn {
    pub(super) fn new(streams: usize, request_len: usize) -> H2Conn {
        H2Conn::with_buffers(
            hpack::Decoder::new(),
            Vec::with_capacity(streams),
            Vec::with_capacity(streams * request_len + 1024),
            Vec::new(),
        )
    }

    /// The UDP port of the HTTP/3 a response's `Alt-Svc` offered on this slot.
    pub(in crate::engine) fn alt_svc_h3(&self) -> Option<u16> {
        self.decoder.alt_svc_h3
    }

    /// A connection's initial state around these buffers (emptied).
    fn with_buffers(
        mut decoder: hpack::Decoder,
        mut streams: Vec<Stream>,
        mut out: Vec<u8>,
        mut block: Vec<u8>,
    ) -> H2Conn {
        decoder.reset();
        streams.clear();
        out.clear();
        block.clear();
        H2Conn {
            decoder,
            streams,
            next_id: 1,
            out,
            out_at: 0,
            peer_max_streams: 1,
            settings_seen: false,
            send_window: INITIAL_WINDOW as i64,
            peer_window: INITIAL_WINDOW,
            recv_unacked: 0,
            block,
            block_stream: 0,
            block_ends_stream: false,
            goaway: false,
            started: 0,
            permits: 0,
            scheduled: None,
        }
    }

    /// A fresh connection on the same slot: new HPACK state and windows, same buffers;
    /// the open loop's claimed permits and due time carry over to it.
    pub(super) fn reset(&mut self) {
        let mut fresh = H2Conn::with_buffers(
            std::mem::take(&mut self.decoder),
            std::mem::take(&mut self.streams),
            std::mem::take(&mut self.out),
            std::mem::take(&mut self.block),
        );
        fresh.permits = self.permits;
        fresh.scheduled = self.scheduled;
        *self = fresh;
    }

    pub(super) fn find(&self, id: u32) -> Option<usize> {
        self.streams.iter().position(|s| s.id == id)
    }

    /// Queues as much of stream `i`'s request body as its window, the connection's, and
    /// `QUEUE_MAX` allow.
    pub(super) fn push_body(&mut self, all: &H2Requests, i: usize) {
        let s = &mut self.streams[i];
        let frames = &all.each[s.target as usize];
        let left = frames.body_len - s.body_at as usize;
        let room = QUEUE_MAX.saturating_sub(self.out.len() - self.out_at);
        let n = left
            .min(room)
            .min(s.window.min(self.send_window).max(0) as usize);
        if n == 0 {
            return;
        }
        frames.write_data(&mut self.out, s.id, s.body_at as usize, n);
        s.body_at += n as u32;
        s.window -= n as i64;
        self.send_window -= n as i64;
    }

    /// A window opened: every stream's body goes on as far as the windows allow.
    pub(super) fn push_bodies(&mut self, frames: &H2Requests) {
        for i in 0..self.streams.len() {
            if self.send_window <= 0 {
                return;
            }
            self.push_body(frames, i);
        }
    }
}

impl H2Conn {
    /// Decodes a header block (keeping the connection's HPACK table in step) and
    /// returns its `:status` (0 when it has none, e.g. trailers).
    pub(super) fn decode_status(&mut self, block: &[u8]) -> Result<u16, ErrorKind> {
        self.decoder.status(block).map_err(|_| ErrorKind::Parse)
    }
}
