//! Results per endpoint of a `--targets` mix: one entry per name, each with its own
//! HdrHistogram, so that merging Runs (segments) adds them exactly as it adds the totals.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::load::LatencySummary;

/// One endpoint's results (an endpoint is a target name: the target's `name`, else its
/// method and path without the query; beyond 100 names, `other`).
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct EndpointResult {
    /// The endpoint's name.
    pub name: String,
    /// Requests that ended, answered or failed (`responses + errors`).
    pub requests: u64,
    /// Complete responses received (any status).
    pub responses: u64,
    /// Requests that failed (any error class: connect, read, write, timeout, parse,
    /// reset).
    pub errors: u64,
    /// Responses by status code.
    pub status_codes: BTreeMap<u16, u64>,
    /// Latency of its responses, measured as the run's (`results.latency`).
    pub latency: LatencySummary,
}

impl EndpointResult {
    /// Total time its responses took, µs (count × mean): what the terminal sorts by.
    pub fn total_us(&self) -> f64 {
        self.latency.count as f64 * self.latency.mean_us
    }
}

/// The endpoints of several loads (repetitions, or segments run side by side) added by
/// name: counts summed, HdrHistograms added (exact, never percentiles averaged), in the
/// order each name first appears.
pub fn merged<'a>(
    parts: impl Iterator<Item = &'a [EndpointResult]>,
) -> anyhow::Result<Vec<EndpointResult>> {
    let mut out: Vec<(EndpointResult, Vec<&'a LatencySummary>)> = Vec::new();
    for part in parts {
        for e in part {
            match out.iter_mut().find(|(m, _)| m.name == e.name) {
                Some((m, lat)) => {
                    m.requests += e.requests;
                    m.responses += e.responses;
                    m.errors += e.errors;
                    for (code, n) in &e.status_codes {
                        *m.status_codes.entry(*code).or_default() += n;
                    }
                    lat.push(&e.latency);
                }
                None => out.push((e.clone(), vec![&e.latency])),
            }
        }
    }
    out.into_iter()
        .map(|(mut m, lat)| {
            m.latency = LatencySummary::merged(lat.into_iter())?;
            Ok(m)
        })
        .collect()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An endpoint whose responses took these latencies (µs).
    pub fn endpoint(name: &str, latencies_us: &[u64]) -> EndpointResult {
        let mut h = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).unwrap();
        for &us in latencies_us {
            h.record(us).unwrap();
        }
        let n = latencies_us.len() as u64;
        EndpointResult {
            name: name.into(),
            requests: n + 1,
            responses: n,
            errors: 1,
            status_codes: [(200, n)].into(),
            latency: LatencySummary::from_histogram(&h, false),
        }
    }

    #[test]
    fn merged_endpoints_add_histograms_exactly_by_name() {
        let a = [endpoint("GET /a", &[100, 200]), endpoint("GET /b", &[5000])];
        let b = [
            endpoint("GET /c", &[7]),
            endpoint("GET /a", &[300, 400, 10_000]),
        ];
        let m = merged([&a[..], &b[..]].into_iter()).unwrap();
        let names: Vec<&str> = m.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["GET /a", "GET /b", "GET /c"]);
        let whole = endpoint("GET /a", &[100, 200, 300, 400, 10_000]);
        assert_eq!(m[0].responses, 5);
        assert_eq!(m[0].requests, 7);
        assert_eq!(m[0].errors, 2);
        assert_eq!(m[0].status_codes[&200], 5);
        // The histogram of the union, not an average of percentiles.
        assert_eq!(m[0].latency.histogram, whole.latency.histogram);
        let json = |l: &LatencySummary| serde_json::to_value(&l.percentiles).unwrap();
        assert_eq!(json(&m[0].latency), json(&whole.latency));
        assert_eq!(m[0].latency.max_us, whole.latency.max_us);
    }
}
