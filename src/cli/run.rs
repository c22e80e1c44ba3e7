//! `loadlens run`: flags → Spec, the load (repeated if asked), the views.

use std::io::IsTerminal;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;

use super::load::{stop_on_signals, LoadFlags, Shape};
use super::mix::MixFlags;
use super::progress::LiveLine;
use super::{available_cpus, parse_u32};
use crate::pipeline;
use crate::report::{self, Dest, Json, Output, Text};
use crate::run::{Run, Segment};
use crate::spec::{RequestBytes, SegmentOf, Spec, StageKind, Stages};
use crate::units::{parse_count, parse_duration};

#[derive(Args, Debug)]
pub struct RunArgs {
    /// The URL to load, e.g. http://127.0.0.1:8080/index.html
    pub(super) url: String,
    /// Connections to keep open [default: 10; with --stages of connections, the
    /// highest stage's].
    #[arg(short = 'c', long, value_parser = parse_u32)]
    pub(super) connections: Option<u32>,
    /// Worker threads [default: CPUs available to this process].
    #[arg(short = 't', long, value_parser = parse_u32)]
    pub(super) threads: Option<u32>,
    /// Length of the test, e.g. 10s, 1m [default: 10s, or unbounded with -n].
    #[arg(short = 'd', long, value_parser = parse_duration, allow_hyphen_values = true)]
    pub(super) duration: Option<Duration>,
    /// Stop after this many requests (responses plus failed requests), e.g. 10k.
    #[arg(short = 'n', long, value_parser = parse_count, conflicts_with = "replay")]
    pub(super) requests: Option<u64>,
    /// Requests per connection, then close and reconnect (1 = a new TCP connection per
    /// request) [default: keep-alive as long as the server allows].
    #[arg(long, value_parser = parse_u32)]
    pub(super) connreqs: Option<u32>,
    /// Open loop: this many requests per second over all connections, on schedule; latency
    /// is measured from each request's scheduled time (corrected for coordinated omission).
    #[arg(short = 'R', long, value_parser = parse_count)]
    pub(super) rate: Option<u64>,
    /// Change the load over the run, stage by stage (k6's stages): DURATION:RATE for
    /// open-loop rates (30s:100,1m:1000,30s:0) or DURATION:cN for connections
    /// (30s:c10,1m:c200). Each stage ramps linearly from the previous stage's target
    /// (0 before the first) to its own; the run lasts their sum. Rates take -c as the
    /// connections that carry the schedule; connections are opened and closed as the
    /// target moves.
    #[arg(long, value_parser = Stages::parse, value_name = "STAGES",
          conflicts_with_all = ["duration", "requests", "rate", "replay"])]
    pub(super) stages: Option<Stages>,
    /// Stop an open-loop run (-R, or --stages of rates) whose completed requests fall
    /// behind the schedule by more than P% over the last 2 s, e.g. 10%: the results so
    /// far are reported with when it stopped, the rates and the diagnosis; exit 4.
    #[arg(long, value_name = "P%", value_parser = parse_pct)]
    pub(super) abort_if_behind: Option<f64>,
    #[command(flatten)]
    pub(super) mix: MixFlags,
    /// Print the latency percentiles, status codes and connection details.
    #[arg(long)]
    pub(super) latency: bool,
    /// Write the Run as JSON to FILE (`-` = stdout, which silences the text output).
    #[arg(long, value_name = "FILE")]
    pub(super) json: Option<String>,
    /// Write a flame graph of the server's CPU (an SVG that opens in a browser,
    /// searchable) to FILE; implies --profile.
    #[arg(long, value_name = "FILE.svg")]
    pub(super) flamegraph: Option<std::path::PathBuf>,
    /// Write the self-contained HTML report (charts, findings, profile) to FILE.
    #[arg(long, value_name = "FILE")]
    pub(super) html: Option<std::path::PathBuf>,
    /// Print nothing but errors (the JSON, if asked for, is still written).
    #[arg(short = 'q', long)]
    pub(super) quiet: bool,
    /// Run the same load N times and report each repetition and the mean with its 95%
    /// interval (for `loadlens compare`).
    #[arg(long, value_parser = parse_u32, default_value = "1", value_name = "N")]
    pub(super) repeat: u32,
    /// Pause between repetitions.
    #[arg(long, value_parser = parse_duration, allow_hyphen_values = true, default_value = "2s")]
    pub(super) pause: Duration,
    /// Run only the I-th of N shares of the load (connections, -n and -R split so the N
    /// segments add up exactly to the whole; --targets: every N-th request of the seeded
    /// order from the I-th; --replay: every N-th request of the log from the I-th, each
    /// at its own time), e.g. 2/3; `loadlens merge` adds the segments' Runs up.
    #[arg(long, value_name = "I/N")]
    pub(super) segment: Option<SegmentOf>,
    /// Wait until this time (seconds since the Unix epoch, at most an hour ahead) and
    /// start the load then, so segments on several machines start together.
    #[arg(long, value_name = "UNIX_TIME", allow_hyphen_values = true)]
    pub(super) start_at: Option<f64>,
    /// Probe when one run cannot tell causes apart (the rate could be the load's
    /// concurrency or a limit inside the server): short loads after the run at 1
    /// connection and at 4× the connections, each 15% of the run (0.5-3 s), kept in the
    /// Run and cited in the findings. On by default for a closed-loop run bounded by
    /// time; off unless asked under --slo, -n, -R, --segment and --replay.
    #[arg(long, conflicts_with = "no_probe")]
    pub(super) probe: bool,
    /// Never probe: send nothing beyond the load asked for.
    #[arg(long)]
    pub(super) no_probe: bool,
    #[command(flatten)]
    pub(super) ci: super::ci::CiFlags,
    #[command(flatten)]
    pub(super) ray: RayFlags,
    #[command(flatten)]
    pub(super) load: LoadFlags,
    #[command(flatten)]
    pub(super) save: super::history::SaveFlags,
}

