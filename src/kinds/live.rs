//! Touching the live server on this machine, each step checked: a file written in
//! place (same inode, owner and mode), the server's own config test, its graceful
//! reload and the wait for the new workers, a sysctl inside the server's network
//! namespace, and the files a session holds ([`Held`]: each locked so two tunes keep
//! off one config file, its original backed up, and only those written). `tune` calls
//! these on its own machine, and `watch --stdio` calls them on the server's for a tune
//! over ssh (`remote::server`).

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::kinds::Server;
use crate::run::Settle;
use crate::sys::procfs;

/// How long a reload may take before the server counts as not serving.
const RELOAD_WAIT: Duration = Duration::from_secs(15);
/// How long the old workers may drain once new ones run, before the session goes on
/// without them: they no longer accept (only finish what they hold), and the load's
/// connections were closed with its end. nginx's old workers at an open-files or
/// connections limit lingered the whole 15 s at every switch of a tune pair
/// (`lab tune worker-connections`: 15-17 s per switch in pairs 3-5, < 1 s in 1-2).
const DRAIN_WAIT: Duration = Duration::from_secs(2);

/// Writes `text` over `path` in place: the same inode (a bind mount, a hard link and
/// the owner and mode stay), flushed to disk.
pub fn write_in_place(path: &Path, text: &[u8]) -> anyhow::Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .truncate(true)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(text)
        .and_then(|_| f.sync_all())
        .with_context(|| format!("cannot write {}", path.display()))
}

/// Why `path` cannot be tuned (not a regular file, not writable), or `Ok`.
pub fn check_writable(path: &Path) -> anyhow::Result<()> {
    let meta = std::fs::symlink_metadata(path)
        .with_context(|| format!("cannot read the config file {}", path.display()))?;
    if !meta.file_type().is_file() {
        bail!(
            "{} is not a regular file (a symlink or a device): tune edits only the file itself; give the server the real path",
            path.display()
        );
    }
    std::fs::OpenOptions::new()
        .append(true)
        .open(path)
        .with_context(|| {
            format!(
                "{} is not writable by loadlens: run tune as the user who may edit it (root for a system server)",
                path.display()
            )
        })?;
    Ok(())
}

/// Runs a command to completion within `limit`; its output on failure.
fn run(cmd: &[String], limit: Duration) -> anyhow::Result<()> {
    let mut child = Command::new(&cmd[0])
        .args(&cmd[1..])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {}", cmd[0]))?;
    let mut err = child.stderr.take().expect("piped");
    let mut out = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = err.read_to_string(&mut s);
        let _ = out.read_to_string(&mut s);
        s
    });
    let t0 = Instant::now();
    let status = loop {
        if let Some(st) = child.try_wait()? {
            break st;
        }
        if t0.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            bail!("`{}` took more than {} s", cmd.join(" "), limit.as_secs());
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let text = reader.join().unwrap_or_default();
    if !status.success() {
        bail!("`{}` failed ({status}):\n{}", cmd.join(" "), text.trim());
    }
    Ok(())
}

/// The server's own test of `file` as process `pid` would read it, in the server's
/// network namespace: `nginx -t` binds its `listen` addresses, which exist only there
/// when the server lives in a namespace of its own.
pub fn config_test(s: &dyn Server, pid: i32, file: &Path) -> anyhow::Result<()> {
    let mut cmd = s.test_command(pid, file)?;
    let ns = |p: &str| std::fs::read_link(format!("/proc/{p}/ns/net")).ok();
    if ns(&pid.to_string()) != ns("self") {
        let mut enter = vec!["nsenter".to_string(), format!("--net=/proc/{pid}/ns/net")];
        enter.append(&mut cmd);
        cmd = enter;
    }
    run(&cmd, Duration::from_secs(20)).context("the config test failed")
}

/// The pids of a process's children.
fn children(pid: i32) -> BTreeSet<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

