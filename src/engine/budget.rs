//! The request budget of `-n`, shared by the workers: each request sent claims one
//! unit, and the claim's ordinal picks a `--targets` mix's request.

use std::sync::atomic::{AtomicI64, Ordering};

/// Shared request budget for `-n`: each request sent claims one unit.
#[derive(Debug)]
pub struct Budget(Option<(i64, AtomicI64)>);

/// The ordinal a claim returns when the run has no `-n`: the connection numbers its own
/// requests.
pub(super) const UNCOUNTED: u64 = u64::MAX;
/// A connection's ordinal when its next request is the last one again (a reused
/// connection the server closed before answering: retried on a new one).
pub(super) const RESEND: u64 = u64::MAX - 1;

impl Budget {
    pub fn new(requests: Option<u64>) -> Budget {
        Budget(requests.map(|n| {
            let n = n.min(i64::MAX as u64) as i64;
            (n, AtomicI64::new(n))
        }))
    }
    /// Claims one request: `None` when the budget is spent, else the request's ordinal
    /// (0, 1, … in claim order, whichever thread claims it: a `--targets` mix picks its
    /// target by it), or [`UNCOUNTED`] without `-n`.
    #[inline]
    pub(super) fn claim(&self) -> Option<u64> {
        match &self.0 {
            None => Some(UNCOUNTED),
            Some((total, left)) => {
                let l = left.fetch_sub(1, Ordering::Relaxed);
                (l > 0).then(|| (total - l) as u64)
            }
        }
    }
    /// How many requests were claimed (ordinals `0..claimed`), and of how many; `None`
    /// without `-n`.
    pub(super) fn claimed(&self) -> Option<(u64, u64)> {
        let (total, left) = self.0.as_ref()?;
        let left = left.load(Ordering::Relaxed).clamp(0, *total);
        Some(((total - left) as u64, *total as u64))
    }
}