/// How far ahead `--start-at` may be: further is more likely a mistake than a plan.
const MAX_START_AHEAD_S: f64 = 3600.0;
/// How far in the past `--start-at` may be (a segment launched a little late by a slow
/// scheduler still starts, at once).
const MAX_START_LATE_S: f64 = 5.0;

/// Checks `--start-at` against the clock: one line, before anything else happens.
fn check_start_at(at: f64) -> anyhow::Result<()> {
    let now = pipeline::unix_now();
    if !at.is_finite() || at > now + MAX_START_AHEAD_S {
        anyhow::bail!(
            "--start-at {at} is more than an hour ahead (now is {now:.0}): give seconds since the Unix epoch, e.g. $(( $(date +%s) + 10 ))"
        );
    }
    if at < now - MAX_START_LATE_S {
        anyhow::bail!(
            "--start-at {at} is {:.0} s in the past (now is {now:.0}): give a time a few seconds ahead",
            now - at
        );
    }
    Ok(())
}

/// `--stages` and `--abort-if-behind` against the other flags: what a load of stages
/// takes from them and what it cannot (clap refuses -d, -n, -R and --replay beside
/// --stages: the stages set the length and the rate).
fn check_stages(a: &RunArgs) -> anyhow::Result<()> {
    if let Some(s) = &a.stages {
        if s.kind == StageKind::Connections && a.connections.is_some() {
            anyhow::bail!(
                "--stages of connections ({}) set the connections over the run: drop -c",
                s.text()
            );
        }
        if a.segment.is_some() || a.ray.address.is_some() {
            anyhow::bail!(
                "--stages cannot be split over machines yet: drop --segment/--ray, or run each machine's share as its own --stages"
            );
        }
    }
    if a.abort_if_behind.is_some() {
        let open = a.rate.is_some() || a.stages.as_ref().is_some_and(|s| s.kind == StageKind::Rate);
        if !open {
            anyhow::bail!(
                "--abort-if-behind judges an open-loop schedule: give -R RATE or --stages of rates (e.g. 10s:500), or drop it"
            );
        }
    }
    Ok(())
}

