//! `--stages`: a load whose target changes over the run, as k6's `stages` option
//! (<https://grafana.com/docs/k6/latest/using-k6/k6-options/reference/#stages>): each
//! stage ramps linearly from the previous stage's target to its own over its duration,
//! the first from 0. `30s:100,1m:1000,30s:0` are open-loop rates (requests per second);
//! `30s:c10,1m:c200` are connections (closed loop). The run's length is the sum.
//!
//! The open-loop schedule is exact: the number of requests due by time t is the
//! integral of the rate, N(t), and request n (0, 1, …) is due when N(t) = n, solved per
//! stage from its quadratic (a linear ramp integrates to a parabola). No table is kept:
//! a worker asks for the due time of the request it claimed.

use serde::{Deserialize, Serialize};

use crate::units::parse_duration;

/// What the stages' targets are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum StageKind {
    /// Requests per second, sent on schedule (open loop).
    Rate,
    /// Connections, each with one request in flight (closed loop).
    Connections,
}

/// One stage: over `duration_s`, the target ramps linearly from the previous stage's
/// (0 before the first) to `target`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stage {
    pub duration_s: f64,
    /// Requests per second or connections at the end of the stage.
    pub target: f64,
}

/// The stages of a load, as `--stages` gave them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stages {
    pub kind: StageKind,
    pub stages: Vec<Stage>,
}

/// Stage durations are whole 100 ms slices, so each slice of the timeline lies in one
/// stage and the per-stage counts are exact.
const SLICE_S: f64 = 0.1;
/// The most stages one load may have (a longer list is more likely a mistake).
const MAX_STAGES: usize = 1000;

impl Stages {
    /// Parses `30s:100,1m:1000,30s:0` (rates) or `30s:c10,1m:c200` (connections).
    pub fn parse(text: &str) -> Result<Stages, String> {
        let mut kind = None;
        let mut stages = Vec::new();
        for (i, part) in text.split(',').map(str::trim).enumerate() {
            let n = i + 1;
            let Some((dur, target)) = part.split_once(':') else {
                return Err(format!(
                    "stage {n} `{part}` is not DURATION:TARGET: write e.g. 30s:100 (a rate) or 30s:c10 (connections)"
                ));
            };
            let d = parse_duration(dur).map_err(|e| format!("stage {n} `{part}`: {e}"))?;
            let duration_s = d.as_secs_f64();
            if duration_s <= 0.0 {
                return Err(format!(
                    "stage {n} `{part}` lasts zero time: give each stage a duration, e.g. 10s"
                ));
            }
            let slices = duration_s / SLICE_S;
            if (slices - slices.round()).abs() > 1e-6 {
                return Err(format!(
                    "stage {n} `{part}`: a stage lasts a whole number of 100 ms (e.g. 1.5s, 300ms)"
                ));
            }
            let (this, number) = match target.trim().strip_prefix('c') {
                Some(c) => (StageKind::Connections, c),
                None => (StageKind::Rate, target.trim()),
            };
            let value = crate::units::parse_count(number).map_err(|e| {
                format!("stage {n} `{part}`: {e} (a rate like 100 or 10k, or connections like c10)")
            })? as f64;
            if this == StageKind::Connections && value > 1_000_000.0 {
                return Err(format!("stage {n} `{part}`: at most 1000000 connections"));
            }
            match kind {
                None => kind = Some(this),
                Some(k) if k != this => {
                    return Err(format!(
                        "stage {n} `{part}` mixes kinds: give all stages as rates (30s:100) or all as connections (30s:c10)"
                    ))
                }
                _ => {}
            }
            stages.push(Stage {
                duration_s: slices.round() * SLICE_S,
                target: value,
            });
        }
        if stages.len() > MAX_STAGES {
            return Err(format!("at most {MAX_STAGES} stages"));
        }
        let s = Stages {
            kind: kind.expect("split yields at least one part"),
            stages,
        };
        if s.max_target() == 0.0 {
            return Err(
                "every stage's target is 0: nothing would be sent (give a stage a rate or connections above 0)"
                    .into(),
            );
        }
        Ok(s)
    }

    /// The run's length: the stages' durations summed, seconds.
    pub fn total_s(&self) -> f64 {
        self.stages.iter().map(|s| s.duration_s).sum()
    }

    /// The highest target of any stage.
    pub fn max_target(&self) -> f64 {
        self.stages.iter().map(|s| s.target).fold(0.0, f64::max)
    }

