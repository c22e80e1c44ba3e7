//! The diagnosis of every Run recorded from the lab (`tests/data/runs/<scenario>-
//! {before,after}.json`, written by `loadlens lab run NAME --fix --json-dir
//! tests/data/runs`): each scenario's fault is the first bottleneck and the fix removes
//! it; the healthy server has no false alarm; the ranking holds. The rules' own tests
//! (fires past the threshold, quiet under it) are beside each rule in
//! `src/diagnose/rules/`.

use loadlens::diagnose::{diagnose, explain};
use loadlens::lab::scenarios;
use loadlens::run::{Finding, Kind, Run};

fn fixture(name: &str) -> Run {
    let p = format!("{}/tests/data/runs/{name}.json", env!("CARGO_MANIFEST_DIR"));
    Run::from_json(&std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))).unwrap()
}

fn first_bottleneck(f: &[Finding]) -> Option<&str> {
    f.iter()
        .find(|f| f.kind == Kind::Bottleneck)
        .map(|f| f.id.as_str())
}

fn ids(f: &[Finding]) -> Vec<String> {
    f.iter()
        .map(|f| format!("{}:{:?}:{}", f.id, f.kind, f.confidence))
        .collect()
}

#[test]
fn every_scenario_names_its_fault_and_the_fix_removes_it() {
    for sc in scenarios::all() {
        let before = diagnose(&fixture(&format!("{}-before", sc.name)));
        assert_eq!(
            first_bottleneck(&before),
            Some(sc.expected_finding),
            "{}: {:?}",
            sc.name,
            ids(&before)
        );
        let top = before.iter().find(|f| f.kind == Kind::Bottleneck).unwrap();
        assert!(!top.evidence.is_empty() && !top.fix.is_empty() && !top.explanation.is_empty());
        assert!((0.0..=1.0).contains(&top.confidence));
        if sc.name == "healthy" {
            continue; // nothing to fix: the control
        }
        let after = diagnose(&fixture(&format!("{}-after", sc.name)));
        if sc.expected_finding == "server-cpu-saturated" {
            // The CPU stays the limit (gzip-cpu): the fix makes each response cheaper,
            // and the finding stops naming what the fix removed.
            let fix_of = |f: &[Finding]| {
                f.iter()
                    .find(|f| f.id == sc.expected_finding)
                    .map(|f| f.fix.clone())
                    .unwrap_or_default()
            };
            assert!(fix_of(&before).contains("gzip_comp_level 9"), "{}", sc.name);
            assert!(!fix_of(&after).contains("gzip_comp_level"), "{}", sc.name);
            continue;
        }
        assert!(
            !after
                .iter()
                .any(|f| f.id == sc.expected_finding && f.kind == Kind::Bottleneck),
            "{} after fix: {:?}",
            sc.name,
            ids(&after)
        );
    }
}

#[test]
fn healthy_has_no_false_alarm() {
    for w in ["before", "after"] {
        let f = diagnose(&fixture(&format!("healthy-{w}")));
        for x in f.iter().filter(|f| f.kind == Kind::Bottleneck) {
            assert!(
                ["server-cpu-saturated", "link-saturated"].contains(&x.id.as_str()),
                "{:?}",
                ids(&f)
            );
        }
    }
}

#[test]
fn findings_are_sorted_bottlenecks_first() {
    let f = diagnose(&fixture("ephemeral-ports-before"));
    let kinds: Vec<Kind> = f.iter().map(|f| f.kind).collect();
    let mut sorted = kinds.clone();
    sorted.sort();
    assert_eq!(kinds, sorted);
    assert!(f.iter().any(|f| f.id == "http-errors"), "{:?}", ids(&f));
}

#[test]
fn explain_covers_every_rule_id() {
    let mut all = Vec::new();
    for sc in scenarios::all() {
        for w in ["before", "after"] {
            all.extend(diagnose(&fixture(&format!("{}-{w}", sc.name))));
        }
    }
    // Every rule is explained, whether or not a lab scenario makes it fire
    // (sendfile-off, small-send-buffer, client-receive-window, rate-limited have none),
    // and every finding of the recorded Runs is a rule's.
    let ids: Vec<&str> = loadlens::diagnose::rule_ids().collect();
    assert!(ids.len() >= 29, "{ids:?}");
    for id in &ids {
        assert!(explain(id).is_some(), "no explanation for {id}");
    }
    for f in &all {
        assert!(ids.contains(&f.id.as_str()), "{} is no rule's", f.id);
    }
    assert!(explain("nope").is_none());
}

#[test]
fn connection_cost_outranks_the_busy_cpu_it_causes() {
    let mut run = fixture("conn-per-request-before");
    for p in run.evidence.as_mut().unwrap().window.processes.iter_mut() {
        p.cpu_pct = 99.0;
    }
    let f = diagnose(&run);
    assert_eq!(
        first_bottleneck(&f),
        Some("new-connection-cost"),
        "{:?}",
        ids(&f)
    );
    let cpu = f.iter().find(|x| x.id == "server-cpu-saturated").unwrap();
    assert_eq!(cpu.kind, Kind::Info);
}

/// Regression (a lab run failed once on `proxy-buffers before: ["client-saturated",
/// "small-proxy-buffers"]`): when the server has a limit of its own, that limit is the
/// bottleneck and a saturated client is a warning beside it, however busy the client
/// was; with a server that had headroom, the client comes first.
#[test]
fn a_saturated_client_ranks_first_only_when_the_server_had_headroom() {
    let mut run = fixture("proxy-buffers-before");
    run.client.busy_pct_mean = 99.0;
    run.client.saturated = true;
    let f = diagnose(&run);
    assert_eq!(
        first_bottleneck(&f),
        Some("small-proxy-buffers"),
        "{:?}",
        ids(&f)
    );
    let client = f.iter().find(|x| x.id == "client-saturated").unwrap();
    assert_eq!(client.kind, Kind::Warning);

    let f = diagnose(&fixture("client-bound-before"));
    assert_eq!(
        first_bottleneck(&f),
        Some("client-saturated"),
        "{:?}",
        ids(&f)
    );
}
