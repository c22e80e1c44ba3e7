//! `--stages` in the engine: the request budget of a rate schedule, each stage's
//! results from the timeline, and `--abort-if-behind`'s watch over the schedule.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::conn::{Conn, Phase};
use super::transport::Transport;
use super::worker::Worker;

use crate::run::{Abort, Second, Slice, StageResult};
use crate::spec::{Spec, StageKind, Stages};

/// The run's rate stages, if it has them.
pub(super) fn rate_stages(spec: &Spec) -> Option<&Stages> {
    spec.stages.as_ref().filter(|s| s.kind == StageKind::Rate)
}

/// Connection stages (`--stages 10s:c50,…`): whether the worker's connection `idx` is
/// above the target now. A worker's connections are places `id`, `id + threads`, … of
/// the whole load's, so each thread carries its share at every target; place `g` is
/// open while the target, rounded up, is above `g`.
#[inline]
pub(super) fn resting<T: Transport>(w: &Worker<T>, idx: usize, now: Instant) -> bool {
    let Some(s) = w
        .stages
        .as_ref()
        .filter(|s| s.kind == StageKind::Connections)
    else {
        return false;
    };
    let place = idx * w.threads + w.id;
    let t = now.saturating_duration_since(w.start).as_secs_f64();
    place as f64 >= (s.target_at(t) - 1e-9).ceil()
}

/// Connection stages: a connection below the target is closed and waits as `Retry`
/// (looked at every sweep) until the target reaches it again; `true` when it rests.
pub(super) fn rests<T: Transport, S>(w: &Worker<T>, c: &mut Conn<S>, now: Instant) -> bool {
    if !resting(w, c.idx, now) {
        return false;
    }
    c.transport = None;
    c.phase = Phase::Retry;
    c.since = now;
    true
}

/// Rate stages: every request of the schedule claims one unit, so the k-th claim is
/// the schedule's request k (its due time) whichever connection sends it.
pub(super) fn budget(spec: &Spec) -> Option<u64> {
    rate_stages(spec).map(Stages::total_requests)
}

/// The window over which `--abort-if-behind` compares what was completed with what
/// was due: 20 slices of 100 ms, so one slow slice (even one with no response at all)
/// costs at most 5% of it, below any sensible bound, while a server that cannot keep
/// up is seen within 2 s.
pub const BEHIND_WINDOW: Duration = Duration::from_secs(2);
/// Below this many requests due in the window (the first moments of a ramp from 0,
/// the end of a ramp to 0) a few late responses would be a large share: not judged.
const MIN_DUE: f64 = 20.0;

/// `--abort-if-behind`: the requests completed (responses and failed requests) against
/// those the schedule had due, over the last [`BEHIND_WINDOW`].
pub(super) struct Behind {
    limit_pct: f64,
    schedule: Schedule,
    /// (seconds from the start, requests completed by then), oldest first.
    samples: VecDeque<(f64, u64)>,
}

enum Schedule {
    Rate(f64),
    Stages(Stages),
}

impl Schedule {
    fn due_by(&self, t_s: f64) -> f64 {
        match self {
            Schedule::Rate(r) => r * t_s,
            Schedule::Stages(s) => s.due_by(t_s),
        }
    }
}

impl Behind {
    /// The watch for an open-loop run with `--abort-if-behind`; `None` otherwise.
    pub(super) fn new(spec: &Spec) -> Option<Behind> {
        let limit_pct = spec.abort_if_behind_pct?;
        let schedule = match (spec.rate, rate_stages(spec)) {
            (Some(r), _) => Schedule::Rate(r),
            (None, Some(s)) => Schedule::Stages(s.clone()),
            (None, None) => return None,
        };
        Some(Behind {
            limit_pct,
            schedule,
            samples: VecDeque::from([(0.0, 0)]),
        })
    }

    /// `done` requests were completed `elapsed` into the load: the stop, if the last
    /// window fell behind by more than the bound.
    pub(super) fn check(&mut self, elapsed: Duration, done: u64) -> Option<Abort> {
        let t = elapsed.as_secs_f64();
        let w = BEHIND_WINDOW.as_secs_f64();
        self.samples.push_back((t, done));
        // Keep the newest sample at least a window old as the front.
        while self.samples.len() > 2 && self.samples[1].0 <= t - w {
            self.samples.pop_front();
        }
        let (t0, d0) = self.samples[0];
        if t - t0 < w {
            return None;
        }
        let due = self.schedule.due_by(t) - self.schedule.due_by(t0);
        if due < MIN_DUE {
            return None;
        }
        let achieved = done.saturating_sub(d0) as f64;
        let behind_pct = (1.0 - achieved / due) * 100.0;
        (behind_pct > self.limit_pct).then(|| Abort {
            at_s: t,
            window_s: t - t0,
            scheduled_rps: due / (t - t0),
            achieved_rps: achieved / (t - t0),
            behind_pct,
            limit_pct: self.limit_pct,
        })
    }
}

