//! Open-loop pacing (`-R`): a timerfd in the worker's poller wakes the loop when the
//! next scheduled request is due, with sub-millisecond precision and no busy wait.

use std::io;
use std::time::{Duration, Instant};

use mio::{Interest, Poll, Token};

use crate::spec::{Spec, StageKind, Stages};

/// A timerfd in the poller, for open-loop pacing with sub-millisecond precision.
pub(super) struct PaceTimer(std::os::fd::OwnedFd);

impl PaceTimer {
    pub(super) fn new(poll: &Poll, token: Token) -> io::Result<PaceTimer> {
        use std::os::fd::{AsRawFd, FromRawFd};
        // SAFETY: timerfd_create returns a new fd or -1; we own it from here.
        let fd = unsafe {
            libc::timerfd_create(
                libc::CLOCK_MONOTONIC,
                libc::TFD_NONBLOCK | libc::TFD_CLOEXEC,
            )
        };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        let owned = unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) };
        poll.registry().register(
            &mut mio::unix::SourceFd(&owned.as_raw_fd()),
            token,
            Interest::READABLE,
        )?;
        Ok(PaceTimer(owned))
    }

    /// Fires once after `after` (at least 1 µs: a zero value would disarm it).
    pub(super) fn arm(&self, after: Duration) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let after = after.max(Duration::from_micros(1));
        let spec = libc::itimerspec {
            it_interval: libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            },
            it_value: libc::timespec {
                tv_sec: after.as_secs() as libc::time_t,
                tv_nsec: after.subsec_nanos() as libc::c_long,
            },
        };
        // SAFETY: a valid timerfd and a fully initialised itimerspec.
        if unsafe { libc::timerfd_settime(self.0.as_raw_fd(), 0, &spec, std::ptr::null_mut()) } != 0
        {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Reads the expiry count so the (edge-triggered) fd can fire again.
    pub(super) fn clear(&self) {
        use std::os::fd::AsRawFd;
        let mut n = 0u64;
        // SAFETY: reading 8 bytes into a u64 we own.
        unsafe {
            libc::read(self.0.as_raw_fd(), (&mut n as *mut u64).cast(), 8);
        }
    }
}

/// The open-loop schedule every engine follows (the TCP workers and HTTP/3's): each
/// connection sends a request every `pace` (connections ÷ `-R`), the connections of a
/// thread staggered over one pace; or each request at its own due time, by its ordinal
/// (`--replay` at a speed, rate `--stages`), `pace` then set only to mark the open loop.
pub(super) fn connection_pace(spec: &Spec, due_us: &[u64]) -> Option<Duration> {
    spec.rate
        .map(|r| Duration::from_secs_f64(spec.connections as f64 / r))
        .or(
            (!due_us.is_empty() || super::stages::rate_stages(spec).is_some())
                .then_some(Duration::from_secs(1)),
        )
}

/// When slot `i` of a thread's `n` connections sends its first request.
pub(super) fn first_due(start: Instant, pace: Option<Duration>, i: usize, n: usize) -> Instant {
    start + pace.map_or(Duration::ZERO, |p| p * i as u32 / n.max(1) as u32)
}

/// When request `ordinal` is due by its own time (`--replay` at a speed, rate
/// `--stages`); `None` when the schedule is by connection (`-R`) or the request has no
/// time (due at the end or later).
pub(super) fn due_of(
    start: Instant,
    due_us: &[u64],
    stages: Option<&Stages>,
    ordinal: u64,
) -> Option<Instant> {
    if let Some(&us) = due_us.get(ordinal as usize) {
        return Some(start + Duration::from_micros(us));
    }
    let t = stages
        .filter(|s| s.kind == StageKind::Rate)?
        .due_s(ordinal)?;
    Some(start + Duration::from_secs_f64(t))
}

/// Requests the schedule had due before `end` that no connection or stream had claimed
/// when the run ended (ordinals `claimed..total`, claimed in order): the client was
/// behind its schedule — every connection or stream busy, or the client itself starved
/// of a CPU. Only a schedule by request has them (`--replay` at a speed, rate
/// `--stages`); 0 otherwise. The walk stops at the first request due at the end or
/// later, so it costs one step per request owed.
pub(super) fn due_unclaimed(
    start: Instant,
    end: Instant,
    due_us: &[u64],
    stages: Option<&Stages>,
    (claimed, total): (u64, u64),
) -> u64 {
    (claimed..total)
        .take_while(|&n| due_of(start, due_us, stages, n).is_some_and(|at| at < end))
        .count() as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_was_due_and_never_claimed_is_counted_up_to_the_end() {
        let start = Instant::now();
        let at = |s: f64| start + Duration::from_secs_f64(s);
        // A ramp to 40/s over 1 s, then 40/s for 1 s: 60 requests, the 20th due at 1 s.
        let st = Stages::parse("1s:40,1s:40").unwrap();
        assert_eq!(st.total_requests(), 60);
        assert_eq!(due_unclaimed(start, at(2.0), &[], Some(&st), (0, 60)), 60);
        assert_eq!(due_unclaimed(start, at(2.0), &[], Some(&st), (22, 60)), 38);
        // Stopped at 1 s: the 20 due by then (0 ..= 19, the 20th at 1 s is not before).
        assert_eq!(due_unclaimed(start, at(1.0), &[], Some(&st), (5, 60)), 15);
        assert_eq!(due_unclaimed(start, at(2.0), &[], Some(&st), (60, 60)), 0);
        // A replay's own times (µs): two of the three unclaimed were due before 1.5 s.
        let due = [0, 500_000, 1_000_000, 1_400_000, 2_000_000];
        assert_eq!(due_unclaimed(start, at(1.5), &due, None, (2, 5)), 2);
        // A schedule by connection (`-R`) has no time per request: nothing to count.
        assert_eq!(due_unclaimed(start, at(9.0), &[], None, (0, 100)), 0);
    }
}
