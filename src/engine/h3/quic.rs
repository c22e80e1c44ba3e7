//! The QUIC stack's own counts over a run: each connection's quinn statistics added
//! when it closes, the workers' sums added after the load, and the Run's `QuicStats`.

use std::time::Duration;

use hdrhistogram::Histogram;

use super::resume::Handshake;
use crate::engine::stats::latency_histogram;
use crate::run::{LatencySummary, QuicCounts, QuicStats};

/// The QUIC counts of a worker's connections, added as each one closes.
#[derive(Default)]
pub(super) struct QuicSum {
    counts: QuicCounts,
    rtt: Option<Histogram<u64>>,
    /// Handshake times by kind (`Handshake as usize`).
    handshakes: [Option<Histogram<u64>>; 3],
}

/// One connection's quinn statistics as the Run counts them.
fn counts_of(s: &quinn::ConnectionStats) -> QuicCounts {
    QuicCounts {
        packets_sent: s.path.sent_packets,
        packets_lost: s.path.lost_packets,
        bytes_lost: s.path.lost_bytes,
        congestion_events: s.path.congestion_events,
        datagrams_sent: s.udp_tx.datagrams,
        datagrams_received: s.udp_rx.datagrams,
        send_calls: s.udp_tx.ios,
        receive_calls: s.udp_rx.ios,
        ..QuicCounts::default()
    }
}

/// Adds histogram `h` into `into`.
fn add_histogram(into: &mut Option<Histogram<u64>>, h: Histogram<u64>) {
    match into.as_mut() {
        Some(r) => r.add(&h).expect("histograms share bounds"),
        None => *into = Some(h),
    }
}

impl QuicSum {
    /// A connection that has closed: its counters and its RTT.
    pub(super) fn add(&mut self, s: &quinn::ConnectionStats, max: Duration) {
        self.counts.add(&counts_of(s));
        self.rtt
            .get_or_insert_with(|| latency_histogram(max))
            .saturating_record((s.path.rtt.as_micros() as u64).max(1));
    }

    /// A handshake done: its kind and how long it took, µs.
    pub(super) fn handshake(&mut self, kind: Handshake, us: u64, max: Duration) {
        match kind {
            Handshake::Full => self.counts.handshakes_full += 1,
            Handshake::Resumed => self.counts.handshakes_resumed += 1,
            Handshake::ZeroRtt => self.counts.handshakes_0rtt += 1,
        }
        self.handshakes[kind as usize]
            .get_or_insert_with(|| latency_histogram(max))
            .saturating_record(us.max(1));
    }

    pub(super) fn merge(&mut self, o: QuicSum) {
        self.counts.add(&o.counts);
        if let Some(h) = o.rtt {
            add_histogram(&mut self.rtt, h);
        }
        for (into, h) in self.handshakes.iter_mut().zip(o.handshakes) {
            if let Some(h) = h {
                add_histogram(into, h);
            }
        }
    }

    pub(super) fn into_stats(self, max: Duration) -> QuicStats {
        let rtt = self.rtt.unwrap_or_else(|| latency_histogram(max));
        let [full, resumed, zero] = self
            .handshakes
            .map(|h| h.map(|h| LatencySummary::from_histogram(&h, false)));
        QuicStats {
            counts: self.counts,
            rtt: LatencySummary::from_histogram(&rtt, false),
            handshake_full: full,
            handshake_resumed: resumed,
            handshake_0rtt: zero,
        }
    }
}
