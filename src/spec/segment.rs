//! Segments: one process's share of a load split over machines (`--segment I/N`).
//! Connections and the request budget are split so the N segments add up exactly to the
//! whole; `loadlens merge` adds their Runs up again. A mix is split by its requests:
//! segment I sends every N-th request of the one sequence from the I-th — of a
//! `--targets` mix's seeded order, or of a `--replay` log each at its own due time — so
//! the segments together send what one process would.

use std::sync::Arc;

use super::targets::{gcd, schedule};
use super::{MixSpec, Spec, SpecError};

/// `--segment I/N`: this process runs the I-th of N shares of a load (I from 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SegmentOf {
    pub index: u32,
    pub count: u32,
}

impl std::str::FromStr for SegmentOf {
    type Err = String;
    fn from_str(s: &str) -> Result<SegmentOf, String> {
        let bad = || format!("invalid segment `{s}`: expected I/N, e.g. 2/3 (the second of three)");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if count == 0 || index == 0 || index > count {
            return Err(format!(
                "invalid segment `{s}`: I must be in 1..={count} (segments are numbered from 1)"
            ));
        }
        Ok(SegmentOf { index, count })
    }
}

/// The share of `total` that part `index` (0-based) of `count` takes: the parts differ
/// by at most one and add up to `total` exactly (the first ones take the remainder).
pub fn share_of(total: u64, index: u32, count: u32) -> u64 {
    total / count as u64 + u64::from((index as u64) < total % count as u64)
}

impl Spec {
    /// This segment's share of the load: connections and the request budget split so
    /// the N segments add up exactly to the whole; the rate split in proportion to the
    /// connections, so every connection keeps the whole load's pace (connections/rate)
    /// and the segments' schedules together are the whole schedule. Threads are capped
    /// at the segment's connections. A mix's requests are dealt out as [`mix_share`]
    /// says (a replay's `-n` is the log's count, so the budgets match the requests
    /// dealt; a `--targets` mix's `-n` share is the number of its places below `-n`).
    pub fn segment(&self, seg: SegmentOf) -> Result<Spec, SpecError> {
        let i = seg.index - 1;
        if seg.count > self.connections {
            return Err(SpecError::Flags(format!(
                "--segment {}/{}: {} segments need at least {} connections (-c is {}): each segment needs one",
                seg.index, seg.count, seg.count, seg.count, self.connections
            )));
        }
        if let Some(n) = self.requests.filter(|&n| n < seg.count as u64) {
            let what = match self.mix.as_ref().and_then(|m| m.replay.as_ref()) {
                Some(_) if n == 1 => "the replayed log's one request".to_string(),
                Some(_) => format!("the replayed log's {n} requests"),
                None => format!("-n {n}"),
            };
            return Err(SpecError::Flags(format!(
                "--segment {}/{}: {what} cannot be split into {} segments of at least one request",
                seg.index, seg.count, seg.count
            )));
        }
        let connections = share_of(self.connections as u64, i, seg.count) as u32;
        Ok(Spec {
            connections,
            threads: self.threads.min(connections),
            requests: self.requests.map(|n| share_of(n, i, seg.count)),
            rate: self
                .rate
                .map(|r| r * connections as f64 / self.connections as f64),
            mix: self.mix.as_ref().map(|m| mix_share(m, i, seg.count)),
            ..self.clone()
        })
    }
}

