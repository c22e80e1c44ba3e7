//! loadlens in CI, against a real nginx on loopback: each exit status of a judged Run
//! (0 met, 1 broken, 2 bad input before any load, 3 evidence that cannot be trusted,
//! 130 interrupted), the CI files (JUnit, Markdown and `$GITHUB_STEP_SUMMARY`,
//! HdrHistogram interval log, OpenMetrics) read back, and `compare --fail-if-slower`
//! refusing an untrusted Run. Loads are open loop at a low rate for a second, so the
//! client never saturates; a host busy with something else (another build) is what the
//! gate refuses, so the tests of objectives judge with `--judge-untrusted` and accept
//! either trust (the warning said exactly when the Run is untrusted), and the gate's
//! own refusal is tested with busy loops the test starts.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use common::{loadlens, output_within, wait_exit, wait_for, Nginx, HANG};
use hdrhistogram::serialization::interval_log::{IntervalLogIterator, LogEntry};
use serde_json::Value;

/// One test at a time: another test's load, nginx or busy loops would be "another
/// process busy on the machine" to the gate.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A light load: 200 requests/s over 2 connections for a second.
const LOAD: [&str; 8] = ["-c", "2", "-t", "1", "-R", "200", "-d", "1s"];

fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

fn read_json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

/// `loadlens run URL LOAD ARGS` once.
fn run_once(url: &str, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut cmd = loadlens();
    cmd.arg("run").arg(url).args(LOAD).args(args).arg("-q");
    for (k, v) in env {
        cmd.env(k, v);
    }
    output_within(cmd, HANG)
}

/// The run judged whatever else the host is doing (`--judge-untrusted`): the
/// objectives decide the exit status, and a busy host is one warning line first.
fn run_judged(url: &str, args: &[&str], env: &[(&str, &Path)]) -> Output {
    let mut all = vec!["--judge-untrusted"];
    all.extend_from_slice(args);
    run_once(url, &all, env)
}

/// The stderr of a judged run less the one warning a host busy with other work gets
/// (said when the Run's evidence was not trusted, absent when it was).
fn judged_stderr(out: &Output, trusted: bool) -> String {
    let err = stderr(out);
    if trusted {
        return err;
    }
    let (first, rest) = err.split_once('\n').unwrap_or((&err, ""));
    assert!(
        first.starts_with(
            "loadlens: warning: evidence cannot be trusted, objectives judged anyway (--judge-untrusted): "
        ),
        "{err}"
    );
    rest.to_string()
}

