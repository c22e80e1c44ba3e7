//! Target discovery: from the URL's address (or `--server-pid` / `--server-name`) to the
//! listening socket and the processes that hold it — the nginx master, its workers —
//! plus the unix listeners those processes own (an upstream such as php-fpm's socket).

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

use crate::run::{Listener, ServerProcess, Topology};
use crate::sys::procfs::all_pid_stats;
use crate::sys::sockdiag::Diag;

/// What the user told loadlens about the server.
#[derive(Debug, Clone, Default)]
pub struct Hints {
    pub pids: Vec<i32>,
    pub names: Vec<String>,
}

/// Discovery result: the topology and warnings.
pub struct Found {
    pub topology: Topology,
    pub warnings: Vec<String>,
}

/// The processes named by `--server-pid` / `--server-name`, with a warning for each
/// hint that matched nothing. The first one's namespace is where counters are read.
pub fn hinted(hints: &Hints, warnings: &mut Vec<String>) -> BTreeSet<i32> {
    let procs = all_processes();
    let mut chosen: BTreeSet<i32> = BTreeSet::new();
    for p in &hints.pids {
        if procs.contains_key(p) {
            chosen.insert(*p);
        } else {
            warnings.push(format!("--server-pid {p}: no such process"));
        }
    }
    for n in &hints.names {
        let before = chosen.len();
        chosen.extend(procs.iter().filter(|(_, (_, c))| c == n).map(|(p, _)| *p));
        if chosen.len() == before {
            warnings.push(format!("--server-name {n}: no process with that name"));
        }
    }
    chosen
}

/// Every process: pid → (ppid, comm).
fn all_processes() -> BTreeMap<i32, (i32, String)> {
    all_pid_stats()
        .into_iter()
        .map(|(pid, s)| (pid, (s.ppid, s.comm)))
        .collect()
}

/// Socket inodes held by `pid` (from its fd links `socket:[INODE]`); `None` when the
/// fd directory cannot be read (another user's process without root).
pub fn socket_inodes(pid: i32) -> Option<BTreeSet<u64>> {
    let rd = std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?;
    Some(
        rd.flatten()
            .filter_map(|e| {
                let l = std::fs::read_link(e.path()).ok()?;
                let s = l.to_str()?;
                s.strip_prefix("socket:[")?.strip_suffix(']')?.parse().ok()
            })
            .collect(),
    )
}

/// Whether `ip` is an address of this host (loopback, or one a socket can bind to).
pub fn is_local(ip: IpAddr) -> bool {
    ip.is_loopback() || std::net::TcpListener::bind(SocketAddr::new(ip, 0)).is_ok()
}

fn listener_matches(l: &Listener, target: SocketAddr) -> bool {
    let Ok(a) = l.addr.parse::<SocketAddr>() else {
        return false;
    };
    a.port() == target.port() && (a.ip() == target.ip() || a.ip().is_unspecified())
}

