//! A test's history in the formats dashboards already read:
//!
//! - `bmf`: Bencher Metric Format (<https://bencher.dev/docs/reference/bencher-metric-format/>),
//!   `{"BENCHMARK": {"MEASURE": {"value": X}}}`, the newest Run of each name;
//! - `gab`: github-action-benchmark's `customSmallerIsBetter` input, a JSON array of
//!   `{"name", "unit", "value", "extra"}`, the newest Run of each name (throughput is not
//!   smaller-is-better: it goes in `extra`);
//! - `csv`: Apache Otava's CSV (a `time` column, one column per metric, attributes such
//!   as `commit`), every Run, oldest first.

use std::collections::BTreeMap;
use std::fmt::Write;

use serde_json::{json, Value};

use super::{Entry, METRICS};

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Bencher Metric Format JSON.
    Bmf,
    /// github-action-benchmark's customSmallerIsBetter JSON.
    Gab,
    /// Apache Otava's CSV.
    Csv,
}

/// `entries` (oldest first) in `format`.
pub fn export(entries: &[Entry], format: Format) -> String {
    match format {
        Format::Bmf => {
            let mut doc = serde_json::Map::new();
            for e in newest_per_name(entries) {
                let mut measures = serde_json::Map::new();
                for m in METRICS {
                    if let Some(v) = m.of(e) {
                        measures.insert(m.name().replace('_', "-"), json!({ "value": v }));
                    }
                }
                doc.insert(e.name.clone(), Value::Object(measures));
            }
            pretty(&Value::Object(doc))
        }
        Format::Gab => {
            let mut out = Vec::new();
            for e in newest_per_name(entries) {
                let extra = format!(
                    "{:.1} requests/s; {} responses; {}",
                    e.requests_per_s,
                    e.responses,
                    e.origin
                        .git_revision
                        .as_deref()
                        .unwrap_or("no git revision")
                );
                let rows: [(&str, &str, Option<f64>); 5] = [
                    ("p50", "us", Some(e.p50_us as f64)),
                    ("p99", "us", Some(e.p99_us as f64)),
                    ("max", "us", Some(e.max_us as f64)),
                    ("errors", "requests", Some(e.errors as f64)),
                    ("server CPU per request", "us", e.server_cpu_us_per_request),
                ];
                for (what, unit, v) in rows {
                    if let Some(v) = v {
                        out.push(json!({
                            "name": format!("{} — {what}", e.name),
                            "unit": unit,
                            "value": v,
                            "extra": extra,
                        }));
                    }
                }
            }
            pretty(&Value::Array(out))
        }
        Format::Csv => {
            let mut s = String::from("time,name,commit,branch,machine");
            for m in METRICS {
                s.push(',');
                s.push_str(m.name());
            }
            s.push('\n');
            for e in entries {
                let _ = write!(
                    s,
                    "{},{},{},{},{}",
                    rfc3339(e.started_unix_s),
                    csv_field(&e.name),
                    csv_field(e.origin.git_revision.as_deref().unwrap_or("")),
                    csv_field(e.origin.git_branch.as_deref().unwrap_or("")),
                    e.machine
                );
                for m in METRICS {
                    s.push(',');
                    if let Some(v) = m.of(e) {
                        let _ = write!(s, "{v}");
                    }
                }
                s.push('\n');
            }
            s
        }
    }
}

fn newest_per_name(entries: &[Entry]) -> Vec<&Entry> {
    let mut by: BTreeMap<&str, &Entry> = BTreeMap::new();
    for e in entries {
        by.insert(&e.name, e);
    }
    by.into_values().collect()
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).expect("JSON serialises");
    s.push('\n');
    s
}

fn csv_field(s: &str) -> String {
    if s.contains([',', '"', '\n']) {
        format!("\"{}\"", s.replace('"', "\"\""))
    } else {
        s.to_string()
    }
}

/// `2026-11-27T01:02:03Z` (UTC), what Otava's CSV reader takes: the JUnit form with
/// its zone.
pub fn rfc3339(unix_s: f64) -> String {
    format!("{}Z", crate::units::iso8601(unix_s))
}

#[cfg(test)]
mod tests {
    #[test]
    fn rfc3339_dates() {
        assert_eq!(super::rfc3339(0.0), "1970-01-01T00:00:00Z");
        assert_eq!(super::rfc3339(1_795_741_323.0), "2026-11-27T01:02:03Z");
        assert_eq!(super::rfc3339(951_782_400.0), "2000-02-29T00:00:00Z");
    }
}
