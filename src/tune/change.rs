//! From a finding to a typed change: which server's file, which directive, its current
//! value read from the file itself and the new one computed from the evidence where the
//! evidence sizes it (Little's law for a pool, the connections for a connection limit).
//! A finding loadlens has no typed change for is said plainly, with the finding's own
//! fix, and tune stops there.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use std::sync::Arc;

use super::live::Host;
use crate::diagnose::FindingId;
use crate::kinds::{self, Server};
use crate::run::{Fact, Finding, Role, Run, ServerKind, Tier, TuneEdit};

/// A server process whose config tune may change.
#[derive(Clone)]
pub struct Target {
    pub server: &'static dyn Server,
    pub pid: i32,
    pub file: PathBuf,
    /// Where it runs: its files are read, written, tested and reloaded there.
    pub host: Arc<dyn Host>,
}

impl Target {
    /// The watched process of `kind` that owns a config (a master, or a server alone).
    pub fn find(
        run: &Run,
        kind: ServerKind,
        host: &Arc<dyn Host>,
    ) -> Option<anyhow::Result<Target>> {
        let topo = run.evidence.as_ref()?.topology.clone();
        let p = topo
            .processes
            .iter()
            .find(|p| p.kind == kind && p.role != Role::Worker)?;
        let server = kinds::of(kind)?;
        Some(host.config_file(server, p.pid).map(|file| Target {
            server,
            pid: p.pid,
            file,
            host: host.clone(),
        }))
    }

    /// The front server (the one serving the URL) tune can change.
    pub fn front(run: &Run, host: &Arc<dyn Host>) -> anyhow::Result<Target> {
        let topo = run
            .evidence
            .as_ref()
            .map(|e| e.topology.clone())
            .unwrap_or_default();
        let owner =
            |p: &&crate::run::ServerProcess| p.tier != Tier::Upstream && p.role != Role::Worker;
        let web = [
            crate::kinds::nginx::KIND,
            crate::kinds::apache::KIND,
            crate::kinds::haproxy::KIND,
        ];
        let p = topo
            .processes
            .iter()
            .filter(owner)
            .find(|p| web.contains(&p.kind))
            .or_else(|| topo.processes.iter().find(owner))
            .with_context(|| {
                format!(
                    "no server process was found serving the URL ({}): tune changes a server it watches; name it with --server-pid",
                    topo.summary
                )
            })?;
        let Some(server) = kinds::of(p.kind) else {
            bail!(
                "the server ({}, pid {}) is not one whose config tune knows how to change (nginx, php-fpm, Apache, HAProxy)",
                p.comm,
                p.pid
            );
        };
        Ok(Target {
            server,
            pid: p.pid,
            file: host.config_file(server, p.pid)?,
            host: host.clone(),
        })
    }
}

/// A change in the making: every file's text before and after, and its edits.
pub struct Change {
    pub finding: String,
    pub reason: String,
    pub evidence: Vec<Fact>,
    pub edits: Vec<TuneEdit>,
    /// Each file changed: (target, original text, changed text).
    pub files: BTreeMap<PathBuf, (Target, String, String)>,
}

impl Change {
    pub fn new(finding: &str, reason: String, evidence: Vec<Fact>) -> Change {
        Change {
            finding: finding.into(),
            reason,
            evidence,
            edits: Vec::new(),
            files: BTreeMap::new(),
        }
    }

    /// The directive `name` (whose value contains `matching`) in `t`'s files, first
    /// found: its file and value.
    pub fn current(
        &self,
        t: &Target,
        name: &str,
        matching: Option<&str>,
    ) -> Option<(PathBuf, String)> {
        for f in t.host.files(t.server, &t.file).ok()? {
            let text = self.text(t, &f).ok()?;
            if let Some(found) = kinds::find(t.server, &text, name, matching)
                .into_iter()
                .next()
            {
                return Some((f, found.value));
            }
        }
        None
    }

    fn text(&self, t: &Target, file: &Path) -> anyhow::Result<String> {
        match self.files.get(file) {
            Some((_, _, now)) => Ok(now.clone()),
            None => t.host.read(file),
        }
    }

    fn record(&mut self, t: &Target, file: &Path, now: String) -> anyhow::Result<()> {
        let original = match self.files.get(file) {
            Some((_, o, _)) => o.clone(),
            None => t.host.read(file)?,
        };
        self.files
            .insert(file.to_path_buf(), (t.clone(), original, now));
        Ok(())
    }

