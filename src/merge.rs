//! Segment Runs → one Run of the whole load (`loadlens merge`, and `--ray` after it
//! gathers its segments).
//!
//! Segments ran side by side, so their counters are summed and their HdrHistograms
//! added — percentiles are never averaged: the merged p99.99 is the p99.99 of every
//! request of every segment. Timelines are aligned on wall-clock seconds from the
//! earliest start. Each segment's own client self-check is kept, because one saturated
//! client machine makes the whole result a floor. The findings are left to the caller
//! (the diagnosis runs on the merged Run as on any other).

use std::collections::BTreeMap;

use anyhow::bail;

use crate::run::{
    ClientCheck, LatencySummary, LoadResults, Merged, Run, Second, SegmentPart, Spread,
    SCHEMA_VERSION,
};

/// A segment Run and what to call it in messages (its file name).
pub struct Part {
    pub name: String,
    pub run: Run,
}

/// The spec fields a segment splits; every other field must be equal across segments.
const SPLIT_FIELDS: [&str; 4] = ["connections", "threads", "requests", "rate"];

/// Merges the segment Runs of one load. Refuses Runs that are not segments, segments of
/// different loads or splits, and a segment given twice. Segments of the split that are
/// not given are listed in `merged.missing`, with the reason from `reasons` (by index)
/// where the caller knows one.
pub fn merge(parts: Vec<Part>, reasons: &BTreeMap<u32, String>) -> anyhow::Result<Run> {
    let Some(first) = parts.first() else {
        bail!("nothing to merge: give the segment Runs (loadlens run … --segment I/N --json FILE)");
    };
    for p in &parts {
        if p.run.segment.is_none() {
            bail!(
                "{} is not a segment Run: merge adds up Runs made with `loadlens run … --segment I/N`",
                p.name
            );
        }
        if !p.run.repetitions.is_empty() {
            bail!("{} holds repetitions: segments are single loads", p.name);
        }
    }
    let seg0 = first.run.segment.clone().expect("checked above");
    for p in &parts[1..] {
        let seg = p.run.segment.as_ref().expect("checked above");
        if seg.count != seg0.count {
            bail!(
                "{} is segment {}/{} but {} is segment {}/{}: segments of different splits cannot be merged",
                first.name, seg0.index, seg0.count, p.name, seg.index, seg.count
            );
        }
        let whole = |s: &crate::run::Segment| (s.whole_connections, s.whole_requests, s.whole_rate);
        if whole(seg) != whole(&seg0) {
            bail!(
                "{} and {} are segments of different loads: the whole load's -c/-n/-R differ ({:?} vs {:?})",
                first.name, p.name, whole(&seg0), whole(seg)
            );
        }
        if let Some((key, a, b)) = spec_difference(&first.run, &p.run) {
            bail!(
                "{} and {} are segments of different loads: `{key}` differs ({a} vs {b})",
                first.name,
                p.name
            );
        }
    }
    let mut by_index: BTreeMap<u32, &Part> = BTreeMap::new();
    for p in &parts {
        let i = p.run.segment.as_ref().expect("checked above").index;
        if let Some(other) = by_index.insert(i, p) {
            bail!(
                "segment {i}/{} is given twice ({} and {}): each segment merges once",
                seg0.count,
                other.name,
                p.name
            );
        }
    }
    let runs: Vec<&Run> = by_index.values().map(|p| &p.run).collect();
    let missing: Vec<u32> = (1..=seg0.count)
        .filter(|i| !by_index.contains_key(i))
        .collect();
    let t0 = runs
        .iter()
        .map(|r| r.started_unix_s)
        .fold(f64::INFINITY, f64::min);
    let results = side_by_side(&runs, t0)?;

    let mut spec = first.run.spec.clone();
    spec.connections = seg0.whole_connections;
    spec.requests = seg0.whole_requests;
    spec.rate = seg0.whole_rate;
    spec.threads = runs.iter().map(|r| r.spec.threads).sum();

    let label = |r: &Run| {
        let s = r.segment.as_ref().expect("checked above");
        format!("segment {}/{} ({})", s.index, s.count, s.host)
    };
    let mut warnings = Vec::new();
    for r in &runs {
        warnings.extend(r.warnings.iter().map(|w| format!("{}: {w}", label(r))));
    }
    // The evidence of the segment that watched the server (found its processes), else
    // of the first segment that watched at all: the client machines' own evidence says
    // nothing about the server.
    let watched = runs
        .iter()
        .find(|r| {
            r.evidence
                .as_ref()
                .is_some_and(|e| !e.topology.processes.is_empty())
        })
        .or_else(|| runs.iter().find(|r| r.evidence.is_some()));
    if let Some(r) = watched {
        if runs.len() > 1 {
            warnings.push(format!("the machine evidence is {}'s", label(r)));
        }
    }
    let interrupted: Vec<String> = runs
        .iter()
        .filter_map(|r| {
            r.interrupted
                .as_ref()
                .map(|s| format!("{s} ({})", label(r)))
        })
        .collect();
    let merged = Merged {
        count: seg0.count,
        segments: runs
            .iter()
            .map(|r| SegmentPart {
                index: r.segment.as_ref().expect("checked above").index,
                host: r.segment.as_ref().expect("checked above").host.clone(),
                started_unix_s: r.started_unix_s,
                duration_s: r.results.duration_s,
                connections: r.spec.connections,
                responses: r.results.responses,
                errors: r.results.errors.total(),
                requests_per_s: r.results.requests_per_s,
                latency: r.results.latency.clone(),
                client: r.client.clone(),
            })
            .collect(),
        missing_reasons: if missing.iter().any(|i| reasons.contains_key(i)) {
            missing
                .iter()
                .map(|i| reasons.get(i).cloned().unwrap_or_default())
                .collect()
        } else {
            Vec::new()
        },
        missing,
    };
    Ok(Run {
        schema_version: SCHEMA_VERSION,
        tool: format!("loadlens {}", env!("CARGO_PKG_VERSION")),
        started_unix_s: t0,
        spec,
        target_addr: first.run.target_addr.clone(),
        results,
        client: all_clients(&runs),
        evidence: watched.and_then(|r| r.evidence.clone()),
        warnings,
        findings: Vec::new(),
        repetitions: Vec::new(),
        interrupted: (!interrupted.is_empty()).then(|| interrupted.join(", ")),
        segment: None,
        merged: Some(merged),
        objectives: Vec::new(),
        trust: None,
        probes: Vec::new(),
        path: None,
        tune: None,
    })
}

