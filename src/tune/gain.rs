//! The gain of a change over its A/B pairs: each pair's ratio on a log scale, their
//! mean and 95% interval, each side's spread, and whether the spread leaves the gain
//! standing.

use crate::run::{Gain, TunePair};

/// Whether the new side's spread leaves the gain standing. Its repetitions may vary
/// more than the old's only by what the gain dwarfs: gzip level 9 → 1 ran 115/s ± 1.0%
/// before and 1,114–1,308/s (± 7.6%) after, a gain of +880% at its interval's low end,
/// which no spread of 7.6% can hide. Nor can a spread hide a loss when every pair gained
/// more than `min_gain_pct`: php-fpm's 4 → 50 children beside other loads made 450, 450,
/// 63, 450, 450/s against 31-36/s (new ± 46%): its worst repetition still +75%.
pub(super) fn spread_ok(gain: &Gain, pairs: &[TunePair], min_gain_pct: f64) -> bool {
    gain.spread_new_pct <= 2.0 * gain.spread_old_pct + 5.0
        || gain.low_pct >= 4.0 * gain.spread_new_pct
        || (!pairs.is_empty() && pairs.iter().all(|p| p.gain_pct > min_gain_pct))
}

/// The gain of `new` over `old` as a log ratio (positive when better): pairs are
/// averaged and their interval taken on this scale (the geometric mean of the ratios),
/// where a halving and a doubling weigh the same. A load that served nothing would
/// make it infinite: one pair counts for at most ×11 (+1000%).
pub(super) fn log_gain(old: f64, new: f64, higher_is_better: bool) -> f64 {
    let (better, worse) = if higher_is_better {
        (new, old)
    } else {
        (old, new)
    };
    let cap = (1.0 + MAX_GAIN_PCT / 100.0).ln();
    if better <= 0.0 && worse <= 0.0 {
        return 0.0;
    }
    (better.max(1e-12) / worse.max(1e-12)).ln().clamp(-cap, cap)
}

/// Percent from a log ratio.
pub(super) fn pct(log: f64) -> f64 {
    (log.exp() - 1.0) * 100.0
}

/// The largest gain one pair counts for, percent.
const MAX_GAIN_PCT: f64 = 1000.0;

pub(super) fn gain_of(pairs: &[TunePair]) -> Gain {
    let g: Vec<f64> = pairs
        .iter()
        .map(|p| (1.0 + p.gain_pct / 100.0).ln())
        .filter(|g| g.is_finite())
        .collect();
    let i = crate::stats::interval(&g);
    let hw = if i.half_width.is_finite() {
        i.half_width
    } else {
        f64::INFINITY
    };
    let cv = |xs: Vec<f64>| {
        let (m, sd) = crate::stats::mean_sd(&xs);
        if m.abs() > 0.0 {
            sd / m.abs() * 100.0
        } else {
            0.0
        }
    };
    Gain {
        mean_pct: pct(i.mean),
        low_pct: pct(i.mean - hw),
        high_pct: pct(i.mean + hw),
        pairs: g.len() as u32,
        spread_old_pct: cv(pairs.iter().map(|p| p.old.objective).collect()),
        spread_new_pct: cv(pairs.iter().map(|p| p.new.objective).collect()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::LoadSummary;

    fn pairs(old: &[f64], new: &[f64]) -> Vec<TunePair> {
        let at = |x: f64| LoadSummary {
            objective: x,
            requests_per_s: x,
            good_per_s: x,
            p99_us: 0,
            errors: 0,
            non_2xx_3xx: 0,
            settled: Vec::new(),
        };
        old.iter()
            .zip(new)
            .map(|(&o, &n)| TunePair {
                old: at(o),
                new: at(n),
                gain_pct: ((n / o - 1.0) * 100.0).min(1000.0),
            })
            .collect()
    }

    /// tests/tune.rs beside other test binaries: one repetition of the new side starved
    /// (63/s among 450s) blew its spread up to 46%, and a sixfold gain was put back.
    #[test]
    fn a_spread_that_hides_no_loss_keeps_the_gain() {
        let p = pairs(
            &[36.0, 36.0, 36.0, 35.0, 31.0],
            &[450.0, 450.0, 63.0, 450.0, 450.0],
        );
        let g = gain_of(&p);
        assert!(
            g.spread_new_pct > 40.0 && g.low_pct < 4.0 * g.spread_new_pct,
            "{g:?}"
        );
        assert!(spread_ok(&g, &p, 2.0));
        // The same spread with one repetition worse than its old: erratic, put back.
        let p = pairs(
            &[36.0, 36.0, 36.0, 35.0, 31.0],
            &[450.0, 450.0, 30.0, 450.0, 450.0],
        );
        let g = gain_of(&p);
        assert!(g.low_pct > 2.0, "{g:?}");
        assert!(!spread_ok(&g, &p, 2.0), "{g:?}");
    }
}
