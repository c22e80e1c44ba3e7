//! What the rules read: the Run and its evidence behind helpers that name what each
//! rule asks (a counter's delta, a sysctl, the front workers, the server's CPUs…).

use super::kinds;
use crate::run::Counter;
use crate::run::{Evidence, OffCpu, ProcRates, Role, Run, ServerKind, Tier};

/// Read-only helpers over a Run for the rules.
pub(crate) struct Ctx<'a> {
    pub run: &'a Run,
    pub ev: Option<&'a Evidence>,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(run: &'a Run) -> Self {
        Ctx {
            run,
            ev: run.evidence.as_ref(),
        }
    }

    /// A window counter delta (`Counter::ListenOverflows`), 0 when absent.
    pub fn counter(&self, counter: Counter) -> u64 {
        self.ev
            .and_then(|e| e.window.counters.get(counter.key()).copied())
            .unwrap_or(0)
    }

    pub fn sysctl(&self, key: &str) -> Option<&'a str> {
        self.ev
            .and_then(|e| e.host.sysctls.get(key))
            .map(|s| s.as_str())
    }

    pub fn duration_s(&self) -> f64 {
        self.run.results.duration_s.max(1e-9)
    }

    pub fn responses(&self) -> u64 {
        self.run.results.responses
    }

    /// The watched server processes over the window.
    pub fn procs(&self) -> &'a [ProcRates] {
        self.ev
            .map(|e| e.window.processes.as_slice())
            .unwrap_or(&[])
    }

    /// The processes doing the serving: workers where there are some (nginx workers,
    /// php-fpm children), else every watched process.
    pub fn workers(&self) -> Vec<&'a ProcRates> {
        let w: Vec<&ProcRates> = self
            .procs()
            .iter()
            .filter(|p| p.role == Role::Worker)
            .collect();
        if w.is_empty() {
            self.procs().iter().collect()
        } else {
            w
        }
    }

    /// The workers of the process serving the URL: the `front` tier, or in Runs
    /// recorded before tiers, the first watched comm.
    pub fn front_workers(&self) -> Vec<&'a ProcRates> {
        let tiered = self.procs().iter().any(|p| p.tier != Tier::Unknown);
        let front = self
            .ev
            .and_then(|e| e.topology.processes.first())
            .map(|p| p.comm.clone());
        self.workers()
            .into_iter()
            .filter(|p| {
                if tiered {
                    p.tier == Tier::Front
                } else {
                    front.as_deref().is_none_or(|c| c == p.comm)
                }
            })
            .collect()
    }

    /// The pids of [`Ctx::front_workers`].
    pub fn front_pids(&self) -> Vec<i32> {
        self.front_workers().iter().map(|p| p.pid).collect()
    }

    /// The off-CPU time of the server threads, when it was watched.
    pub fn offcpu(&self) -> Option<&'a OffCpu> {
        self.ev?.offcpu.as_ref()
    }

    /// The values of a directive in the front server's configuration (none when the
    /// configuration was not read).
    pub fn directive(&self, name: &str) -> &'a [String] {
        self.ev
            .and_then(|e| e.topology.config.as_ref())
            .and_then(|c| c.directives.get(name))
            .map_or(&[], Vec::as_slice)
    }

    /// The processes behind the front (php-fpm, a backend), when any were watched.
    pub fn upstream_procs(&self) -> Vec<&'a ProcRates> {
        self.procs()
            .iter()
            .filter(|p| p.tier == Tier::Upstream)
            .collect()
    }

    /// A class of message in the servers' error logs over the window: its count over
    /// every log, and the first example.
    pub fn log(&self, class: &str) -> Option<(u64, &'a str)> {
        let mut hits = self
            .ev?
            .logs
            .iter()
            .flat_map(|l| l.classes.iter())
            .filter(|c| c.class == class)
            .peekable();
        let example = hits.peek()?.example.as_str();
        Some((hits.map(|c| c.count).sum(), example))
    }

    /// Mean response size (bytes read per response), or 0.
    pub fn response_bytes(&self) -> f64 {
        let r = &self.run.results;
        if r.responses == 0 {
            0.0
        } else {
            r.bytes_read as f64 / r.responses as f64
        }
    }

    /// Connections the server's side opened (Tcp.ActiveOpens), less loadlens's own when
    /// both share a network namespace: connections to an upstream.
    pub fn upstream_opens(&self) -> u64 {
        let active = self.counter(Counter::ActiveOpens);
        let shared_ns = self.ev.is_some_and(|e| e.topology.netns == "loadlens");
        if shared_ns {
            active.saturating_sub(self.run.results.connections_opened)
        } else {
            active
        }
    }

    /// Whether the front forwards requests to an upstream: from its configuration when
    /// it was read (`proxy_pass`, `fastcgi_pass`…: counters of a shared network
    /// namespace carry other processes' connections), else from upstream processes or
    /// connections opened.
    pub fn proxies(&self) -> bool {
        if !self.upstream_procs().is_empty() {
            return true;
        }
        match self.ev.and_then(|e| e.topology.config.as_ref()) {
            Some(cfg) => !cfg.upstreams.is_empty(),
            None => self.upstream_opens() > 0,
        }
    }

    /// A directive's values in nginx's running configuration, joined with ` | `: outer
    /// `None` when nginx's configuration was not read (or the server is not nginx),
    /// inner `None` when the directive is not set.
    pub fn nginx(&self, directive: &str) -> Option<Option<String>> {
        let cfg = self.ev?.topology.config.as_ref()?;
        (cfg.kind == crate::kinds::nginx::KIND).then(|| cfg.get(directive))
    }

    /// A directive's values in the front server's configuration, whatever the server:
    /// outer `None` when no configuration was read.
    pub fn setting(&self, directive: &str) -> Option<Option<String>> {
        let cfg = self.ev?.topology.config.as_ref()?;
        Some(cfg.get(directive))
    }

    /// `(now …)` for a fix, from the server's configuration, or "" when unknown.
    pub fn now(&self, directive: &str) -> String {
        match self.setting(directive) {
            Some(Some(v)) => format!(" (now `{directive} {v}`)"),
            Some(None) => format!(" (now `{directive}` is not set)"),
            None => String::new(),
        }
    }

    /// Which server serves the URL: the kind of the front's processes (its master
    /// first), `Unknown` when nothing was watched or in Runs recorded before kinds.
    pub fn front_kind(&self) -> ServerKind {
        let Some(e) = self.ev else {
            return ServerKind::UNKNOWN;
        };
        e.topology
            .processes
            .iter()
            .filter(|p| p.tier != Tier::Upstream)
            .map(|p| p.kind)
            .find(|k| *k != ServerKind::UNKNOWN)
            .unwrap_or(ServerKind::UNKNOWN)
    }

    /// Whether the front serves one request per thread or process of a pool (its
    /// concurrency is a pool: Apache's MaxRequestWorkers, a servlet container's
    /// maxThreads), not connections multiplexed on an event loop.
    pub fn front_is_a_pool(&self) -> bool {
        crate::diagnose::kinds::knob(self.front_kind(), crate::kinds::Knob::Pool).is_some()
    }

    /// The kind of the upstream's processes (php-fpm, a backend), when any were watched.
    pub fn upstream_kind(&self) -> ServerKind {
        self.upstream_procs()
            .first()
            .map(|p| p.kind)
            .unwrap_or(ServerKind::UNKNOWN)
    }

    /// The front server's own words for sizing `knob`, with its current value when the
    /// configuration was read: "`MaxRequestWorkers` (…) (now `MaxRequestWorkers 8`)".
    pub fn knob(&self, knob: kinds::Knob) -> Option<String> {
        let kind = self.front_kind();
        let phrase = kinds::knob(kind, knob)?;
        let now = kinds::setting(kind, knob)
            .map(|d| self.now(d))
            .unwrap_or_default();
        Some(format!("{phrase}{now}"))
    }

    /// The watched process closest to its open-files limit, and how full (most fds held
    /// during the run ÷ soft limit).
    pub fn fd_fill(&self) -> Option<(&'a ProcRates, f64)> {
        self.procs()
            .iter()
            .filter_map(|p| Some((p, p.fds_peak()? as f64 / p.fd_limit? as f64)))
            .max_by(|a, b| a.1.total_cmp(&b.1))
    }

    /// A per-worker connection limit (nginx's `worker_connections`: each connection is
    /// an fd of the worker) and the most fds a front worker held, when both are known.
    pub fn worker_connections_fill(&self) -> Option<(&'a ProcRates, u64, u64)> {
        let limit: u64 = self
            .nginx("worker_connections")??
            .split_whitespace()
            .next()?
            .parse()
            .ok()?;
        let w = self
            .front_workers()
            .into_iter()
            .max_by_key(|p| p.fds_peak().unwrap_or(0))?;
        Some((w, w.fds_peak()?, limit))
    }

    /// The CPUs both loadlens and the server may run on (their affinity masks
    /// intersected): empty when they are kept apart, `None` when either is unknown.
    pub fn shared_cpus(&self) -> Option<Vec<u32>> {
        let h = &self.ev?.host;
        if h.loadgen_cpus.is_empty() || h.server_cpus.is_empty() {
            return None;
        }
        Some(
            h.loadgen_cpus
                .iter()
                .filter(|c| h.server_cpus.contains(c))
                .copied()
                .collect(),
        )
    }

    /// The cores a worker can use: one for a single-threaded event loop, one per thread
    /// for a threaded one (Apache's mpm_event, HAProxy's nbthread), at most the CPUs
    /// the server may use.
    pub fn worker_cores(&self, p: &ProcRates) -> f64 {
        p.threads.clamp(1, self.server_cpus() as u64) as f64
    }

    /// A worker's CPU demand as a share of the cores it can use, percent, over the load
    /// (see [`Ctx::window_over_load`]).
    pub fn worker_cpu_share(&self, p: &ProcRates) -> f64 {
        p.cpu_demand_pct() * self.window_over_load() / self.worker_cores(p)
    }

    /// The watch's window over the load's duration (1 to 1.25): the window's rates are
    /// over a span that begins before the load and ends after it, longer still when the
    /// watch waited for a CPU, while a server loaded by the run did its work inside the
    /// load. A 1 s load of an nginx worker compressing at gzip level 9 beside other
    /// loads: 11% on a CPU and 76% waiting for one over a 1.2 s window, all of it in the
    /// load's second.
    pub fn window_over_load(&self) -> f64 {
        let window = self.ev.map_or(0.0, |e| e.window.duration_s);
        let load = self.run.results.duration_s;
        if window > 0.0 && load > 0.0 {
            (window / load).clamp(1.0, 1.25)
        } else {
            1.0
        }
    }

    /// How close a worker is to its CPU limit, percent: its busiest thread when that one
    /// thread is at a core's limit and ahead of the process's share (an event loop, e.g.
    /// Node's main thread, holds the pace however idle the other threads are), else its
    /// CPU share of the cores it can use.
    pub fn worker_load_pct(&self, p: &ProcRates) -> f64 {
        match self.one_thread_bound(p) {
            Some(t) => t,
            None => self.worker_cpu_share(p),
        }
    }

    /// The busiest thread's CPU when that one thread holds the worker at a core's limit.
    pub fn one_thread_bound(&self, p: &ProcRates) -> Option<f64> {
        p.busiest_thread_pct
            .filter(|t| *t >= 90.0 && *t >= self.worker_cpu_share(p))
    }

    /// The CPUs the server may use: its workers' affinity where known, else every
    /// online CPU.
    pub fn server_cpus(&self) -> u32 {
        self.ev
            .map(|e| match e.host.server_cpus.len() {
                0 => e.host.cpus,
                n => n as u32,
            })
            .unwrap_or(1)
            .max(1)
    }
}

#[cfg(test)]
mod tests {
    use crate::diagnose::testutil::{fires, fixture};

    /// tests/tune.rs beside other test binaries: a 1 s load of a worker compressing at
    /// gzip level 9, 11% on a CPU and 76% waiting for one over a 1.2 s window (the watch
    /// itself late), and no bottleneck was found. Its demand over the load is what counts;
    /// over a window as long as the load, 87% is not saturated.
    #[test]
    fn a_workers_demand_counts_over_the_load_not_the_watchs_window() {
        let mut run = fixture("gzip-cpu-before");
        run.results.duration_s = 1.0;
        let ev = run.evidence.as_mut().unwrap();
        ev.window.duration_s = 1.2;
        for p in ev.window.processes.iter_mut() {
            if p.role == crate::run::Role::Worker {
                p.cpu_pct = 11.3;
                p.run_delay_ms_per_s = Some(757.0);
            }
        }
        assert!(fires(&run, "server-cpu-saturated"));
        run.evidence.as_mut().unwrap().window.duration_s = 1.0;
        assert!(!fires(&run, "server-cpu-saturated"));
    }
}
