//! The client's reader of a watch channel: ssh's output read on a thread of its own
//! within the limits of `protocol` (#46). Lines through `bounded::LineReader`: 4 KiB
//! each and 64 KiB in all before the hello, 32 MiB after; the samples kept here as they
//! come, no faster than asked (`protocol::samples_allowed`); other messages queued for
//! the session only as many as it can have asked for. Past a limit the thread stops
//! reading and says why (`Shared::broke`); the session kills ssh's process group.

use std::io::BufReader;
use std::process::{Child, ChildStdout};
use std::sync::mpsc::{SyncSender, TrySendError};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::bounded::{LineError, LineReader, Size};
use super::protocol::{
    self, samples_allowed, ToClient, MAX_BEFORE_HELLO, MAX_CONFIG, MAX_EARLY_LINE, MAX_MESSAGE,
    MAX_SAMPLE, MAX_TUNE_REPLY,
};
use crate::run::Sample;

/// Messages other than samples come only as replies, one per request, each awaited
/// before the next is sent: more than this many queued were not asked for. (The lines
/// before the hello share the queue; the reader waits for the session to take them.)
pub(super) const UNASKED: usize = 4;

/// What the reader thread hands the session, in the order it came.
pub(super) enum Incoming {
    /// A line before the hello: a login script's chatter, the bootstrap's marker, the
    /// hello itself.
    Early(String),
    /// A message after the hello, other than a sample (those are kept in `Shared`).
    Msg(ToClient),
    /// A line after the hello that looks like a message but is not one: why.
    Unreadable(String),
}

/// What the reader thread and the session share.
#[derive(Default)]
pub(super) struct Shared {
    /// Bytes received, every line with its newline.
    pub(super) bytes: u64,
    /// The watch running: when its start was sent, its sampling interval in seconds.
    pub(super) watch: Option<(Instant, f64)>,
    /// Its samples, as they came.
    pub(super) samples: Vec<Sample>,
    /// Why the reader stopped before ssh's output ended: the limit passed, what was seen.
    pub(super) broke: Option<String>,
    /// When ssh's output ended or the reader stopped (this machine's clock, seconds
    /// since the epoch).
    pub(super) ended_unix_s: Option<f64>,
}

/// The reader thread: ssh's output read within the protocol's limits.
pub(super) struct Reader {
    pub(super) tx: SyncSender<Incoming>,
    pub(super) shared: Arc<Mutex<Shared>>,
    pub(super) host: String,
}

