//! Statistics for deciding whether two sets of measurements differ: means with a 95%
//! confidence interval, Welch's t-test, and the lag-1 autocorrelation correction for
//! per-second series (neighbouring seconds of one run are not independent samples).
//!
//! Welch's test (unequal variances) is the usual choice for comparing benchmark
//! repetitions (it is what `hyperfine`'s `scripts/welch_ttest.py` does); the
//! effective-sample-size correction n·(1−r)/(1+r) for an AR(1)-like series is from
//! Wilks, *Statistical Methods in the Atmospheric Sciences*, §5.2.4.

use statrs::distribution::{ContinuousCDF, StudentsT};

/// Mean and sample standard deviation (n − 1).
pub fn mean_sd(xs: &[f64]) -> (f64, f64) {
    let n = xs.len() as f64;
    if xs.is_empty() {
        return (0.0, 0.0);
    }
    let mean = xs.iter().sum::<f64>() / n;
    if xs.len() < 2 {
        return (mean, 0.0);
    }
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
    (mean, var.sqrt())
}

/// The two-sided 97.5% quantile of Student's t with `df` degrees of freedom.
fn t975(df: f64) -> f64 {
    StudentsT::new(0.0, 1.0, df.max(1.0))
        .map(|t| t.inverse_cdf(0.975))
        .unwrap_or(f64::NAN)
}

/// A mean with its 95% confidence interval (Student's t, n − 1 degrees of freedom).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Interval {
    pub mean: f64,
    /// Half-width of the 95% interval; NaN with fewer than two values.
    pub half_width: f64,
    pub n: usize,
}

pub fn interval(xs: &[f64]) -> Interval {
    let (mean, sd) = mean_sd(xs);
    let n = xs.len();
    let half_width = if n < 2 {
        f64::NAN
    } else {
        t975(n as f64 - 1.0) * sd / (n as f64).sqrt()
    };
    Interval {
        mean,
        half_width,
        n,
    }
}

/// Lag-1 autocorrelation of a series (0 for fewer than three values).
pub fn lag1_autocorrelation(xs: &[f64]) -> f64 {
    if xs.len() < 3 {
        return 0.0;
    }
    let (mean, _) = mean_sd(xs);
    let var: f64 = xs.iter().map(|x| (x - mean).powi(2)).sum();
    if var == 0.0 {
        return 0.0;
    }
    let cov: f64 = xs.windows(2).map(|w| (w[0] - mean) * (w[1] - mean)).sum();
    cov / var
}

/// How many independent samples a positively autocorrelated series is worth:
/// n·(1−r)/(1+r), never more than n.
pub fn effective_n(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let r = lag1_autocorrelation(xs).clamp(0.0, 0.99);
    (n * (1.0 - r) / (1.0 + r)).min(n)
}

/// Welch's two-sided t-test of equal means, each side given as (mean, sd, n) with `n`
/// possibly an effective sample size. `None` when either side has fewer than two
/// samples' worth of data.
pub fn welch_p(a: (f64, f64, f64), b: (f64, f64, f64)) -> Option<f64> {
    let ((ma, sa, na), (mb, sb, nb)) = (a, b);
    if na < 2.0 || nb < 2.0 {
        return None;
    }
    let (va, vb) = (sa * sa / na, sb * sb / nb);
    if va + vb == 0.0 {
        // No spread at all: any difference is certain, none is none.
        return Some(if ma == mb { 1.0 } else { 0.0 });
    }
    let t = (ma - mb).abs() / (va + vb).sqrt();
    let df = (va + vb).powi(2) / (va * va / (na - 1.0) + vb * vb / (nb - 1.0));
    let dist = StudentsT::new(0.0, 1.0, df.max(1.0)).ok()?;
    Some(2.0 * (1.0 - dist.cdf(t)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interval_matches_a_t_table() {
        // n = 5, sd = 1: half-width = t(0.975, 4) / sqrt(5) = 2.776 / 2.236.
        let i = interval(&[-1.0, -0.5, 0.0, 0.5, 1.0]);
        assert!((mean_sd(&[1.0, 2.0, 3.0]).1 - 1.0).abs() < 1e-12);
        assert_eq!(i.n, 5);
        assert!(i.mean.abs() < 1e-12);
        let (_, sd) = mean_sd(&[-1.0, -0.5, 0.0, 0.5, 1.0]);
        let want = 2.776_445 * sd / 5f64.sqrt();
        let got = interval(&[-1.0, -0.5, 0.0, 0.5, 1.0]).half_width;
        assert!((got - want).abs() < 1e-4, "{got} vs {want}");
        assert!(interval(&[3.0]).half_width.is_nan());
    }

    #[test]
    fn welch_agrees_with_scipy() {
        // scipy.stats.ttest_ind([1,2,3,4,5], [3,4,5,6,7], equal_var=False).pvalue = 0.0805
        let a = [1.0, 2.0, 3.0, 4.0, 5.0];
        let b = [3.0, 4.0, 5.0, 6.0, 7.0];
        let side = |x: &[f64]| {
            let (m, s) = mean_sd(x);
            (m, s, x.len() as f64)
        };
        let p = welch_p(side(&a), side(&b)).unwrap();
        assert!((p - 0.0805).abs() < 1e-3, "{p}");
        assert_eq!(welch_p(side(&a), (1.0, 0.0, 1.0)), None);
    }

    #[test]
    fn autocorrelated_series_count_for_less() {
        let trend: Vec<f64> = (0..100).map(|i| i as f64).collect();
        assert!(lag1_autocorrelation(&trend) > 0.9);
        assert!(effective_n(&trend) < 10.0);
        let alternating: Vec<f64> = (0..100).map(|i| (i % 2) as f64).collect();
        assert!(lag1_autocorrelation(&alternating) < 0.0);
        assert_eq!(effective_n(&alternating), 100.0);
    }
}
