//! `loadlens lab`: the published nginx setups rebuilt in network namespaces, each with a
//! known fault and its fix. loadlens runs against each from the client namespace with
//! the server's processes watched; `--fix` rebuilds the world with the fix and shows
//! before/after. It is the demo and the integration test suite of the diagnosis.

pub mod caddy;
pub mod disk;
pub mod jvm;
pub mod other_servers;
pub mod path_scenarios;
pub mod quic;
pub mod scenario;
pub mod scenarios;
pub mod servers;
pub mod ssh;
pub mod tail_scenarios;
pub mod testbed;
pub mod time_scenarios;
pub mod tune;
pub mod wait_scenarios;
pub mod world;

pub use time_scenarios::BUSY_LOOP;

use std::fmt::Write as _;
use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{bail, Context};

use crate::run::Run;
use crate::units::fmt_us;
use scenario::Scenario;
use world::World;

/// How to run a scenario.
#[derive(Debug, Clone)]
pub struct LabOptions {
    pub fix: bool,
    pub duration: Duration,
    pub keep: bool,
    pub verbose: bool,
    /// Write each Run's JSON here: `<dir>/<scenario>-before.json`, `-after.json`.
    pub json_dir: Option<std::path::PathBuf>,
    /// Print loadlens's own report of each run.
    pub show_runs: bool,
    /// Profile the server (on by default; `--no-profile`); with `json_dir` the flame
    /// graphs go there too, `<scenario>-before.svg`.
    pub profile: bool,
    /// Watch where the server's threads slept (`--no-offcpu`): their context switches
    /// with `profile`, their states sampled from /proc without.
    pub offcpu: bool,
    /// Watch the server namespace over ssh, through an sshd of the world's own
    /// (`--watch-ssh`), instead of from the client's.
    pub watch_ssh: bool,
    /// `--param KEY=VALUE`: the fault's parameters (a scenario with a range, e.g.
    /// `thread-pool`'s `threads`), the same before and after the fix.
    pub params: Vec<(String, String)>,
}

/// What a lab run produced.
pub struct LabResult {
    pub before: Run,
    pub after: Option<Run>,
}

pub fn find(name: &str) -> anyhow::Result<Scenario> {
    let all = scenarios::all();
    let names: Vec<&str> = all.iter().map(|s| s.name).collect();
    let joined = names.join(", ");
    all.into_iter()
        .find(|s| s.name == name)
        .with_context(|| format!("no scenario `{name}`; scenarios: {joined}"))
}

/// The `lab list` table.
pub fn list() -> String {
    let mut o = String::new();
    for s in scenarios::all() {
        let _ = writeln!(o, "{:<18} {}", s.name, s.summary);
        let _ = writeln!(o, "{:<18} source: {}", "", s.source);
    }
    o
}

