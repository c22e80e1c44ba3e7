//! The HTML report of a Run: one self-contained file (inline CSS and SVG, no script,
//! nothing fetched) that opens anywhere and can be attached to a ticket. It measures
//! nothing: the headline numbers, the findings beside their evidence, the second-by-
//! second story (requests/s, p99, errors), the latency spectrum on HdrHistogram's
//! percentile axis, CPU, TIME_WAIT and listen queues over the run, where the server's
//! CPU went, and the terminal block as text.

use std::fmt::Write;

mod compare;
mod history;
mod machine;
mod quic;
mod sweep;
mod time;

use super::chart::{esc, lines, lines_marked, Mark, Series, XAxis};
use super::View;
use crate::run::{Kind, Run};
use crate::units::{fmt_bytes, fmt_us};
pub use compare::CompareHtml;
pub use history::HistoryHtml;

/// The HTML view.
pub struct Html;

const STYLE: &str = "body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;max-width:980px;color:#222;padding:0 12px}
h1{font-size:20px;margin:0 0 4px}h2{font-size:16px;margin:28px 0 8px;border-bottom:1px solid #ddd}
.sub{color:#666}.kpi{display:flex;flex-wrap:wrap;gap:10px;margin:14px 0}
.kpi div{border:1px solid #ddd;border-radius:6px;padding:8px 12px;min-width:96px}.kpi b{display:block;font-size:18px}
.f{border-left:4px solid #999;padding:6px 12px;margin:10px 0;background:#fafafa}.f.bottleneck{border-color:#c0392b}
.f.warning{border-color:#e69f00}.f.info{border-color:#0072b2}.f h3{font-size:15px;margin:0 0 4px}
.f .id{color:#666;font-weight:normal}.f ul{margin:4px 0 4px 18px;padding:0}.fix{margin:4px 0 0}
table{border-collapse:collapse}td,th{padding:2px 10px;text-align:right;border-bottom:1px solid #eee}
td:last-child,th:last-child{text-align:left}pre{background:#f6f6f6;padding:10px;overflow-x:auto;font-size:12px}
.chart{width:100%;height:auto;margin:6px 0}.ct{font-weight:600;font-size:13px}.grid{stroke:#e5e5e5}
.yl{font-size:11px;text-anchor:end;fill:#555}.xl{font-size:11px;text-anchor:middle;fill:#555}.lg{font-size:11px;fill:#333}
details{margin:8px 0}summary{cursor:pointer}th[title]{cursor:pointer}
.heat td{text-align:center;border:2px solid #fff}td[style]{color:#000}.heat th{text-align:center}
@media (prefers-color-scheme:dark){body{background:#141414;color:#ddd}.f,pre{background:#1e1e1e}
.kpi div{border-color:#444}.sub,.f .id{color:#999}.grid{stroke:#333}.yl,.xl,.lg,.ct{fill:#ccc}td,th{border-color:#333}.heat td{border-color:#141414}}
@media print{body{max-width:none;margin:0}.f{break-inside:avoid}.chart{break-inside:avoid}}";

/// Sorts a `table.sort` by the column whose header is clicked (again: the other way).
/// Cells compare by `data-v` when they have one (a number behind a formatted value like
/// `1.20ms`), else as numbers when both parse, else as text.
const SCRIPT: &str = "<script>document.querySelectorAll('table.sort').forEach(function(t){\
t.querySelectorAll('thead th').forEach(function(h,i){h.title='click to sort';h.onclick=function(){\
var b=t.tBodies[0],d=h.dataset.d==='1'?-1:1;h.dataset.d=d===1?'1':'-1';\
var v=function(r){var c=r.cells[i];if(!c)return '';var s=c.dataset.v!==undefined?c.dataset.v:c.textContent.trim();\
var n=Number(s.replace(/[,%+]/g,''));return s!==''&&!isNaN(n)?n:s;};\
Array.prototype.slice.call(b.rows).sort(function(p,q){var x=v(p),y=v(q);\
return (typeof x==='number'&&typeof y==='number'?x-y:String(x).localeCompare(String(y)))*d;})\
.forEach(function(r){b.appendChild(r);});};});});</script>";

impl View<Run> for Html {
    fn render(&self, run: &Run) -> Vec<u8> {
        page(run).into_bytes()
    }
}

/// The whole page.
pub fn page(run: &Run) -> String {
    let r = &run.results;
    let mut o = String::new();
    let _ = write!(
        o,
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>loadlens: {}</title><style>{STYLE}</style></head><body>",
        esc(&run.spec.url)
    );
    let _ = write!(
        o,
        "<h1>{}</h1><div class=\"sub\">{} · {} connections, {} threads{}{} · {:.1} s · {}</div>",
        esc(&run.spec.url),
        esc(&run.tool),
        run.spec.connections,
        run.spec.threads,
        run.spec
            .rate
            .map(|x| format!(", open loop at {x:.0} req/s"))
            .unwrap_or_default(),
        run.spec
            .connreqs
            .map(|n| format!(", {n} requests per connection"))
            .unwrap_or_default(),
        r.duration_s,
        if r.latency.corrected_for_coordinated_omission {
            "latency corrected for coordinated omission"
        } else {
            "closed loop"
        }
    );
    if let Some(sig) = &run.interrupted {
        let _ = write!(
            o,
            "<p><b>Interrupted by {sig}</b>: the numbers until then.</p>"
        );
    }
    if run.client.saturated {
        o.push_str("<p><b>The load generator was saturated: these numbers are a floor.</b></p>");
    }
    // Headline numbers.
    let p = |q: f64| {
        r.latency
            .percentiles
            .iter()
            .find(|x| x.p == q)
            .map(|x| fmt_us(x.us as f64))
            .unwrap_or_else(|| "-".into())
    };
    let errors =
        r.errors.connect + r.errors.read + r.errors.write + r.errors.timeout + r.errors.parse;
    o.push_str("<div class=\"kpi\">");
    for (k, v) in [
        ("requests/s", format!("{:.0}", r.requests_per_s)),
        ("p50", p(50.0)),
        ("p90", p(90.0)),
        ("p99", p(99.0)),
        ("p99.9", p(99.9)),
        ("max", fmt_us(r.latency.max_us as f64)),
        ("errors", errors.to_string()),
        ("non-2xx/3xx", r.non_2xx_3xx.to_string()),
        ("transfer/s", fmt_bytes(r.bytes_per_s)),
    ] {
        let _ = write!(o, "<div>{k}<b>{}</b></div>", esc(&v));
    }
    o.push_str("</div>");
    if let Some(t) = &run.tune {
        super::tune::html(&mut o, t);
    }
    objectives(&mut o, run);
    findings(&mut o, run);
    super::path::html(&mut o, run);
    super::endpoints::html(&mut o, run);
    timeline(&mut o, run);
    time::slices(&mut o, run);
    spectrum(&mut o, run);
    phases(&mut o, run);
    quic::quic(&mut o, run);
    machine::machine(&mut o, run);
    machine::tcp_counters(&mut o, run);
    quic::udp(&mut o, run);
    server_config(&mut o, run);
    profile(&mut o, run);
    time::time(&mut o, run);
    let _ = writeln!(
        o,
        "<h2>The terminal report</h2><pre>{}</pre>{SCRIPT}</body></html>",
        esc(&super::terminal::render(run, true))
    );
    o
}

/// The `--slo` objectives judged on the Run, after whether its evidence was trusted.
fn objectives(o: &mut String, run: &Run) {
    if run.objectives.is_empty() {
        return;
    }
    o.push_str("<h2>Objectives</h2>");
    if let Some(line) = super::objectives::untrusted_line(run) {
        let _ = write!(o, "<p><b>{}</b></p>", esc(&line));
    }
    o.push_str("<table><tr><th>objective</th><th>measured</th><th>wanted</th><th>result</th></tr>");
    for x in &run.objectives {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(&x.objective),
            esc(&x.measured_text()),
            esc(&x.wanted_text()),
            super::objectives::result(run, x)
        );
    }
    o.push_str("</table>");
}

fn findings(o: &mut String, run: &Run) {
    o.push_str("<h2>Findings</h2>");
    if run.findings.is_empty() {
        o.push_str("<p>None.</p>");
    }
    for f in &run.findings {
        let kind = match f.kind {
            Kind::Bottleneck => "bottleneck",
            Kind::Warning => "warning",
            Kind::Info => "info",
        };
        let _ = write!(
            o,
            "<div class=\"f {kind}\"><h3>{} <span class=\"id\">[{}, {kind}, confidence {:.0}%]</span></h3><ul>",
            esc(&f.title),
            esc(&f.id),
            f.confidence * 100.0
        );
        if let Some(cause) = &f.because_of {
            // A consequence (info) follows from it; a limit kept a warning stands beside it.
            let how = if f.kind == Kind::Info {
                "because of"
            } else {
                "beside"
            };
            let _ = write!(
                o,
                "<li class=\"because\">{how} <b>{}</b> (above)</li>",
                esc(cause)
            );
        }
        for e in &f.evidence {
            let _ = write!(
                o,
                "<li>{}: <b>{}</b> {}</li>",
                esc(&e.name),
                esc(&super::findings::fmt_num(e.value)),
                esc(&e.unit)
            );
        }
        let _ = write!(
            o,
            "</ul><div>{}</div><div class=\"fix\"><b>Fix:</b> {}</div></div>",
            esc(&f.explanation),
            esc(&f.fix)
        );
    }
}

fn timeline(o: &mut String, run: &Run) {
    let t = &run.results.timeline;
    if t.is_empty() {
        return;
    }
    o.push_str("<h2>Second by second</h2>");
    let rate = |f: fn(&crate::run::Second) -> f64| -> Vec<(f64, f64)> {
        t.iter()
            .map(|s| (s.t_s as f64, f(s) / s.duration_s.max(1e-9)))
            .collect()
    };
    // --stages: each stage's start marked across both charts, and a rate schedule
    // drawn beside what was achieved.
    let labels: Vec<String> = run
        .results
        .stages
        .iter()
        .map(|st| format!("▸ {}", st.stage))
        .collect();
    let marks: Vec<Mark> = run
        .results
        .stages
        .iter()
        .zip(&labels)
        .map(|(st, l)| Mark::X(st.start_s, l))
        .collect();
    let mut series = vec![
        Series {
            name: "responses/s",
            color: "#0072b2",
            points: per_second(run),
        },
        Series {
            name: "errors/s",
            color: "#c0392b",
            points: rate(|s| s.errors as f64),
        },
    ];
    let stages = &run.results.stages;
    if !stages.is_empty() && stages.iter().all(|st| st.target_rps.is_some()) {
        series.push(Series {
            name: "scheduled/s",
            color: "#999999",
            points: stages
                .iter()
                .flat_map(|st| [(st.start_s, st.target_from), (st.end_s, st.target_to)])
                .collect(),
        });
    }
    o.push_str(&lines_marked(
        "requests/s and errors/s",
        "",
        XAxis::Linear("s"),
        &series,
        &marks,
    ));
    let ms = |f: fn(&crate::run::Second) -> u64| -> Vec<(f64, f64)> {
        t.iter()
            .filter(|s| s.responses > 0)
            .map(|s| (s.t_s as f64, f(s) as f64 / 1000.0))
            .collect()
    };
    o.push_str(&lines_marked(
        "latency per second",
        "ms",
        XAxis::Linear("s"),
        &percentile_series([ms(|s| s.p50_us), ms(|s| s.p99_us), ms(|s| s.max_us)]),
        &marks,
    ));
}

/// The p50, p99 and max lines of a latency chart (the seconds' and the slices'), in ms.
pub(super) fn percentile_series(points: [Vec<(f64, f64)>; 3]) -> [Series<'static>; 3] {
    let [p50, p99, max] = points;
    [
        Series {
            name: "p50",
            color: "#009e73",
            points: p50,
        },
        Series {
            name: "p99",
            color: "#e69f00",
            points: p99,
        },
        Series {
            name: "max",
            color: "#c0392b",
            points: max,
        },
    ]
}

/// The latency spectrum of the whole-run histogram: (percentile, ms) on HdrHistogram's
/// percentile axis; empty when the Run has no latency.
fn spectrum_points(run: &Run) -> Vec<(f64, f64)> {
    let Ok(h) = run.results.latency.decode() else {
        return Vec::new();
    };
    if h.is_empty() {
        return Vec::new();
    }
    let qs = [
        0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 97.5, 99.0, 99.5, 99.75, 99.9, 99.95, 99.975,
        99.99, 99.995, 99.999, 99.9999,
    ];
    qs.iter()
        .map(|&q| (q, h.value_at_quantile(q / 100.0) as f64 / 1000.0))
        .collect()
}

/// Responses per second, second by second.
fn per_second(run: &Run) -> Vec<(f64, f64)> {
    run.results
        .timeline
        .iter()
        .map(|s| (s.t_s as f64, s.responses as f64 / s.duration_s.max(1e-9)))
        .collect()
}

/// The latency spectrum from the whole-run histogram (HdrHistogram's plot).
fn spectrum(o: &mut String, run: &Run) {
    let points = spectrum_points(run);
    if points.is_empty() {
        return;
    }
    o.push_str("<h2>Latency spectrum</h2>");
    o.push_str(&lines(
        "latency by percentile (whole run)",
        "ms",
        XAxis::Percentile,
        &[Series {
            name: "latency",
            color: "#0072b2",
            points,
        }],
    ));
}

/// Where each request's time went: one row per phase, p50/p99/max and how many values.
fn phases(o: &mut String, run: &Run) {
    let Some(p) = &run.results.phases else { return };
    let _ = write!(
        o,
        "<h2>Phases</h2><p>Name lookup (once): {}.</p><table><tr><th>phase</th><th>count</th><th>p50</th><th>p99</th><th>max</th></tr>",
        fmt_us(p.dns_us as f64)
    );
    // QUIC has no TCP connect: its handshake (TLS 1.3 inside QUIC) is the set-up.
    let quic = run.results.quic.is_some();
    let rows = [
        ("TCP connect", (!quic).then_some(&p.connect)),
        (
            if quic {
                "QUIC handshake"
            } else {
                "TLS handshake"
            },
            p.tls_handshake.as_ref(),
        ),
        ("time to first byte", Some(&p.ttfb)),
        ("body", Some(&p.body)),
    ];
    for (name, l) in rows.iter().filter_map(|(n, l)| Some((n, (*l)?))) {
        let at = |q| fmt_us(l.at(q).unwrap_or(0) as f64);
        let _ = write!(
            o,
            "<tr><td>{name}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            l.count,
            at(50.0),
            at(99.0),
            fmt_us(l.max_us as f64)
        );
    }
    o.push_str("</table>");
}

/// The server's configuration as loadlens read it (`nginx -T`, Apache's or HAProxy's
/// files), collapsed.
fn server_config(o: &mut String, run: &Run) {
    let Some(cfg) = run
        .evidence
        .as_ref()
        .and_then(|e| e.topology.config.as_ref())
    else {
        return;
    };
    let _ = write!(
        o,
        "<details><summary>{} configuration read ({}): {} directives</summary><table class=\"sort\"><thead><tr><th>directive</th><th>values</th></tr></thead><tbody>",
        cfg.kind.name(),
        esc(&cfg.conf),
        cfg.directives.len()
    );
    for (k, v) in &cfg.directives {
        let _ = write!(
            o,
            "<tr><td>{}</td><td>{}</td></tr>",
            esc(k),
            esc(&v.join(" | "))
        );
    }
    o.push_str("</tbody></table></details>");
}

fn profile(o: &mut String, run: &Run) {
    let Some(p) = run.evidence.as_ref().and_then(|e| e.profile.as_ref()) else {
        return;
    };
    let Some(top) = &p.top else { return };
    let _ = write!(
        o,
        "<h2>Where the server's CPU went</h2><p>Worker {}: {} samples at {} Hz; kernel {:.0}%, user {:.0}%.</p><table class=\"sort\"><thead><tr><th>self</th><th>total</th><th>where</th><th>function</th></tr></thead><tbody>",
        top.pid, top.samples, p.frequency_hz, top.kernel_pct, top.user_pct
    );
    for f in top.functions.iter().take(15) {
        let _ = write!(
            o,
            "<tr><td>{:.1}%</td><td>{:.1}%</td><td>{}</td><td>{}</td></tr>",
            f.self_pct,
            f.total_pct,
            if f.kernel { "kernel" } else { "user" },
            esc(&f.name)
        );
    }
    o.push_str("</tbody></table>");
    // The flame graph itself, inline (inferno's SVG; as an image its search is off:
    // `--flamegraph FILE.svg` gives the interactive one).
    if let Ok(svg) = super::flamegraph::inline_svg(run) {
        use base64::Engine;
        let _ = write!(
            o,
            "<p><img alt=\"flame graph\" style=\"width:100%\" src=\"data:image/svg+xml;base64,{}\"></p>",
            base64::engine::general_purpose::STANDARD.encode(svg)
        );
    }
}

/// A page around `body` (HTML), with the report's style and script.
fn wrap(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>loadlens: {t}</title><style>{STYLE}</style></head><body><h1>{t}</h1>{body}{SCRIPT}</body></html>\n",
        t = esc(title)
    )
}
