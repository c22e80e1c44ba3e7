//! The QUIC stack's own counts over a run: each connection's quinn statistics added
//! when it closes, the workers' sums added after the load, and the Run's `QuicStats`.

use std::time::Duration;

use hdrhistogram::Histogram;

use crate::engine::stats::latency_histogram;
use crate::run::{LatencySummary, QuicStats};

/// The QUIC counters of a worker's connections, added as each one closes.
#[derive(Default)]
pub(super) struct QuicSum {
    packets_sent: u64,
    packets_lost: u64,
    bytes_lost: u64,
    congestion_events: u64,
    datagrams_sent: u64,
    datagrams_received: u64,
    send_calls: u64,
    receive_calls: u64,
    rtt: Option<Histogram<u64>>,
}

impl QuicSum {
    pub(super) fn add(&mut self, s: &quinn::ConnectionStats, max: Duration) {
        self.packets_sent += s.path.sent_packets;
        self.packets_lost += s.path.lost_packets;
        self.bytes_lost += s.path.lost_bytes;
        self.congestion_events += s.path.congestion_events;
        self.datagrams_sent += s.udp_tx.datagrams;
        self.datagrams_received += s.udp_rx.datagrams;
        self.send_calls += s.udp_tx.ios;
        self.receive_calls += s.udp_rx.ios;
        self.rtt
            .get_or_insert_with(|| latency_histogram(max))
            .saturating_record((s.path.rtt.as_micros() as u64).max(1));
    }

    pub(super) fn merge(&mut self, o: QuicSum) {
        self.packets_sent += o.packets_sent;
        self.packets_lost += o.packets_lost;
        self.bytes_lost += o.bytes_lost;
        self.congestion_events += o.congestion_events;
        self.datagrams_sent += o.datagrams_sent;
        self.datagrams_received += o.datagrams_received;
        self.send_calls += o.send_calls;
        self.receive_calls += o.receive_calls;
        if let Some(h) = o.rtt {
            match self.rtt.as_mut() {
                Some(r) => r.add(&h).expect("histograms share bounds"),
                None => self.rtt = Some(h),
            }
        }
    }

    pub(super) fn into_stats(self, max: Duration) -> QuicStats {
        let rtt = self.rtt.unwrap_or_else(|| latency_histogram(max));
        QuicStats {
            packets_sent: self.packets_sent,
            packets_lost: self.packets_lost,
            bytes_lost: self.bytes_lost,
            congestion_events: self.congestion_events,
            datagrams_sent: self.datagrams_sent,
            datagrams_received: self.datagrams_received,
            send_calls: self.send_calls,
            receive_calls: self.receive_calls,
            rtt: LatencySummary::from_histogram(&rtt, false),
        }
    }
}