fn python_xml(path: &Path, script: &str) -> String {
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(path)
        .output()
        .expect("python3 runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// JUnit as a standard XML parser reads it: (tests, failures, errors, skipped) of the
/// suite and each testcase as `class/name:outcome:message`.
fn junit(path: &Path) -> (String, Vec<String>) {
    // First valid against the JUnit schema CI servers read (Jenkins' junit-10 layout).
    let xsd = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/junit.xsd");
    match std::process::Command::new("xmllint")
        .args(["--noout", "--schema", xsd])
        .arg(path)
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "{} does not validate against the JUnit schema: {}",
            path.display(),
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(_) => common::skip_or_fail("xmllint not found (Debian: libxml2-utils)"),
    }
    let text = python_xml(
        path,
        "import sys, xml.etree.ElementTree as E\n\
         r = E.parse(sys.argv[1]).getroot(); s = r.find('testsuite')\n\
         print(','.join(s.get(k) for k in ('tests', 'failures', 'errors', 'skipped')))\n\
         for c in s.findall('testcase'):\n\
         \x20   k = [x for x in c if x.tag in ('failure', 'error', 'skipped')]\n\
         \x20   print(c.get('classname') + '/' + c.get('name') + ':' + (k[0].tag + ':' + k[0].get('message') if k else 'pass'))",
    );
    let mut lines = text.lines().map(String::from);
    let head = lines.next().unwrap();
    (head, lines.collect())
}

fn files(dir: &Path) -> [PathBuf; 5] {
    [
        "run.json",
        "junit.xml",
        "summary.md",
        "latency.hlog",
        "metrics.om",
    ]
    .map(|f| dir.join(f))
}

#[test]
fn objectives_met_exit_0_with_every_ci_file() {
    let _one = serial();
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    let [json, junit_xml, md, hlog, om] = files(dir.path());
    let step = dir.path().join("step_summary.md");
    std::fs::write(&step, "earlier step\n").unwrap();
    let args = [
        "--slo",
        "p99<2s, p50<=2s, mean<2s, max<10s, errors<1%, non2xx<=0, rps>=50",
        "--json",
        json.to_str().unwrap(),
        "--junit",
        junit_xml.to_str().unwrap(),
        "--summary-md",
        md.to_str().unwrap(),
        "--hdr-log",
        hlog.to_str().unwrap(),
        "--openmetrics",
        om.to_str().unwrap(),
    ];
    let out = run_judged(&ng.url("/1k.txt"), &args, &[("GITHUB_STEP_SUMMARY", &step)]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let run = read_json(&json);
    common::assert_valid("run", &run);
    let trusted = run["trust"]["trusted"] == true;
    assert_eq!(
        run["trust"]["judged_anyway"] == true,
        !trusted,
        "{}",
        run["trust"]
    );
    assert!(judged_stderr(&out, trusted).is_empty(), "{}", stderr(&out));
    let objectives = run["objectives"].as_array().unwrap();
    assert_eq!(objectives.len(), 7);
    assert!(
        objectives.iter().all(|o| o["met"] == true),
        "{objectives:?}"
    );
    assert_eq!(objectives[0]["objective"], "p99<2s");
    let p99 = common::percentile_us(&run, 99.0) as f64;
    assert_eq!(objectives[0]["measured"].as_f64(), Some(p99));
    let responses = run["results"]["responses"].as_u64().unwrap();
    assert!(responses > 0);

    // JUnit: the evidence (or, on a busy host, skipped) and the seven objectives pass;
    // no bottleneck on a quiet nginx at 200 requests/s, or it would be an eighth
    // testcase, failing.
    let (head, cases) = junit(&junit_xml);
    let bottlenecks = run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|f| f["kind"] == "bottleneck")
        .count();
    assert_eq!(
        head,
        format!("{},{bottlenecks},0,{}", 8 + bottlenecks, u8::from(!trusted)),
        "{cases:?}"
    );
    if trusted {
        assert_eq!(cases[0], "loadlens.evidence/evidence can be trusted:pass");
    } else {
        assert!(
            cases[0].starts_with("loadlens.evidence/evidence can be trusted:skipped:evidence cannot be trusted, objectives judged anyway: "),
            "{cases:?}"
        );
    }
    assert_eq!(cases[1], "loadlens.objectives/p99<2s:pass");

    // Markdown: the headline, the numbers, the objectives table; the same text
    // appended to $GITHUB_STEP_SUMMARY after what an earlier step wrote there.
    let summary = std::fs::read_to_string(&md).unwrap();
    assert!(summary.starts_with("## loadlens: GET "), "{summary}");
    let headline = if trusted {
        " — objectives met\n"
    } else {
        " — objectives met, evidence untrusted\n"
    };
    assert!(summary.contains(headline), "{summary}");
    assert!(
        summary.contains(&format!("\n| {responses} | ")),
        "{summary}"
    );
    assert!(summary.contains("| p99\\<2s | "), "{summary}");
    assert_eq!(summary.matches("| met |").count(), 7, "{summary}");
    // A Markdown parser (CommonMark with GitHub's tables) reads the same tables: every
    // row of the text is a row of an HTML table, the escaped objective intact.
    let html = {
        use pulldown_cmark::{html, Options, Parser};
        let mut out = String::new();
        html::push_html(&mut out, Parser::new_ext(&summary, Options::ENABLE_TABLES));
        out
    };
    let text_rows = summary
        .lines()
        .filter(|l| l.starts_with('|') && !l.starts_with("|-") && !l.starts_with("| -"))
        .count();
    assert_eq!(html.matches("<tr>").count(), text_rows, "{html}");
    assert!(html.contains("<td>p99&lt;2s</td>"), "{html}");
    let appended = std::fs::read_to_string(&step).unwrap();
    assert_eq!(appended, format!("earlier step\n{summary}"));

    // The interval log reads back, one interval per second of the timeline, to the
    // Run's own count of latencies.
    let log = std::fs::read(&hlog).unwrap();
    let mut total = 0;
    let mut intervals = 0;
    for e in IntervalLogIterator::new(&log) {
        if let LogEntry::Interval(i) = e.unwrap() {
            let h = loadlens::run::decode_histogram(i.encoded_histogram()).unwrap();
            total += h.len();
            intervals += 1;
        }
    }
    assert_eq!(total, run["results"]["latency"]["count"].as_u64().unwrap());
    assert_eq!(
        intervals,
        run["results"]["timeline"].as_array().unwrap().len()
    );

    // OpenMetrics: the Run's numbers, the objectives as gauges, `# EOF` last.
    let metrics = std::fs::read_to_string(&om).unwrap();
    assert!(metrics.ends_with("\n# EOF\n"), "{metrics}");
    assert!(metrics.contains(&format!("\nloadlens_responses_total {responses}\n")));
    assert!(metrics.contains("\nloadlens_objective_met{objective=\"p99<2s\"} 1\n"));
    assert!(metrics.contains(&format!(
        "\nloadlens_evidence_trusted {}\n",
        u8::from(trusted)
    )));
}

#[test]
fn a_broken_objective_exits_1_and_says_which() {
    let _one = serial();
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    let [json, junit_xml, ..] = files(dir.path());
    let args = [
        "--slo",
        "p99<1us,errors<1%",
        "--json",
        json.to_str().unwrap(),
        "--junit",
        junit_xml.to_str().unwrap(),
    ];
    let out = run_judged(&ng.url("/1k.txt"), &args, &[]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let run = read_json(&json);
    let err = judged_stderr(&out, run["trust"]["trusted"] == true);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("loadlens: objectives broken: p99<1us (p99 was "),
        "{err}"
    );
    assert_eq!(run["objectives"][0]["met"], false);
    assert_eq!(run["objectives"][1]["met"], true);
    let (_, cases) = junit(&junit_xml);
    assert!(
        cases[1].starts_with("loadlens.objectives/p99<1us:failure:p99 was ")
            && cases[1].ends_with(", wanted < 1.00us"),
        "{cases:?}"
    );
    assert_eq!(cases[2], "loadlens.objectives/errors<1%:pass");
}

#[test]
fn a_malformed_objective_exits_2_before_any_load() {
    let _one = serial();
    let ng = Nginx::start("", "");
    for (slo, named) in [
        ("p99<200ms,p99<fast", "`p99<fast`"),
        ("latency<1s", "`latency<1s`"),
        ("rps<100", "`rps<100`"),
    ] {
        let out = run_once(&ng.url("/1k.txt"), &["--slo", slo], &[]);
        assert_eq!(code(&out), 2, "{slo}: {}", stderr(&out));
        let err = stderr(&out);
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(err.starts_with("error: ") && err.contains(named), "{err}");
    }
    assert!(ng.log().is_empty(), "a request reached nginx");
}

/// Busy loops beside the load, one per CPU: the gate refuses the run with one line,
/// keeps the objectives it did not judge, and `compare --fail-if-slower` refuses the
/// Run as a baseline or a candidate, naming it (beside a recorded healthy Run, which
/// it judges).
#[test]
fn untrusted_evidence_exits_3_and_compare_refuses_it() {
    let _one = serial();
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    let quiet = PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/runs/healthy-before.json"
    ));
    let busy = dir.path().join("busy.json");
    let junit_xml = dir.path().join("junit.xml");
    let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
    let mut hogs: Vec<_> = (0..cpus)
        .map(|_| {
            Command::new("sh")
                .args(["-c", "while :; do :; done"])
                .spawn()
                .unwrap()
        })
        .collect();
    let out = run_once(
        &ng.url("/1k.txt"),
        &[
            "--slo",
            "p99<2s",
            "--json",
            busy.to_str().unwrap(),
            "--junit",
            junit_xml.to_str().unwrap(),
        ],
        &[],
    );
    // The same host judged anyway: the objectives decide (p99<1us is broken whatever
    // the host), the doubt is said first and kept in the Run and the JUnit report.
    let anyway_json = dir.path().join("anyway.json");
    let anyway_junit = dir.path().join("anyway.xml");
    let anyway = run_judged(
        &ng.url("/1k.txt"),
        &[
            "--slo",
            "p99<1us",
            "--json",
            anyway_json.to_str().unwrap(),
            "--junit",
            anyway_junit.to_str().unwrap(),
        ],
        &[],
    );
    for h in hogs.iter_mut() {
        let _ = h.kill();
        let _ = h.wait();
    }
    let err = stderr(&anyway);
    assert_eq!(code(&anyway), 1, "{err}");
    let run = read_json(&anyway_json);
    assert_eq!(run["trust"]["trusted"], false, "{err}");
    assert_eq!(run["trust"]["judged_anyway"], true);
    let rest = judged_stderr(&anyway, false);
    assert!(
        rest.starts_with("loadlens: objectives broken: p99<1us (p99 was "),
        "{err}"
    );
    let (head, cases) = junit(&anyway_junit);
    // Two CPU hogs beside the server may also be named (a BOTTLENECK is a failing case
    // of loadlens.findings, after the objectives): what was judged is the same.
    let found = cases
        .iter()
        .filter(|c| c.starts_with("loadlens.findings/"))
        .count();
    assert_eq!(
        head,
        format!("{},{},0,1", 2 + found, 1 + found),
        "one objective failure, one skipped, and the findings: {cases:?}"
    );
    assert!(cases[0].starts_with(
        "loadlens.evidence/evidence can be trusted:skipped:evidence cannot be trusted, objectives judged anyway: "
    ), "{cases:?}");
    assert!(
        cases[1].starts_with("loadlens.objectives/p99<1us:failure:p99 was "),
        "{cases:?}"
    );

    let err = stderr(&out);
    assert_eq!(code(&out), 3, "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("loadlens: evidence cannot be trusted, objectives not judged: "),
        "{err}"
    );
    let hog_named = hogs
        .iter()
        .any(|h| err.contains(&format!("sh (pid {},", h.id())));
    // On a machine busy with more than the hogs (CI's other test binaries, a build) the
    // busiest competitor named may be another process: a process is named all the same.
    assert!(
        hog_named || err.contains("the client saturated") || err.contains(" (pid "),
        "{err}"
    );
    let run = read_json(&busy);
    assert_eq!(run["trust"]["trusted"], false);
    assert_eq!(run["objectives"][0]["objective"], "p99<2s");
    let (head, cases) = junit(&junit_xml);
    assert!(head.ends_with(",1,1"), "one error, one skipped: {head}");
    assert!(cases[0].starts_with(
        "loadlens.evidence/evidence can be trusted:error:evidence cannot be trusted: "
    ));
    assert!(cases[1].starts_with("loadlens.objectives/p99<2s:skipped:not judged"));

    let compare = |a: &Path, b: &Path| {
        let mut cmd = loadlens();
        cmd.arg("compare")
            .arg(a)
            .arg(b)
            .args(["--fail-if-slower", "1000"]);
        output_within(cmd, HANG)
    };
    for (a, b) in [(&quiet, &busy), (&busy, &quiet)] {
        let out = compare(a, b);
        let err = stderr(&out);
        assert_eq!(code(&out), 3, "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("loadlens: evidence cannot be trusted, no verdict: ")
                && err.contains(&format!("{}: ", busy.display()))
                && !err.contains(&format!("{}: ", quiet.display())),
            "{err}"
        );
        assert!(out.stdout.is_empty(), "no verdict printed");
    }
    let out = compare(&quiet, &quiet);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    // Judged anyway: the comparison decides (no slower run: 0), the doubt a warning.
    let mut cmd = loadlens();
    cmd.arg("compare").arg(&quiet).arg(&busy).args([
        "--fail-if-slower",
        "1000",
        "--judge-untrusted",
    ]);
    let out = output_within(cmd, HANG);
    let err = stderr(&out);
    assert_eq!(code(&out), 0, "{err}");
    assert!(
        err.starts_with(
            "loadlens: warning: evidence cannot be trusted, judged anyway (--judge-untrusted): "
        ) && err.contains(&format!("{}: ", busy.display())),
        "{err}"
    );
    assert!(!out.stdout.is_empty(), "the verdict is printed");
}

