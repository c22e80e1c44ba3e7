//! The HdrHistogram interval log (`--hdr-log FILE`): the format of HdrHistogram's
//! `HistogramLogWriter`, which its `HistogramLogProcessor`, its plotters and the
//! hdrhistogram crate's `IntervalLogIterator` read. One interval per second of the load,
//! each the latency histogram of the responses completed in that second (the engine
//! keeps one per second in the timeline), timed from the load's start (`BaseTime`).
//! A Run whose seconds carry no histogram (recorded before they were kept, or merged
//! from segments that did not all keep them) gets its whole-run histogram as one
//! interval, and a comment line saying so.
//!
//! Values are microseconds, as everywhere in a Run: `Interval_Max` is written in
//! milliseconds (`MaxValueDivisor: 1000`), and HistogramLogProcessor wants
//! `-outputValueUnitRatio 1000` to print milliseconds.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use hdrhistogram::serialization::interval_log::IntervalLogWriterBuilder;
use hdrhistogram::serialization::V2DeflateSerializer;
use hdrhistogram::Histogram;

use super::View;
use crate::run::{decode_histogram, Run};

/// The interval log view.
pub struct HdrLog;

impl View<Run> for HdrLog {
    fn render(&self, run: &Run) -> Vec<u8> {
        log(run)
    }
}

/// The intervals: (start from the load's start, length, histogram).
fn intervals(run: &Run) -> Result<Vec<(f64, f64, Histogram<u64>)>, String> {
    let r = &run.results;
    let per_second: Option<Vec<_>> = r
        .timeline
        .iter()
        .map(|s| {
            let h = decode_histogram(s.histogram.as_deref()?).ok()?;
            Some((s.t_s as f64, s.duration_s, h))
        })
        .collect();
    match per_second {
        Some(v) if !v.is_empty() => Ok(v),
        _ => {
            let h = r.latency.decode().map_err(|e| format!("{e:#}"))?;
            Ok(vec![(0.0, r.duration_s, h)])
        }
    }
}

/// The whole log.
pub fn log(run: &Run) -> Vec<u8> {
    let mut out = Vec::new();
    let at = |s: f64| UNIX_EPOCH + Duration::from_secs_f64(s.max(0.0));
    let start: SystemTime = at(run.started_unix_s);
    let found = intervals(run);
    let mut b = IntervalLogWriterBuilder::new();
    b.add_comment(&format!(
        "{}: {} {}, latency in microseconds{}",
        run.tool,
        run.spec.method,
        run.spec.url,
        if run.results.latency.corrected_for_coordinated_omission {
            " (corrected for coordinated omission)"
        } else {
            " (closed loop: not corrected for coordinated omission)"
        }
    ));
    match &found {
        Ok(v) if v.len() == 1 && run.results.timeline.iter().all(|s| s.histogram.is_none()) => {
            b.add_comment("this Run keeps no per-second histograms: the whole run is one interval");
        }
        Err(e) => {
            b.add_comment(&format!("no histogram could be read from this Run: {e}"));
        }
        _ => {}
    }
    b.with_start_time(start)
        .with_base_time(start)
        .with_max_value_divisor(1000.0);
    let mut ser = V2DeflateSerializer::new();
    let mut w = b
        .begin_log_with(&mut out, &mut ser)
        .expect("writing to memory cannot fail");
    for (t, len, h) in found.unwrap_or_default() {
        w.write_histogram(
            &h,
            Duration::from_secs_f64(t),
            Duration::from_secs_f64(len.max(0.0)),
            None,
        )
        .expect("writing to memory cannot fail");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};

    fn histograms(log: &[u8]) -> Vec<(f64, Histogram<u64>)> {
        IntervalLogIterator::new(log)
            .filter_map(|e| match e.unwrap() {
                LogEntry::Interval(i) => {
                    let h = decode_histogram(i.encoded_histogram()).unwrap();
                    Some((i.start_timestamp().as_secs_f64(), h))
                }
                _ => None,
            })
            .collect()
    }

    /// A recorded Run has no per-second histograms: one interval, its whole histogram,
    /// and a comment saying so.
    #[test]
    fn a_run_without_per_second_histograms_is_one_interval() {
        let path = format!(
            "{}/tests/data/runs/healthy-before.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let run = Run::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
        let whole = log(&run);
        let text = String::from_utf8_lossy(&whole);
        assert!(
            text.contains(
                "\n#this Run keeps no per-second histograms: the whole run is one interval\n"
            ),
            "{text}"
        );
        let hs = histograms(&whole);
        assert_eq!(hs.len(), 1);
        assert_eq!(hs[0].1.len(), run.results.latency.count);
        // Per-second histograms, when the seconds have them: one interval each.
        let mut run = run;
        let mut h = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for s in run.results.timeline.iter_mut() {
            h.reset();
            h.record_n(100 + s.t_s, s.responses).unwrap();
            s.histogram = Some(crate::run::encode_histogram(&h));
        }
        let hs = histograms(&log(&run));
        assert_eq!(hs.len(), run.results.timeline.len());
        for ((t, h), s) in hs.iter().zip(&run.results.timeline) {
            let max = if s.responses > 0 { 100 + s.t_s } else { 0 };
            assert_eq!((*t, h.len(), h.max()), (s.t_s as f64, s.responses, max));
        }
    }
}