    /// Sets directive `name` to `new` where it is written; `false` when it is not.
    pub fn set(
        &mut self,
        t: &Target,
        name: &str,
        matching: Option<&str>,
        new: &str,
    ) -> anyhow::Result<bool> {
        let Some((file, old)) = self.current(t, name, matching) else {
            return Ok(false);
        };
        let text = self.text(t, &file)?;
        let (now, _) = kinds::set(t.server, &text, name, matching, new).expect("found above");
        self.record(t, &file, now)?;
        self.edits.push(TuneEdit::Directive {
            server: t.server.kind(),
            pid: t.pid,
            file: file.display().to_string(),
            directive: name.into(),
            old: Some(old),
            new: new.into(),
            block: None,
        });
        Ok(true)
    }

    /// Adds `name value` at the end of block `block` of `t`'s main file.
    pub fn add(
        &mut self,
        t: &Target,
        block: &str,
        name: &str,
        value: &str,
    ) -> anyhow::Result<bool> {
        let text = self.text(t, &t.file)?;
        let Some(now) = kinds::add(t.server, &text, block, name, value) else {
            return Ok(false);
        };
        self.record(t, &t.file.clone(), now)?;
        self.edits.push(TuneEdit::Directive {
            server: t.server.kind(),
            pid: t.pid,
            file: t.file.display().to_string(),
            directive: name.into(),
            old: None,
            new: value.into(),
            block: Some(block.into()),
        });
        Ok(true)
    }

    /// The unified diff of every file changed.
    pub fn diff(&self) -> String {
        let mut out = String::new();
        for (path, (_, old, new)) in &self.files {
            let p = path.display().to_string();
            let d = similar::TextDiff::from_lines(old, new);
            out.push_str(
                &d.unified_diff()
                    .context_radius(2)
                    .header(&format!("a{p}"), &format!("b{p}"))
                    .to_string(),
            );
        }
        out
    }
}

/// What tune does with a finding.
pub enum Plan {
    Change(Box<Change>),
    /// No typed change: why, in the finding's words.
    Nothing(String),
}

/// What plans need besides the Run.
pub struct Ask {
    pub allow_sysctl: bool,
    /// Where the server runs.
    pub host: Arc<dyn Host>,
}

fn pow2_at_least(n: u64) -> u64 {
    n.max(1).next_power_of_two()
}

fn num(v: &str) -> Option<u64> {
    v.split_whitespace().next()?.parse().ok()
}