/// A percentage such as `10%` or `10` (0 to 100, exclusive of 0).
fn parse_pct(s: &str) -> Result<f64, String> {
    let v: f64 = s
        .trim()
        .trim_end_matches('%')
        .parse()
        .map_err(|_| format!("invalid percentage `{s}`: expected e.g. 10%"))?;
    if !(v > 0.0 && v < 100.0) {
        return Err(format!(
            "invalid percentage `{s}`: between 0% and 100% (exclusive), e.g. 10%"
        ));
    }
    Ok(v)
}

/// This machine's host name (for naming a segment's client).
fn host_name() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf.
    if unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) } != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

impl RunArgs {
    /// The load's shape, with the defaults for what was not given.
    fn shape(&self) -> Shape {
        let connections = match &self.stages {
            Some(s) if s.kind == StageKind::Connections => s.max_target().ceil() as u32,
            _ => self.connections.unwrap_or(10),
        };
        let threads = self
            .threads
            .unwrap_or_else(|| available_cpus().min(connections.max(1)));
        let duration = match (self.duration, self.requests, &self.stages) {
            (_, _, Some(s)) => Some(Duration::from_secs_f64(s.total_s())),
            (Some(d), _, _) => Some(d),
            (None, Some(_), _) => None,
            (None, None, _) => Some(Duration::from_secs(10)),
        };
        Shape {
            url: self.url.clone(),
            connections,
            threads,
            duration,
            requests: self.requests,
            connreqs: self.connreqs,
            rate: self.rate.map(|r| r as f64),
        }
    }
}

/// `run` up to the point where it would touch anything (no file read, no name
/// resolved, no limit raised): the flags checked into a Spec, the URL parsed, the
/// request bytes built. A `--body-file` counts as empty here.
pub fn dry_run(a: &RunArgs) -> anyhow::Result<(Spec, RequestBytes)> {
    let body = a.load.body.clone().unwrap_or_default().into_bytes();
    let spec = a.load.checked_spec(a.shape(), body.len())?;
    let target = spec.parse_url()?;
    let request = RequestBytes::build(&spec, &target, &body);
    Ok((spec, request))
}

/// The checks every `run` makes first and the whole load's spec (before a segment is
/// taken of it), for `run` and for `run --ray`.
pub(super) fn prepare(a: &mut RunArgs) -> anyhow::Result<(Vec<u8>, Spec)> {
    if let Some(at) = a.start_at {
        check_start_at(at)?;
    }
    if a.segment.is_some() && a.repeat > 1 {
        anyhow::bail!(
            "--segment and --repeat cannot be combined: repeat the whole split load instead"
        );
    }
    if a.ray.address.is_some() && (a.segment.is_some() || a.start_at.is_some()) {
        anyhow::bail!("--ray places the segments itself: drop --segment and --start-at");
    }
    if a.ray.address.is_some() && a.load.watch_ssh.is_some() {
        anyhow::bail!("--ray watches the server with --server-node-resource: drop --watch");
    }
    if a.flamegraph.is_some() {
        a.load.profile = true;
    }
    // --ray ships the mix's file to the nodes (`src/cli/ray/segment.rs#segment_args`):
    // a file, not what this process's standard input holds.
    if let (Some("-"), Some(_)) = (a.mix.file(), &a.ray.address) {
        let flag = if a.mix.targets.is_some() {
            "--targets"
        } else {
            "--replay"
        };
        anyhow::bail!(
            "{flag} - reads standard input, which --ray cannot ship to the nodes: save it to a file and give its path"
        );
    }
    a.mix.check(&a.load)?;
    check_stages(a)?;
    let body = a.load.body()?;
    let mut whole = a.load.spec(a.shape(), body.len())?;
    whole.stages = a.stages.clone();
    whole.abort_if_behind_pct = a.abort_if_behind;
    // The stages against the rest (HTTP/3 ramps rates, not connections).
    whole.check_flags()?;
    let mix = a.mix.read(&whole.url)?;
    MixFlags::apply(mix, &mut whole, a.duration);
    Ok((body, whole))
}

