//! `run --save`, `loadlens history`: Runs kept in SQLite, change points, exports,
//! imports, concurrent writers. Real short loads against nginx on loopback; a series
//! with a known step made from a recorded Run (tests/data/runs/healthy-before.json)
//! with its numbers scaled, saved through `report --save`.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::{assert_ok, loadlens, Nginx};
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
