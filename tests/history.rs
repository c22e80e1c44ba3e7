//! `run --save`, `loadlens history`: Runs kept in SQLite, change points, exports,
//! imports, concurrent writers. Real short loads against nginx on loopback; a series
//! with a known step made from a recorded Run (tests/data/runs/healthy-before.json)
//! with its numbers scaled, saved through `report --save`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{assert_ok, loadlens, Nginx};
use loadlens::history::changepoint::{change_points, Options};
use serde_json::Value;

fn history(db: &Path, args: &[&str]) -> Output {
    let mut cmd = loadlens();
    cmd.arg("history").args(args).arg("--db").arg(db);
    cmd.output().unwrap()
}

fn history_json(db: &Path, name: &str) -> Value {
    let out = history(db, &[name, "--json"]);
    assert_ok(&out);
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The recorded Run with its throughput × `rps`, latency percentiles × `lat`, started
/// `hours` later, written to `dir/NAME.json`.
fn scaled(dir: &Path, name: &str, hours: f64, rps: f64, lat: f64) -> PathBuf {
    let text = std::fs::read_to_string("tests/data/runs/healthy-before.json").unwrap();
    let mut run: Value = serde_json::from_str(&text).unwrap();
    let t = run["started_unix_s"].as_f64().unwrap();
    run["started_unix_s"] = (t + hours * 3600.0).into();
    let r = &mut run["results"];
    r["requests_per_s"] = (r["requests_per_s"].as_f64().unwrap() * rps).into();
    for p in r["latency"]["percentiles"].as_array_mut().unwrap() {
        p["us"] = ((p["us"].as_f64().unwrap() * lat).round() as u64).into();
    }
    let path = dir.join(format!("{name}.json"));
    std::fs::write(&path, serde_json::to_string(&run).unwrap()).unwrap();
    path
}

fn save(db: &Path, file: &Path, name: &str) {
    let out = loadlens()
        .arg("report")
        .arg(file)
        .args(["--save", name, "--db"])
        .arg(db)
        .output()
        .unwrap();
    assert_ok(&out);
}

/// ±2% of deterministic noise for Run `i`.
fn wobble(i: usize) -> f64 {
    let x = ((i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40) as f64 / (1u64 << 24) as f64;
    1.0 + 0.04 * (x - 0.5)
}

/// 30 Runs, throughput 20% lower and latency 20% higher from Run 21 (index 20).
fn stepped(dir: &Path, db: &Path, name: &str, n: usize, step_at: usize) {
    for i in 0..n {
        let (r, l) = if i < step_at { (1.0, 1.0) } else { (0.8, 1.2) };
        let f = scaled(
            dir,
            &format!("{name}-{i}"),
            i as f64,
            r * wobble(i),
            l * wobble(i + 100),
        );
        save(db, &f, name);
    }
}

fn change_indexes(h: &Value, metric: &str) -> Vec<u64> {
    h["change_points"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["metric"] == metric)
        .map(|c| c["index"].as_u64().unwrap())
        .collect()
}

#[test]
fn real_runs_against_nginx_are_saved_once_each_with_git_and_tags() {
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sub/h.db");
    for i in 0..2 {
        let json = dir.path().join(format!("run{i}.json"));
        let out = loadlens()
            .args([
                "run",
                &ng.url("/"),
                "-c",
                "2",
                "-d",
                "1s",
                "-q",
                "--save",
                "smoke",
            ])
            .args(["--tag", "try=1", "--db"])
            .arg(&db)
            .arg("--json")
            .arg(&json)
            .output()
            .unwrap();
        assert_ok(&out);
        assert!(String::from_utf8_lossy(&out.stderr).contains("saved as `smoke`"));
    }
    // The same Run again (report --save of its JSON) is not stored twice.
    let out = loadlens()
        .arg("report")
        .arg(dir.path().join("run0.json"))
        .args(["--save", "smoke", "--db"])
        .arg(&db)
        .output()
        .unwrap();
    assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stderr).contains("already stored"));
    let h = history_json(&db, "smoke");
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map_or(Value::Null, |o| {
            Value::from(String::from_utf8_lossy(&o.stdout).trim().to_string())
        });
    let runs = h["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    for (i, r) in runs.iter().enumerate() {
        let saved: Value = serde_json::from_str(
            &std::fs::read_to_string(dir.path().join(format!("run{i}.json"))).unwrap(),
        )
        .unwrap();
        assert_eq!(r["requests_per_s"], saved["results"]["requests_per_s"]);
        assert!(r["requests_per_s"].as_f64().unwrap() > 100.0, "{r}");
        assert_eq!(r["responses"], saved["results"]["responses"]);
        assert_eq!(r["max_us"], saved["results"]["latency"]["max_us"]);
        assert_eq!(r["tags"]["try"], "1");
        // The working directory's git revision is kept (none outside a checkout).
        assert_eq!(r["git_revision"], head, "{r}");
        assert!(r["cores"].as_u64().unwrap() >= 1);
    }
    // The list of names.
    let out = history(&db, &[]);
    assert_ok(&out);
    assert!(String::from_utf8_lossy(&out.stdout).contains("2  smoke"));
}

