//! `loadlens run … --ray ADDRESS --clients N`: the load split into N segments, one per
//! node of an existing Ray cluster, started together, gathered and merged.
//!
//! The placing is Ray's: a small Python companion (`ray/loadlens_ray.py`, built into
//! this binary and run with the Python that has Ray installed) ships this binary to the
//! nodes in a Ray runtime environment, with the files the segments read (the body, a
//! `--targets` file and its bodies, a `--replay` log), starts one segment per node
//! (`--segment I/N --start-at T`), bounds every wait, and hands back the segment Runs;
//! the merge and the diagnosis are loadlens's own (`crate::merge`), as for `loadlens
//! merge`.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};

use anyhow::Context;
use serde::Deserialize;

use super::merge::Views;
use super::run::RunArgs;
use crate::merge::Part;
use crate::remote::bounded::{read_file, FileError};
use crate::run::{Evidence, Run};
use crate::spec::{SegmentOf, Spec};

mod segment;
use segment::{segment_args, Segments};

/// The companion, carried inside the binary so an installed loadlens needs no other file.
const COMPANION: &str = include_str!("../../ray/loadlens_ray.py");

/// The companion's outcome (`result.json`): paths, host names and a reason per missing
/// segment, a few KiB. What the nodes wrote is read within a bound (#46).
const MAX_OUTCOME: u64 = 16 << 20;
/// A segment's Run, or the server node's Evidence: 125 KiB measured for a 5 s load
/// (with the watch's samples and a profile), growing ~5 KiB per second of load (the
/// timeline ~1 KiB, the 100 ms slices ~1 KiB, a sample 3.3 KiB on 2 CPUs; more on a
/// machine of many CPUs). Allowed: this, plus [`MAX_RUN_PER_S`] per second the run may
/// last.
const MAX_RUN: u64 = 64 << 20;
const MAX_RUN_PER_S: u64 = 256 << 10;

/// The longest a segment's Run (or the server's Evidence) may be for a run of at most
/// `run_timeout_s`.
fn max_run_bytes(run_timeout_s: f64) -> u64 {
    MAX_RUN + MAX_RUN_PER_S * run_timeout_s.max(0.0).ceil() as u64
}

/// What the companion hands back.
#[derive(Deserialize)]
struct Outcome {
    #[serde(default)]
    error: Option<String>,
    #[serde(default)]
    segments: Vec<Done>,
    /// Missing segment → why.
    #[serde(default)]
    missing: BTreeMap<u32, String>,
    /// The Evidence watched on the server's node (`--server-node-resource`).
    #[serde(default)]
    server: Option<ServerWatch>,
    /// Why there is none, when one was asked for.
    #[serde(default)]
    server_error: Option<String>,
}

#[derive(Deserialize)]
struct ServerWatch {
    file: PathBuf,
    host: String,
}

#[derive(Deserialize)]
struct Done {
    index: u32,
    file: PathBuf,
    host: String,
}

/// The Python with Ray: `LOADLENS_PYTHON`, else the venv `scripts/install-deps.sh`
/// makes, else `python3`.
pub fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("LOADLENS_PYTHON") {
        return PathBuf::from(p);
    }
    if let Some(home) = std::env::var_os("HOME") {
        let venv = PathBuf::from(home).join(".cache/loadlens-venv/bin/python3");
        if venv.exists() {
            return venv;
        }
    }
    PathBuf::from("python3")
}

/// `run … --ray`: the checks and the whole load's spec as `run` makes them, then the
/// segments placed on the cluster and merged.
pub fn cmd(mut a: RunArgs) -> anyhow::Result<ExitCode> {
    let (body, whole) = super::run::prepare(&mut a)?;
    on_cluster(&a, &whole, &body)
}

