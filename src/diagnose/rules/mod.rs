//! The rules, grouped by resource: client, accept queues, ports, conntrack, upstream,
//! proxy buffers, socket buffers, CPU, CPU quotas, network, stalls, limits, HTTP. Each is
//! `fn(&Ctx) -> Option<Finding>`; thresholds are named where they are used and explained
//! there. Every finding has a row in `table.rs` (its id, check, texts and relations to
//! the others); what a row holds is defined here.

mod accept;
mod buffers;
mod client;
mod conntrack;
mod cpu;
mod http;
mod limits;
mod network;
mod pool;
mod ports;
pub mod profile;
mod quota;
mod sockbuf;
mod stalls;
mod tails;
mod udp;
mod upstream;

pub(super) use super::{fact, ramp, Ctx};
use crate::run::{Fact, Finding, Kind};

/// A consequence of a cause's: when the cause is found a bottleneck and the consequence
/// fires, the consequence is demoted to info and says which cause explains it — so a
/// symptom is never ranked above what made it, whatever their confidences.
pub(crate) struct Explains {
    pub consequence: FindingId,
    /// Why the cause produces the consequence's evidence (appended to its explanation).
    pub why: &'static str,
    /// Evidence of the consequence's own that the cause cannot produce: when it holds,
    /// the consequence stands beside the cause.
    pub unless: Option<fn(&Finding) -> bool>,
}

/// The tier of the request path (`path`) a finding's resource is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tier {
    Client,
    Network,
    Front,
    Upstream,
    /// The upstream's when the finding's title names the upstream (or its address),
    /// else the front's: a queue or a pool either may have.
    UpstreamIfNamed,
}

/// One finding: its id, its check, its texts and its relations.
pub(crate) struct Row {
    pub id: FindingId,
    /// The rule that makes the finding.
    pub check: fn(&Ctx) -> Option<Finding>,
    /// The check's module and function, as written in the row: docs/findings.md reads
    /// the evidence a rule cites from its source (`catalog`, with
    /// [`FindingId::check_source`]).
    pub check_at: (&'static str, &'static str),
    /// One line: what the finding means.
    pub means: &'static str,
    /// The long form: `Mechanism:`, `Confirm:`, `Fix:` and `Source:` lines.
    pub long: &'static str,
    /// The consequences this finding explains when it is a bottleneck.
    pub explains: &'static [Explains],
    /// It describes capacity (what the limit was) rather than a fault: demoted to info
    /// when a fault explains the run. (new-connection-cost is a cause: a busy CPU is
    /// its consequence.)
    pub capacity: bool,
    /// It follows from a limit in the tier behind it (the queue in front of a saturated
    /// tier and its overflow, the connections the front opens and retries while it
    /// waits): beside a bottleneck it is that bottleneck's consequence, whatever its own
    /// confidence, for this reason.
    pub queue_consequence: Option<&'static str>,
    /// The tier of the request path its resource is in.
    pub tier: Tier,
    /// It explains a latency (a wait for a CPU, a stall) but not a rate that stays put:
    /// beside it the latency could still be a queue for a pool (`pipeline`'s probes).
    pub latency_only: bool,
}

fn no_check(_: &Ctx) -> Option<Finding> {
    None
}

impl Row {
    /// What a row says of what it does not name.
    const NONE: Row = Row {
        id: FindingId::ClientSaturated,
        check: no_check,
        check_at: ("", ""),
        means: "",
        long: "",
        explains: &[],
        capacity: false,
        queue_consequence: None,
        tier: Tier::Front,
        latency_only: false,
    };
}