/// A split load merged without one of its segments: the merged numbers are half the
/// load's, and the gate says so.
#[test]
fn a_missing_segment_exits_3_on_merge() {
    let _one = serial();
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    let seg = dir.path().join("seg1.json");
    let out = run_once(
        &ng.url("/1k.txt"),
        &["--segment", "1/2", "--json", seg.to_str().unwrap()],
        &[],
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let mut cmd = loadlens();
    cmd.arg("merge")
        .arg(&seg)
        .args(["--slo", "p99<2s", "--json"])
        .arg(dir.path().join("m.json"));
    let out = output_within(cmd, HANG);
    let err = stderr(&out);
    assert_eq!(code(&out), 3, "{err}");
    assert!(
        err.contains("segment 2 of 2 missing: the numbers are the others' only"),
        "{err}"
    );
    // Without --slo, merge judges nothing, as before.
    let mut cmd = loadlens();
    cmd.arg("merge").arg(&seg);
    assert_eq!(code(&output_within(cmd, HANG)), 0);
}

#[test]
fn an_interrupted_judged_run_exits_130() {
    let _one = serial();
    let ng = Nginx::start("", "");
    let mut child = loadlens()
        .args([
            "run",
            &ng.url("/1k.txt"),
            "-c",
            "2",
            "-t",
            "1",
            "-R",
            "200",
            "-d",
            "120s",
        ])
        .args(["--slo", "p99<1us", "-q"])
        .spawn()
        .unwrap();
    wait_for("the load to reach nginx", || !ng.log().is_empty());
    // SAFETY: kill(2) on the child this test started.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let status = wait_exit(&mut child, HANG);
    assert_eq!(
        status.code(),
        Some(130),
        "interrupted wins over a broken objective"
    );
}

/// Recorded Runs judged again by `report --slo`: a client held by its CPU quota and a
/// competitor on the server's CPU are refused; a healthy Run is judged.
#[test]
fn report_judges_a_saved_run_with_the_same_gate() {
    let _one = serial();
    let data = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/runs");
    let report = |name: &str, slo: &str| {
        let mut cmd = loadlens();
        cmd.args(["report", &format!("{data}/{name}.json"), "--slo", slo]);
        output_within(cmd, HANG)
    };
    let out = report("client-bound-before", "p99<10s");
    assert_eq!(code(&out), 3);
    assert!(stderr(&out).contains(
        "the client saturated: the load generator was held back by its cgroup's CPU quota"
    ));
    let out = report("cpu-contention-before", "p99<10s");
    assert_eq!(code(&out), 3);
    assert!(stderr(&out).contains("another process competed for the server's CPU: nginx worker 10178 waits for CPU 1 (sh (pid 10180, 50% CPU))"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("Objectives (--slo):\n"), "{text}");
    assert!(text.contains("not judged\n"), "{text}");
    assert_eq!(code(&report("healthy-before", "p99<10s")), 0);
    assert_eq!(code(&report("healthy-before", "p99<1us")), 1);
}
