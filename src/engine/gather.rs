//! How long the epoll loop lets responses gather between its waits, in closed loop over
//! HTTP/2, and over TLS with keep-alive (set-up, which is timed when the loop sees it,
//! is then rare).
//!
//! A client quicker than its server wakes for almost every write the server makes: in
//! `bench/vs-peers`' HTTP/2 mode (nginx, `-c 50 -m 10`) the loop saw 0.5-0.8 context
//! switches per response and each wake-up handled a response or two, so the kernel's
//! work of waking, polling, reading and sending was paid per response. After a small
//! batch the loop now sleeps as long as it takes for as many responses to arrive as do
//! in `HOLD_US` at the recent rate (at most a quarter of its streams), as the io_uring
//! loop waits for that many completions. A server slower than 2 responses per
//! `HOLD_US` is never held for. Responses end at their kernel arrival time
//! (`arrival.rs`), so the hold is in no latency; it shows as `held`, and while it lasts
//! the streams it holds are idle for the server.

use std::time::{Duration, Instant};

/// The longest the loop sleeps after a small batch.
const HOLD_US: f64 = 300.0;

/// The response rate lately, for the hold.
pub(super) struct Gather {
    streams: f64,
    /// Responses per microsecond over the last measured interval.
    rate: f64,
    /// When, and at what response count, it was last measured.
    at: (Instant, u64),
}

impl Gather {
    /// For a loop over `streams` streams in all, starting at `now`.
    pub(super) fn new(now: Instant, streams: usize) -> Gather {
        Gather {
            streams: streams as f64,
            rate: 0.0,
            at: (now, 0),
        }
    }

    /// Measures the rate since the last call, `responses` being the count so far.
    pub(super) fn measure(&mut self, now: Instant, responses: u64) {
        let us = now.saturating_duration_since(self.at.0).as_secs_f64() * 1e6;
        self.rate = responses.saturating_sub(self.at.1) as f64 / us.max(1.0);
        self.at = (now, responses);
    }

    /// How long to sleep after a batch that handled `handled` responses; `None` when
    /// the batch was large enough, or the server too slow, to hold for.
    pub(super) fn hold(&self, handled: u64) -> Option<Duration> {
        let want = (self.rate * HOLD_US).min(self.streams / 4.0);
        if want < 2.0 || handled as f64 >= want {
            return None;
        }
        Some(Duration::from_secs_f64(want / self.rate / 1e6))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(rate: f64, streams: usize) -> Gather {
        let mut g = Gather::new(Instant::now(), streams);
        g.rate = rate;
        g
    }

    #[test]
    fn responses_gather_only_when_the_server_is_quick_and_the_batch_small() {
        // 30,000 responses/s over 500 streams: 9 arrive in 300 µs.
        let d = at(0.03, 500).hold(2).unwrap();
        assert!((299..=300).contains(&d.as_micros()), "{d:?}");
        assert_eq!(at(0.03, 500).hold(9), None, "the batch was large enough");
        // 1,000 responses/s: not even 2 in 300 µs, so never held.
        assert_eq!(at(0.001, 500).hold(0), None);
        // 8 streams: at most 2 gather (a quarter), 66 µs at that rate.
        let d = at(0.03, 8).hold(0).unwrap();
        assert!((66..=67).contains(&d.as_micros()), "{d:?}");
        assert_eq!(
            Gather::new(Instant::now(), 500).hold(0),
            None,
            "no rate yet"
        );
    }

    #[test]
    fn the_rate_is_responses_per_microsecond_since_the_last_measure() {
        let t = Instant::now();
        let mut g = Gather::new(t, 500);
        g.measure(t + Duration::from_millis(20), 600);
        assert!((g.rate - 0.03).abs() < 1e-9);
        g.measure(t + Duration::from_millis(40), 700);
        assert!((g.rate - 0.005).abs() < 1e-9);
    }
}