/// The enum of ids and the rows, from one list: `Variant = "id" { check, means, long,
/// and any other field of [`Row`] }`. The check is written `module::function`, its module
/// a child of `rules` (`super::` from the table's module): its file, `rules/module.rs`, is
/// all a new rule needs besides its row and its `mod` line.
macro_rules! findings {
    ($(
        $variant:ident = $id:literal {
            check: $module:ident::$function:ident,
            means: $means:literal,
            long: $long:literal
            $(, $field:ident: $value:expr)* $(,)?
        }
    )*) => {
        /// The id of every finding a rule can make, in the order the rules run.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum FindingId {
            $(#[doc = $means] $variant,)*
        }

        impl FindingId {
            /// Every id, in the order the rules run.
            pub const ALL: &'static [FindingId] = &[$(FindingId::$variant),*];

            /// The id as the Run, the JSON and `loadlens explain` spell it.
            pub const fn as_str(self) -> &'static str {
                match self {
                    $(FindingId::$variant => $id,)*
                }
            }

            /// The text of the file of the rule that makes the finding (`rules/module.rs`,
            /// from the row's check): docs/findings.md reads the evidence a rule cites and
            /// the knobs its fix names there (`catalog`). Only the catalog calls it, so the
            /// sources stay out of a binary that does not write the page.
            pub(in crate::diagnose) fn check_source(self) -> &'static str {
                match self {
                    $(FindingId::$variant => include_str!(concat!(stringify!($module), ".rs")),)*
                }
            }
        }

        /// Every finding's row, in the order of [`FindingId::ALL`].
        pub(in crate::diagnose) const ROWS: &[Row] = &[$(
            Row {
                id: FindingId::$variant,
                check: super::$module::$function,
                check_at: (stringify!($module), stringify!($function)),
                means: $means,
                long: $long,
                $($field: $value,)*
                ..Row::NONE
            },
        )*];
    };
}

impl FindingId {
    /// The finding's row.
    pub(crate) fn row(self) -> &'static Row {
        &ROWS[self as usize]
    }

    /// The id of a finding, `None` for an id no rule of this version makes.
    pub fn of(f: &Finding) -> Option<FindingId> {
        f.id.parse().ok()
    }
}

impl std::fmt::Display for FindingId {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An id no rule makes.
#[derive(Debug, thiserror::Error)]
#[error("unknown finding id `{0}`: the known ones are {known}", known = known())]
pub struct UnknownFinding(pub String);

fn known() -> String {
    let ids: Vec<&str> = FindingId::ALL.iter().map(|i| i.as_str()).collect();
    ids.join(", ")
}

impl std::str::FromStr for FindingId {
    type Err = UnknownFinding;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        FindingId::ALL
            .iter()
            .copied()
            .find(|i| i.as_str() == s)
            .ok_or_else(|| UnknownFinding(s.to_string()))
    }
}

impl PartialEq<FindingId> for String {
    fn eq(&self, id: &FindingId) -> bool {
        self == id.as_str()
    }
}

impl PartialEq<FindingId> for str {
    fn eq(&self, id: &FindingId) -> bool {
        self == id.as_str()
    }
}

impl PartialEq<FindingId> for &str {
    fn eq(&self, id: &FindingId) -> bool {
        *self == id.as_str()
    }
}

// The table, after the macro that makes it (a macro is seen only by the modules declared
// after it).
mod table;

pub use table::FindingId;
pub(in crate::diagnose) use table::ROWS;

/// Bodies arriving ~40 ms after their heads: Nagle's own signature (a queue delays a
/// response's head, not the gap between its head and its body).
fn body_after_head(nagle: &Finding) -> bool {
    cites(nagle, http::BODY_AFTER_HEAD)
}

/// Few requests per connection by the load's own choice (`--connreqs`), not because the
/// server closed kept-alive connections.
fn client_chose_few_requests(f: &Finding) -> bool {
    !cites(f, cpu::SERVER_CLOSED)
}

/// Workers blocked in a call that were event loops, each holding every connection it
/// serves (not a pool's threads, one request each): the block is a limit of its own.
fn event_loop_blocked(blocked: &Finding) -> bool {
    !cites(blocked, stalls::ONE_REQUEST_PER_THREAD)
}

/// A stall whose samples caught a worker stopped or in disk wait was a worker blocked,
/// whatever else the machine did meanwhile.
fn worker_seen_blocked(stall: &Finding) -> bool {
    cites(stall, stalls::SEEN_BLOCKED) || cites(stall, stalls::BLOCKED_STALLS)
}