/// Builds the world (with or without the fix) and runs loadlens against it.
fn run_once(
    sc: &Scenario,
    fixed: bool,
    opts: &LabOptions,
    stop: &AtomicBool,
) -> anyhow::Result<Run> {
    let mut w = World::new(sc.name, opts.verbose)?;
    w.params = opts
        .params
        .iter()
        .map(|(k, v)| (k.clone(), v.clone(), false))
        .collect();
    let setup = (sc.build)(&mut w, fixed).with_context(|| {
        format!(
            "building scenario {} ({})",
            sc.name,
            if fixed { "fixed" } else { "fault" }
        )
    })?;
    if let Some(p) = w.unread_params().first() {
        bail!(
            "scenario {} has no parameter `{p}` (see `loadlens lab list` for each scenario's parameters)",
            sc.name
        );
    }
    let remote = if opts.watch_ssh {
        ssh::serve(&mut w)?
    } else {
        Vec::new()
    };
    if stop.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    let json = w.dir.join(if fixed { "after.json" } else { "before.json" });
    let exe = std::env::current_exe().context("cannot find the loadlens binary")?;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &w.client()]);
    let dur = format!("{}ms", opts.duration.as_millis());
    cmd.args(&setup.client_prefix)
        .arg(&exe)
        .args(["run", &setup.url, "-d", &dur, "--latency", "--json"])
        .arg(&json)
        .args(&setup.args)
        .args(&remote);
    if let Some(procs) = &setup.client_cgroup {
        world::join_cgroup(&mut cmd, procs)?;
    }
    for p in &setup.server_pids {
        cmd.args(["--server-pid", &p.to_string()]);
    }
    let stage = if fixed { "after" } else { "before" };
    if opts.profile {
        match &opts.json_dir {
            Some(dir) => {
                cmd.arg("--flamegraph")
                    .arg(dir.join(format!("{}-{stage}.svg", sc.name)));
            }
            None => {
                cmd.arg("--profile");
            }
        }
    }
    if !opts.offcpu && !setup.args.iter().any(|a| a == "--no-offcpu") {
        cmd.arg("--no-offcpu");
    }
    if !opts.show_runs {
        cmd.arg("-q");
    }
    if opts.verbose {
        eprintln!("+ {cmd:?}");
    }
    let mut child = cmd
        .spawn()
        .context("cannot run loadlens in the client namespace")?;
    // Ctrl-C reaches loadlens through us (it may not share our terminal): forward it,
    // so the run ends early, reports, and the world is removed.
    let mut forwarded = false;
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if stop.load(Ordering::Relaxed) && !forwarded {
            forward_interrupt(child.id() as i32);
            forwarded = true;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    drop(setup.beside);
    if stop.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    if !status.success() {
        bail!("loadlens run failed in scenario {} ({status})", sc.name);
    }
    let text = std::fs::read_to_string(&json)?;
    let run = Run::from_json(&text)?;
    if let Some(dir) = &opts.json_dir {
        std::fs::write(dir.join(format!("{}-{stage}.json", sc.name)), text)?;
    }
    if opts.keep {
        eprintln!(
            "world kept: `ip netns exec {} bash` to explore, server at {}; press Enter to remove it",
            w.client(),
            setup.url
        );
        let mut line = String::new();
        let _ = std::io::stdin().read_line(&mut line);
    }
    Ok(run)
}

/// Sends SIGINT to `ip netns exec`'s program (ip execs it, so the pid is loadlens).
fn forward_interrupt(pid: i32) {
    // SAFETY: kill(2) on a child we started.
    unsafe {
        libc::kill(pid, libc::SIGINT);
    }
}

/// `lab run NAME [--fix]`.
pub fn run(name: &str, opts: &LabOptions) -> anyhow::Result<LabResult> {
    let sc = find(name)?;
    // Ctrl-C: the load child stops early on its own; we then clean up and stop.
    let stop = Arc::new(AtomicBool::new(false));
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    let before = run_once(&sc, false, opts, &stop)?;
    if stop.load(Ordering::Relaxed) {
        bail!("interrupted");
    }
    let after = if opts.fix {
        Some(run_once(&sc, true, opts, &stop)?)
    } else {
        None
    };
    Ok(LabResult { before, after })
}

/// The header printed before a scenario runs.
pub fn header(sc: &Scenario, opts: &LabOptions) -> String {
    format!(
        "scenario {}: {}\n  source: {}\n  fault:  {}\n  fix:    {}\n  load:   {} s per run{}\n",
        sc.name,
        sc.summary,
        sc.source,
        sc.fault,
        sc.fix,
        opts.duration.as_secs_f64(),
        if opts.fix {
            ", before and after the fix"
        } else {
            ""
        }
    )
}

