//! The run's timeline: the workers' per-second ticks merged into one entry per second.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::stats::{latency_histogram, Tick};
use crate::run::Second;

/// Merges the workers' ticks into one entry per second, keeping memory flat however
/// long the run: a second stays open (with its merged histogram) only until every
/// worker has reported a later one, then it is reduced to its compact [`Second`] and
/// its histogram reused. Workers report seconds in increasing order, so a second no
/// worker can still report is final.
pub(super) struct TimelineBuilder {
    max: Duration,
    /// Seconds some worker may still report: counts and the merged histogram.
    open: BTreeMap<u64, OpenSecond>,
    /// Per worker: the latest second it reported (`None` before its first tick,
    /// `u64::MAX` once it stopped).
    latest: Vec<Option<u64>>,
    done: Vec<Second>,
    /// Histograms of closed seconds, reset, for the next ones.
    free: Vec<Histogram<u64>>,
    /// Responses per second of each thread, for whole seconds only.
    per_thread: Vec<f64>,
    /// Each thread's last, partial second: (second, responses). Its rate stands in for
    /// the whole seconds when a run had none (under a second), so Req/Sec is not 0.
    partial: Vec<(u64, u64)>,
}

struct OpenSecond {
    latency: Histogram<u64>,
    responses: u64,
    errors: u64,
    bytes_read: u64,
}

impl TimelineBuilder {
    pub(super) fn new(max: Duration, threads: usize) -> Self {
        TimelineBuilder {
            max,
            open: BTreeMap::new(),
            latest: vec![None; threads],
            done: Vec::new(),
            free: Vec::new(),
            per_thread: Vec::new(),
            partial: Vec::new(),
        }
    }

    /// Adds a worker's tick; returns the tick's histogram, emptied, for the worker to
    /// reuse.
    pub(super) fn add(&mut self, mut t: Tick) -> Histogram<u64> {
        if t.last {
            self.partial.push((t.second, t.responses));
        } else {
            self.per_thread.push(t.responses as f64);
        }
        let max = self.max;
        let free = &mut self.free;
        let e = self.open.entry(t.second).or_insert_with(|| OpenSecond {
            latency: free.pop().unwrap_or_else(|| latency_histogram(max)),
            responses: 0,
            errors: 0,
            bytes_read: 0,
        });
        e.latency.add(&t.latency).expect("histograms share bounds");
        e.responses += t.responses;
        e.errors += t.errors;
        e.bytes_read += t.bytes_read;
        if let Some(l) = self.latest.get_mut(t.thread) {
            *l = Some(if t.last { u64::MAX } else { t.second });
        }
        self.close_final();
        t.latency.reset();
        t.latency
    }

    /// Closes every open second that no worker can report any more.
    fn close_final(&mut self) {
        let Some(horizon) = self.latest.iter().map(|l| l.unwrap_or(0)).min() else {
            return;
        };
        if self.latest.iter().any(Option::is_none) {
            return;
        }
        while let Some(entry) = self.open.first_entry() {
            if *entry.key() >= horizon {
                break;
            }
            let (t, s) = entry.remove_entry();
            self.close(t, s);
        }
    }

    fn close(&mut self, t: u64, mut s: OpenSecond) {
        let h = &s.latency;
        self.done.push(Second {
            t_s: t,
            duration_s: 1.0,
            responses: s.responses,
            errors: s.errors,
            bytes_read: s.bytes_read,
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
            // Once a second, off the workers' threads: the interval log's histogram.
            histogram: Some(crate::run::encode_histogram(h)),
        });
        s.latency.reset();
        self.free.push(s.latency);
    }

