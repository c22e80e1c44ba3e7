//! The run's timeline: the workers' 100 ms ticks merged into one entry per slice and
//! one per second.

use std::collections::BTreeMap;
use std::time::Duration;

use hdrhistogram::Histogram;

use super::stats::{latency_histogram, Tick};
use crate::run::{Second, Slice};

/// A slice's length in milliseconds: the workers' tick.
const TICK_MS: u64 = super::worker::TICK.as_millis() as u64;
/// Slices per second.
const PER_SECOND: u64 = 1000 / TICK_MS;

/// Merges the workers' ticks into one entry per 100 ms slice and one per second,
/// keeping memory flat however long the run: a slice stays open (with its merged
/// histogram) only until every worker has reported a later one; then it is reduced to
/// its compact [`Slice`] and its histogram added into its second's, which closes the
/// same way when its last slice has. Workers report slices in increasing order, so a
/// slice no worker can still report is final.
pub(super) struct TimelineBuilder {
    max: Duration,
    /// Slices some worker may still report: counts and the merged histogram.
    open: BTreeMap<u64, Open>,
    /// The second the closed slices are adding up to.
    second: Option<(u64, Open)>,
    /// Per worker: the latest slice it reported (`None` before its first tick,
    /// `u64::MAX` once it stopped).
    latest: Vec<Option<u64>>,
    done: Vec<Second>,
    slices: Vec<Slice>,
    /// Histograms of closed intervals, reset, for the next ones.
    free: Vec<Histogram<u64>>,
    /// Per worker: the second it is reporting and its responses in it so far.
    current: Vec<Option<(u64, u64)>>,
    /// Responses per second of each thread, for whole seconds only.
    per_thread: Vec<f64>,
    /// Each thread's last, partial second: (second, responses). Its rate stands in for
    /// the whole seconds when a run had none (under a second), so Req/Sec is not 0.
    partial: Vec<(u64, u64)>,
}

