//! Objectives: `--slo 'p99<200ms,p50<20ms,errors<0.1%,rps>1000'`, one grammar for
//! `run`, `merge`, `report` and `sweep --ceiling`, each objective measured on a Run's
//! results and judged.
//!
//! An objective is `METRIC OP BOUND`, objectives separated by commas:
//!
//! | metric | means | ops | bound |
//! |---|---|---|---|
//! | `p50`, `p99.9`, any `pNN[.N]` (0 < NN ≤ 100; `p100` = max) | request latency at that percentile, from the Run's HdrHistogram | `<` `<=` | a duration: `200ms`, `1s`, `500us` |
//! | `mean`, `max` | mean and highest request latency | `<` `<=` | a duration |
//! | `errors` | failed requests (connect, read, write, timeout, parse, reset) and non-2xx/3xx responses: everything that was not a good response | `<` `<=` | a share of requests sent, `0.1%`, or a count, `10` |
//! | `non2xx` | responses whose status was not 2xx or 3xx | `<` `<=` | a share of responses, `1%`, or a count |
//! | `rps` | responses per second over the load | `>` `>=` | a rate: `1000`, `1.5k` |
//!
//! A latency or a share with nothing to measure (no responses, no requests) breaks its
//! objective: a load that got no answer meets no latency bound.

use anyhow::bail;

use crate::run::{LoadResults, ObjectiveResult};
use crate::units::{parse_count, parse_duration};

/// What an objective is about.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Metric {
    /// Request latency at this percentile (0 < p ≤ 100).
    Percentile(f64),
    Mean,
    Max,
    /// Failed requests and non-2xx/3xx responses.
    Errors,
    /// Non-2xx/3xx responses.
    Non2xx,
    /// Responses per second.
    Rps,
}

/// The comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    Lt,
    Le,
    Gt,
    Ge,
}

impl Op {
    fn text(self) -> &'static str {
        match self {
            Op::Lt => "<",
            Op::Le => "<=",
            Op::Gt => ">",
            Op::Ge => ">=",
        }
    }

    /// `v OP bound`.
    pub fn holds(self, v: f64, bound: f64) -> bool {
        match self {
            Op::Lt => v < bound,
            Op::Le => v <= bound,
            Op::Gt => v > bound,
            Op::Ge => v >= bound,
        }
    }
}

/// The unit of a bound (and of the value measured against it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    Micros,
    Percent,
    Count,
    PerSecond,
}

impl Unit {
    fn text(self) -> &'static str {
        match self {
            Unit::Micros => "us",
            Unit::Percent => "%",
            Unit::Count => "count",
            Unit::PerSecond => "req/s",
        }
    }
}

/// One objective, parsed.
#[derive(Debug, Clone, PartialEq)]
pub struct Objective {
    /// As given, without spaces: `p99<200ms`.
    pub text: String,
    pub metric: Metric,
    pub op: Op,
    /// In `unit`.
    pub bound: f64,
    pub unit: Unit,
}

/// The objectives of one `--slo`, in the order given (what clap hands over).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Objectives(pub Vec<Objective>);

const EXAMPLES: &str =
    "e.g. 'p99<200ms', 'p99.9<=1s', 'mean<50ms', 'max<1s', 'errors<0.1%', 'errors<10', 'non2xx<1%', 'rps>1000'";

impl Objectives {
    /// Parses `p99<200ms,errors<0.1%,rps>1k`; the first malformed objective is named.
    pub fn parse(s: &str) -> anyhow::Result<Objectives> {
        let list: Vec<Objective> = s
            .split(',')
            .filter(|x| !x.trim().is_empty())
            .map(Objective::parse)
            .collect::<anyhow::Result<_>>()?;
        if list.is_empty() {
            bail!("no objective in `{s}`: {EXAMPLES}");
        }
        Ok(Objectives(list))
    }

    /// Each objective judged on `r`, in order.
    pub fn judge(&self, r: &LoadResults) -> Vec<ObjectiveResult> {
        self.0.iter().map(|o| o.judge(r)).collect()
    }

    /// Whether every objective holds on `r`.
    pub fn met_by(&self, r: &LoadResults) -> bool {
        self.0.iter().all(|o| o.judge(r).met)
    }