pub fn cmd(mut a: RunArgs) -> anyhow::Result<ExitCode> {
    let (body, whole) = prepare(&mut a)?;
    // An unwritable --db fails here, before the target is even probed.
    let saver = a.save.open()?;
    let spec = match a.segment {
        Some(seg) => whole.segment(seg)?,
        None => whole.clone(),
    };
    let target = spec.target()?;
    // HTTP/3 is UDP: its probe is the QUIC handshake the engine makes before the load.
    let addr = match spec.http {
        crate::spec::HttpVersion::H3 => target.addrs[0],
        _ => target.probe(spec.timeout())?,
    };
    // The views, chosen by flag; fail before the load, not after it, when an output
    // cannot be written.
    let json = a.json.as_deref().map(Dest::parse);
    if let Some(d) = &json {
        d.check("JSON")?;
    }
    if let Some(f) = &a.flamegraph {
        Dest::File(f.clone()).check("flame graph")?;
        if a.load.no_watch {
            anyhow::bail!("--flamegraph profiles the watched server: drop --no-watch");
        }
    }
    let text = !a.quiet && json != Some(Dest::Stdout);
    let mut outputs: Vec<Output<Run>> = Vec::new();
    outputs.extend(json.map(|d| Output::new(Json, d)));
    outputs.extend(report::html_output(a.html.as_deref())?);
    outputs.extend(a.ci.outputs()?);
    if text {
        outputs.push(Output::new(Text { latency: a.latency }, Dest::Stdout));
    }

    let remote = a
        .load
        .remote(remote_guard(&spec, a.repeat, a.pause), !text)?;
    let stop = stop_on_signals()?;
    let mut progress = LiveLine::new(text && std::io::stderr().is_terminal(), &spec);
    let job = pipeline::Job {
        spec: &spec,
        target: &target,
        addr,
        body: &body,
        watch: a.load.watch(addr),
        remote: remote.as_ref(),
        start_at: a.start_at,
        probe: probing(&a, &spec),
    };
    let bar = progress.bar();
    let repeat = a.repeat;
    let run = pipeline::measure_repeated(
        &job,
        repeat,
        a.pause,
        stop.flag.clone(),
        &mut progress,
        &mut |i| {
            if let (Some(b), true) = (&bar, repeat > 1) {
                b.set_prefix(format!("repetition {} of {repeat}  ", i + 1));
            }
        },
    );
    progress.finish();
    let mut run = run?;
    run.interrupted = stop.signal().map(String::from);
    run.segment = a.segment.map(|seg| Segment {
        index: seg.index,
        count: seg.count,
        whole_connections: whole.connections,
        whole_requests: whole.requests,
        whole_rate: whole.rate,
        start_at_unix_s: a.start_at,
        host: host_name(),
    });
    a.ci.judge(&mut run);
    report::write_all(&run, &outputs)?;
    if let Some(s) = &saver {
        s.save(&run)?;
    }
    if let Some(f) = &a.flamegraph {
        // No profile (not permitted, nothing ran) is said, not fatal: the run stands.
        if let Err(e) = report::flamegraph::write(&run, f) {
            eprintln!("warning: no flame graph written to {}: {e:#}", f.display());
        }
    }
    let code = a.ci.finish(&run)?;
    match (&run.results.aborted, &run.interrupted) {
        (Some(ab), None) => {
            eprintln!("loadlens: {}", aborted_line(ab, &run));
            Ok(ExitCode::from(super::ci::BEHIND))
        }
        _ => Ok(code),
    }
}