/// Part `index` (0-based) of `count` of a mix: the requests whose place in the one
/// sequence the whole load sends is `index` modulo `count`. Dealt one by one rather
/// than in blocks, every stretch of the sequence is shared out within one request of
/// even. The targets and endpoint names stay the whole mix's, so the segments' Runs
/// name their endpoints alike and `merge` adds them by name; the recorded mix (and a
/// replay's record) stays the whole one's (merge requires the segments' specs equal but
/// for the split fields).
///
/// A replay: the log's requests in its time order, each still due at its time in the
/// whole log (from the log's first request, ÷ `--speed`), not moved up to close the
/// gaps the other segments fill, so each segment's load follows the log's shape.
///
/// A `--targets` mix: its seeded order (`targets::schedule`, a table sent round and
/// round) taken at places `index`, `index + count`, … Under `-n` the segment's k-th
/// claim is the whole load's request `index + k·count`, so "the k-th request is always
/// the same target whoever sends it" holds across the segments, and N segments of
/// `-n` send exactly the requests of one unsplit `-n` run. The places repeat after
/// `len / gcd(len, count)` of them (`count` times round the table), so the segment's
/// table is at most as long as the whole one.
fn mix_share(mix: &MixSpec, index: u32, count: u32) -> MixSpec {
    if mix.sequence.is_empty() {
        let whole = schedule(&mix.loaded.weights(), mix.seed, mix.sequential);
        return MixSpec {
            sequence: Arc::new(every_round(&whole, index, count)),
            ..mix.clone()
        };
    }
    MixSpec {
        sequence: Arc::new(every(&mix.sequence, index, count)),
        // Empty at `--speed max` (no due times), so empty here too.
        due_us: Arc::new(every(&mix.due_us, index, count)),
        ..mix.clone()
    }
}

/// The items at `index`, `index + count`, `index + 2 count`, …
fn every<T: Copy>(v: &[T], index: u32, count: u32) -> Vec<T> {
    v.iter()
        .skip(index as usize)
        .step_by(count as usize)
        .copied()
        .collect()
}