#[test]
fn a_planted_step_is_the_one_change_point_and_fails_the_gate() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    stepped(dir.path(), &db, "step", 30, 20);
    let h = history_json(&db, "step");
    assert_eq!(h["runs"].as_array().unwrap().len(), 30);
    assert_eq!(change_indexes(&h, "requests_per_s"), [20], "{h:#}");
    assert_eq!(change_indexes(&h, "p99_us"), [20]);
    assert_eq!(change_indexes(&h, "max_us"), Vec::<u64>::new());
    let rps = h["change_points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["metric"] == "requests_per_s")
        .unwrap();
    let pct = rps["change_pct"].as_f64().unwrap();
    assert!((-22.0..-18.0).contains(&pct), "{pct}");
    assert_eq!(rps["regression"], true);

    // The newest Run is in the slower segment: exit 1 beyond 5%, 0 beyond 30%.
    let out = history(&db, &["step", "--fail-on-regression"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("REGRESSION  requests_per_s"));
    let out = history(&db, &["step", "--fail-on-regression", "--threshold", "30"]);
    assert_eq!(out.status.code(), Some(0));

    // The same history without the step: no change point, the gate passes.
    let db2 = dir.path().join("flat.db");
    stepped(dir.path(), &db2, "flat", 20, 99);
    let h = history_json(&db2, "flat");
    assert_eq!(h["change_points"], Value::Array(vec![]), "{h:#}");
    let out = history(&db2, &["flat", "--fail-on-regression"]);
    assert_eq!(out.status.code(), Some(0));

    // Exports.
    let export = |fmt: &str| {
        let out = history(&db, &["export", "step", "--format", fmt]);
        assert_ok(&out);
        String::from_utf8(out.stdout).unwrap()
    };
    let bmf: Value = serde_json::from_str(&export("bmf")).unwrap();
    let newest = &h_newest(&db, "step");
    assert_eq!(
        bmf["step"]["requests-per-s"]["value"].as_f64().unwrap(),
        newest["requests_per_s"].as_f64().unwrap()
    );
    assert!(bmf["step"]["p99-us"]["value"].is_number());
    let gab: Value = serde_json::from_str(&export("gab")).unwrap();
    for row in gab.as_array().unwrap() {
        assert!(row["name"].as_str().unwrap().starts_with("step — "));
        assert!(row["unit"].is_string());
        assert!(row["value"].is_number());
    }
    assert!(gab
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["name"] == "step — p99"));
    let csv = export("csv");
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(&header[..2], ["time", "name"]);
    assert!(header.contains(&"requests_per_s") && header.contains(&"p99_us"));
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    assert_eq!(rows.len(), 30);
    assert!(rows.iter().all(|r| r.len() == header.len()));
    assert!(rows[0][0].ends_with('Z') && rows[0][0].contains('T'));
}