/// Workers blocked in I/O (a pipe whose reader lags, a disk, a socket), not in a lock:
/// a wait no lack of a CPU makes.
fn blocked_in_io(blocked: &Finding) -> bool {
    cites(blocked, stalls::BLOCKED_IN_IO)
}

/// Gaps in the responses that lie inside a worker's blocked wait: a stall of the
/// server's own, whatever the network lost meanwhile.
fn stall_lined_up(stall: &Finding) -> bool {
    cites(stall, stalls::LINED_UP)
}

/// Whether a finding cites the fact `name` with a value above zero (the evidence the
/// `unless` of a relation reads).
fn cites(f: &Finding, name: &str) -> bool {
    f.evidence.iter().any(|e| e.name == name && e.value > 0.0)
}

pub(super) fn finding(id: FindingId, kind: Kind, confidence: f64, title: String) -> Finding {
    Finding {
        id: id.as_str().to_string(),
        kind,
        confidence: (confidence * 100.0).round() / 100.0,
        title,
        evidence: Vec::new(),
        explanation: String::new(),
        fix: String::new(),
        because_of: None,
    }
}

/// What a server's error log said, for a finding: the count as a fact and one line
/// quoting it for the explanation. `None` when the class was not logged.
pub(super) fn logged(c: &Ctx, class: &str) -> Option<(u64, Fact, String)> {
    let (n, example) = c.log(class)?;
    let quote: String = example.chars().take(160).collect();
    Some((
        n,
        fact(&format!("error log lines \"{class}\""), n as f64, "lines"),
        match n {
            1 => format!(" The error log said so: `{quote}`."),
            _ => format!(" The error log said so {n} times, e.g. `{quote}`."),
        },
    ))
}

/// Busy processes that are neither the server nor loadlens on `cpu` (any CPU if None).
pub(super) fn competitors(c: &Ctx, cpu: Option<u32>) -> Vec<String> {
    busy_others(c, cpu, |_| true)
}

/// [`competitors`] but the load generator. loadlens's own watch knows this run's
/// process and leaves it out, so any other `loadlens` it lists is another run: other
/// work. A watch over ssh cannot tell this run's process from others of the name (on a
/// machine the load also runs on): those are taken for the load generator, which
/// shares the CPU as the load does and is not other work to move away.
pub(super) fn other_work(c: &Ctx, cpu: Option<u32>) -> Vec<String> {
    let remote = c.ev.is_some_and(|e| e.source.is_some());
    busy_others(c, cpu, |o| !remote || o.comm != "loadlens")
}

fn busy_others(
    c: &Ctx,
    cpu: Option<u32>,
    keep: impl Fn(&crate::run::OtherProcess) -> bool,
) -> Vec<String> {
    c.ev.map(|e| {
        e.window
            .other_processes
            .iter()
            .filter(|o| o.cpu_pct >= 20.0 && cpu.is_none_or(|x| x == o.last_cpu) && keep(o))
            .map(|o| format!("{} (pid {}, {:.0}% CPU)", o.comm, o.pid, o.cpu_pct))
            .collect()
    })
    .unwrap_or_default()
}

/// The busy processes on `cpu` when every one of them is already niced (and none is
/// SCHED_IDLE, which would not have delayed the worker): "sh (pid 12, nice 19)".
pub(super) fn already_niced(c: &Ctx, cpu: u32) -> Option<String> {
    let busy: Vec<_> = c
        .ev?
        .window
        .other_processes
        .iter()
        .filter(|o| o.cpu_pct >= 20.0 && o.last_cpu == cpu)
        .collect();
    (!busy.is_empty() && busy.iter().all(|o| o.nice > 0 && !o.sched_idle)).then(|| {
        busy.iter()
            .map(|o| format!("{} (pid {}, nice {})", o.comm, o.pid, o.nice))
            .collect::<Vec<_>>()
            .join(", ")
    })
}

#[cfg(test)]
mod tests {
    use super::{FindingId, ROWS};
    use crate::diagnose::testutil::fixture;

