//! `loadlens lab tune NAME`: a scenario's fault world, and `loadlens tune --apply`
//! run against it from the client namespace, as a user would run it. Afterwards the lab
//! says whether each config file the world started with is byte-identical to how it
//! started and whether the server still serves — what a tune test asserts.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;

use super::world::World;
use crate::diagnose::FindingId;

/// How to run `lab tune`.
pub struct TuneOptions {
    pub duration: Duration,
    /// `--try 'directive value'`, passed on.
    pub try_change: Option<String>,
    pub pairs: u32,
    /// Write the session's Run here.
    pub json: Option<PathBuf>,
    /// `--objective`; by default the one that measures the scenario's fault (see
    /// [`objective`]).
    pub objective: Option<String>,
    /// Dry run: tune without `--apply`.
    pub dry_run: bool,
    /// Tune over ssh (`--watch ssh://`): the world's own sshd in the server namespace,
    /// the config changed through it.
    pub watch_ssh: bool,
    pub verbose: bool,
}

/// What measures a fault's harm, by the finding it produces: a connection or
/// open-files limit costs failed requests (and, with them, a rate that swings with how
/// the client's reconnects fall). Anything else: throughput, tune's default.
/// (listen-backlog's fix, measured: neither rate nor p99 gains — p99 ×10 worse with
/// 4096 connections queued instead of 10 — and tune reverts it.)
pub fn objective(expected_finding: &str) -> Option<&'static str> {
    match expected_finding.parse() {
        Ok(FindingId::ConnectionLimit | FindingId::FdLimit) => Some("errors<1%"),
        _ => None,
    }
}

/// Every file of the world whose path `keep` accepts, with its bytes and mtime.
fn files(w: &World, keep: fn(&Path) -> bool) -> Vec<(PathBuf, Vec<u8>, std::time::SystemTime)> {
    let mut out = Vec::new();
    let mut dirs = vec![w.dir.clone()];
    while let Some(d) = dirs.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                dirs.push(p);
            } else if keep(&p) {
                if let (Ok(b), Ok(m)) = (std::fs::read(&p), e.metadata()) {
                    out.push((p, b, m.modified().unwrap_or(std::time::UNIX_EPOCH)));
                }
            }
        }
    }
    out.sort();
    out
}

/// Every config file of the world (`*.conf`, `*.cfg`) and its bytes.
fn configs(w: &World) -> Vec<(PathBuf, Vec<u8>, std::time::SystemTime)> {
    files(w, |p| {
        p.extension().is_some_and(|x| x == "conf" || x == "cfg")
    })
}

/// The last lines of the world's servers' error logs, for a server that stopped
/// serving: what it said is the first thing to read.
fn error_log_tails(w: &World) -> String {
    let mut out = String::new();
    for (p, bytes, _) in files(w, |p| p.file_name().is_some_and(|n| n == "error.log")) {
        let text = String::from_utf8_lossy(&bytes);
        let lines: Vec<&str> = text.lines().collect();
        out.push_str(&format!("lab: the last lines of {}:\n", p.display()));
        for l in &lines[lines.len().saturating_sub(15)..] {
            out.push_str(&format!("  {l}\n"));
        }
    }
    out
}

/// Builds scenario `name`'s fault, runs tune against it, reports the files and the
/// server afterwards. Returns tune's exit code.
pub fn tune(name: &str, o: &TuneOptions) -> anyhow::Result<u8> {
    let sc = super::find(name)?;
    let stop = Arc::new(AtomicBool::new(false));
    let which = Arc::new(AtomicUsize::new(0));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
        signal_hook::flag::register_usize(sig, which.clone(), sig as usize)?;
    }
    let mut w = World::new(sc.name, o.verbose)?;
    let setup = (sc.build)(&mut w, false)
        .with_context(|| format!("building scenario {} (fault)", sc.name))?;
    let remote = if o.watch_ssh {
        super::ssh::serve(&mut w)?
    } else {
        Vec::new()
    };
    let before = configs(&w);
    let exe = std::env::current_exe().context("cannot find the loadlens binary")?;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &w.client()]);
    let dur = format!("{}ms", o.duration.as_millis());
    cmd.args(&setup.client_prefix)
        .arg(&exe)
        .args([
            "tune",
            &setup.url,
            "-d",
            &dur,
            "--pause",
            "500ms",
            "--allow-sysctl",
        ])
        .args(["--pairs", &o.pairs.to_string()])
        .args(&setup.args)
        .args(&remote)
        // tune's locks and backups in the world (removed with it).
        .env("LOADLENS_STATE_DIR", &w.dir);
    if !o.dry_run {
        cmd.arg("--apply");
    }
    let objective = o.objective.as_deref().or(objective(sc.expected_finding));
    if let Some(obj) = objective {
        cmd.args(["--objective", obj]);
    }
    if let Some(t) = &o.try_change {
        cmd.args(["--try", t]);
    }
    if let Some(j) = &o.json {
        cmd.arg("--json").arg(j);
    }
    for p in &setup.server_pids {
        cmd.args(["--server-pid", &p.to_string()]);
    }
    if let Some(procs) = &setup.client_cgroup {
        super::world::join_cgroup(&mut cmd, procs)?;
    }
    if o.verbose {
        eprintln!("+ {cmd:?}");
    }
    let mut child = cmd
        .spawn()
        .context("cannot run loadlens tune in the client namespace")?;
    // A signal to the lab goes on to tune (it puts the config back first), as `lab run`
    // forwards Ctrl-C.
    let mut forwarded = false;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if stop.load(Ordering::Relaxed) && !forwarded {
            let sig = which.load(Ordering::Relaxed) as i32;
            // SAFETY: kill(2) on the child we started (ip execs loadlens: same pid).
            unsafe {
                libc::kill(child.id() as i32, if sig == 0 { libc::SIGINT } else { sig });
            }
            forwarded = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(setup.beside);
    let after = configs(&w);
    println!();
    for (p, bytes, mtime) in &before {
        let now = after.iter().find(|(q, _, _)| q == p);
        let word = match now {
            Some((_, b, m)) if b == bytes && m == mtime => "unchanged (content and mtime)",
            Some((_, b, _)) if b == bytes => "byte-identical to the original",
            Some(_) => "changed",
            None => "gone",
        };
        println!("lab: {} {word}", p.display());
    }
    let url = setup.url.clone();
    let serves = super::world::in_netns(&format!("/run/netns/{}", w.client()), move || {
        crate::tune::live::serving(&url).map_err(|e| format!("{e:#}"))
    })?;
    match &serves {
        Ok(code) => println!("lab: the server serves {} (status {code})", setup.url),
        Err(e) => println!("lab: the server does NOT serve: {e}"),
    }
    let code = status.code().map(|c| c as u8).unwrap_or_else(|| {
        128 + std::os::unix::process::ExitStatusExt::signal(&status).unwrap_or(0) as u8
    });
    // Whatever went wrong, the servers' own words about it (a failed reload, a worker
    // that could not take over: a tune test's failure shows them).
    if code != 0 || serves.is_err() {
        print!("{}", error_log_tails(&w));
    }
    Ok(code)
}