/// The first spec field other than the split ones that differs: (key, a, b).
fn spec_difference(a: &Run, b: &Run) -> Option<(String, String, String)> {
    let fields = |r: &Run| match serde_json::to_value(&r.spec) {
        Ok(serde_json::Value::Object(m)) => m,
        _ => serde_json::Map::new(),
    };
    let (fa, fb) = (fields(a), fields(b));
    fa.iter()
        .filter(|(k, _)| !SPLIT_FIELDS.contains(&k.as_str()))
        .find(|(k, v)| fb.get(*k) != Some(*v))
        .map(|(k, v)| {
            let other = fb.get(k).map_or("nothing".into(), |x| x.to_string());
            (k.clone(), v.to_string(), other)
        })
}

/// The results of loads that ran side by side: counts summed, histograms added, the
/// window from the earliest start to the latest end, timelines on wall-clock seconds.
fn side_by_side(runs: &[&Run], t0: f64) -> anyhow::Result<LoadResults> {
    let mut out = runs[0].results.clone();
    for r in &runs[1..] {
        out.add_counts(&r.results);
    }
    let end = runs
        .iter()
        .map(|r| r.started_unix_s + r.results.duration_s)
        .fold(t0, f64::max);
    out.duration_s = (end - t0).max(1e-9);
    out.requests_per_s = out.responses as f64 / out.duration_s;
    out.bytes_per_s = out.bytes_read as f64 / out.duration_s;
    out.latency = LatencySummary::merged(runs.iter().map(|r| &r.results.latency))?;
    out.connect_time = LatencySummary::merged(runs.iter().map(|r| &r.results.connect_time))?;
    out.thread_requests_per_s =
        Spread::pooled(runs.iter().map(|r| &r.results.thread_requests_per_s));
    out.timeline = aligned_timeline(runs, t0);
    // A slice's percentiles come from a histogram the Run does not keep: segments'
    // slices cannot be added exactly, so a merged Run has the seconds only.
    if runs.len() > 1 {
        out.slices = Vec::new();
    }
    out.endpoints = crate::run::merged_endpoints(runs.iter().map(|r| &r.results.endpoints[..]))?;
    out.quic = crate::run::QuicStats::merged(runs.iter().map(|r| r.results.quic.as_ref()))?;
    Ok(out)
}