/// The typed change for `f`, from the baseline `run`.
pub fn plan(run: &Run, f: &Finding, ask: &Ask) -> anyhow::Result<Plan> {
    let conns = run.spec.connections as u64;
    let good_per_s = good_per_s(run);
    let none = |what: &str| {
        Ok(Plan::Nothing(format!(
            "no typed change for {} ({what}); its fix: {}",
            f.id, f.fix
        )))
    };
    let mut c = Change::new(&f.id, String::new(), f.evidence.clone());
    let id = FindingId::of(f);
    match id {
        Some(FindingId::UpstreamSaturated) => {
            let Some(t) = Target::find(run, crate::kinds::php_fpm::KIND, &ask.host) else {
                return none("the upstream is not a php-fpm loadlens watches");
            };
            let t = t?;
            let Some((_, cur)) = c.current(&t, "pm.max_children", None) else {
                return none("pm.max_children is not in php-fpm's files");
            };
            let n = num(&cur).unwrap_or(5);
            // Little's law: n children busy serving `good_per_s` spend n ÷ rate each;
            // a closed loop keeps up to -c requests in flight, an open one rate × time.
            let each_s = n as f64 / good_per_s.max(1e-3);
            let want = match run.spec.rate {
                Some(r) => (r * each_s * 1.25).ceil() as u64,
                None => conns,
            }
            .clamp(n + 1, 1024);
            c.reason = format!(
                "php-fpm's {n} children served {good_per_s:.1} responses/s: {:.0} ms each (Little's law); {} requests in flight need as many children",
                each_s * 1000.0,
                want
            );
            c.set(&t, "pm.max_children", None, &want.to_string())?;
            // A dynamic pool starts `pm.start_servers` children and adds a few a second
            // (pm.max_spawn_rate): sized for the load from the reload on, it serves it
            // at once rather than growing into it.
            if c.current(&t, "pm", None)
                .is_some_and(|(_, v)| v == "dynamic")
            {
                for (k, v) in [
                    ("pm.start_servers", want),
                    ("pm.min_spare_servers", (want / 4).max(1)),
                    ("pm.max_spare_servers", want),
                ] {
                    if c.current(&t, k, None)
                        .is_some_and(|(_, cur)| num(&cur) < Some(v))
                    {
                        c.set(&t, k, None, &v.to_string())?;
                    }
                }
            }
        }
        Some(FindingId::ConnectionLimit | FindingId::FdLimit) => {
            let t = Target::front(run, &ask.host)?;
            let want = pow2_at_least(conns * 4).max(4096);
            let done = match (t.server.kind(), id) {
                (crate::kinds::nginx::KIND, Some(FindingId::FdLimit)) => {
                    c.reason = format!("{conns} connections need as many open files in a worker (and more for upstreams and logs): worker_rlimit_nofile {}", want * 2);
                    c.set(&t, "worker_rlimit_nofile", None, &(want * 2).to_string())?
                        || c.add(&t, "", "worker_rlimit_nofile", &(want * 2).to_string())?
                }
                (crate::kinds::nginx::KIND, _) => {
                    c.reason = format!("{conns} connections are more than a worker may hold: worker_connections {want}");
                    c.set(&t, "worker_connections", None, &want.to_string())?
                }
                (crate::kinds::haproxy::KIND, _) => {
                    c.reason = format!(
                        "{conns} connections are more than HAProxy's maxconn: maxconn {want}"
                    );
                    c.set(&t, "maxconn", None, &want.to_string())?
                }
                (crate::kinds::apache::KIND, _) => return apache_workers(run, f, &t, conns),
                _ => false,
            };
            if !done {
                return none("the directive is not written in the server's config file");
            }
        }
        Some(FindingId::ListenQueueOverflow) => {
            let t = Target::front(run, &ask.host)?;
            let want = pow2_at_least(conns * 2).max(4096);
            let ns_pid = t.pid;
            let somax: u64 = ask
                .host
                .sysctl(ns_pid, "net.core.somaxconn", None)
                .ok()
                .and_then(|v| v.parse().ok())
                .unwrap_or(4096);
            let port = format!(":{}", run.target_addr.rsplit(':').next().unwrap_or(""));
            let done = match t.server.kind() {
                crate::kinds::nginx::KIND => match c.current(&t, "listen", Some(&port)) {
                    Some((_, v)) => {
                        let words: Vec<String> = v
                            .split_whitespace()
                            .filter(|w| !w.starts_with("backlog="))
                            .map(String::from)
                            .collect();
                        let new = format!("{} backlog={want}", words.join(" "));
                        c.set(&t, "listen", Some(&port), &new)?
                    }
                    None => false,
                },
                crate::kinds::haproxy::KIND => c.set(&t, "maxconn", None, &want.to_string())?,
                crate::kinds::apache::KIND => {
                    c.set(&t, "ListenBacklog", None, &want.to_string())?
                        || c.add(&t, "", "ListenBacklog", &want.to_string())?
                }
                _ => false,
            };
            if !done {
                return none("the listen directive is not written in the server's config file");
            }
            c.reason = format!("the accept queue overflowed: a listen backlog of {want}");
            if somax < want {
                if !ask.allow_sysctl {
                    return Ok(Plan::Nothing(format!(
                        "the backlog the kernel grants is min(backlog, net.core.somaxconn = {somax}): raising the backlog alone changes nothing; give --allow-sysctl to raise net.core.somaxconn to {want} too (restored at the end)"
                    )));
                }
                c.reason.push_str(&format!(
                    ", with net.core.somaxconn {somax} → {want} (the kernel grants min of the two)"
                ));
                c.edits.insert(
                    0,
                    TuneEdit::Sysctl {
                        pid: ns_pid,
                        key: "net.core.somaxconn".into(),
                        old: somax.to_string(),
                        new: want.to_string(),
                    },
                );
            }
        }
        Some(FindingId::EphemeralPortsExhausted | FindingId::TimeWaitConnectCost) => {
            let t = Target::front(run, &ask.host)?;
            if t.server.kind() != crate::kinds::nginx::KIND {
                return none("upstream keep-alive is typed for nginx only");
            }
            let Some((_, pass)) = c.current(&t, "proxy_pass", None) else {
                return none("no proxy_pass in nginx's config file");
            };
            let name = pass
                .trim_start_matches("http://")
                .split(['/', ':'])
                .next()
                .unwrap_or("")
                .to_string();
            let text = t.host.read(&t.file)?;
            let in_block = kinds::find(t.server, &text, "keepalive", None)
                .iter()
                .any(|k| {
                    k.block
                        .last()
                        .is_some_and(|b| *b == format!("upstream {name}"))
                });
            if in_block || c.current(&t, "proxy_http_version", Some("1.1")).is_none() {
                return none("the upstream block already keeps connections, or the proxy does not speak HTTP/1.1 to it");
            }
            c.reason = format!("every upstream request opens a new connection: `keepalive 32` in `upstream {name}` reuses them (with keepalive_requests high so they are not closed every 1000 requests)");
            if !c.add(&t, &format!("upstream {name}"), "keepalive", "32")? {
                return none("proxy_pass names no upstream block");
            }
            c.add(
                &t,
                &format!("upstream {name}"),
                "keepalive_requests",
                "1000000",
            )?;
        }
        Some(FindingId::ServerCpuSaturated | FindingId::CompressionCpu) => {
            let t = Target::front(run, &ask.host)?;
            let level = c
                .current(&t, "gzip_comp_level", None)
                .and_then(|(_, v)| num(&v));
            match level {
                Some(l) if l > 1 && t.server.kind() == crate::kinds::nginx::KIND => {
                    c.reason = format!("the workers' CPU is used up and each response is compressed at gzip_comp_level {l}: level 1 gives nearly the same bytes for a fraction of the CPU");
                    c.set(&t, "gzip_comp_level", None, "1")?;
                }
                _ => return none("no compression level to lower in the server's config"),
            }
        }
        Some(FindingId::SmallProxyBuffers) => {
            let t = Target::front(run, &ask.host)?;
            if c.current(&t, "proxy_buffers", None).is_none() {
                return none("proxy_buffers is not written in nginx's config file");
            }
            c.reason = "the proxy reads its upstream's responses 4 KiB at a time: buffers of 128 KiB read them in a few calls".into();
            c.set(&t, "proxy_buffers", None, "8 128k")?;
            c.set(&t, "proxy_buffer_size", None, "128k")?;
            c.set(&t, "proxy_busy_buffers_size", None, "128k")?;
        }
        _ => return none("not a setting of the server's config"),
    }
    Ok(Plan::Change(Box::new(c)))
}

