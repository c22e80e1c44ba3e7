//! `loadlens attach RUN.json WATCH.json`: a watch run alone on a server the client
//! cannot reach (`loadlens watch URL --duration D --json WATCH.json`) joined to a Run
//! made without a watch, by wall clock: the watch's samples placed on the load's time
//! line (the two machines' clocks assumed in agreement, as NTP keeps them), those
//! outside the load dropped, the window rebuilt from the rest ([`super::lost::window`]).
//!
//! What the samples do not carry — kernel counters outside the sampled series, the
//! error logs, the profile — covers the whole watch, which is longer than the load: a
//! warning says so.

use anyhow::{bail, Context};

use crate::run::{Evidence, EvidenceSource, Run};

/// The Evidence of `watch` (from `file`) placed on `run`'s time line, and warnings.
pub fn join(run: &Run, mut ev: Evidence, file: &str) -> anyhow::Result<(Evidence, Vec<String>)> {
    let started = ev.started_unix_s.with_context(|| {
        format!(
            "{file} has no start time: write it with `loadlens watch URL --duration D --json FILE`"
        )
    })?;
    let interval = ev.sample_interval_s.max(1e-3);
    let load_s = run.results.duration_s;
    // The watch's t_s = 0 on the load's time line.
    let shift = started - run.started_unix_s;
    let watched_to = shift + ev.window.duration_s;
    if watched_to <= 0.0 || shift >= load_s {
        bail!(
            "{file} watched from {:.1} s to {:.1} s of the load, which ran from 0 to {load_s:.1} s: they do not overlap — start the watch before the load and let it run past its end",
            shift,
            watched_to
        );
    }
    let mut warnings = Vec::new();
    if shift > 0.0 || watched_to < load_s {
        warnings.push(format!(
            "the watch in {file} covered {:.1} s to {:.1} s of the {load_s:.1} s load: the findings see only that part",
            shift.max(0.0),
            watched_to.min(load_s)
        ));
    }
    // A sample is the interval ending at its t_s: kept when most of it is in the load.
    let mut samples = std::mem::take(&mut ev.samples);
    for s in &mut samples {
        s.t_s += shift;
    }
    samples.retain(|s| s.t_s - interval / 2.0 >= 0.0 && s.t_s - interval / 2.0 <= load_s);
    if samples.is_empty() {
        bail!("{file} has no sample within the load (samples every {interval} s): watch with a shorter --sample");
    }
    if let Some(o) = &mut ev.offcpu {
        for s in &mut o.stalls {
            s.t_s += shift;
        }
    }
    let whole_s = ev.window.duration_s;
    let rebuilt = super::lost::window(&samples, interval);
    let w = &mut ev.window;
    w.duration_s = rebuilt.duration_s;
    w.cpus = rebuilt.cpus;
    w.ifaces = rebuilt.ifaces;
    w.processes = rebuilt.processes;
    w.listen_queues = rebuilt.listen_queues;
    w.time_wait_max = rebuilt.time_wait_max;
    w.sockstat_end = rebuilt.sockstat_end;
    for (k, v) in rebuilt.counters {
        w.counters.insert(k, v);
    }
    warnings.push(format!(
        "the server's rates are from the {} samples within the load; its other counters, error logs and profile cover the whole watch ({whole_s:.1} s); the two clocks are taken to agree (NTP)",
        samples.len()
    ));
    ev.samples = samples;
    let hostname = ev
        .source
        .as_ref()
        .map(|s| s.hostname.clone())
        .unwrap_or_default();
    ev.source = Some(EvidenceSource {
        transport: "attach".into(),
        destination: file.into(),
        hostname,
        remote_version: super::protocol::VERSION.into(),
        shift_s: shift,
        ..EvidenceSource::default()
    });
    ev.started_unix_s = None;
    Ok((ev, warnings))
}