    /// The objectives as one string, as they would be given.
    pub fn text(&self) -> String {
        self.0
            .iter()
            .map(|o| o.text.as_str())
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl Objective {
    /// Parses one objective: `p99<200ms`, `p99.9 <= 1s`, `errors<0.1%`, `rps>=1k`.
    pub fn parse(s: &str) -> anyhow::Result<Objective> {
        let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
        let bad = |why: &str| anyhow::anyhow!("invalid objective `{t}`: {why}; {EXAMPLES}");
        let at = t
            .find(['<', '>'])
            .ok_or_else(|| bad("no comparison (<, <=, >, >=)"))?;
        let (lhs, rest) = t.split_at(at);
        let (op, rhs) = match rest.as_bytes() {
            [b'<', b'=', ..] => (Op::Le, &rest[2..]),
            [b'>', b'=', ..] => (Op::Ge, &rest[2..]),
            [b'<', ..] => (Op::Lt, &rest[1..]),
            _ => (Op::Gt, &rest[1..]),
        };
        let metric = match lhs.to_ascii_lowercase().as_str() {
            "mean" | "avg" => Metric::Mean,
            "max" => Metric::Max,
            "errors" | "error" => Metric::Errors,
            "non2xx" | "non-2xx" => Metric::Non2xx,
            "rps" => Metric::Rps,
            p => match p.strip_prefix('p').map(str::parse::<f64>) {
                Some(Ok(x)) if x > 0.0 && x <= 100.0 => Metric::Percentile(x),
                Some(Ok(_)) => return Err(bad("a percentile is above 0 and at most 100")),
                _ => return Err(bad(&format!("unknown metric `{lhs}`"))),
            },
        };
        let upper = matches!(op, Op::Lt | Op::Le);
        let (bound, unit) = match metric {
            Metric::Rps => {
                if upper {
                    return Err(bad("a rate objective is a floor: use > or >="));
                }
                let v = rhs
                    .parse::<f64>()
                    .ok()
                    .or_else(|| parse_count(rhs).ok().map(|n| n as f64))
                    .filter(|v| v.is_finite() && *v >= 0.0)
                    .ok_or_else(|| bad(&format!("`{rhs}` is not a rate")))?;
                (v, Unit::PerSecond)
            }
            _ if !upper => {
                return Err(bad(&format!(
                    "`{lhs}` objectives are upper bounds: use < or <="
                )))
            }
            Metric::Errors | Metric::Non2xx => match rhs.strip_suffix('%') {
                Some(p) => match p.parse::<f64>() {
                    Ok(x) if (0.0..=100.0).contains(&x) => (x, Unit::Percent),
                    _ => return Err(bad(&format!("`{rhs}` is not a percentage"))),
                },
                None => {
                    let n = parse_count(rhs)
                        .map_err(|_| bad(&format!("`{rhs}` is not a count or a percentage")))?;
                    (n as f64, Unit::Count)
                }
            },
            _ => {
                let d =
                    parse_duration(rhs).map_err(|_| bad(&format!("`{rhs}` is not a duration")))?;
                (d.as_secs_f64() * 1e6, Unit::Micros)
            }
        };
        Ok(Objective {
            text: t.clone(),
            metric,
            op,
            bound,
            unit,
        })
    }

    /// Whether this is a latency objective.
    pub fn is_latency(&self) -> bool {
        matches!(
            self.metric,
            Metric::Percentile(_) | Metric::Mean | Metric::Max
        )
    }

    /// `p99`, `p99.9`, `mean`, `max`, `errors`, `non2xx`, `rps`.
    pub fn label(&self) -> String {
        match self.metric {
            Metric::Percentile(p) if p >= 100.0 => "max".into(),
            Metric::Percentile(p) => format!("p{p}"),
            Metric::Mean => "mean".into(),
            Metric::Max => "max".into(),
            Metric::Errors => "errors".into(),
            Metric::Non2xx => "non2xx".into(),
            Metric::Rps => "rps".into(),
        }
    }

    /// The value of this objective's metric on `r`, in its unit; `None` when there is
    /// nothing to measure.
    pub fn measure(&self, r: &LoadResults) -> Option<f64> {
        let lat = &r.latency;
        let failed = r.errors.total();
        let share = |n: u64, of: u64| (of > 0).then(|| n as f64 * 100.0 / of as f64);
        match self.metric {
            _ if self.is_latency() && lat.count == 0 => None,
            Metric::Percentile(p) if p >= 100.0 => Some(lat.max_us as f64),
            // Any percentile, from the histogram; the summary's own when it cannot be
            // read (a hand-edited Run).
            Metric::Percentile(p) => match lat.decode() {
                Ok(h) => Some(h.value_at_quantile(p / 100.0) as f64),
                Err(_) => lat.at(p).map(|v| v as f64),
            },
            Metric::Mean => Some(lat.mean_us),
            Metric::Max => Some(lat.max_us as f64),
            Metric::Errors if self.unit == Unit::Percent => {
                share(failed + r.non_2xx_3xx, r.responses + failed)
            }
            Metric::Errors => Some((failed + r.non_2xx_3xx) as f64),
            Metric::Non2xx if self.unit == Unit::Percent => share(r.non_2xx_3xx, r.responses),
            Metric::Non2xx => Some(r.non_2xx_3xx as f64),
            Metric::Rps => Some(r.requests_per_s),
        }
    }

    /// This objective judged on `r`.
    pub fn judge(&self, r: &LoadResults) -> ObjectiveResult {
        let measured = self.measure(r);
        ObjectiveResult {
            objective: self.text.clone(),
            metric: self.label(),
            op: self.op.text().into(),
            bound: self.bound,
            measured,
            unit: self.unit.text().into(),
            met: measured.is_some_and(|v| self.op.holds(v, self.bound)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Run;

    fn results() -> LoadResults {
        let path = format!(
            "{}/tests/data/runs/healthy-before.json",
            env!("CARGO_MANIFEST_DIR")
        );
        Run::from_json(&std::fs::read_to_string(path).unwrap())
            .unwrap()
            .results
    }

    #[test]
    fn objectives_parse() {
        let o = Objectives::parse("p99<200ms, p50 <= 20ms,errors<0.1%,rps>1k").unwrap();
        let got: Vec<_> =
            o.0.iter()
                .map(|x| (x.metric, x.op, x.bound, x.unit))
                .collect();
        assert_eq!(
            got,
            [
                (Metric::Percentile(99.0), Op::Lt, 200_000.0, Unit::Micros),
                (Metric::Percentile(50.0), Op::Le, 20_000.0, Unit::Micros),
                (Metric::Errors, Op::Lt, 0.1, Unit::Percent),
                (Metric::Rps, Op::Gt, 1000.0, Unit::PerSecond),
            ]
        );
        assert_eq!(o.text(), "p99<200ms,p50<=20ms,errors<0.1%,rps>1k");
        let one = |s| Objective::parse(s).unwrap();
        assert_eq!(one("p99.95<1s").metric, Metric::Percentile(99.95));
        assert_eq!(one("p100<1s").label(), "max");
        assert_eq!(one("mean<500us").bound, 500.0);
        assert_eq!(one("max<1s").metric, Metric::Max);
        assert_eq!(
            (one("errors<10").bound, one("errors<10").unit),
            (10.0, Unit::Count)
        );
        assert_eq!(one("non-2xx<=1%").metric, Metric::Non2xx);
        assert_eq!(one("rps>=1500.5").bound, 1500.5);
    }

    #[test]
    fn a_malformed_objective_is_named_with_why() {
        for (bad, why) in [
            ("p99", "no comparison"),
            ("p0<1s", "above 0"),
            ("p101<1s", "at most 100"),
            ("p99<fast", "`fast` is not a duration"),
            ("latency<1s", "unknown metric `latency`"),
            ("rps<100", "a floor"),
            ("p99>1ms", "upper bounds"),
            ("errors<abc", "not a count or a percentage"),
            ("errors<101%", "not a percentage"),
            ("rps>lots", "not a rate"),
        ] {
            let e = Objectives::parse(&format!("p50<1s,{bad}"))
                .unwrap_err()
                .to_string();
            assert!(e.contains(&format!("`{bad}`")), "{bad}: {e}");
            assert!(e.contains(why), "{bad}: {e}");
            assert!(e.contains("e.g. 'p99<200ms'"), "{bad}: {e}");
        }
        assert!(Objectives::parse(" , ").is_err());
    }

    /// Each metric measured on a recorded Run, against the numbers it holds.
    #[test]
    fn objectives_are_judged_on_the_results() {
        let mut r = results();
        let p99 = r.latency.at(99.0).unwrap() as f64;
        let judge = |s: &str, r: &LoadResults| Objective::parse(s).unwrap().judge(r);
        let j = judge(&format!("p99<{}us", p99 as u64 + 1), &r);
        assert!(j.met && j.measured == Some(p99), "{j:?}");
        let j = judge(&format!("p99<{}us", p99 as u64), &r);
        assert!(!j.met, "strictly below: {j:?}");
        assert!(judge(&format!("p99<={}us", p99 as u64), &r).met);
        // A percentile the summary does not list, from the histogram.
        let p95 = r.latency.decode().unwrap().value_at_quantile(0.95) as f64;
        assert_eq!(judge("p95<1s", &r).measured, Some(p95));
        assert_eq!(judge("max<1s", &r).measured, Some(r.latency.max_us as f64));
        assert_eq!(judge("mean<1s", &r).measured, Some(r.latency.mean_us));
        let rps = r.requests_per_s;
        assert!(judge(&format!("rps>{}", (rps - 1.0) as u64), &r).met);
        assert!(!judge(&format!("rps>{}", (rps + 1.0) as u64), &r).met);
        // Errors: failures and non-2xx/3xx, as a share of requests sent or a count.
        r.errors.timeout = 5;
        r.non_2xx_3xx = 5;
        r.responses = 995;
        let j = judge("errors<1%", &r);
        assert_eq!(j.measured, Some(1.0));
        assert!(!j.met);
        assert!(judge("errors<=1%", &r).met);
        assert_eq!(judge("errors<10", &r).measured, Some(10.0));
        assert_eq!(judge("non2xx<1%", &r).measured, Some(5.0 * 100.0 / 995.0));
        // Nothing to measure breaks the objective.
        r.latency.count = 0;
        r.responses = 0;
        let j = judge("p99<1s", &r);
        assert!(j.measured.is_none() && !j.met, "{j:?}");
        assert!(!judge("non2xx<1%", &r).met);
        assert_eq!(j.measured_text(), "none");
        assert_eq!(judge("errors<0.1%", &r).wanted_text(), "< 0.1%");
    }
}
