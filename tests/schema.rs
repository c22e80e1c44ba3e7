//! The Run's JSON schema: generated from the structs (their doc comments are the field
//! documentation), kept in docs/run.schema.json, and every Run loadlens writes — recorded
//! lab Runs and a fresh one against nginx — validates against it.
//!
//! After changing the Run: `UPDATE_SCHEMA=1 cargo test --test schema`.

mod common;

use common::{run_json, schema_errors, Nginx};

fn schema() -> serde_json::Value {
    serde_json::to_value(schemars::schema_for!(loadlens::run::Run)).unwrap()
}

#[test]
fn committed_schemas_are_current() {
    for (name, schema) in [
        ("run", schema()),
        (
            "comparison",
            serde_json::to_value(schemars::schema_for!(loadlens::run::Comparison)).unwrap(),
        ),
        (
            "sweep",
            serde_json::to_value(schemars::schema_for!(loadlens::run::Sweep)).unwrap(),
        ),
    ] {
        let path = format!("{}/docs/{name}.schema.json", env!("CARGO_MANIFEST_DIR"));
        let text = serde_json::to_string_pretty(&schema).unwrap() + "\n";
        if std::env::var_os("UPDATE_SCHEMA").is_some() {
            std::fs::write(&path, &text).unwrap();
        }
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            committed == text,
            "docs/{name}.schema.json is out of date: run `UPDATE_SCHEMA=1 cargo test --test schema`"
        );
    }
}

fn validate(v: &serde_json::Value, what: &str) {
    if let Some(errors) = schema_errors(&schema(), v) {
        panic!("{what}: {errors}");
    }
}

#[test]
fn recorded_lab_runs_validate() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/runs");
    let mut n = 0;
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&p).unwrap()).unwrap();
        validate(&v, &p.display().to_string());
        n += 1;
    }
    assert!(n >= 22);
}

#[test]
fn a_fresh_run_validates() {
    let ng = Nginx::start("", "");
    let run = run_json(&["-n", "500", "-c", "4", "-t", "2", &ng.url("/1k.txt")]);
    assert!(run["findings"].is_array());
    validate(&run, "fresh run");
}

#[test]
fn the_schema_rejects_a_wrong_type() {
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/data/runs/healthy-before.json"
    );
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir).unwrap()).unwrap();
    v["results"]["responses"] = serde_json::json!("many");
    let errors = schema_errors(&schema(), &v).expect("a string where a count belongs is refused");
    assert!(errors.contains("/results/responses"), "{errors}");
}
