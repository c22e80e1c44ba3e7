//! Segments: one process's share of a load split over machines (`--segment I/N`).
//! Connections and the request budget are split so the N segments add up exactly to the
//! whole; `loadlens merge` adds their Runs up again.

use super::{Spec, SpecError};

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
    /// at the segment's connections.
    pub fn segment(&self, seg: SegmentOf) -> Result<Spec, SpecError> {
        let i = seg.index - 1;
        if seg.count > self.connections {
            return Err(SpecError::Flags(format!(
                "--segment {}/{}: {} segments need at least {} connections (-c is {}): each segment needs one",
                seg.index, seg.count, seg.count, seg.count, self.connections
            )));
        }
        if let Some(n) = self.requests.filter(|&n| n < seg.count as u64) {
            return Err(SpecError::Flags(format!(
                "--segment {}/{}: -n {n} cannot be split into {} segments of at least one request",
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
            ..self.clone()
        })
    }
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

    #[test]
    fn segment_flag_parses_and_refuses() {
        let s: SegmentOf = "2/3".parse().unwrap();
        assert_eq!((s.index, s.count), (2, 3));
        for bad in ["0/3", "4/3", "1/0", "x", "1/", "/2", "-1/2"] {
            assert!(bad.parse::<SegmentOf>().is_err(), "{bad}");
        }
    }
}