fn alive(pid: i32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    unsafe { libc::kill(pid, 0) == 0 }
}

/// Sends the server's reload signal to `pid`, waits until new workers run (a child
/// that was not there before, the old ones gone or, after [`DRAIN_WAIT`], still
/// draining), then until they have settled ([`settle`]). How they settled.
pub fn reload(s: &dyn Server, pid: i32) -> anyhow::Result<Settle> {
    let sig = s.reload_signal(pid)?;
    let before = children(pid);
    // SAFETY: kill(2) with a signal the server handles as a reload.
    if unsafe { libc::kill(pid, sig) } != 0 {
        bail!(
            "cannot signal {} {pid}: {}",
            s.kind().name(),
            std::io::Error::last_os_error()
        );
    }
    let t0 = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(50));
        if !alive(pid) {
            bail!("{} {pid} exited on reload", s.kind().name());
        }
        let now = children(pid);
        let fresh = now.difference(&before).count();
        let old_left = now.intersection(&before).count();
        // Or the old ones are draining.
        if (fresh > 0 || before.is_empty()) && old_left == 0
            || fresh > 0 && t0.elapsed() > DRAIN_WAIT
        {
            return settle(s, pid, &before, t0);
        }
        if t0.elapsed() > RELOAD_WAIT {
            bail!(
                "{} {pid} started no new workers within {} s of its reload signal",
                s.kind().name(),
                RELOAD_WAIT.as_secs()
            );
        }
    }
}

/// How long new workers may take to settle before the load goes on without it (the Run
/// says so): php-fpm settled with its 50 children 0.26-0.36 s after the reload signal
/// on a 2-core machine building beside, 2.6-2.9 s with its CPU capped at 3% of a core.
const SETTLE_WAIT: Duration = Duration::from_secs(5);
/// How often the new workers are looked at while they settle, and how many looks in a
/// row must find them as before and idle.
const SETTLE_EVERY: Duration = Duration::from_millis(100);
const SETTLE_LOOKS: u32 = 3;

/// Waits until the new generation of server `pid`'s processes (its children not in
/// `before`, and theirs) holds still: the same processes with the same threads over
/// [`SETTLE_LOOKS`] looks, none of them nor the master running or in a disk wait at the
/// last. A master forking its pool runs between forks (and waits for a CPU, runnable, on
/// a busy host), so a pool half forked does not pass for a settled one; a worker still
/// starting its threads changes. Bounded by [`SETTLE_WAIT`]; `t0`: the reload signal.
fn settle(s: &dyn Server, pid: i32, before: &BTreeSet<i32>, t0: Instant) -> anyhow::Result<Settle> {
    let came = Instant::now();
    let mut last: Option<Vec<(i32, u64)>> = None;
    let mut still = 0;
    loop {
        let (now, running) = generation(pid, before);
        still = if last.as_ref() == Some(&now) && !running {
            still + 1
        } else {
            0
        };
        let steady = still + 1 >= SETTLE_LOOKS;
        if steady || came.elapsed() > SETTLE_WAIT {
            return Ok(Settle {
                server: s.kind(),
                pid,
                workers: now.len() as u32,
                threads: now.iter().map(|(_, t)| *t as u32).sum(),
                after_ms: t0.elapsed().as_millis() as u64,
                steady,
            });
        }
        last = Some(now);
        std::thread::sleep(SETTLE_EVERY);
        if !alive(pid) {
            bail!("{} {pid} exited on reload", s.kind().name());
        }
    }
}