impl Reader {
    /// Reads until ssh's output ends (`None`) or the server passes a limit (`Some(why)`:
    /// the limit and what was seen). Returns early, quietly, when the session is gone.
    pub(super) fn read(&self, out: ChildStdout) -> Option<String> {
        let host = &self.host;
        let mut input = LineReader::new(BufReader::with_capacity(64 << 10, out), MAX_EARLY_LINE);
        let mut greeted = false;
        loop {
            let line = match input.next_line() {
                Ok(Some(line)) => line,
                // A read error on the pipe is its end, as ssh's exit is.
                Ok(None) | Err(LineError::Io(_)) => return None,
                Err(e @ LineError::TooLong { .. }) if !greeted => {
                    return Some(format!(
                        "the remote end {host} sent {e} before the hello (the bootstrap's lines are under 100 B): not a loadlens watch, or a login script printing without end — the session was ended"
                    ))
                }
                Err(e) if !greeted => {
                    return Some(format!(
                        "the remote end {host} sent {e} before the hello: not a loadlens watch, or a login script printing binary data — the session was ended"
                    ))
                }
                Err(e @ LineError::TooLong { .. }) => {
                    return Some(format!(
                        "the remote watch on {host} sent {e}; the largest message, the Evidence, is a few hundred KiB — the session was ended"
                    ))
                }
                Err(e) => {
                    return Some(format!(
                        "the remote watch on {host} sent {e}, where every message is JSON text — the session was ended"
                    ))
                }
            };
            let read = input.bytes_read();
            lock(&self.shared).bytes = read;
            if !greeted {
                if read > MAX_BEFORE_HELLO {
                    return Some(format!(
                        "the remote end {host} sent more than {} before the hello ({read} B, the last line `{line:.60}`): a login script printing without end, or not a loadlens watch — the session was ended",
                        Size(MAX_BEFORE_HELLO)
                    ));
                }
                // The first message is the hello: after it, messages may be long.
                if protocol::is_message(&line) {
                    greeted = true;
                    input.set_max_line(MAX_MESSAGE);
                }
                if self.tx.send(Incoming::Early(line)).is_err() {
                    return None;
                }
                continue;
            }
            if !protocol::is_message(&line) {
                // A background job of the login shell printing: not ours.
                continue;
            }
            let len = line.len();
            let msg = match serde_json::from_str::<ToClient>(&line) {
                Ok(ToClient::Sample { sample }) => {
                    if let Some(why) = self.sample(*sample, len) {
                        return Some(why);
                    }
                    continue;
                }
                Ok(ToClient::Tuned { .. }) if len > MAX_TUNE_REPLY => {
                    return Some(format!(
                        "the remote watch on {host} sent a reply to tune of {} (the limit is {}: a config file of at most {} as JSON): the session was ended",
                        Size(len as u64),
                        Size(MAX_TUNE_REPLY as u64),
                        Size(MAX_CONFIG)
                    ));
                }
                Ok(msg) => Incoming::Msg(msg),
                Err(e) => Incoming::Unreadable(format!("{e}: {line:.120}")),
            };
            match self.tx.try_send(msg) {
                Ok(()) => {}
                Err(TrySendError::Full(_)) => {
                    return Some(format!(
                        "the remote watch on {host} sent more than {UNASKED} messages that were not asked for: the session was ended"
                    ))
                }
                Err(TrySendError::Disconnected(_)) => return None,
            }
        }
    }

    /// Keeps a sample of the watch running; `Some(why)` when it passes a limit.
    fn sample(&self, sample: Sample, len: usize) -> Option<String> {
        let host = &self.host;
        if len > MAX_SAMPLE {
            return Some(format!(
                "the remote watch on {host} sent a sample of {} (the limit of a sample is {}; one measured 3.3 KiB): the session was ended",
                Size(len as u64),
                Size(MAX_SAMPLE as u64)
            ));
        }
        let mut sh = lock(&self.shared);
        // No watch running (a late sample, after the stop: the Evidence has it): the
        // sample is dropped, and that is no fault.
        let (since, interval_s) = sh.watch?;
        let elapsed_s = since.elapsed().as_secs_f64();
        let allowed = samples_allowed(elapsed_s, interval_s);
        if sh.samples.len() as u64 >= allowed {
            return Some(format!(
                "the remote watch on {host} sent {} samples in {elapsed_s:.1} s, asked for one every {interval_s} s: more than twice as fast as asked, plus {} (the limit that keeps them from filling memory) — the session was ended",
                sh.samples.len() + 1,
                protocol::SAMPLES_BEYOND_RATE
            ));
        }
        sh.samples.push(sample);
        None
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Kills ssh's process group (ssh, a ProxyCommand, an `--ssh-command` script and what
/// it started) and reaps ssh. With ssh gone its connection closes, and the remote
/// watch exits on its closed standard input.
pub(super) fn end_group(child: &Mutex<Child>) {
    let mut c = lock(child);
    if let Ok(None) = c.try_wait() {
        // SAFETY: a signal to the process group ssh leads (`process_group(0)`); ssh is
        // not reaped yet (checked under the lock that every wait takes), so the group's
        // id is still its own.
        unsafe { libc::kill(-(c.id() as libc::pid_t), libc::SIGKILL) };
    }
    let _ = c.wait();
}

/// Waits for a child at most `limit`; `None` if it is still running.
pub(super) fn wait_bounded(
    child: &Mutex<Child>,
    limit: Duration,
) -> Option<std::process::ExitStatus> {
    let until = Instant::now() + limit;
    loop {
        match lock(child).try_wait() {
            Ok(Some(s)) => return Some(s),
            Ok(None) if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
            _ => return None,
        }
    }
}