fn h_newest(db: &Path, name: &str) -> Value {
    history_json(db, name)["runs"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone()
}

#[test]
fn import_merges_another_database_without_duplicates() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.db"), dir.path().join("b.db"));
    let files: Vec<PathBuf> = (0..6)
        .map(|i| scaled(dir.path(), &format!("r{i}"), i as f64, wobble(i), 1.0))
        .collect();
    for f in &files[..4] {
        save(&a, f, "t");
    }
    for f in &files[2..] {
        save(&b, f, "t");
    }
    let out = history(&a, &["import", b.to_str().unwrap()]);
    assert_ok(&out);
    assert!(
        String::from_utf8_lossy(&out.stdout).starts_with("2 Runs added"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert_eq!(history_json(&a, "t")["runs"].as_array().unwrap().len(), 6);
    // Again: nothing new.
    let out = history(&a, &["import", b.to_str().unwrap()]);
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("0 Runs added"));
    assert_eq!(history_json(&a, "t")["runs"].as_array().unwrap().len(), 6);
}

#[test]
fn concurrent_writers_lose_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let files: Vec<PathBuf> = (0..8)
        .map(|i| scaled(dir.path(), &format!("c{i}"), i as f64, wobble(i), 1.0))
        .collect();
    // Eight processes at once on a database none of them has created yet.
    let children: Vec<_> = files
        .iter()
        .map(|f| {
            loadlens()
                .arg("report")
                .arg(f)
                .args(["--save", "c", "--db"])
                .arg(&db)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    assert_eq!(history_json(&db, "c")["runs"].as_array().unwrap().len(), 8);
}

#[test]
fn bad_input_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let out = history(&db, &["nothing-saved"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no Run saved as `nothing-saved`"));
    // A file that is not a database.
    let junk = dir.path().join("junk.db");
    std::fs::write(
        &junk,
        "not sqlite at all, just text that is long enough to be read",
    )
    .unwrap();
    let out = history(&junk, &["x"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a usable loadlens history database"));
    let out = loadlens()
        .args([
            "report",
            "tests/data/runs/healthy-before.json",
            "--save",
            "x",
            "--tag",
            "novalue",
            "--db",
        ])
        .arg(&db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("KEY=VALUE"));
}

/// A small seeded shuffle for the noise-only histories (SplitMix64, Fisher–Yates).
fn shuffled(xs: &[f64], seed: u64) -> Vec<f64> {
    let mut state = seed;
    let mut next = || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let mut v = xs.to_vec();
    for i in (1..v.len()).rev() {
        let j = (next() % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// The echo module's shared object (Debian's libnginx-mod-http-echo).
const ECHO_MODULE: &str = "/usr/lib/nginx/modules/ngx_http_echo_module.so";

/// The test, on real loads: 30 Runs of `-c 10 -n 50` against nginx answering
/// `/slow` after `echo_sleep 0.1`; before Run 21 the config is changed to 0.12 and nginx
/// reloaded — a 20% step in latency that the config sets, not the CPU: on this busy
/// 2-core machine (load average 13) the p50 of each Run stayed within 100.4–104.1 ms
/// before, 120.6–124.0 ms after. E-divisive finds it at Run 21 (index 20) and nowhere
/// else in p50; the gate fails with JUnit, Markdown and HTML written; the two Runs the
/// change separates are stored whole, for `compare`. Then the same p50s as noise only
/// (the step divided out, shuffled by seed) raise no change point for 19 of 20 seeds.
///
/// `--min-change 5`: the permutation test alone splits pure noise about 5% of the time
/// (p < 0.05 for each segment searched: here the two sides of the step), so "no other
/// change point" on live data would be a coin toss at about 1 in 10 without a floor;
/// 5% is a quarter of the step and several times this noise (≈ 1–2%).
#[test]
fn a_real_20_percent_step_at_run_21_is_the_one_change_point() {
    if !Path::new(ECHO_MODULE).exists() {
        common::skip_or_fail("nginx's echo module (libnginx-mod-http-echo) is not installed");
        return;
    }
    let t0 = std::time::Instant::now();
    let ng = Nginx::start_opts(
        None,
        "127.0.0.1",
        &format!("load_module {ECHO_MODULE};"),
        "",
        "location /slow { echo_sleep 0.1; echo ok; }",
        "",
    );
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let url = ng.url("/slow");
    for i in 0..30 {
        if i == 20 {
            let conf = ng.root().join("nginx.conf");
            let text = std::fs::read_to_string(&conf).unwrap();
            assert!(text.contains("echo_sleep 0.1;"));
            std::fs::write(&conf, text.replace("echo_sleep 0.1;", "echo_sleep 0.12;")).unwrap();
            let old = ng.workers();
            assert!(!old.is_empty());
            let st = std::process::Command::new("kill")
                .args(["-HUP", &ng.pid().to_string()])
                .status()
                .unwrap();
            assert!(st.success());
            // Reloaded: the old workers gone, new ones there.
            common::wait_for("nginx's reload", || {
                let now = ng.workers();
                !now.is_empty() && now.iter().all(|p| !old.contains(p))
            });
        }
        let out = loadlens()
            .args([
                "run", &url, "-c", "10", "-n", "50", "-q", "--save", "step", "--db",
            ])
            .arg(&db)
            .output()
            .unwrap();
        assert_ok(&out);
    }
    let load_s = t0.elapsed().as_secs_f64();
    let h = history_json(&db, "step");
    let runs = h["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 30);
    let p50: Vec<f64> = runs.iter().map(|r| r["p50_us"].as_f64().unwrap()).collect();
    let rps: Vec<f64> = runs
        .iter()
        .map(|r| r["requests_per_s"].as_f64().unwrap())
        .collect();
    assert!(runs.iter().all(|r| r["errors"] == 0), "{h:#}");
    eprintln!("p50 µs: {p50:?} ({load_s:.1} s of loads)");
    // The planted step, measured: ≈ 20% from the first Run at 0.12 s.
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len() as f64;
    let (before, after) = (mean(&p50[..20]), mean(&p50[20..]));
    let step = (after - before) / before * 100.0;
    assert!((17.0..23.0).contains(&step), "{step:.1}%: {p50:?}");

    let h = {
        let out = history(&db, &["step", "--json", "--min-change", "5"]);
        assert_ok(&out);
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    assert_eq!(change_indexes(&h, "p50_us"), [20], "{h:#}");
    // Throughput follows (10 connections / latency), with more noise: found there too.
    assert!(change_indexes(&h, "requests_per_s").contains(&20), "{h:#}");
    let cp = h["change_points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["metric"] == "p50_us")
        .unwrap()
        .clone();
    assert_eq!(cp["regression"], true);
    assert_eq!(cp["before_id"], runs[19]["id"]);
    assert_eq!(cp["after_id"], runs[20]["id"]);

    // The gate, with its CI files and the page.
    let (junit, md, html) = (
        dir.path().join("h.xml"),
        dir.path().join("h.md"),
        dir.path().join("h.html"),
    );
    let mut cmd = loadlens();
    cmd.args([
        "history",
        "step",
        "--fail-on-regression",
        "--min-change",
        "5",
    ])
    .arg("--db")
    .arg(&db)
    .arg("--junit")
    .arg(&junit)
    .arg("--summary-md")
    .arg(&md)
    .arg("--html")
    .arg(&html)
    .env_remove("GITHUB_STEP_SUMMARY");
    let out = cmd.output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("REGRESSION  p50_us"), "{stdout}");
    // Valid against the JUnit schema CI servers read, as run --junit's file is.
    let xsd = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/junit.xsd");
    match std::process::Command::new("xmllint")
        .args(["--noout", "--schema", xsd])
        .arg(&junit)
        .output()
    {
        Ok(out) => assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        ),
        Err(_) => common::skip_or_fail("xmllint not found (Debian: libxml2-utils)"),
    }
    let junit = std::fs::read_to_string(&junit).unwrap();
    assert!(
        junit.contains("name=\"p50_us: no regression beyond 5%\" time=\"0\"><failure"),
        "{junit}"
    );
    assert!(junit.contains("type=\"regression\""));
    let md = std::fs::read_to_string(&md).unwrap();
    assert!(md.starts_with("## loadlens history: step — "), "{md}");
    assert!(
        md.contains("| p50_us |") && md.contains("❌ regression"),
        "{md}"
    );
    let html = std::fs::read_to_string(&html).unwrap();
    let (b, a) = (
        cp["before_id"].as_i64().unwrap(),
        cp["after_id"].as_i64().unwrap(),
    );
    let anchor = "href=\"#cp-p50_us-20\"";
    assert!(
        html.contains(anchor) && html.contains("id=\"cp-p50_us-20\""),
        "{html}"
    );
    assert!(
        html.contains(&format!("href=\"#run-{b}\"")) && html.contains(&format!("id=\"run-{a}\""))
    );
    assert!(html.contains(&format!(
        "loadlens compare &lt;(loadlens history show {b} --db {}",
        db.display()
    )));
    // Self-contained: nothing fetched.
    assert!(!html.contains("<script src") && !html.contains("<link"));
    let charts = html.matches("<svg").count();
    assert!(
        charts >= 2,
        "requests/s, latency (and CPU per request if watched): {charts}"
    );

    // The two Runs it separates, stored whole: compared, the later one slower.
    let show = |id: i64| {
        let out = history(&db, &["show", &id.to_string()]);
        assert_ok(&out);
        let p = dir.path().join(format!("run-{id}.json"));
        std::fs::write(&p, &out.stdout).unwrap();
        p
    };
    let (fb, fa) = (show(b), show(a));
    let out = loadlens()
        .arg("compare")
        .arg(&fb)
        .arg(&fa)
        .arg("--json")
        .arg("-")
        .output()
        .unwrap();
    assert_ok(&out);
    let c: Value = serde_json::from_slice(&out.stdout).unwrap();
    let row = c["rows"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["metric"] == "requests/s")
        .unwrap_or_else(|| panic!("{c:#}"));
    assert_eq!(row["values"][0].as_f64().unwrap(), rps[19], "{row}");
    assert_eq!(row["values"][1].as_f64().unwrap(), rps[20], "{row}");

    // Noise only: the step divided out, the values shuffled by seed, the permutations
    // seeded the same way.
    let noise: Vec<f64> = p50[..20]
        .iter()
        .copied()
        .chain(p50[20..].iter().map(|x| x * before / after))
        .collect();
    let quiet = (0..20u64)
        .filter(|&seed| {
            let o = Options {
                seed,
                min_change_pct: 5.0,
                ..Options::default()
            };
            change_points(&shuffled(&noise, seed), &o).is_empty()
        })
        .count();
    assert!(
        quiet >= 19,
        "{quiet} of 20 noise-only histories quiet: {noise:?}"
    );
    // Without the floor, the permutation test alone: most seeds quiet all the same.
    let quiet_no_floor = (0..20u64)
        .filter(|&seed| {
            let o = Options {
                seed,
                ..Options::default()
            };
            change_points(&shuffled(&noise, seed), &o).is_empty()
        })
        .count();
    eprintln!("noise only: {quiet}/20 quiet with the floor, {quiet_no_floor}/20 without");
    eprintln!("{:.1} s in all", t0.elapsed().as_secs_f64());
}