/// Server `pid`'s processes not in `before` (the generation its reload started: its
/// children and theirs), each with its threads; and whether any of them or `pid` itself
/// is running or in a disk wait (state R or D).
fn generation(pid: i32, before: &BTreeSet<i32>) -> (Vec<(i32, u64)>, bool) {
    let stat = |p: i32| {
        std::fs::read_to_string(format!("/proc/{p}/stat"))
            .ok()
            .and_then(|t| procfs::parse_pid_stat(&t))
    };
    let busy = |st: &procfs::PidStat| matches!(st.state, 'R' | 'D');
    let mut running = stat(pid).is_some_and(|st| busy(&st));
    let mut out = Vec::new();
    let mut todo: Vec<i32> = children(pid).difference(before).copied().collect();
    while let Some(p) = todo.pop() {
        // One that exited meanwhile is not in the generation.
        let Some(st) = stat(p) else { continue };
        running |= busy(&st);
        out.push((p, st.num_threads));
        todo.extend(children(p));
    }
    out.sort_unstable();
    (out, running)
}

/// A sysctl read (`value = None`) or written in the network namespace of process
/// `pid` (where the server's sockets are), through `nsenter` and `sysctl`.
pub fn sysctl(pid: i32, key: &str, value: Option<&str>) -> anyhow::Result<String> {
    let net = format!("--net=/proc/{pid}/ns/net");
    let mut cmd = Command::new("nsenter");
    cmd.arg(&net).args(["sysctl", "-n"]);
    match value {
        Some(v) => cmd.args(["-w", &format!("{key}={v}")]),
        None => cmd.arg(key),
    };
    let out = cmd
        .stdin(Stdio::null())
        .output()
        .context("cannot run nsenter (util-linux) for a sysctl")?;
    if !out.status.success() {
        bail!(
            "sysctl {key} in pid {pid}'s network namespace: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
}

/// An exclusive lock on one config file for the session: a second tune of the same
/// file is refused. Released (and its file removed) when dropped, and by the kernel
/// when the process dies.
pub struct Lock {
    file: std::fs::File,
    path: PathBuf,
}

/// Where locks and backups go: `$LOADLENS_STATE_DIR` if set (the lab puts them in its
/// world), else `/run/lock` (cleared at boot), else the temp dir.
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("LOADLENS_STATE_DIR") {
        return PathBuf::from(d);
    }
    let run = Path::new("/run/lock");
    if run.is_dir() {
        run.to_path_buf()
    } else {
        std::env::temp_dir()
    }
}

/// The name of a config file's lock and backup: its path, `/` → `_`.
pub fn stem(config: &Path) -> String {
    let p = std::fs::canonicalize(config).unwrap_or_else(|_| config.to_path_buf());
    format!("loadlens-tune{}", p.display().to_string().replace('/', "_"))
}

impl Lock {
    /// Whether this is the lock of `config`.
    pub fn is(&self, config: &Path) -> bool {
        self.path == state_dir().join(format!("{}.lock", stem(config)))
    }

    pub fn take(config: &Path) -> anyhow::Result<Lock> {
        let path = state_dir().join(format!("{}.lock", stem(config)));
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .read(true)
            .write(true)
            .open(&path)
            .with_context(|| format!("cannot create the lock {}", path.display()))?;
        // SAFETY: flock on a file we hold open.
        if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } != 0 {
            let mut holder = String::new();
            let _ = file.read_to_string(&mut holder);
            bail!(
                "another loadlens tune (pid {}) is changing {}: one tune per server at a time; wait for it to end",
                holder.trim(),
                config.display()
            );
        }
        file.set_len(0)?;
        write!(file, "{}", std::process::id())?;
        Ok(Lock { file, path })
    }
}

impl Drop for Lock {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
        // SAFETY: unlocking the file we locked.
        unsafe {
            libc::flock(self.file.as_raw_fd(), libc::LOCK_UN);
        }
    }
}

/// The config files a tune session holds on this machine: each one of its server's own
/// config files, checked writable, locked, its original bytes kept in memory and in a
/// backup beside the lock (`state_dir()/loadlens-tune_PATH.orig`, mode 0600). Only a
/// held file is written. Released: the locks let go, the backup of a file back to its
/// original removed, that of a changed file kept (the way back to the original).
#[derive(Default)]
pub struct Held {
    files: Vec<HeldFile>,
}