/// Each stage's results, from the 100 ms slices (counts: a stage lasts whole slices)
/// and the seconds' histograms (latency of the seconds that began in the stage); the
/// stages a stopped run did not reach are left out.
pub(super) fn results(
    st: &Stages,
    slices: &[Slice],
    seconds: &[Second],
    duration_s: f64,
) -> Vec<StageResult> {
    let mut out = Vec::new();
    for ((a, b, from, to), stage) in st.spans().zip(&st.stages) {
        if a >= duration_s - 1e-9 {
            break;
        }
        let end = b.min(duration_s);
        let (a_ms, end_ms) = ((a * 1e3).round() as u64, (end * 1e3).round() as u64);
        let within = slices.iter().filter(|s| s.t_ms >= a_ms && s.t_ms < end_ms);
        let responses: u64 = within.clone().map(|s| s.responses).sum();
        let errors: u64 = within.map(|s| s.errors).sum();
        let mut h = hdrhistogram::Histogram::<u64>::new(3).expect("3 significant digits");
        h.auto(true);
        for s in seconds
            .iter()
            .filter(|s| (s.t_s as f64) >= a - 1e-9 && (s.t_s as f64) < b - 1e-9)
        {
            if let Some(one) = s
                .histogram
                .as_deref()
                .and_then(|x| crate::run::decode_histogram(x).ok())
            {
                let _ = h.add(&one);
            }
        }
        let q = |p: f64| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(p)
            }
        };
        let span = (end - a).max(1e-9);
        let c = if st.kind == StageKind::Connections {
            "c"
        } else {
            ""
        };
        out.push(StageResult {
            stage: format!(
                "{}:{c}{}",
                crate::units::fmt_duration(Duration::from_secs_f64(stage.duration_s)),
                stage.target
            ),
            start_s: a,
            end_s: end,
            target_from: from,
            target_to: to,
            target_rps: (st.kind == StageKind::Rate)
                .then(|| (st.due_by(end) - st.due_by(a)) / span),
            requests: responses + errors,
            responses,
            errors,
            achieved_rps: (responses + errors) as f64 / span,
            p50_us: q(0.5),
            p99_us: q(0.99),
            max_us: if h.is_empty() { 0 } else { h.max() },
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(stages: &str, limit: f64) -> Spec {
        let mut s = crate::spec::tests::spec("http://127.0.0.1:1/");
        s.stages = Some(Stages::parse(stages).unwrap());
        s.abort_if_behind_pct = Some(limit);
        s
    }

    #[test]
    fn behind_trips_only_past_the_bound_over_the_window() {
        // 1000 req/s flat after a 1 s ramp: 500 due in the first second.
        let mut b = Behind::new(&spec("1s:1000,10s:1000", 10.0)).unwrap();
        // Keeping up (5% behind, within 10%): never stops.
        for k in 1..=60 {
            let t = k as f64 * 0.1;
            let done = (b.schedule.due_by(t) * 0.95) as u64;
            assert!(b.check(Duration::from_secs_f64(t), done).is_none(), "{t}");
        }
        // One slice with nothing completed, then catching up: still within the bound.
        let base = b.schedule.due_by(6.0) as u64;
        assert!(b.check(Duration::from_secs_f64(6.1), base).is_none());
        // Then nothing more at all: stopped once the window is 10% short.
        let mut stop = None;
        for k in 62..=100 {
            if let Some(a) = b.check(Duration::from_secs_f64(k as f64 * 0.1), base) {
                stop = Some(a);
                break;
            }
        }
        let a = stop.expect("a stalled load is stopped");
        assert!(a.behind_pct > 10.0 && a.behind_pct < 20.0, "{a:?}");
        assert!((a.scheduled_rps - 1000.0).abs() < 1.0, "{a:?}");
        assert!(a.at_s < 6.5, "{a:?}");
    }

    #[test]
    fn behind_waits_for_enough_requests_due() {
        // 5 req/s: never 20 due in 2 s, never judged.
        let mut b = Behind::new(&spec("10s:5", 1.0)).unwrap();
        for k in 1..=100 {
            assert!(b
                .check(Duration::from_secs_f64(k as f64 * 0.1), 0)
                .is_none());
        }
    }
}