/// Each segment's seconds put on the wall clock (its start rounded to the second from
/// `t0`) and added: responses, errors and bytes summed, and the seconds' histograms
/// where every segment kept them (for `--hdr-log`). A merged second's p50 and p99 are
/// the highest of the segments' (an upper bound; Runs recorded before the seconds kept
/// histograms cannot do better), its max is exact.
fn aligned_timeline(runs: &[&Run], t0: f64) -> Vec<Second> {
    let mut seconds: BTreeMap<u64, Second> = BTreeMap::new();
    for r in runs {
        let offset = (r.started_unix_s - t0).round().max(0.0) as u64;
        for s in &r.results.timeline {
            let t = offset + s.t_s;
            let m = seconds.entry(t).or_insert_with(|| Second {
                t_s: t,
                duration_s: 0.0,
                responses: 0,
                errors: 0,
                bytes_read: 0,
                p50_us: 0,
                p99_us: 0,
                max_us: 0,
                histogram: Some(String::new()),
            });
            m.duration_s = m.duration_s.max(s.duration_s);
            m.responses += s.responses;
            m.errors += s.errors;
            m.bytes_read += s.bytes_read;
            m.p50_us = m.p50_us.max(s.p50_us);
            m.p99_us = m.p99_us.max(s.p99_us);
            m.max_us = m.max_us.max(s.max_us);
            m.histogram = add_encoded(m.histogram.take(), s.histogram.as_deref());
        }
    }
    seconds.into_values().collect()
}

/// Two seconds' histograms added (an empty string is none yet); `None` once either is
/// missing or unreadable: the merged second then has no histogram rather than a partial one.
fn add_encoded(sum: Option<String>, add: Option<&str>) -> Option<String> {
    let (sum, add) = (sum?, add?);
    let mut h = crate::run::decode_histogram(add).ok()?;
    if !sum.is_empty() {
        h.add(crate::run::decode_histogram(&sum).ok()?).ok()?;
    }
    Some(crate::run::encode_histogram(&h))
}

/// Every segment's worker threads in one self-check: the mean over all threads, and
/// saturated if any segment's client was.
fn all_clients(runs: &[&Run]) -> ClientCheck {
    let threads: Vec<_> = runs
        .iter()
        .flat_map(|r| r.client.threads.iter().cloned())
        .collect();
    let busy_pct_mean = if threads.is_empty() {
        0.0
    } else {
        threads.iter().map(|t| t.busy_pct).sum::<f64>() / threads.len() as f64
    };
    ClientCheck {
        threads,
        busy_pct_mean,
        saturated: runs.iter().any(|r| r.client.saturated),
        // The segment its quota held back most speaks for the whole load.
        quota: runs
            .iter()
            .filter_map(|r| r.client.quota.clone())
            .max_by(|a, b| a.throttled_pct().total_cmp(&b.throttled_pct())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Segment;

    /// A recorded Run made segment `index` of 2, started at `started`.
    fn segment(index: u32, started: f64) -> Part {
        let p = format!(
            "{}/tests/data/runs/healthy-before.json",
            env!("CARGO_MANIFEST_DIR")
        );
        let mut run = Run::from_json(&std::fs::read_to_string(p).unwrap()).unwrap();
        run.started_unix_s = started;
        run.segment = Some(Segment {
            index,
            count: 2,
            whole_connections: run.spec.connections * 2,
            whole_requests: None,
            whole_rate: None,
            start_at_unix_s: None,
            host: format!("h{index}"),
        });
        Part {
            name: format!("seg{index}.json"),
            run,
        }
    }

    #[test]
    fn timelines_are_aligned_on_the_wall_clock() {
        let a = segment(1, 1000.0);
        let b = segment(2, 1001.0);
        let secs = a.run.results.timeline.len();
        let per_second: Vec<u64> = a.run.results.timeline.iter().map(|s| s.responses).collect();
        let m = merge(vec![a, b], &BTreeMap::new()).unwrap();
        let t = &m.results.timeline;
        // The second segment started a second later: its seconds are one later.
        assert_eq!(t.len(), secs + 1);
        assert_eq!(t[0].responses, per_second[0]);
        assert_eq!(t[1].responses, per_second[1] + per_second[0]);
        assert_eq!(t[secs].responses, per_second[secs - 1]);
        let d = m.merged.as_ref().unwrap();
        assert_eq!(d.missing, Vec::<u32>::new());
        assert_eq!(m.results.duration_s, 1.0 + d.segments[1].duration_s);
    }

    #[test]
    fn a_missing_segment_is_named_with_its_reason() {
        let reasons = BTreeMap::from([(2, "node died".to_string())]);
        let m = merge(vec![segment(1, 1000.0)], &reasons).unwrap();
        let d = m.merged.unwrap();
        assert_eq!(d.missing, [2]);
        assert_eq!(d.missing_reasons, ["node died"]);
        assert_eq!(m.spec.connections, d.segments[0].connections * 2);
    }
}