    /// Every id has its row (in the enum's order), its texts, its section and anchor in
    /// docs/findings.md, and a string that round-trips; the relations name other
    /// findings; an unknown id names the known ones.
    #[test]
    fn every_finding_has_its_row_texts_anchor_and_string() {
        let md = include_str!("../../../docs/findings.md");
        assert_eq!(FindingId::ALL.len(), ROWS.len());
        for (i, &id) in FindingId::ALL.iter().enumerate() {
            let row = id.row();
            assert_eq!((row.id, id as usize), (id, i));
            let s = id.as_str();
            assert_eq!(s.parse::<FindingId>().unwrap(), id);
            assert_eq!(id.to_string(), s);
            assert!(
                s.split('-')
                    .all(|w| !w.is_empty() && w.bytes().all(|b| b.is_ascii_lowercase())),
                "{s}: kebab-case"
            );
            assert!(row.means.len() > 20, "{s}");
            assert!(
                row.long.contains("Mechanism:") && row.long.contains("Fix:"),
                "{s}"
            );
            let anchor = crate::diagnose::catalog::anchor(s);
            assert!(
                md.contains(&format!("(#{anchor})")),
                "{s}: no link in docs/findings.md"
            );
            assert!(
                md.contains(&format!("\n## {s}\n")),
                "{s}: no section in docs/findings.md"
            );
            for e in row.explains {
                assert_ne!(e.consequence, id, "{s} explains itself");
                assert!(e.why.len() > 20, "{s} → {}", e.consequence);
            }
        }
        let err = "listen-queue-overflows".parse::<FindingId>().unwrap_err();
        assert!(err.to_string().contains("`listen-queue-overflows`"));
        assert!(
            err.to_string()
                .contains("listen-queue-overflow, syn-queue-overflow"),
            "{err}"
        );
    }

    /// Regression (healthy beside `nice -n 19` busy loop, kernel 6.18): the niced loop
    /// still took 73% of the worker's CPU and delayed it 209 ms/s; the fix said "lower
    /// its priority (nice)", which it already was. A niced competitor gets SCHED_IDLE.
    #[test]
    fn a_niced_competitor_is_told_sched_idle() {
        let mut run = fixture("cpu-contention-before");
        let find = |run: &crate::run::Run| {
            crate::diagnose::diagnose(run)
                .into_iter()
                .find(|f| f.id == "run-queue-delay")
                .unwrap()
        };
        assert!(find(&run).fix.contains("lower its priority"));
        for o in run
            .evidence
            .as_mut()
            .unwrap()
            .window
            .other_processes
            .iter_mut()
        {
            o.nice = 19;
        }
        let f = find(&run);
        assert!(f.fix.contains("SCHED_IDLE"), "{}", f.fix);
        assert!(f.fix.contains("nice 19"), "{}", f.fix);
    }

    #[test]
    fn another_loadlens_on_the_workers_cpu_is_other_work_unless_the_watch_was_remote() {
        use crate::diagnose::{diagnose, FindingId};
        use crate::run::{EvidenceSource, Kind, Run};
        // The recorded busy loop beside nginx's worker, renamed: another loadlens run.
        let mut run = fixture("cpu-contention-before");
        let ev = run.evidence.as_mut().unwrap();
        ev.window.other_processes[0].comm = "loadlens".into();
        let rqd = |run: &Run| {
            diagnose(run)
                .into_iter()
                .find(|f| f.id == FindingId::RunQueueDelay)
                .expect("run-queue-delay fires")
        };
        // loadlens's own watch leaves this run's process out: this one is another run.
        let local = rqd(&run);
        assert_eq!(local.kind, Kind::Bottleneck, "{local:?}");
        assert!(
            local.explanation.contains("loadlens (pid 10180"),
            "{}",
            local.explanation
        );
        assert!(
            !local.explanation.contains("load generator"),
            "{}",
            local.explanation
        );
        // Over ssh the watch cannot tell it from the load generator: a warning about
        // the sharing, not other work.
        run.evidence.as_mut().unwrap().source = Some(EvidenceSource::default());
        let remote = rqd(&run);
        assert_eq!(remote.kind, Kind::Warning, "{remote:?}");
        assert!(
            !remote.explanation.contains("pid 10180"),
            "{}",
            remote.explanation
        );
    }
}