/// Apache's worker pool: `MaxRequestWorkers` raised within what a graceful restart can
/// give (`ServerLimit` × `ThreadLimit`, read only at a full start).
fn apache_workers(run: &Run, f: &Finding, t: &Target, conns: u64) -> anyhow::Result<Plan> {
    let mut c = Change::new(&f.id, String::new(), f.evidence.clone());
    let get = |c: &Change, n: &str, d: u64| {
        c.current(t, n, None)
            .and_then(|(_, v)| num(&v))
            .unwrap_or(d)
    };
    let (sl, tl) = (get(&c, "ServerLimit", 16), get(&c, "ThreadLimit", 64));
    let mrw = get(&c, "MaxRequestWorkers", sl * get(&c, "ThreadsPerChild", 25));
    let cap = sl * tl;
    let want = (conns + conns / 4).min(cap);
    let _ = run;
    if want <= mrw {
        return Ok(Plan::Nothing(format!(
            "no typed change for {}: MaxRequestWorkers {mrw} is already what ServerLimit {sl} × ThreadLimit {tl} allow, and Apache reads those two only at a full start (not on a graceful restart); its fix: {}",
            f.id, f.fix
        )));
    }
    c.reason = format!("{conns} connections wait for {mrw} workers: MaxRequestWorkers {want} (ServerLimit {sl} × ThreadLimit {tl} allow {cap})");
    c.set(t, "MaxRequestWorkers", None, &want.to_string())?;
    let tpc = want.div_ceil(sl);
    c.set(t, "ThreadsPerChild", None, &tpc.to_string())?;
    Ok(Plan::Change(Box::new(c)))
}

/// `--try 'directive value'`: set in the front server's files, else an upstream's.
pub fn tried(run: &Run, directive: &str, value: &str, ask: &Ask) -> anyhow::Result<Plan> {
    let mut c = Change::new(
        "--try",
        format!("asked for: `{directive} {value}`"),
        Vec::new(),
    );
    let mut targets = vec![Target::front(run, &ask.host)?];
    for k in [
        crate::kinds::php_fpm::KIND,
        crate::kinds::nginx::KIND,
        crate::kinds::apache::KIND,
        crate::kinds::haproxy::KIND,
    ] {
        if let Some(Ok(t)) = Target::find(run, k, &ask.host) {
            targets.push(t);
        }
    }
    for t in &targets {
        if c.set(t, directive, None, value)? {
            return Ok(Plan::Change(Box::new(c)));
        }
    }
    bail!(
        "--try: `{directive}` is not written in {}: tune changes directives that are there (add it yourself first, or check its spelling)",
        targets
            .iter()
            .map(|t| t.file.display().to_string())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// 2xx/3xx responses per second of a Run.
pub fn good_per_s(run: &Run) -> f64 {
    let r = &run.results;
    r.responses.saturating_sub(r.non_2xx_3xx) as f64 / r.duration_s.max(1e-9)
}
