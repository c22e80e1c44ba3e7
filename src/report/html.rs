//! The HTML report of a Run: one self-contained file (inline CSS and SVG, no script,
//! nothing fetched) that opens anywhere and can be attached to a ticket. It measures
//! nothing: the headline numbers, the findings beside their evidence, the second-by-
//! second story (requests/s, p99, errors), the latency spectrum on HdrHistogram's
//! percentile axis, CPU, TIME_WAIT and listen queues over the run, where the server's
//! CPU went, and the terminal block as text.

use std::fmt::Write;

use super::chart::{esc, lines, Series, XAxis};
use super::View;
use crate::run::{Kind, Run};
use crate::units::{fmt_bytes, fmt_us};

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
details{margin:8px 0}summary{cursor:pointer}
@media (prefers-color-scheme:dark){body{background:#141414;color:#ddd}.f,pre{background:#1e1e1e}
.kpi div{border-color:#444}.sub,.f .id{color:#999}.grid{stroke:#333}.yl,.xl,.lg,.ct{fill:#ccc}td,th{border-color:#333}}
@media print{body{max-width:none;margin:0}.f{break-inside:avoid}.chart{break-inside:avoid}}";

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
    findings(&mut o, run);
    timeline(&mut o, run);
    spectrum(&mut o, run);
    phases(&mut o, run);
    machine(&mut o, run);
    nginx_config(&mut o, run);
    profile(&mut o, run);
    let _ = writeln!(
        o,
        "<h2>The terminal report</h2><pre>{}</pre></body></html>",
        esc(&super::terminal::render(run, true))
    );
    o
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
    o.push_str(&lines(
        "requests/s and errors/s",
        "",
        XAxis::Linear("s"),
        &[
            Series {
                name: "responses/s",
                color: "#0072b2",
                points: rate(|s| s.responses as f64),
            },
            Series {
                name: "errors/s",
                color: "#c0392b",
                points: rate(|s| s.errors as f64),
            },
        ],
    ));
    let ms = |f: fn(&crate::run::Second) -> u64| -> Vec<(f64, f64)> {
        t.iter()
            .filter(|s| s.responses > 0)
            .map(|s| (s.t_s as f64, f(s) as f64 / 1000.0))
            .collect()
    };
    o.push_str(&lines(
        "latency per second",
        "ms",
        XAxis::Linear("s"),
        &[
            Series {
                name: "p50",
                color: "#009e73",
                points: ms(|s| s.p50_us),
            },
            Series {
                name: "p99",
                color: "#e69f00",
                points: ms(|s| s.p99_us),
            },
            Series {
                name: "max",
                color: "#c0392b",
                points: ms(|s| s.max_us),
            },
        ],
    ));
}

/// The latency spectrum from the whole-run histogram (HdrHistogram's plot).
fn spectrum(o: &mut String, run: &Run) {
    let l = &run.results.latency;
    let Ok(h) = l.decode() else { return };
    if h.is_empty() {
        return;
    }
    let qs = [
        0.0, 10.0, 25.0, 50.0, 75.0, 90.0, 95.0, 97.5, 99.0, 99.5, 99.75, 99.9, 99.95, 99.975,
        99.99, 99.995, 99.999, 99.9999,
    ];
    let points: Vec<(f64, f64)> = qs
        .iter()
        .map(|&q| (q, h.value_at_quantile(q / 100.0) as f64 / 1000.0))
        .collect();
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
    let rows = [
        ("TCP connect", Some(&p.connect)),
        ("TLS handshake", p.tls_handshake.as_ref()),
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

/// CPU, TIME_WAIT and accept queues over the run, from the watch's samples.
fn machine(o: &mut String, run: &Run) {
    let Some(e) = &run.evidence else { return };
    if e.samples.is_empty() {
        return;
    }
    o.push_str("<h2>The machine</h2>");
    let avg = |f: fn(&crate::run::CpuPct) -> f64| -> Vec<(f64, f64)> {
        e.samples
            .iter()
            .filter(|s| !s.cpus.is_empty())
            .map(|s| {
                (
                    s.t_s,
                    s.cpus.iter().map(f).sum::<f64>() / s.cpus.len() as f64,
                )
            })
            .collect()
    };
    // Busy share per CPU (up to 16 lines; beyond that the average says it).
    let ncpu = e.samples.iter().map(|s| s.cpus.len()).max().unwrap_or(0);
    if (2..=16).contains(&ncpu) {
        const COLORS: [&str; 8] = [
            "#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000",
        ];
        let names: Vec<String> = (0..ncpu).map(|i| format!("cpu{i}")).collect();
        let series: Vec<Series> = (0..ncpu)
            .map(|i| Series {
                name: &names[i],
                color: COLORS[i % COLORS.len()],
                points: e
                    .samples
                    .iter()
                    .filter_map(|s| s.cpus.get(i).map(|c| (s.t_s, 100.0 - c.idle)))
                    .collect(),
            })
            .collect();
        o.push_str(&lines(
            "CPU busy, per CPU",
            "%",
            XAxis::Linear("s"),
            &series,
        ));
    }
    o.push_str(&lines(
        "CPU, average of all CPUs",
        "%",
        XAxis::Linear("s"),
        &[
            Series {
                name: "user",
                color: "#0072b2",
                points: avg(|c| c.user),
            },
            Series {
                name: "system",
                color: "#e69f00",
                points: avg(|c| c.system),
            },
            Series {
                name: "softirq",
                color: "#cc79a7",
                points: avg(|c| c.softirq),
            },
        ],
    ));
    let tw: Vec<(f64, f64)> = e
        .samples
        .iter()
        .filter_map(|s| Some((s.t_s, *s.sockstat.get("TCP.tw")? as f64)))
        .collect();
    let queue: Vec<(f64, f64)> = e
        .samples
        .iter()
        .map(|s| {
            (
                s.t_s,
                s.listen_queues.iter().map(|q| q.queue).max().unwrap_or(0) as f64,
            )
        })
        .collect();
    o.push_str(&lines(
        "TIME_WAIT sockets",
        "",
        XAxis::Linear("s"),
        &[Series {
            name: "TIME_WAIT",
            color: "#56b4e9",
            points: tw,
        }],
    ));
    // Network: every interface that moved, Mbit/s each way.
    let mut ifaces: Vec<String> = e
        .window
        .ifaces
        .iter()
        .filter(|i| i.rx_bytes_per_s + i.tx_bytes_per_s > 0.0)
        .map(|i| i.name.clone())
        .collect();
    ifaces.truncate(4);
    let labels: Vec<(String, String)> = ifaces
        .iter()
        .map(|n| (format!("{n} rx"), format!("{n} tx")))
        .collect();
    let mut net = Vec::new();
    for (k, n) in ifaces.iter().enumerate() {
        let rate = |f: fn(&crate::run::IfaceRate) -> f64| -> Vec<(f64, f64)> {
            e.samples
                .iter()
                .filter_map(|s| {
                    let i = s.ifaces.iter().find(|i| &i.name == n)?;
                    Some((s.t_s, f(i) * 8.0 / 1e6))
                })
                .collect()
        };
        net.push(Series {
            name: &labels[k].0,
            color: ["#0072b2", "#009e73", "#cc79a7", "#56b4e9"][k],
            points: rate(|i| i.rx_bytes_per_s),
        });
        net.push(Series {
            name: &labels[k].1,
            color: ["#e69f00", "#d55e00", "#f0e442", "#000"][k],
            points: rate(|i| i.tx_bytes_per_s),
        });
    }
    o.push_str(&lines("network, Mbit/s", "", XAxis::Linear("s"), &net));
    // The front's busiest worker and the busiest upstream process, CPU %.
    let busiest = |front: bool| -> Option<i32> {
        e.window
            .processes
            .iter()
            .filter(|p| p.is_front() == front)
            .max_by(|a, b| a.cpu_pct.total_cmp(&b.cpu_pct))
            .map(|p| p.pid)
    };
    let mut procs = Vec::new();
    let proc_labels: Vec<String> = [busiest(true), busiest(false)]
        .iter()
        .flatten()
        .map(|pid| format!("pid {pid}"))
        .collect();
    for (k, pid) in [busiest(true), busiest(false)].iter().flatten().enumerate() {
        procs.push(Series {
            name: &proc_labels[k],
            color: ["#0072b2", "#d55e00"][k],
            points: e
                .samples
                .iter()
                .filter_map(|s| {
                    let p = s.processes.iter().find(|p| p.pid == *pid)?;
                    Some((s.t_s, p.cpu_pct))
                })
                .collect(),
        });
    }
    o.push_str(&lines(
        "server processes' CPU (busiest front worker, busiest upstream)",
        "%",
        XAxis::Linear("s"),
        &procs,
    ));
    o.push_str(&lines(
        "accept queue (fullest listener)",
        "",
        XAxis::Linear("s"),
        &[Series {
            name: "queued",
            color: "#d55e00",
            points: queue,
        }],
    ));
}

/// nginx's running configuration as loadlens read it, collapsed.
fn nginx_config(o: &mut String, run: &Run) {
    let Some(cfg) = run
        .evidence
        .as_ref()
        .and_then(|e| e.topology.nginx.as_ref())
    else {
        return;
    };
    let _ = write!(
        o,
        "<details><summary>nginx configuration read ({}): {} directives</summary><table>",
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
    o.push_str("</table></details>");
}

fn profile(o: &mut String, run: &Run) {
    let Some(p) = run.evidence.as_ref().and_then(|e| e.profile.as_ref()) else {
        return;
    };
    let Some(top) = &p.top else { return };
    let _ = write!(
        o,
        "<h2>Where the server's CPU went</h2><p>Worker {}: {} samples at {} Hz; kernel {:.0}%, user {:.0}%.</p><table><tr><th>self</th><th>total</th><th>where</th><th>function</th></tr>",
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
    o.push_str("</table>");
    // The flame graph itself, inline (inferno's SVG; as an image its search is off:
    // `--flamegraph FILE.svg` gives the interactive one).
    if let Ok(svg) = super::flamegraph::svg(run) {
        use base64::Engine;
        let _ = write!(
            o,
            "<p><img alt=\"flame graph\" style=\"width:100%\" src=\"data:image/svg+xml;base64,{}\"></p>",
            base64::engine::general_purpose::STANDARD.encode(svg)
        );
    }
}

/// A page around `body` (HTML), with the report's style.
fn wrap(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html><html lang=\"en\"><head><meta charset=\"utf-8\"><meta name=\"viewport\" content=\"width=device-width\"><title>loadlens: {t}</title><style>{STYLE}</style></head><body><h1>{t}</h1>{body}</body></html>\n",
        t = esc(title)
    )
}

impl View<crate::run::Comparison> for Html {
    fn render(&self, c: &crate::run::Comparison) -> Vec<u8> {
        let text = super::compare::CompareText.render(c);
        wrap(
            "loadlens compare",
            &format!("<pre>{}</pre>", esc(&String::from_utf8_lossy(&text))),
        )
        .into_bytes()
    }
}

impl View<crate::run::Sweep> for Html {
    fn render(&self, s: &crate::run::Sweep) -> Vec<u8> {
        let mut body = String::new();
        if let Some(c) = &s.ceiling {
            // The rate → latency curve: where p99 leaves p50 behind is the knee.
            let pts = |f: fn(&crate::run::Step) -> u64| -> Vec<(f64, f64)> {
                c.steps
                    .iter()
                    .map(|st| (st.rate, f(st) as f64 / 1000.0))
                    .collect()
            };
            body.push_str(&lines(
                &format!(
                    "latency by scheduled rate (requests/s); objective {}",
                    c.slo
                ),
                "ms",
                XAxis::Linear("/s"),
                &[
                    Series {
                        name: "p50",
                        color: "#009e73",
                        points: pts(|st| st.p50_us),
                    },
                    Series {
                        name: "p99",
                        color: "#e69f00",
                        points: pts(|st| st.p99_us),
                    },
                ],
            ));
        } else {
            let pts: Vec<(f64, f64)> = s
                .cells
                .iter()
                .enumerate()
                .map(|(i, c)| (i as f64, c.run.results.requests_per_s))
                .collect();
            body.push_str(&lines(
                "requests/s by cell (in the table's order)",
                "",
                XAxis::Linear(""),
                &[Series {
                    name: "requests/s",
                    color: "#0072b2",
                    points: pts,
                }],
            ));
        }
        let text = super::sweep::SweepText.render(s);
        body.push_str(&format!(
            "<pre>{}</pre>",
            esc(&String::from_utf8_lossy(&text))
        ));
        wrap("loadlens sweep", &body).into_bytes()
    }
}
