//! The gate: whether a Run's evidence can be trusted to judge objectives or a
//! comparison, decided before either. Shared CI runners are noisy (the same code
//! measured 3.4× apart); a load that measured the client, or a machine busy with
//! something else, passes or fails by chance. So a Run is refused (exit 3) when:
//!
//! - the load generator set the pace: the `client-saturated` finding as a bottleneck
//!   (its threads CPU-bound, starved beside a busy process, or held by a CPU quota), or
//!   the client self-check saturated, in the Run or in any segment of a merged one;
//! - another process competed for the CPUs: `run-queue-delay` as a bottleneck (the
//!   server's worker waited while another process ran on its CPU), or the other
//!   processes the watch saw used at least a quarter of the machine's CPUs and half a
//!   core — not counting the server's own kind (an upstream nginx the watch did not
//!   adopt) or per-CPU kernel threads (`ksoftirqd/0`, `kworker/1:1`: the load's own
//!   interrupts and I/O);
//! - segments of a split load are missing from a merged Run.
//!
//! Pure functions of the Run, like the rules it reads: the same Run is judged the same
//! by `run`, `merge`, `report` and `compare`.

use crate::diagnose::FindingId;
use crate::run::{Kind, Run, Trust};
use crate::slo::Objectives;

/// Other processes' CPU, percent of one core, at which they contaminate the load on
/// any machine: half a core.
const OTHERS_MIN_PCT: f64 = 50.0;
/// …and the share of the machine's CPUs they must take on a larger one: a quarter.
const OTHERS_SHARE_OF_MACHINE: f64 = 0.25;

/// Whether `run`'s evidence can be trusted, and why not.
pub fn trust(run: &Run) -> Trust {
    let mut reasons = Vec::new();
    let bottleneck = |id: FindingId| {
        run.findings
            .iter()
            .find(|f| f.id == id && f.kind == Kind::Bottleneck)
    };
    if let Some(f) = bottleneck(FindingId::ClientSaturated) {
        reasons.push(format!("the client saturated: {}", f.title));
    } else if run.client.saturated {
        reasons.push(format!(
            "the client saturated: its threads were busy {:.0}% of the load",
            run.client.busy_pct_mean
        ));
    }
    if let Some(m) = &run.merged {
        for s in m.segments.iter().filter(|s| s.client.saturated) {
            reasons.push(format!(
                "the client of segment {} ({}) saturated",
                s.index, s.host
            ));
        }
        if !m.missing.is_empty() {
            let list: Vec<String> = m.missing.iter().map(u32::to_string).collect();
            reasons.push(format!(
                "segment{} {} of {} missing: the numbers are the others' only",
                if m.missing.len() == 1 { "" } else { "s" },
                list.join(", "),
                m.count
            ));
        }
    }
    if let Some(f) = bottleneck(FindingId::RunQueueDelay) {
        let named = others(run, 20.0);
        reasons.push(format!(
            "another process competed for the server's CPU: {}{}",
            f.title,
            if named.is_empty() {
                String::new()
            } else {
                format!(" ({})", named.join(", "))
            }
        ));
    } else if let Some(busy) = busy_others(run) {
        reasons.push(format!("other processes were busy on the machine: {busy}"));
    }
    Trust {
        trusted: reasons.is_empty(),
        reasons,
        judged_anyway: false,
    }
}

/// The other processes the watch saw at `min_pct` of a core or more, named:
/// "sh (pid 12, 98% CPU)".
fn others(run: &Run, min_pct: f64) -> Vec<String> {
    run.evidence
        .iter()
        .flat_map(|e| &e.window.other_processes)
        .filter(|o| o.cpu_pct >= min_pct)
        .map(|o| format!("{} (pid {}, {:.0}% CPU)", o.comm, o.pid, o.cpu_pct))
        .collect()
}

