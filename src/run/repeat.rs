//! `--repeat N`: every repetition of the same load kept whole, and the totals over all
//! of them (counts summed, HdrHistograms added — never percentiles averaged).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{ClientCheck, Evidence, Finding, LatencySummary, LoadResults, Phases, Spread};

/// One repetition of a repeated run: what a single run would have recorded.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Repetition {
    /// When this repetition's load started, seconds since the Unix epoch.
    pub started_unix_s: f64,
    pub results: LoadResults,
    pub client: ClientCheck,
    #[serde(default)]
    pub evidence: Option<Evidence>,
    /// This repetition's own diagnosis.
    #[serde(default)]
    pub findings: Vec<Finding>,
}

impl LoadResults {
    /// The totals of loads run one after the other: counts summed, durations added,
    /// histograms merged, timelines laid end to end. `None` for an empty list.
    pub fn concat(parts: &[&LoadResults]) -> anyhow::Result<Option<LoadResults>> {
        let Some(first) = parts.first() else {
            return Ok(None);
        };
        let mut out = (*first).clone();
        for p in &parts[1..] {
            out.duration_s += p.duration_s;
            out.add_counts(p);
            let offset = out.timeline.last().map_or(0, |s| s.t_s + 1);
            out.timeline.extend(p.timeline.iter().cloned().map(|mut s| {
                s.t_s += offset;
                s
            }));
            // The slices on the same clock as the seconds they fall in.
            out.slices.extend(p.slices.iter().cloned().map(|mut s| {
                s.t_ms += offset * 1000;
                s
            }));
        }
        let d = out.duration_s.max(1e-9);
        out.requests_per_s = out.responses as f64 / d;
        out.bytes_per_s = out.bytes_read as f64 / d;
        out.latency = LatencySummary::merged(parts.iter().map(|p| &p.latency))?;
        out.connect_time = LatencySummary::merged(parts.iter().map(|p| &p.connect_time))?;
        out.phases = Phases::merged(parts.iter().map(|p| p.phases.as_ref()))?;
        out.thread_requests_per_s = Spread::pooled(parts.iter().map(|p| &p.thread_requests_per_s));
        out.endpoints = super::endpoint::merged(parts.iter().map(|p| &p.endpoints[..]))?;
        out.quic = super::QuicStats::merged(parts.iter().map(|p| p.quic.as_ref()))?;
        Ok(Some(out))
    }
}

impl LoadResults {
    /// Adds `p`'s counters to these: responses, bytes, errors by class and errno,
    /// status codes, connections, in flight, keep-alive ends. Durations, rates,
    /// histograms and timelines are left to the caller, which knows whether the loads
    /// ran one after the other (`concat`) or side by side (`loadlens merge`).
    pub fn add_counts(&mut self, p: &LoadResults) {
        self.responses += p.responses;
        self.bytes_read += p.bytes_read;
        self.errors.connect += p.errors.connect;
        self.errors.read += p.errors.read;
        self.errors.write += p.errors.write;
        self.errors.timeout += p.errors.timeout;
        self.errors.parse += p.errors.parse;
        self.errors.reset += p.errors.reset;
        self.goaway_received += p.goaway_received;
        add_counts(&mut self.connect_errors, &p.connect_errors);
        add_counts(&mut self.status_codes, &p.status_codes);
        self.non_2xx_3xx += p.non_2xx_3xx;
        self.connections_opened += p.connections_opened;
        self.in_flight_at_end += p.in_flight_at_end;
        self.due_unsent_at_end += p.due_unsent_at_end;
        self.keepalive_closed += p.keepalive_closed;
        self.unsolicited += p.unsolicited;
    }
}

fn add_counts<K: Ord + Clone>(into: &mut BTreeMap<K, u64>, from: &BTreeMap<K, u64>) {
    for (k, v) in from {
        *into.entry(k.clone()).or_default() += v;
    }
}

impl Phases {
    /// The phases of several loads (histograms added; the slowest name lookup). `None`
    /// when any load has none.
    fn merged<'a>(
        parts: impl Iterator<Item = Option<&'a Phases>>,
    ) -> anyhow::Result<Option<Phases>> {
        let Some(parts) = parts.collect::<Option<Vec<&Phases>>>() else {
            return Ok(None);
        };
        if parts.is_empty() {
            return Ok(None);
        }
        let held = parts
            .iter()
            .filter_map(|p| p.held.as_ref())
            .collect::<Vec<_>>();
        let held = match held.is_empty() {
            true => None,
            false => Some(LatencySummary::merged(held.into_iter())?),
        };
        let tls = if parts.iter().all(|p| p.tls_handshake.is_some()) {
            Some(LatencySummary::merged(
                parts.iter().filter_map(|p| p.tls_handshake.as_ref()),
            )?)
        } else {
            None
        };
        Ok(Some(Phases {
            dns_us: parts.iter().map(|p| p.dns_us).max().unwrap_or(0),
            connect: LatencySummary::merged(parts.iter().map(|p| &p.connect))?,
            tls_handshake: tls,
            ttfb: LatencySummary::merged(parts.iter().map(|p| &p.ttfb))?,
            body: LatencySummary::merged(parts.iter().map(|p| &p.body))?,
            held,
        }))
    }
}

impl LatencySummary {
    /// The distribution of all values of several summaries: their histograms added.
    pub fn merged<'a>(
        parts: impl Iterator<Item = &'a LatencySummary>,
    ) -> anyhow::Result<LatencySummary> {
        let mut corrected = true;
        let mut total: Option<hdrhistogram::Histogram<u64>> = None;
        for p in parts {
            corrected &= p.corrected_for_coordinated_omission;
            let h = p.decode()?;
            match total.as_mut() {
                None => total = Some(h),
                Some(t) => t
                    .add(&h)
                    .map_err(|e| anyhow::anyhow!("histograms cannot be added: {e:?}"))?,
            }
        }
        let total = total.ok_or_else(|| anyhow::anyhow!("no histogram to merge"))?;
        Ok(LatencySummary::from_histogram(&total, corrected))
    }
}

impl Spread {
    /// The spread of the samples of several equally long groups, from each group's
    /// mean and spread: the pooled variance is the mean within-group variance plus the
    /// variance of the group means.
    pub fn pooled<'a>(parts: impl Iterator<Item = &'a Spread>) -> Spread {
        let parts: Vec<&Spread> = parts.collect();
        if parts.is_empty() {
            return Spread::default();
        }
        let n = parts.len() as f64;
        let mean = parts.iter().map(|s| s.mean).sum::<f64>() / n;
        let within = parts.iter().map(|s| s.stdev * s.stdev).sum::<f64>() / n;
        let between = parts.iter().map(|s| (s.mean - mean).powi(2)).sum::<f64>() / n;
        Spread {
            mean,
            stdev: (within + between).sqrt(),
            max: parts.iter().map(|s| s.max).fold(0.0, f64::max),
            within_stdev_pct: parts.iter().map(|s| s.within_stdev_pct).sum::<f64>() / n,
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::run::Spread;

    #[test]
    fn pooled_spread_equals_the_spread_of_all_samples() {
        let a = [10.0, 20.0];
        let b = [30.0, 50.0];
        let all: Vec<f64> = a.iter().chain(b.iter()).copied().collect();
        let p = Spread::pooled([Spread::of(&a), Spread::of(&b)].iter());
        let want = Spread::of(&all);
        assert!((p.mean - want.mean).abs() < 1e-9);
        assert!((p.stdev - want.stdev).abs() < 1e-9, "{p:?} {want:?}");
        assert_eq!(p.max, 50.0);
    }
}