/// The same of `v` repeated without end, as one period: the items at `(index + k
/// count) mod len` for k below `len / gcd(len, count)`, after which they repeat (so
/// item `k mod period` of the result is item `(index + k count) mod len` of `v` for
/// every k).
fn every_round<T: Copy>(v: &[T], index: u32, count: u32) -> Vec<T> {
    let len = v.len() as u64;
    let period = len / gcd(len, count as u64);
    (0..period)
        .map(|k| v[((index as u64 + k * count as u64) % len) as usize])
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(url: &str) -> Spec {
        super::super::tests::spec(url)
    }

    #[test]
    fn segments_add_up_to_the_whole() {
        let mut s = spec("http://127.0.0.1/");
        s.connections = 10;
        s.threads = 4;
        s.requests = Some(1001);
        s.rate = Some(333.0);
        let parts: Vec<Spec> = (1..=3)
            .map(|i| s.segment(SegmentOf { index: i, count: 3 }).unwrap())
            .collect();
        let conns: Vec<u32> = parts.iter().map(|p| p.connections).collect();
        assert_eq!(conns, [4, 3, 3]);
        let reqs: u64 = parts.iter().map(|p| p.requests.unwrap()).sum();
        assert_eq!(reqs, 1001);
        let rate: f64 = parts.iter().map(|p| p.rate.unwrap()).sum();
        assert!((rate - 333.0).abs() < 1e-9, "{rate}");
        // Every connection keeps the whole load's pace.
        for p in &parts {
            let pace = p.connections as f64 / p.rate.unwrap();
            assert!((pace - 10.0 / 333.0).abs() < 1e-12);
            assert!(p.threads <= p.connections);
        }
        assert!(s
            .segment(SegmentOf {
                index: 1,
                count: 11
            })
            .is_err());
        s.requests = Some(2);
        assert!(s.segment(SegmentOf { index: 1, count: 3 }).is_err());
    }

    /// A replay's segments deal out the log's requests in turn, each at its due time in
    /// the whole log: together, request for request, the whole replay.
    #[test]
    fn a_replay_is_dealt_out_at_its_own_times() {
        let log: String = (0..7)
            .map(|i| format!("{{\"t\": {}, \"url\": \"/{}\"}}\n", i as f64 * 0.5, i % 3))
            .collect();
        for speed in [Some(2.0), None] {
            let mut s = spec("http://127.0.0.1/");
            s.connections = 4;
            let mix = super::super::replay::from_text(log.as_bytes(), "l", &s.url, speed).unwrap();
            s.requests = Some(mix.replay.as_ref().unwrap().requests);
            s.mix = Some(mix);
            let whole = s.mix.as_ref().unwrap();
            let parts: Vec<Spec> = (1..=3)
                .map(|i| s.segment(SegmentOf { index: i, count: 3 }).unwrap())
                .collect();
            let mut sent = Vec::new();
            for (i, p) in parts.iter().enumerate() {
                let m = p.mix.as_ref().unwrap();
                assert_eq!(p.requests, Some(m.sequence.len() as u64));
                assert_eq!(
                    m.due_us.len(),
                    if speed.is_some() { m.sequence.len() } else { 0 }
                );
                // The whole log's targets, names and record in every segment.
                assert_eq!(m.endpoints, whole.endpoints);
                assert_eq!(m.targets, whole.targets);
                assert_eq!(m.replay.as_ref().unwrap().requests, 7);
                for (k, &t) in m.sequence.iter().enumerate() {
                    let at = m.due_us.get(k).copied();
                    sent.push((i + 3 * k, t, at));
                }
            }
            assert_eq!(
                parts
                    .iter()
                    .map(|p| p.requests.unwrap())
                    .collect::<Vec<_>>(),
                [3, 2, 2]
            );
            sent.sort();
            let want: Vec<_> = (0..7)
                .map(|j| (j, whole.sequence[j], whole.due_us.get(j).copied()))
                .collect();
            assert_eq!(sent, want);
            if speed.is_some() {
                // Segment 2's first request is the log's second: due 0.5 s ÷ 2 in.
                assert_eq!(parts[1].mix.as_ref().unwrap().due_us[0], 250_000);
            }
        }
    }

    /// A `--targets` mix's segments take the one seeded order in turn: segment I's k-th
    /// request is the whole load's request I + kN (from 0), whatever N, the weights or
    /// `--sequential`, so N segments of `-n` send an unsplit run's `-n` requests, each
    /// once; and no segment's table is longer than the whole one's.
    #[test]
    fn a_targets_mix_is_dealt_out_from_one_order() {
        use crate::spec::Requests;
        let text: String = (1..=7)
            .map(|w| format!("{{\"url\": \"/p{w}\", \"weight\": {w}}}\n"))
            .collect();
        for (sequential, seed) in [(false, 1), (false, 42), (true, 1)] {
            let mut s = spec("http://127.0.0.1/");
            s.connections = 12;
            let base = s.url.clone();
            let (loaded, endpoints) = super::super::targets::parse(
                text.as_bytes(),
                "t",
                &base,
                std::path::Path::new("."),
            )
            .unwrap();
            s.mix = Some(MixSpec {
                file: "t".into(),
                seed,
                sequential,
                targets: loaded.len(),
                endpoints,
                replay: None,
                loaded: Arc::new(loaded),
                sequence: Arc::default(),
                due_us: Arc::default(),
            });
            let target = s.parse_url().unwrap();
            let whole = Requests::build(&s, &target, b"");
            for n in [1u64, 2, 3, 4, 5, 7, 12] {
                let total = 3 * whole.order.len() as u64 + 5;
                s.requests = Some(total);
                let mut sent = vec![None; total as usize];
                for i in 1..=n as u32 {
                    let part = s
                        .segment(SegmentOf {
                            index: i,
                            count: n as u32,
                        })
                        .unwrap();
                    let m = part.mix.as_ref().unwrap();
                    assert!(m.due_us.is_empty() && m.replay.is_none());
                    let r = Requests::build(&part, &target, b"");
                    assert!(r.order.len() <= whole.order.len());
                    for k in 0..part.requests.unwrap() {
                        let at = (i as u64 - 1 + k * n) as usize;
                        assert!(sent[at].is_none(), "place {at} sent twice");
                        sent[at] = Some(r.pick(k));
                    }
                }
                let want: Vec<_> = (0..total).map(|k| Some(whole.pick(k))).collect();
                assert_eq!(sent, want, "{n} segments, sequential {sequential}");
            }
        }
    }

    #[test]
    fn segment_flag_parses_and_refuses() {
        let s: SegmentOf = "2/3".parse().unwrap();
        assert_eq!((s.index, s.count), (2, 3));
        for bad in ["0/3", "4/3", "1/0", "x", "1/", "/2", "-1/2"] {
            assert!(bad.parse::<SegmentOf>().is_err(), "{bad}");
        }
    }
}