/// The one line saying a run was stopped by `--abort-if-behind`: when, the rates, and
/// what the watch found limited it.
fn aborted_line(ab: &crate::run::Abort, run: &Run) -> String {
    use crate::run::Kind;
    let verdict = match (&run.evidence, run.findings.first()) {
        (None, _) => "the server was not watched (--no-watch), so why is not known".to_string(),
        (Some(_), Some(f)) if f.kind == Kind::Bottleneck => {
            format!("the watch's verdict: {} ({})", f.title, f.id)
        }
        (Some(_), Some(f)) => format!(
            "the watch named no bottleneck; its first finding: {} ({})",
            f.title, f.id
        ),
        (Some(_), None) => "the watch named no bottleneck".to_string(),
    };
    format!(
        "aborted at {:.1} s: {:.0} req/s completed over the last {:.1} s where the schedule asked {:.0} req/s, {:.0}% behind (more than --abort-if-behind {}%); {verdict}",
        ab.at_s, ab.achieved_rps, ab.window_s, ab.scheduled_rps, ab.behind_pct, ab.limit_pct
    )
}

/// Whether this run may probe: `--no-probe` (or `--no-watch`) refuses; `--probe` asks;
/// otherwise on for a closed-loop load bounded by time, whose evidence may admit
/// several causes. Off by default where the load asked for is exactly what must reach
/// the server: `--slo` (a CI gate), `-n` (a count), `-R` (an open loop's rate), a
/// segment of a larger load, a replayed log.
pub(super) fn probing(a: &RunArgs, spec: &Spec) -> pipeline::Probing {
    let exact = a.ci.slo.is_some()
        || spec.requests.is_some()
        || spec.rate.is_some()
        || a.segment.is_some()
        || spec.mix.as_ref().is_some_and(|m| m.replay.is_some());
    if a.no_probe || a.load.no_watch || (exact && !a.probe) {
        pipeline::Probing::Off
    } else {
        pipeline::Probing::WhenUnsure
    }
}

/// How long a remote watch may live at most: the loads with their pauses and ten
/// minutes to spare, or six hours for a load bounded by a count only.
fn remote_guard(spec: &Spec, repeat: u32, pause: Duration) -> Duration {
    let spare = Duration::from_secs(600);
    match spec.duration_s {
        Some(d) => (Duration::from_secs_f64(d) + pause) * repeat.max(1) + spare,
        None => Duration::from_secs(6 * 3600),
    }
}

#[derive(Args, Debug, Default)]
pub struct RayFlags {
    /// Run the load from the nodes of this Ray cluster (e.g. 10.0.0.1:6379, or `auto`
    /// on a node of it), one segment per node, and merge them (needs Ray installed for
    /// the Python in LOADLENS_PYTHON, or in ~/.cache/loadlens-venv).
    #[arg(long = "ray", value_name = "ADDRESS")]
    pub address: Option<String>,
    /// With --ray: how many nodes send load (at most the alive nodes with CPUs).
    #[arg(long, value_parser = super::parse_u32, value_name = "N", requires = "address")]
    pub clients: Option<u32>,
    /// With --ray: the longest wait for the segments, from their start [default: the
    /// duration (a replay's: its log's span ÷ --speed; 5 minutes with -n) plus the
    /// request timeout plus 60s]; a segment without a Run by then is reported missing.
    #[arg(long, value_parser = parse_duration, requires = "address", value_name = "DURATION")]
    pub ray_timeout: Option<Duration>,
    /// With --ray: the custom resource of the server's node (e.g. `server`): the machine
    /// is watched there (as `run` watches its own; the segments then do not watch
    /// theirs), and no client segment goes there.
    #[arg(long, value_name = "NAME", requires = "address")]
    pub server_node_resource: Option<String>,
}
