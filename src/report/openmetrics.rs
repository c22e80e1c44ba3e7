//! The OpenMetrics text view (`--openmetrics FILE`): a Run's headline numbers for
//! node_exporter's textfile collector or a Pushgateway — requests, responses, errors
//! by class, non-2xx/3xx responses, the request rate, latency quantiles (a summary, in
//! seconds), each objective met or broken and whether the evidence was trusted (gauges,
//! 1 or 0). The format is the OpenMetrics 1.0 text exposition: `# TYPE`/`# UNIT`/
//! `# HELP` per family, counters' samples ending in `_total`, and `# EOF` last.

use std::fmt::Write as _;

use super::View;
use crate::run::Run;

/// The OpenMetrics view.
pub struct OpenMetrics;

impl View<Run> for OpenMetrics {
    fn render(&self, run: &Run) -> Vec<u8> {
        exposition(run).into_bytes()
    }
}

/// A label value: backslash, double quote and line feed escaped, as the format asks.
pub fn label(s: &str) -> String {
    s.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// A percentile as a quantile label: `99.9` → `0.999` (not `0.9990000000000001`).
fn quantile(p: f64) -> String {
    let s = format!("{:.6}", p / 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

fn family(o: &mut String, name: &str, kind: &str, unit: Option<&str>, help: &str) {
    let _ = writeln!(o, "# TYPE {name} {kind}");
    if let Some(u) = unit {
        let _ = writeln!(o, "# UNIT {name} {u}");
    }
    let _ = writeln!(o, "# HELP {name} {help}");
}

/// The whole exposition.
pub fn exposition(run: &Run) -> String {
    let r = &run.results;
    let mut o = String::new();
    family(
        &mut o,
        "loadlens_run",
        "info",
        None,
        "The load: its URL and the loadlens that ran it.",
    );
    let _ = writeln!(
        o,
        "loadlens_run_info{{url=\"{}\",method=\"{}\",tool=\"{}\"}} 1",
        label(&run.spec.url),
        label(&run.spec.method),
        label(&run.tool)
    );
    let failed = r.errors.total();
    family(
        &mut o,
        "loadlens_requests",
        "counter",
        None,
        "Requests that ended: responses and failed requests.",
    );
    let _ = writeln!(o, "loadlens_requests_total {}", r.responses + failed);
    family(
        &mut o,
        "loadlens_responses",
        "counter",
        None,
        "Complete responses received, any status.",
    );
    let _ = writeln!(o, "loadlens_responses_total {}", r.responses);
    family(
        &mut o,
        "loadlens_errors",
        "counter",
        None,
        "Failed requests by class.",
    );
    let e = &r.errors;
    for (class, n) in [
        ("connect", e.connect),
        ("read", e.read),
        ("write", e.write),
        ("timeout", e.timeout),
        ("parse", e.parse),
        ("reset", e.reset),
    ] {
        let _ = writeln!(o, "loadlens_errors_total{{class=\"{class}\"}} {n}");
    }
    family(
        &mut o,
        "loadlens_non_2xx_3xx_responses",
        "counter",
        None,
        "Responses whose status was not 2xx or 3xx.",
    );
    let _ = writeln!(o, "loadlens_non_2xx_3xx_responses_total {}", r.non_2xx_3xx);
    family(
        &mut o,
        "loadlens_requests_per_second",
        "gauge",
        None,
        "Responses per second over the load.",
    );
    let _ = writeln!(o, "loadlens_requests_per_second {}", r.requests_per_s);
    family(
        &mut o,
        "loadlens_duration_seconds",
        "gauge",
        Some("seconds"),
        "Length of the load window.",
    );
    let _ = writeln!(o, "loadlens_duration_seconds {}", r.duration_s);
    let l = &r.latency;
    family(
        &mut o,
        "loadlens_latency_seconds",
        "summary",
        Some("seconds"),
        if l.corrected_for_coordinated_omission {
            "Request latency, from each request's scheduled time (corrected for coordinated omission)."
        } else {
            "Request latency, closed loop (not corrected for coordinated omission)."
        },
    );
    for p in &l.percentiles {
        let _ = writeln!(
            o,
            "loadlens_latency_seconds{{quantile=\"{}\"}} {}",
            quantile(p.p),
            p.us as f64 / 1e6
        );
    }
    let _ = writeln!(
        o,
        "loadlens_latency_seconds_sum {}",
        l.mean_us * l.count as f64 / 1e6
    );
    let _ = writeln!(o, "loadlens_latency_seconds_count {}", l.count);
    if !run.objectives.is_empty() {
        family(
            &mut o,
            "loadlens_objective_met",
            "gauge",
            None,
            "1 when the objective (--slo) was met, 0 when broken.",
        );
        for x in &run.objectives {
            let _ = writeln!(
                o,
                "loadlens_objective_met{{objective=\"{}\"}} {}",
                label(&x.objective),
                u8::from(x.met)
            );
        }
    }
    if let Some(t) = &run.trust {
        family(
            &mut o,
            "loadlens_evidence_trusted",
            "gauge",
            None,
            "1 when the evidence could be trusted to judge the objectives, 0 when not.",
        );
        let _ = writeln!(o, "loadlens_evidence_trusted {}", u8::from(t.trusted));
    }
    o.push_str("# EOF\n");
    o
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        assert_eq!(
            [
                quantile(50.0),
                quantile(99.9),
                quantile(99.99),
                quantile(100.0)
            ],
            ["0.5", "0.999", "0.9999", "1"]
        );
    }

    /// Every line is a descriptor or a sample of the family declared above it, and the
    /// exposition ends with `# EOF`.
    #[test]
    fn samples_belong_to_their_family() {
        let path = format!(
            "{}/tests/data/runs/healthy-before.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let run = Run::from_json(&std::fs::read_to_string(path).unwrap()).unwrap();
        let text = exposition(&run);
        assert!(text.ends_with("\n# EOF\n"));
        let mut fam = String::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                fam = rest.split(' ').next().unwrap().to_string();
            } else if !line.starts_with('#') {
                let name = line.split(['{', ' ']).next().unwrap();
                assert!(name.starts_with(&fam), "{line} outside {fam}");
                let value = line.rsplit(' ').next().unwrap();
                assert!(value.parse::<f64>().is_ok(), "{line}");
            }
        }
        assert!(text.contains(&format!(
            "loadlens_responses_total {}\n",
            run.results.responses
        )));
    }
}