fn on_cluster(a: &RunArgs, whole: &Spec, body: &[u8]) -> anyhow::Result<ExitCode> {
    let address = a.ray.address.clone().expect("checked by the caller");
    let Some(clients) = a.ray.clients else {
        anyhow::bail!("--ray needs --clients N: how many nodes send load");
    };
    if clients == 0 {
        anyhow::bail!("--clients must be at least 1");
    }
    // Refuse a split that cannot be made before any node is asked.
    whole.segment(SegmentOf {
        index: 1,
        count: clients,
    })?;
    if !a.load.server_pids.is_empty() {
        anyhow::bail!(
            "--server-pid names a process on this machine: with --ray, name the server with --server-name"
        );
    }
    if a.flamegraph.is_some() {
        anyhow::bail!("--flamegraph profiles a server on the client's machine: not with --ray");
    }
    if a.repeat > 1 {
        anyhow::bail!("--repeat is not available with --ray: run the command again");
    }
    let views = Views::new(
        a.json.as_deref(),
        a.html.as_deref(),
        a.latency,
        a.quiet,
        &a.ci,
    )?
    // The merged Run is kept here, not by the segments.
    .saving(a.save.open()?);
    // A replay at a speed lasts its log's span ÷ the speed, however long that is.
    let replay_s = whole
        .mix
        .as_ref()
        .and_then(|m| m.replay.as_ref())
        .and_then(|r| Some(r.span_s / r.speed?));
    let run_timeout = a
        .ray
        .ray_timeout
        .map(|d| d.as_secs_f64())
        .unwrap_or(whole.duration_s.or(replay_s).unwrap_or(300.0) + whole.timeout_s + 60.0);
    let dir = tempfile::Builder::new()
        .prefix("loadlens-ray")
        .tempdir()
        .context("cannot make a temporary directory for the segment Runs")?;
    let ship = dir.path().join("ship");
    std::fs::create_dir(&ship).context("cannot make a directory for the files to ship")?;
    let Segments { args, files } = segment_args(a, whole, body, &ship)?;
    let script = dir.path().join("loadlens_ray.py");
    std::fs::write(&script, COMPANION).context("cannot write the Ray companion")?;
    let binary = std::env::current_exe().context("cannot find this loadlens binary")?;
    let job = serde_json::json!({
        "address": address,
        "clients": clients,
        "binary": binary,
        "args": args,
        "files": files,
        "run_timeout_s": run_timeout,
        "ready_timeout_s": 180.0,
        "out_dir": dir.path(),
        "server_node_resource": a.ray.server_node_resource,
        "watch_args": watch_args(a, run_timeout),
        "quiet": a.quiet,
    });
    // Ctrl-C reaches the companion too, which stops its segments and says so; this
    // process waits for it (and then removes its temporary files) instead of dying.
    let _stop = super::load::stop_on_signals()?;
    let py = python();
    let mut child = Command::new(&py)
        .arg(&script)
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(if a.quiet {
            Stdio::null()
        } else {
            Stdio::inherit()
        })
        .spawn()
        .with_context(|| {
            format!(
                "cannot run {} for --ray: install Ray (scripts/install-deps.sh ray) or set LOADLENS_PYTHON",
                py.display()
            )
        })?;
    child
        .stdin
        .take()
        .expect("piped")
        .write_all(job.to_string().as_bytes())
        .context("cannot hand the job to the Ray companion")?;
    let status = child.wait().context("the Ray companion failed")?;
    let result = read_file(&dir.path().join("result.json"), MAX_OUTCOME);
    let outcome: Outcome = match result.map(|t| serde_json::from_str(&t)) {
        Ok(Ok(o)) => o,
        Err(e @ FileError::TooLarge { .. }) => {
            anyhow::bail!("the Ray companion's outcome: {e} — not a result of this loadlens")
        }
        _ => anyhow::bail!(
            "the Ray companion ({}) ended without a result ({status}): is Ray installed for it? (scripts/install-deps.sh ray, or set LOADLENS_PYTHON)",
            py.display()
        ),
    };
    if let Some(e) = outcome.error {
        anyhow::bail!("{e}");
    }
    if outcome.segments.is_empty() {
        let why: Vec<String> = outcome
            .missing
            .iter()
            .map(|(i, r)| format!("segment {i}: {r}"))
            .collect();
        anyhow::bail!("no segment returned a Run: {}", why.join("; "));
    }
    let mut parts = Vec::new();
    for d in &outcome.segments {
        let text = read_file(&d.file, max_run_bytes(run_timeout))
            .with_context(|| format!("segment {}'s Run (on {})", d.index, d.host))?;
        let mut run = Run::from_json(&text)
            .with_context(|| format!("segment {} (on {})", d.index, d.host))?;
        // The segments read the shipped copy of the mix's file: the Run names the one given.
        if let (Some(m), Some(f)) = (run.spec.mix.as_mut(), a.mix.file()) {
            m.file = f.to_string();
        }
        parts.push(Part {
            name: format!("segment {} (on {})", d.index, d.host),
            run,
        });
    }
    let server = match &outcome.server {
        Some(w) => {
            let text = read_file(&w.file, max_run_bytes(run_timeout))
                .with_context(|| format!("the evidence from the server's node ({})", w.host))?;
            let ev: Evidence = serde_json::from_str(&text)
                .with_context(|| format!("the evidence from the server's node ({})", w.host))?;
            Some((ev, w.host.clone()))
        }
        None => None,
    };
    views.merge_and_write(
        parts,
        &outcome.missing,
        server,
        outcome.server_error.into_iter().collect(),
    )
}

/// The flags of the watch on the server's node (`loadlens watch`): the URL (its port
/// finds the listener), the sampling, the names and the profile asked for.
fn watch_args(a: &RunArgs, run_timeout_s: f64) -> Vec<String> {
    let mut v = vec![
        a.url.clone(),
        "--sample".into(),
        format!("{}ms", a.load.sample.as_millis().max(1)),
        "--max-duration".into(),
        format!("{}s", run_timeout_s.ceil() as u64 + 10),
    ];
    for n in &a.load.server_names {
        v.extend(["--server-name".into(), n.clone()]);
    }
    if a.load.profile {
        v.extend(["--profile-hz".into(), a.load.profile_hz.to_string()]);
    }
    v
}