    pub(super) fn finish(mut self, duration_s: f64) -> (Vec<Second>, Vec<f64>) {
        while let Some((t, s)) = self.open.pop_first() {
            self.close(t, s);
        }
        for s in self.done.iter_mut() {
            // The last one may be shorter than a second.
            s.duration_s = (duration_s - s.t_s as f64).clamp(0.0, 1.0);
        }
        if self.per_thread.is_empty() {
            self.per_thread = self
                .partial
                .iter()
                .map(|&(t, n)| n as f64 / (duration_s - t as f64).clamp(1e-3, 1.0))
                .collect();
        }
        (self.done, self.per_thread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(thread: usize, second: u64, us: u64, last: bool) -> Tick {
        let mut latency = latency_histogram(Duration::from_secs(5));
        latency.record(us).unwrap();
        Tick {
            thread,
            second,
            responses: 1,
            errors: 0,
            bytes_read: 100,
            latency,
            last,
        }
    }

    /// An hour of ticks from two workers, one a second behind the other: at most two
    /// seconds are ever open (each with a histogram), so the builder's memory does not
    /// grow with the run; a closed second costs only its compact record.
    #[test]
    fn timeline_memory_is_flat_over_an_hour() {
        let mut b = TimelineBuilder::new(Duration::from_secs(5), 2);
        let mut most_open = 0;
        for s in 0..3600u64 {
            b.add(tick(0, s, 1000 + s, false));
            if s > 0 {
                b.add(tick(1, s - 1, 2000, false));
            }
            most_open = most_open.max(b.open.len());
            assert!(b.free.len() <= 2, "histograms are reused, not piled up");
        }
        b.add(tick(0, 3600, 7, true));
        b.add(tick(1, 3599, 7, true));
        assert!(most_open <= 2, "{most_open} seconds open at once");
        let (seconds, per_thread) = b.finish(3600.5);
        assert_eq!(seconds.len(), 3601);
        assert_eq!(per_thread.len(), 7199);
        // Bytes per second of timeline: the record and its encoded histogram.
        assert!(std::mem::size_of::<Second>() <= 96);
        let encoded = seconds[10].histogram.as_ref().unwrap();
        assert!(encoded.len() < 200, "{} bytes", encoded.len());
        let h = crate::run::decode_histogram(encoded).unwrap();
        assert_eq!((h.len(), h.max()), (2, 2000));
        // Seconds are exact: both workers' responses, the slower one's latency on top.
        assert_eq!(seconds[10].responses, 2);
        assert_eq!(seconds[10].p50_us, 1010);
        assert_eq!(seconds[10].max_us, 2000);
        assert_eq!(seconds[3600].duration_s, 0.5);
        assert_eq!(seconds[3599].responses, 2);
    }

    #[test]
    fn a_second_stays_open_until_every_worker_has_moved_past_it() {
        let mut b = TimelineBuilder::new(Duration::from_secs(5), 2);
        b.add(tick(0, 0, 10, false));
        b.add(tick(0, 1, 10, false));
        assert_eq!(b.open.len(), 2, "worker 1 has not reported yet");
        b.add(tick(1, 0, 30, false));
        assert_eq!(
            b.open.len(),
            2,
            "worker 1 may still report more of second 0"
        );
        b.add(tick(1, 1, 30, false));
        assert_eq!(b.open.len(), 1);
        assert_eq!(b.done[0].max_us, 30);
    }

    /// Under a second no worker reports a whole second: Req/Sec comes from the partial
    /// one (it showed 0.00 before).
    #[test]
    fn a_run_under_a_second_has_a_thread_rate() {
        let mut b = TimelineBuilder::new(Duration::from_secs(5), 2);
        b.add(tick(0, 0, 10, true));
        b.add(tick(1, 0, 10, true));
        let (seconds, per_thread) = b.finish(0.25);
        assert_eq!(seconds[0].duration_s, 0.25);
        assert_eq!(per_thread, vec![4.0, 4.0]);
        // With whole seconds, the partial one is left out as before.
        let mut b = TimelineBuilder::new(Duration::from_secs(5), 1);
        b.add(tick(0, 0, 10, false));
        b.add(tick(0, 1, 10, true));
        assert_eq!(b.finish(1.5).1, vec![1.0]);
    }
}