struct HeldFile {
    path: PathBuf,
    original: Vec<u8>,
    backup: PathBuf,
    _lock: Lock,
}

impl Held {
    /// Whether `path` is held.
    pub fn holds(&self, path: &Path) -> bool {
        self.files.iter().any(|f| f.path == path)
    }

    /// Holds `path`, a config file of server `pid`; a second hold of it is a no-op.
    pub fn hold(&mut self, s: &dyn Server, pid: i32, path: &Path) -> anyhow::Result<()> {
        if self.holds(path) {
            return Ok(());
        }
        let main = s.config_file(pid)?;
        let own = s.files(&main);
        if !own.iter().any(|f| f == path) {
            bail!(
                "{} is not a config file of {} {pid} (its files: {}): tune writes nothing else",
                path.display(),
                s.kind().name(),
                own.iter()
                    .map(|f| f.display().to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            );
        }
        check_writable(path)?;
        let lock = Lock::take(path)?;
        let original =
            std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
        let backup = state_dir().join(format!("{}.orig", stem(path)));
        write_private(&backup, &original)
            .with_context(|| format!("cannot write the backup {}", backup.display()))?;
        self.files.push(HeldFile {
            path: path.to_path_buf(),
            original,
            backup,
            _lock: lock,
        });
        Ok(())
    }

    /// Writes `text` over held file `path`, in place.
    pub fn write(&self, path: &Path, text: &[u8]) -> anyhow::Result<()> {
        if !self.holds(path) {
            bail!(
                "{} is not held by this tune session: tune writes only the config files it locked",
                path.display()
            );
        }
        write_in_place(path, text)
    }

    /// Lets go of every file; one line for each: its backup kept (changed) or removed.
    pub fn release(&mut self) -> Vec<String> {
        let mut notes = Vec::new();
        for f in self.files.drain(..) {
            let now = std::fs::read(&f.path).ok();
            if now.as_deref() == Some(&f.original[..]) {
                let _ = std::fs::remove_file(&f.backup);
            } else {
                notes.push(format!(
                    "{} was changed: its original is kept in {}",
                    f.path.display(),
                    f.backup.display()
                ));
            }
        }
        notes
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.release();
    }
}

/// Creates `path` readable by its owner alone, with `bytes`.
fn write_private(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(bytes)?;
    f.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shell with two children that sleep: both are its generation (none in `before`),
    /// one when the other was there before; once they sleep, it settles with both.
    #[test]
    fn a_generation_is_the_children_not_there_before_and_it_settles_when_idle() {
        let mut sh = Command::new("sh")
            .args(["-c", "sleep 60 & sleep 60 & wait"])
            .spawn()
            .unwrap();
        let pid = sh.id() as i32;
        let t0 = Instant::now();
        while children(pid).len() < 2 && t0.elapsed() < Duration::from_secs(20) {
            std::thread::sleep(Duration::from_millis(20));
        }
        let kids = children(pid);
        let (all, _) = generation(pid, &BTreeSet::new());
        let first: BTreeSet<i32> = kids.iter().take(1).copied().collect();
        let (fresh, _) = generation(pid, &first);
        let settled = settle(&crate::kinds::nginx::Nginx, pid, &BTreeSet::new(), t0);
        for k in &kids {
            unsafe { libc::kill(*k, libc::SIGKILL) };
        }
        let _ = sh.kill();
        let _ = sh.wait();
        assert_eq!(kids.len(), 2, "{kids:?}");
        assert_eq!(all.iter().map(|(p, _)| *p).collect::<BTreeSet<_>>(), kids);
        assert!(all.iter().all(|(_, threads)| *threads == 1), "{all:?}");
        assert_eq!(fresh.len(), 1, "{fresh:?}");
        let s = settled.unwrap();
        assert_eq!((s.workers, s.threads, s.pid), (2, 2, pid), "{s:?}");
    }
}