struct Open {
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
            second: None,
            latest: vec![None; threads],
            done: Vec::new(),
            slices: Vec::new(),
            free: Vec::new(),
            current: vec![None; threads],
            per_thread: Vec::new(),
            partial: Vec::new(),
        }
    }

    fn fresh(&mut self) -> Open {
        Open {
            latency: self
                .free
                .pop()
                .unwrap_or_else(|| latency_histogram(self.max)),
            responses: 0,
            errors: 0,
            bytes_read: 0,
        }
    }

    /// Adds a worker's tick; returns the tick's histogram, emptied, for the worker to
    /// reuse.
    pub(super) fn add(&mut self, mut t: Tick) -> Histogram<u64> {
        self.count_thread(&t);
        if !self.open.contains_key(&t.slice) {
            let o = self.fresh();
            self.open.insert(t.slice, o);
        }
        let e = self.open.get_mut(&t.slice).expect("inserted above");
        e.latency.add(&t.latency).expect("histograms share bounds");
        e.responses += t.responses;
        e.errors += t.errors;
        e.bytes_read += t.bytes_read;
        if let Some(l) = self.latest.get_mut(t.thread) {
            *l = Some(if t.last { u64::MAX } else { t.slice });
        }
        self.close_final();
        t.latency.reset();
        t.latency
    }

    /// The thread's responses per whole second (wrk's Req/Sec), from its slices.
    fn count_thread(&mut self, t: &Tick) {
        let Some(cur) = self.current.get_mut(t.thread) else {
            return;
        };
        let second = t.slice / PER_SECOND;
        match cur {
            Some((s, n)) if *s == second => *n += t.responses,
            _ => {
                if let Some((_, n)) = cur.take() {
                    self.per_thread.push(n as f64);
                }
                *cur = Some((second, t.responses));
            }
        }
        if t.last {
            if let Some(last) = cur.take() {
                self.partial.push(last);
            }
        }
    }

    /// Closes every open slice that no worker can report any more.
    fn close_final(&mut self) {
        if self.latest.iter().any(Option::is_none) {
            return;
        }
        let Some(horizon) = self.latest.iter().map(|l| l.unwrap_or(0)).min() else {
            return;
        };
        while let Some(entry) = self.open.first_entry() {
            if *entry.key() >= horizon {
                break;
            }
            let (t, s) = entry.remove_entry();
            self.close_slice(t, s);
        }
    }

    fn close_slice(&mut self, t: u64, mut s: Open) {
        let h = &s.latency;
        self.slices.push(Slice {
            t_ms: t * TICK_MS,
            responses: s.responses,
            errors: s.errors,
            p50_us: h.value_at_quantile(0.5),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
        });
        let second = t / PER_SECOND;
        if self.second.as_ref().is_some_and(|(n, _)| *n != second) {
            let (n, done) = self.second.take().expect("checked");
            self.close_second(n, done);
        }
        if self.second.is_none() {
            let o = self.fresh();
            self.second = Some((second, o));
        }
        let (_, acc) = self.second.as_mut().expect("set above");
        acc.latency
            .add(&s.latency)
            .expect("histograms share bounds");
        acc.responses += s.responses;
        acc.errors += s.errors;
        acc.bytes_read += s.bytes_read;
        s.latency.reset();
        self.free.push(s.latency);
    }

    fn close_second(&mut self, t: u64, mut s: Open) {
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

    /// The seconds, the slices and the threads' responses per whole second.
    pub(super) fn finish(mut self, duration_s: f64) -> (Vec<Second>, Vec<Slice>, Vec<f64>) {
        while let Some((t, s)) = self.open.pop_first() {
            self.close_slice(t, s);
        }
        if let Some((t, s)) = self.second.take() {
            self.close_second(t, s);
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
        (self.done, self.slices, self.per_thread)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tick(thread: usize, slice: u64, us: u64, last: bool) -> Tick {
        let mut latency = latency_histogram(Duration::from_secs(5));
        latency.record(us).unwrap();
        Tick {
            thread,
            slice,
            responses: 1,
            errors: 0,
            bytes_read: 100,
            latency,
            last,
        }
    }

    /// An hour of ticks from two workers, one a slice behind the other: at most two
    /// slices and one second are ever open (each with a histogram), so the builder's
    /// memory does not grow with the run; a closed slice or second costs only its
    /// compact record.
    #[test]
    fn timeline_memory_is_flat_over_an_hour() {
        let mut b = TimelineBuilder::new(Duration::from_secs(5), 2);
        let mut most_open = 0;
        let n = 3600 * PER_SECOND;
        for s in 0..n {
            b.add(tick(0, s, 1000 + s / PER_SECOND, false));
            if s > 0 {
                b.add(tick(1, s - 1, 2000, false));
            }
            most_open = most_open.max(b.open.len());
            assert!(b.free.len() <= 3, "histograms are reused, not piled up");
        }
        b.add(tick(0, n, 7, true));
        b.add(tick(1, n - 1, 7, true));
        assert!(most_open <= 2, "{most_open} slices open at once");
        let (seconds, slices, per_thread) = b.finish(3600.5);
        assert_eq!(seconds.len(), 3601);
        assert_eq!(slices.len(), n as usize + 1);
        assert_eq!(per_thread.len(), 7199);
        // Each worker reported ten responses in each whole second.
        assert!(
            per_thread.iter().all(|&r| r == 10.0),
            "{:?}",
            &per_thread[..4]
        );
        // Bytes per second of timeline: the record and its encoded histogram.
        assert!(std::mem::size_of::<Second>() <= 96);
        assert!(std::mem::size_of::<Slice>() <= 48);
        let encoded = seconds[10].histogram.as_ref().unwrap();
        assert!(encoded.len() < 200, "{} bytes", encoded.len());
        let h = crate::run::decode_histogram(encoded).unwrap();
        assert_eq!((h.len(), h.max()), (20, 2000));
        // Seconds are exact: both workers' responses, the slower one's latency on top.
        assert_eq!(seconds[10].responses, 20);
        assert_eq!(seconds[10].p50_us, 1010);
        assert_eq!(seconds[10].max_us, 2000);
        assert_eq!(seconds[3600].duration_s, 0.5);
        assert_eq!(seconds[3599].responses, 20);
        // Slices likewise, placed at their start in milliseconds.
        assert_eq!(slices[105].t_ms, 10_500);
        assert_eq!((slices[105].responses, slices[105].max_us), (2, 2000));
        assert_eq!(slices[105].p50_us, 1010);
    }

    #[test]
    fn a_slice_stays_open_until_every_worker_has_moved_past_it() {
        let mut b = TimelineBuilder::new(Duration::from_secs(5), 2);
        b.add(tick(0, 0, 10, false));
        b.add(tick(0, 1, 10, false));
        assert_eq!(b.open.len(), 2, "worker 1 has not reported yet");
        b.add(tick(1, 0, 30, false));
        assert_eq!(b.open.len(), 2, "worker 1 may still report more of slice 0");
        b.add(tick(1, 1, 30, false));
        assert_eq!(b.open.len(), 1);
        assert_eq!(b.slices[0].max_us, 30);
        assert!(b.done.is_empty(), "second 0 has slices to come");
    }

    /// A worker stalled for 350 ms reports nothing for three slices, then one tick:
    /// those slices stay empty (a gap, not spread-out responses), and the second still
    /// counts every response once.
    #[test]
    fn a_stalled_worker_leaves_its_slices_empty() {
        let mut b = TimelineBuilder::new(Duration::from_secs(5), 1);
        for s in [0, 1, 5, 6, 7, 8, 9, 10] {
            b.add(tick(0, s, if s == 5 { 350_000 } else { 100 }, false));
        }
        let (seconds, slices, _) = b.finish(1.1);
        let at: Vec<u64> = slices.iter().map(|s| s.t_ms).collect();
        assert_eq!(at, [0, 100, 500, 600, 700, 800, 900, 1000]);
        // Within the histogram's 3 significant digits.
        assert_eq!(slices[2].max_us / 1000, 350);
        assert_eq!(seconds[0].responses, 7);
        assert_eq!(seconds[0].max_us, slices[2].max_us);
    }

    /// Under a second no worker reports a whole second: Req/Sec comes from the partial
    /// one (it showed 0.00 before).
    #[test]
    fn a_run_under_a_second_has_a_thread_rate() {
        let mut b = TimelineBuilder::new(Duration::from_secs(5), 2);
        b.add(tick(0, 0, 10, false));
        b.add(tick(0, 1, 10, true));
        b.add(tick(1, 1, 10, true));
        let (seconds, _, per_thread) = b.finish(0.25);
        assert_eq!(seconds[0].duration_s, 0.25);
        assert_eq!(per_thread, vec![8.0, 4.0]);
        // With whole seconds, the partial one is left out as before.
        let mut b = TimelineBuilder::new(Duration::from_secs(5), 1);
        b.add(tick(0, 0, 10, false));
        b.add(tick(0, 10, 10, true));
        assert_eq!(b.finish(1.5).2, vec![1.0]);
    }
}