/// The other processes the watch saw, when together they took enough of the machine to
/// distort the load: "rustc (pid 7051, 47% CPU), rustc (pid 7057, 46% CPU)".
fn busy_others(run: &Run) -> Option<String> {
    let ev = run.evidence.as_ref()?;
    let own_kinds: Vec<&str> = ev
        .topology
        .processes
        .iter()
        .map(|p| p.comm.as_str())
        .collect();
    let others: Vec<_> = ev
        .window
        .other_processes
        .iter()
        .filter(|o| !o.comm.contains('/') && !own_kinds.contains(&o.comm.as_str()))
        .collect();
    let total: f64 = others.iter().map(|o| o.cpu_pct).sum();
    let bar = OTHERS_MIN_PCT.max(OTHERS_SHARE_OF_MACHINE * 100.0 * ev.host.cpus.max(1) as f64);
    (total >= bar).then(|| {
        others
            .iter()
            .map(|o| format!("{} (pid {}, {:.0}% CPU)", o.comm, o.pid, o.cpu_pct))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

/// Judges `objectives` on `run` and the trust of its evidence, keeping both in the Run.
/// `anyway`: the objectives decide even when the evidence cannot be trusted.
pub fn judge(run: &mut Run, objectives: &Objectives, anyway: bool) {
    run.objectives = objectives.judge(&run.results);
    let mut t = trust(run);
    t.judged_anyway = anyway && !t.trusted;
    run.trust = Some(t);
}

/// What a judged Run comes to, in the order it is decided: the evidence first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Every objective met (or none given).
    Met,
    /// At least one objective broken.
    Broken,
    /// The evidence cannot be trusted: the objectives are no verdict (unless judged
    /// anyway).
    Untrusted,
}

/// The verdict on a judged Run.
pub fn verdict(run: &Run) -> Verdict {
    if run
        .trust
        .as_ref()
        .is_some_and(|t| !t.trusted && !t.judged_anyway)
    {
        Verdict::Untrusted
    } else if run.objectives.iter().any(|o| !o.met) {
        Verdict::Broken
    } else {
        Verdict::Met
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::{Finding, OtherProcess};

    fn fixture(name: &str) -> Run {
        let path = format!("{}/tests/data/runs/{name}.json", env!("CARGO_MANIFEST_DIR"));
        crate::cli::saved_run(&std::fs::read_to_string(path).unwrap()).unwrap()
    }

    fn other(comm: &str, pid: i32, cpu_pct: f64) -> OtherProcess {
        OtherProcess {
            pid,
            comm: comm.into(),
            cpu_pct,
            last_cpu: 0,
            nice: 0,
            sched_idle: false,
        }
    }

    #[test]
    fn a_quiet_run_is_trusted() {
        let t = trust(&fixture("healthy-before"));
        assert!(t.trusted, "{t:?}");
        assert!(t.reasons.is_empty());
    }

    #[test]
    fn a_saturated_client_is_not_trusted() {
        let run = fixture("client-bound-before");
        let t = trust(&run);
        assert!(!t.trusted);
        assert!(
            t.why()
                .starts_with("the client saturated: the load generator"),
            "{t:?}"
        );
        // The self-check alone, without the finding (a Run diagnosed by an older rule).
        let mut run = fixture("healthy-before");
        run.client.saturated = true;
        assert!(trust(&run).why().starts_with("the client saturated"));
    }

    #[test]
    fn a_competitor_on_the_servers_cpu_is_not_trusted() {
        let run = fixture("cpu-contention-before");
        let t = trust(&run);
        assert!(
            t.why()
                .starts_with("another process competed for the server's CPU: nginx worker"),
            "{t:?}"
        );
        assert!(t.why().ends_with(" (sh (pid 10180, 50% CPU))"), "{t:?}");
        // The finding demoted (no competitor named) and nothing else busy: trusted.
        let mut run = fixture("cpu-contention-before");
        run.evidence
            .as_mut()
            .unwrap()
            .window
            .other_processes
            .clear();
        for f in run.findings.iter_mut() {
            f.kind = crate::run::Kind::Warning;
        }
        assert!(trust(&run).trusted);
    }

    /// The bar: half a core on this 2-CPU Run, and what does not count towards it.
    #[test]
    fn busy_other_processes_are_not_trusted_past_the_bar() {
        let mut run = fixture("healthy-before");
        assert_eq!(run.evidence.as_ref().unwrap().host.cpus, 2);
        let set = |run: &mut Run, v: Vec<OtherProcess>| {
            run.evidence.as_mut().unwrap().window.other_processes = v;
        };
        set(
            &mut run,
            vec![other("rustc", 7051, 30.0), other("rustc", 7057, 19.0)],
        );
        assert!(trust(&run).trusted, "49% of a core: under the bar");
        set(
            &mut run,
            vec![other("rustc", 7051, 30.0), other("rustc", 7057, 21.0)],
        );
        let t = trust(&run);
        assert_eq!(
            t.why(),
            "other processes were busy on the machine: rustc (pid 7051, 30% CPU), rustc (pid 7057, 21% CPU)"
        );
        // Per-CPU kernel threads and the server's own kind are the load's own work.
        let own = run.evidence.as_ref().unwrap().topology.processes[0]
            .comm
            .clone();
        set(
            &mut run,
            vec![other("ksoftirqd/1", 22, 60.0), other(&own, 9, 60.0)],
        );
        assert!(trust(&run).trusted);
        // On 8 CPUs the bar is two cores.
        run.evidence.as_mut().unwrap().host.cpus = 8;
        set(&mut run, vec![other("rustc", 1, 150.0)]);
        assert!(trust(&run).trusted);
        set(
            &mut run,
            vec![other("rustc", 1, 150.0), other("cc1", 2, 60.0)],
        );
        assert!(!trust(&run).trusted);
    }

    #[test]
    fn a_missing_segment_is_not_trusted() {
        let mut run = fixture("healthy-before");
        run.merged = Some(crate::run::Merged {
            count: 3,
            missing: vec![2, 3],
            ..Default::default()
        });
        assert_eq!(
            trust(&run).why(),
            "segments 2, 3 of 3 missing: the numbers are the others' only"
        );
    }

    #[test]
    fn the_evidence_is_judged_before_the_objectives() {
        let mut run = fixture("healthy-before");
        judge(&mut run, &Objectives::parse("p99<1us").unwrap(), false);
        assert_eq!(verdict(&run), Verdict::Broken);
        judge(&mut run, &Objectives::parse("p99<10s").unwrap(), false);
        assert_eq!(verdict(&run), Verdict::Met);
        run.findings.push(Finding {
            id: "client-saturated".into(),
            kind: Kind::Bottleneck,
            confidence: 1.0,
            title: "the load generator was CPU-bound: results are a floor".into(),
            evidence: Vec::new(),
            explanation: String::new(),
            fix: String::new(),
            because_of: None,
        });
        judge(&mut run, &Objectives::parse("p99<1us").unwrap(), false);
        assert_eq!(verdict(&run), Verdict::Untrusted);
        // Judged anyway (--judge-untrusted): the objectives decide, the doubt is kept.
        judge(&mut run, &Objectives::parse("p99<1us").unwrap(), true);
        assert_eq!(verdict(&run), Verdict::Broken);
        judge(&mut run, &Objectives::parse("p99<10s").unwrap(), true);
        assert_eq!(verdict(&run), Verdict::Met);
        let t = run.trust.as_ref().unwrap();
        assert!(!t.trusted && t.judged_anyway);
    }
}