/// The before/after table.
pub fn table(sc: &Scenario, r: &LabResult) -> String {
    let mut o = String::new();
    let cols: Vec<(&str, &Run)> = std::iter::once(("before", &r.before))
        .chain(r.after.as_ref().map(|a| ("after fix", a)))
        .collect();
    let _ = write!(o, "{:<26}", "");
    for (h, _) in &cols {
        let _ = write!(o, "{h:>27}");
    }
    let _ = writeln!(o);
    let row = |o: &mut String, label: &str, f: &dyn Fn(&Run) -> String| {
        let _ = write!(o, "{label:<26}");
        for (_, run) in &cols {
            let _ = write!(o, "{:>27}", f(run));
        }
        let _ = writeln!(o);
    };
    let pct = |run: &Run, p: f64| {
        run.results
            .latency
            .percentiles
            .iter()
            .find(|x| x.p == p)
            .map(|x| fmt_us(x.us as f64))
            .unwrap_or_default()
    };
    row(&mut o, "requests/s", &|r| {
        format!("{:.0}", r.results.requests_per_s)
    });
    row(&mut o, "latency p50", &|r| pct(r, 50.0));
    row(&mut o, "latency p99", &|r| pct(r, 99.0));
    row(&mut o, "latency max", &|r| {
        fmt_us(r.results.latency.max_us as f64)
    });
    row(&mut o, "errors", &|r| r.results.errors.total().to_string());
    row(&mut o, "non-2xx/3xx", &|r| {
        r.results.non_2xx_3xx.to_string()
    });
    row(&mut o, "first bottleneck", &|r| {
        r.findings
            .iter()
            .find(|f| f.kind == crate::run::Kind::Bottleneck)
            .map(|f| f.id.clone())
            .unwrap_or_else(|| "none".into())
    });
    row(&mut o, sc.key.label, &|r| {
        (sc.key.read)(r)
            .map(scenario::fmt_value)
            .unwrap_or_else(|| "-".into())
    });
    // Whether the fault held on this machine: a fault that did not move its key by the
    // scenario's margin says nothing about the diagnosis.
    if let Some(after) = &r.after {
        match sc.key.margin(&r.before, after) {
            Ok(Some(f)) => {
                let (sign, want) = match sc.key.moves {
                    scenario::Moves::Down(w) => ("÷", w),
                    scenario::Moves::Up(w) => ("×", w),
                    scenario::Moves::Holds => ("", 0.0),
                };
                let moved = if f.is_finite() {
                    format!("{sign}{f:.1}")
                } else {
                    "to 0".into()
                };
                let _ = writeln!(
                    o,
                    "{:<26}{:>54}",
                    "fault held",
                    format!("{moved} by the fix (margin {sign}{want})")
                );
            }
            Ok(None) => {}
            Err(why) => {
                let _ = writeln!(o, "warning: {why}: the fault did not hold on this machine, so this run says little about the diagnosis");
            }
        }
    }
    o
}

/// `lab shell NAME`: the world up, a shell in the client namespace.
pub fn shell(name: &str, verbose: bool) -> anyhow::Result<()> {
    let sc = find(name)?;
    let mut w = World::new(sc.name, verbose)?;
    let setup = (sc.build)(&mut w, false)?;
    let sh = std::env::var("SHELL").unwrap_or_else(|_| "/bin/bash".into());
    let pids: Vec<String> = setup.server_pids.iter().map(|p| p.to_string()).collect();
    eprintln!(
        "scenario {} is up. In this shell (network namespace {}):\n  loadlens run {} {} --server-pid {}\nexit the shell to remove the world.",
        sc.name,
        w.client(),
        setup.url,
        setup.args.join(" "),
        pids.join(" --server-pid ")
    );
    let exe = std::env::current_exe()?;
    let path = format!(
        "{}:{}",
        exe.parent().unwrap_or(Path::new("/")).display(),
        std::env::var("PATH").unwrap_or_default()
    );
    Command::new("ip")
        .args(["netns", "exec", &w.client(), &sh])
        .env("PATH", path)
        .env("LOADLENS_URL", &setup.url)
        .status()
        .context("cannot start a shell in the client namespace")?;
    drop(setup.beside);
    Ok(())
}