    /// Each stage's (start, end, target at its start, target at its end), seconds from
    /// the start of the load.
    pub fn spans(&self) -> impl Iterator<Item = (f64, f64, f64, f64)> + '_ {
        let mut t = 0.0;
        let mut from = 0.0;
        self.stages.iter().map(move |s| {
            let span = (t, t + s.duration_s, from, s.target);
            t += s.duration_s;
            from = s.target;
            span
        })
    }

    /// The target at `t_s` seconds from the start (the last stage's after the end).
    pub fn target_at(&self, t_s: f64) -> f64 {
        let mut last = 0.0;
        for (a, b, r0, r1) in self.spans() {
            if t_s < b {
                return r0 + (r1 - r0) * ((t_s - a) / (b - a)).max(0.0);
            }
            last = r1;
        }
        last
    }

    /// Requests due by `t_s` (the integral of the rate), for rate stages.
    pub fn due_by(&self, t_s: f64) -> f64 {
        let mut n = 0.0;
        for (a, b, r0, r1) in self.spans() {
            let u = (t_s.min(b) - a).max(0.0);
            n += r0 * u + (r1 - r0) * u * u / (2.0 * (b - a));
            if t_s < b {
                break;
            }
        }
        n
    }

    /// Requests due over the whole run: the last one's ordinal + 1.
    pub fn total_requests(&self) -> u64 {
        // Request n is due when N(t) = n, so n = 0 ..= floor(N(end)); a tiny margin keeps
        // a rounding error from adding one at the very end.
        (self.due_by(self.total_s()) - 1e-9).floor().max(-1.0) as u64 + 1
    }

    /// When request `n` (0, 1, …) is due, seconds from the start; `None` for one due at
    /// the end or later.
    pub fn due_s(&self, n: u64) -> Option<f64> {
        let n = n as f64;
        let mut before = 0.0;
        for (a, b, r0, r1) in self.spans() {
            let d = b - a;
            let here = (r0 + r1) * d / 2.0;
            if n < before + here {
                let m = n - before;
                // r0·u + (r1 − r0)·u²/(2d) = m, solved for u in the form that is stable
                // when the stage is flat or starts at 0: u = 2m / (r0 + √(r0² + 2·k·m)).
                let k = (r1 - r0) / d;
                let root = (r0 * r0 + 2.0 * k * m).max(0.0).sqrt();
                let u = if m == 0.0 { 0.0 } else { 2.0 * m / (r0 + root) };
                return Some(a + u.min(d));
            }
            before += here;
        }
        None
    }

    /// The stage `t_s` seconds from the start lies in (the last after the end).
    pub fn index_at(&self, t_s: f64) -> usize {
        self.spans()
            .position(|(_, b, _, _)| t_s < b - 1e-9)
            .unwrap_or(self.stages.len() - 1)
    }

    /// The stages as given (`30s:100,1m:1000`).
    pub fn text(&self) -> String {
        let c = if self.kind == StageKind::Connections {
            "c"
        } else {
            ""
        };
        self.stages
            .iter()
            .map(|s| {
                format!(
                    "{}:{c}{}",
                    crate::units::fmt_duration(std::time::Duration::from_secs_f64(s.duration_s)),
                    s.target
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_rates_and_connections() {
        let s = Stages::parse("30s:100,1m:1000,30s:0").unwrap();
        assert_eq!(s.kind, StageKind::Rate);
        assert_eq!(s.total_s(), 120.0);
        assert_eq!(s.stages[1].target, 1000.0);
        let c = Stages::parse("30s:c10, 1m:c200").unwrap();
        assert_eq!(c.kind, StageKind::Connections);
        assert_eq!(c.max_target(), 200.0);
        assert_eq!(Stages::parse("1.5s:2k").unwrap().stages[0].target, 2000.0);
    }

    #[test]
    fn refuses_bad_stages_saying_which() {
        for (text, says) in [
            ("30s:100,1m:c10", "mixes kinds"),
            ("0s:100", "zero time"),
            ("30x:100", "duration unit"),
            ("30s", "DURATION:TARGET"),
            ("30s:fast", "stage 1"),
            ("10s:0,5s:0", "every stage's target is 0"),
            ("150ms:10", "100 ms"),
        ] {
            let e = Stages::parse(text).unwrap_err();
            assert!(e.contains(says), "{text}: {e}");
        }
    }

    #[test]
    fn ramps_from_zero_then_between_targets() {
        let s = Stages::parse("10s:100,10s:100,10s:0").unwrap();
        assert_eq!(s.target_at(5.0), 50.0);
        assert_eq!(s.target_at(15.0), 100.0);
        assert_eq!(s.target_at(25.0), 50.0);
        assert!((s.due_by(10.0) - 500.0).abs() < 1e-9);
        assert!((s.due_by(20.0) - 1500.0).abs() < 1e-9);
        assert!((s.due_by(30.0) - 2000.0).abs() < 1e-9);
        // Requests 0 ..= 1999: the 2000th would be due at the very end.
        assert_eq!(s.total_requests(), 2000);
        assert_eq!(s.index_at(9.99), 0);
        assert_eq!(s.index_at(10.0), 1);
        assert_eq!(s.index_at(99.0), 2);
    }

    #[test]
    fn due_times_invert_the_count() {
        let s = Stages::parse("3s:200,2s:200,2s:50,1s:0").unwrap();
        let total = s.total_requests();
        let mut last = 0.0;
        for n in 0..total {
            let t = s.due_s(n).unwrap();
            assert!(t >= last, "request {n} due before the one before it");
            assert!((s.due_by(t) - n as f64).abs() < 1e-6, "request {n} at {t}");
            last = t;
        }
        assert_eq!(s.due_s(0), Some(0.0));
        assert_eq!(s.due_s(total), None);
    }
}
