//! Change points in a series by E-divisive means with a permutation test.
//!
//! Matteson & James, "A Nonparametric Approach for Multiple Change Point Analysis of
//! Multivariate Data" (JASA 2014), as MongoDB (Daly et al., ICPE 2020) and Apache Otava
//! (formerly Hunter) use it on performance histories: the split τ of a segment that
//! maximises the energy distance between the values before and after it (α = 1),
//!
//!   Q(τ) = τ·m/(τ+m) · ( 2/(τ·m) Σ|xᵢ−xⱼ| − 1/C(τ,2) Σ|xᵢ−xₖ| − 1/C(m,2) Σ|xⱼ−xₗ| )
//!
//! (across, within the left, within the right; m = the values after τ), is kept when a
//! permutation test says so: the segment shuffled `permutations` times, the p-value is
//! (1 + shuffles whose best Q reaches the observed one) / (1 + shuffles). A kept split
//! divides its segment and each part is searched again (binary segmentation), until no
//! split is significant. The shuffles come from a seeded generator, so the same series
//! and seed give the same change points (what a CI gate needs; Otava replaced the
//! permutations by a t-test for the same reason).
//!
//! Each side of a split holds at least [`Options::min_size`] values (2 by default: with
//! one value after a step, a step and an outlier look the same).

/// How change points are searched.
#[derive(Debug, Clone, Copy)]
pub struct Options {
    /// A split is kept when its p-value is below this.
    pub max_p: f64,
    /// Shuffles per test.
    pub permutations: u32,
    /// The generator's seed.
    pub seed: u64,
    /// Fewest values on each side of a split.
    pub min_size: usize,
    /// A split whose segments' means differ by less than this, percent of the mean
    /// before, is not kept (nor searched further): Otava's `min_magnitude`. The
    /// permutation test alone keeps about `max_p` of the splits of pure noise however
    /// small the noise is; a floor on the size keeps the ones nobody would act on out.
    pub min_change_pct: f64,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            max_p: 0.05,
            permutations: 199,
            seed: 1,
            min_size: 2,
            min_change_pct: 0.0,
        }
    }
}

/// A change point: the series changes from `index` on.
#[derive(Debug, Clone, PartialEq)]
pub struct ChangePoint {
    /// The first value after the change.
    pub index: usize,
    /// The permutation test's p-value.
    pub p: f64,
}

/// The change points of `xs`, by index.
pub fn change_points(xs: &[f64], o: &Options) -> Vec<ChangePoint> {
    let mut rng = SplitMix(o.seed);
    let mut found = Vec::new();
    let mut segments = vec![(0usize, xs.len())];
    while let Some((a, b)) = segments.pop() {
        let seg = &xs[a..b];
        let Some((tau, q)) = best_split(seg, o.min_size) else {
            continue;
        };
        let mut shuffled = seg.to_vec();
        let mut reached = 0u32;
        for _ in 0..o.permutations {
            rng.shuffle(&mut shuffled);
            if best_split(&shuffled, o.min_size).is_some_and(|(_, qp)| qp >= q) {
                reached += 1;
            }
        }
        let p = (1.0 + reached as f64) / (1.0 + o.permutations as f64);
        if p < o.max_p && change_pct(&seg[..tau], &seg[tau..]).abs() >= o.min_change_pct {
            found.push(ChangePoint { index: a + tau, p });
            segments.push((a, a + tau));
            segments.push((a + tau, b));
        }
    }
    found.sort_by_key(|c| c.index);
    found
}

/// How far the mean of `after` is from the mean of `before`, percent of the latter.
pub fn change_pct(before: &[f64], after: &[f64]) -> f64 {
    let mean = |xs: &[f64]| xs.iter().sum::<f64>() / xs.len().max(1) as f64;
    let (b, a) = (mean(before), mean(after));
    if b != 0.0 {
        (a - b) / b * 100.0
    } else if a == 0.0 {
        0.0
    } else {
        100.0
    }
}

/// The split of `xs` with the highest Q, and Q; `None` when no split leaves `min_size`
/// values on each side, or the values are all equal.
fn best_split(xs: &[f64], min_size: usize) -> Option<(usize, f64)> {
    let n = xs.len();
    let min = min_size.max(1);
    if n < 2 * min {
        return None;
    }
    // Sums of |xᵢ − xⱼ| kept as τ moves right: within the left, across, and the whole.
    let d = |i: usize, j: usize| (xs[i] - xs[j]).abs();
    let total: f64 = (0..n)
        .map(|i| (i + 1..n).map(|j| d(i, j)).sum::<f64>())
        .sum();
    if total == 0.0 {
        return None;
    }
    let mut left = 0.0;
    let mut across: f64 = (1..n).map(|j| d(0, j)).sum();
    let mut best: Option<(usize, f64)> = None;
    // τ = number of values on the left.
    for tau in 1..n {
        if tau > 1 {
            // Move xs[tau-1] from the right to the left.
            let k = tau - 1;
            let to_left: f64 = (0..k).map(|i| d(i, k)).sum();
            let to_right: f64 = (k + 1..n).map(|j| d(k, j)).sum();
            left += to_left;
            across += to_right - to_left;
        }
        let m = n - tau;
        if tau < min || m < min {
            continue;
        }
        let right = total - left - across;
        let (t, mf) = (tau as f64, m as f64);
        let within = |sum: f64, k: f64| {
            if k < 2.0 {
                0.0
            } else {
                sum / (k * (k - 1.0) / 2.0)
            }
        };
        let e = 2.0 * across / (t * mf) - within(left, t) - within(right, mf);
        let q = t * mf / (t + mf) * e;
        if best.is_none_or(|(_, bq)| q > bq) {
            best = Some((tau, q));
        }
    }
    best
}