/// Finds the server behind `target`. Runs in the thread that will sample, after it has
/// joined the server's network namespace (`netns` names it for people: `loadlens` or
/// `pid N`); `diag` is a sock_diag socket of that namespace, if one could be opened.
pub fn discover(
    target: SocketAddr,
    hinted: &BTreeSet<i32>,
    netns: &str,
    diag: Option<&mut Diag>,
) -> Found {
    let mut warnings = Vec::new();
    let procs = all_processes();
    let mut chosen = hinted.clone();
    let local = !chosen.is_empty() || is_local(target.ip());
    let mut topo = Topology {
        netns: netns.to_string(),
        ..Topology::default()
    };
    if !local {
        topo.summary = format!(
            "not watching the server: {} is not an address of this machine (give --server-pid if it runs here in another namespace)",
            target.ip()
        );
        return Found {
            topology: topo,
            warnings,
        };
    }
    let mut diag = diag;
    if let Some(d) = diag.as_deref_mut() {
        match d.tcp_listeners(Some(target.port())) {
            Ok(ls) => {
                topo.listeners = ls
                    .into_iter()
                    .filter(|l| listener_matches(l, target))
                    .collect()
            }
            Err(e) => warnings.push(format!("listen queues not watched: sock_diag failed ({e})")),
        }
    }

    // Processes holding the listening socket.
    let wanted: BTreeSet<u64> = topo.listeners.iter().map(|l| l.inode).collect();
    let mut unreadable = 0;
    if !wanted.is_empty() {
        for pid in procs.keys() {
            match socket_inodes(*pid) {
                Some(inodes) if !inodes.is_disjoint(&wanted) => {
                    chosen.insert(*pid);
                }
                Some(_) => {}
                None => unreadable += 1,
            }
        }
    }
    // A master's children are watched too (nginx workers, php-fpm children).
    let roots: Vec<i32> = chosen.iter().copied().collect();
    for (pid, (ppid, _)) in &procs {
        if roots.contains(ppid) {
            chosen.insert(*pid);
        }
    }
    for pid in &chosen {
        let Some((ppid, comm)) = procs.get(pid) else {
            continue;
        };
        let has_children = chosen
            .iter()
            .any(|c| procs.get(c).is_some_and(|(pp, _)| pp == pid));
        let role = if chosen.contains(ppid) {
            "worker"
        } else if has_children {
            "master"
        } else {
            "server"
        };
        topo.processes.push(ServerProcess {
            pid: *pid,
            ppid: *ppid,
            comm: comm.clone(),
            role: role.to_string(),
        });
    }

    // Unix listeners the watched processes hold (php-fpm's socket, for example).
    if let (Some(d), false) = (diag, topo.processes.is_empty()) {
        let mut held = BTreeSet::new();
        for p in &topo.processes {
            held.extend(socket_inodes(p.pid).unwrap_or_default());
        }
        if let Ok(us) = d.unix_listeners() {
            topo.unix_listeners = us.into_iter().filter(|u| held.contains(&u.inode)).collect();
        }
    }

    if let Some(m) = topo
        .processes
        .iter()
        .find(|p| p.comm == "nginx" && p.role != "worker")
    {
        match super::nginx::read(m.pid) {
            Ok(cfg) => topo.nginx = Some(cfg),
            Err(e) => warnings.push(format!("nginx configuration not read: {e}")),
        }
    }
    topo.summary = summarize(&topo, target);
    if topo.processes.is_empty() {
        let why = if topo.listeners.is_empty() {
            format!("no listening socket on port {} found", target.port())
        } else if unreadable > 0 && unsafe { libc::geteuid() } != 0 {
            "the processes holding it belong to another user (run as root, or give --server-pid)"
                .to_string()
        } else {
            "no process holding it was found".to_string()
        };
        topo.summary = format!("not watching server processes: {why}");
    }
    Found {
        topology: topo,
        warnings,
    }
}

fn summarize(t: &Topology, target: SocketAddr) -> String {
    let mut by_comm: BTreeMap<&str, (Vec<i32>, usize, usize)> = BTreeMap::new();
    for p in &t.processes {
        let e = by_comm.entry(p.comm.as_str()).or_default();
        match p.role.as_str() {
            "worker" => e.1 += 1,
            _ => {
                e.0.push(p.pid);
                e.2 += 1
            }
        }
    }
    let parts: Vec<String> = by_comm
        .iter()
        .map(|(comm, (masters, workers, _))| {
            let m = masters
                .iter()
                .map(|p| p.to_string())
                .collect::<Vec<_>>()
                .join(",");
            match (*workers, masters.is_empty()) {
                (0, _) => format!("{comm} {m}"),
                (w, true) => format!("{w} {comm} worker{}", if w == 1 { "" } else { "s" }),
                (w, false) => format!(
                    "{comm} master {m} + {w} worker{}",
                    if w == 1 { "" } else { "s" }
                ),
            }
        })
        .collect();
    let on = t
        .listeners
        .first()
        .map(|l| l.addr.clone())
        .unwrap_or_else(|| target.to_string());
    let mut s = format!("watching {} on {on}", parts.join(", "));
    if t.netns != "loadlens" {
        s.push_str(&format!(" (network namespace of {})", t.netns));
    }
    s
}