/// SplitMix64 (Steele, Lea & Flood 2014): small, seeded, good enough to shuffle.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// Fisher–Yates.
    fn shuffle(&mut self, xs: &mut [f64]) {
        for i in (1..xs.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            xs.swap(i, j);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gaussian-ish noise from the same generator (sum of 12 uniforms − 6).
    fn noise(seed: u64, n: usize, mean: f64, sd: f64) -> Vec<f64> {
        let mut g = SplitMix(seed);
        (0..n)
            .map(|_| {
                let s: f64 = (0..12)
                    .map(|_| (g.next() >> 11) as f64 / (1u64 << 53) as f64)
                    .sum();
                mean + sd * (s - 6.0)
            })
            .collect()
    }

    fn step(seed: u64, n: usize, at: usize, before: f64, after: f64) -> Vec<f64> {
        let mut xs = noise(seed, n, 0.0, 2.0);
        for (i, x) in xs.iter_mut().enumerate() {
            *x += if i < at { before } else { after };
        }
        xs
    }

    #[test]
    fn a_step_up_is_found_where_it_is() {
        let xs = step(7, 30, 20, 100.0, 120.0);
        let cps = change_points(&xs, &Options::default());
        assert_eq!(cps.iter().map(|c| c.index).collect::<Vec<_>>(), [20]);
        assert!(cps[0].p < 0.05);
    }

    #[test]
    fn a_step_down_is_found_at_either_end_of_the_series() {
        for at in [2, 5, 15, 25, 28] {
            let xs = step(11, 30, at, 100.0, 80.0);
            let cps = change_points(&xs, &Options::default());
            assert_eq!(
                cps.iter().map(|c| c.index).collect::<Vec<_>>(),
                [at],
                "step at {at}: {xs:?}"
            );
        }
    }

    #[test]
    fn two_steps_are_both_found() {
        let mut xs = step(3, 40, 10, 100.0, 130.0);
        for x in &mut xs[28..] {
            *x -= 60.0;
        }
        let cps = change_points(&xs, &Options::default());
        assert_eq!(cps.iter().map(|c| c.index).collect::<Vec<_>>(), [10, 28]);
    }

    #[test]
    fn noise_alone_rarely_has_a_change_point() {
        // 20 series of pure noise: at p < 0.05 most hold none (the issue: 19 of 20).
        let quiet = (0..20u64)
            .filter(|&s| {
                change_points(&noise(100 + s, 30, 100.0, 5.0), &Options::default()).is_empty()
            })
            .count();
        assert!(
            quiet >= 19,
            "{quiet} of 20 noise series without a change point"
        );
    }

    #[test]
    fn the_p_value_threshold_is_respected() {
        // A small step (one standard deviation): found at a lax threshold, its p-value
        // above a strict one, and nothing kept above the threshold given.
        let xs = step(5, 30, 15, 100.0, 102.0);
        let lax = change_points(
            &xs,
            &Options {
                max_p: 0.5,
                ..Options::default()
            },
        );
        assert!(lax.iter().all(|c| c.p < 0.5));
        let strict = Options {
            max_p: 0.002,
            permutations: 999,
            ..Options::default()
        };
        let found = change_points(&xs, &strict);
        assert!(found.iter().all(|c| c.p < 0.002));
        // The smallest p-value a test can give is 1/(1+permutations): a threshold at or
        // below it keeps nothing, even for a large step.
        let big = step(5, 30, 15, 100.0, 200.0);
        let none = Options {
            max_p: 1.0 / 200.0,
            ..Options::default()
        };
        assert!(change_points(&big, &none).is_empty());
    }

    #[test]
    fn a_floor_on_the_change_keeps_small_splits_out() {
        // A 4% step (2 sd of noise): without a floor it is found, and so is a split of
        // the noise after it (at 21, p < 0.05 all the same: what a floor is for); under
        // a 5% floor neither is kept; a 20% step is, alone.
        let small = step(5, 30, 15, 100.0, 104.0);
        let found = change_points(&small, &Options::default());
        assert_eq!(found.iter().map(|c| c.index).collect::<Vec<_>>(), [15, 21]);
        let floor = Options {
            min_change_pct: 5.0,
            ..Options::default()
        };
        assert!(change_points(&small, &floor).is_empty());
        let big = step(5, 30, 15, 100.0, 80.0);
        assert_eq!(
            change_points(&big, &floor)
                .iter()
                .map(|c| c.index)
                .collect::<Vec<_>>(),
            [15]
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_answer() {
        let xs = step(9, 30, 12, 100.0, 104.0);
        let o = Options {
            seed: 42,
            ..Options::default()
        };
        assert_eq!(change_points(&xs, &o), change_points(&xs, &o));
    }

    #[test]
    fn short_or_flat_series_have_none() {
        let o = Options::default();
        assert!(change_points(&[], &o).is_empty());
        assert!(change_points(&[1.0, 2.0, 3.0], &o).is_empty());
        assert!(change_points(&[5.0; 30], &o).is_empty());
    }
}
