//! A lab world: network namespaces joined by veth, sysctls set inside them, servers
//! started inside them with generated configs in a temp dir — and all of it removed on
//! drop, on error and on Ctrl-C. A world left by a killed run is found by the pid in
//! its names and removed at the next start.
//!
//! Every command is run through [`World::cmd`], which prints it with `--verbose` so a
//! person can rebuild the world by hand.

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

/// Prefix of every namespace and temp dir the lab makes: `ll-<pid>-…`.
const PREFIX: &str = "ll-";

/// Addresses inside the worlds (they exist only inside its namespaces).
pub const CLIENT_IP: &str = "10.77.0.1";
pub const SERVER_IP: &str = "10.77.0.2";

pub struct World {
    /// `ll-<pid>-<scenario>`: the stem of the namespace names.
    pub id: String,
    pub dir: PathBuf,
    pub verbose: bool,
    namespaces: Vec<String>,
    children: Vec<(String, Child)>,
    /// CPU cgroups made by [`World::cpu_quota`], removed after the processes.
    pub(super) cgroups: Vec<PathBuf>,
    /// Filesystems mounted in the world's directory (a slow disk): unmounted when it ends.
    pub(super) mounts: Vec<PathBuf>,
    /// Processes started by [`World::spawn`] from now on join this CPU cgroup (its
    /// `cgroup.procs`).
    pub spawn_cgroup: Option<PathBuf>,
    /// `lab run NAME --param KEY=VALUE`: the fault's parameters asked for, each marked
    /// when the scenario reads it (an unread one is refused after the build).
    pub params: Vec<(String, String, bool)>,
}

impl World {
    /// The scenario's parameter `name` (`--param name=N`), `default` when not given;
    /// refused outside `range`, the range where the scenario's fault is decisive.
    pub fn param(
        &mut self,
        name: &str,
        default: u32,
        range: std::ops::RangeInclusive<u32>,
    ) -> anyhow::Result<u32> {
        let Some(p) = self.params.iter_mut().find(|p| p.0 == name) else {
            return Ok(default);
        };
        p.2 = true;
        let v: u32 = p.1.parse().map_err(|_| {
            anyhow::anyhow!("--param {name}={}: not a whole number (the fault is decisive for {name} in {}..={})", p.1, range.start(), range.end())
        })?;
        if !range.contains(&v) {
            bail!(
                "--param {name}={v}: outside {}..={}, the range where this scenario's fault is decisive",
                range.start(),
                range.end()
            );
        }
        Ok(v)
    }

    /// The parameters given that the scenario did not read.
    pub fn unread_params(&self) -> Vec<String> {
        self.params
            .iter()
            .filter(|p| !p.2)
            .map(|p| p.0.clone())
            .collect()
    }

    /// Removes stale worlds, then makes an empty one for `scenario`.
    pub fn new(scenario: &str, verbose: bool) -> anyhow::Result<World> {
        if unsafe { libc::geteuid() } != 0 {
            bail!("loadlens lab needs root: it creates network namespaces (ip netns) and sets sysctls inside them — run it with sudo");
        }
        for need in ["ip", "tc"] {
            if which(need).is_none() {
                bail!("`{need}` not found: install iproute2");
            }
        }
        clean_stale(verbose);
        let id = format!("{PREFIX}{}-{scenario}", std::process::id());
        let dir = files_root().join(format!("loadlens-lab-{}-{scenario}", std::process::id()));
        if dir.exists() {
            fs::remove_dir_all(&dir).ok();
        }
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        set_mode(&dir, 0o755);
        Ok(World {
            id,
            dir,
            verbose,
            namespaces: Vec::new(),
            children: Vec::new(),
            cgroups: Vec::new(),
            mounts: Vec::new(),
            spawn_cgroup: None,
            params: Vec::new(),
        })
    }

    pub fn client(&self) -> String {
        format!("{}-c", self.id)
    }
    pub fn server(&self) -> String {
        format!("{}-s", self.id)
    }

    /// Runs a command to completion; fails with its stderr.
    pub fn cmd(&self, args: &[&str]) -> anyhow::Result<String> {
        if self.verbose {
            eprintln!("+ {}", args.join(" "));
        }
        let out = Command::new(args[0])
            .args(&args[1..])
            .stdin(Stdio::null())
            .output()
            .with_context(|| format!("cannot run {}", args[0]))?;
        if !out.status.success() {
            bail!(
                "`{}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(String::from_utf8_lossy(&out.stdout).to_string())
    }

    /// Runs a command inside namespace `ns`.
    pub fn ns_cmd(&self, ns: &str, args: &[&str]) -> anyhow::Result<String> {
        let mut full = vec!["ip", "netns", "exec", ns];
        full.extend_from_slice(args);
        self.cmd(&full)
    }

    /// The client and server namespaces joined by a veth pair (10.77.0.1 ↔ 10.77.0.2).
    pub fn two_hosts(&mut self) -> anyhow::Result<()> {
        let (c, s) = (self.client(), self.server());
        for ns in [&c, &s] {
            self.cmd(&["ip", "netns", "add", ns])?;
            self.namespaces.push(ns.clone());
        }
        // Created directly inside the namespaces: no interface ever exists on the host.
        self.cmd(&[
            "ip", "link", "add", "veth0", "netns", &c, "type", "veth", "peer", "name", "veth0",
            "netns", &s,
        ])?;
        for (ns, ip) in [(&c, CLIENT_IP), (&s, SERVER_IP)] {
            self.ns_cmd(
                ns,
                &["ip", "addr", "add", &format!("{ip}/24"), "dev", "veth0"],
            )?;
            self.ns_cmd(ns, &["ip", "link", "set", "veth0", "up"])?;
            self.ns_cmd(ns, &["ip", "link", "set", "lo", "up"])?;
        }
        Ok(())
    }

    /// Sets a per-namespace sysctl (never a host one), then reads it back: `sysctl -w`
    /// exits 0 when a namespace refuses a key ("Invalid argument", a key the namespace
    /// does not own), and a scenario must not believe its fault is in place when it is not.
    pub fn sysctl(&self, ns: &str, key: &str, value: &str) -> anyhow::Result<()> {
        self.ns_cmd(ns, &["sysctl", "-q", "-w", &format!("{key}={value}")])?;
        // Read back with its fields separated by tabs ("20000\t20049"), written with spaces.
        let now = self.ns_cmd(ns, &["sysctl", "-n", key])?;
        if !now.split_whitespace().eq(value.split_whitespace()) {
            bail!(
                "sysctl {key}={value} did not take in namespace {ns}: it reads {:?} \
                 (the kernel refused the value, or this key is not per-namespace here)",
                now.trim()
            );
        }
        Ok(())
    }

    /// Limits what `ns` sends on veth0 with a token bucket (`tc tbf`), like a slower NIC.
    /// (This kernel has no `netem`, so no delay or loss emulation.)
    pub fn rate_limit(&self, ns: &str, rate: &str) -> anyhow::Result<()> {
        self.ns_cmd(
            ns,
            &[
                "tc", "qdisc", "add", "dev", "veth0", "root", "tbf", "rate", rate, "burst", "64kb",
                "latency", "100ms",
            ],
        )
        .map(|_| ())
    }

    /// A CPU cgroup limited to `cores` (a container's CPU limit: CFS bandwidth control,
    /// cgroup v1 `cpu.cfs_quota_us` or v2 `cpu.max`, over 100 ms periods), removed with
    /// the world. Returns its `cgroup.procs` file, to which a process is moved.
    pub fn cpu_quota(&mut self, name: &str, cores: f64) -> anyhow::Result<PathBuf> {
        let (base, v2) = cpu_cgroup_root()?;
        let dir = base.join(format!(
            "{}-{name}",
            self.dir.file_name().unwrap_or_default().to_string_lossy()
        ));
        if self.verbose {
            eprintln!("+ mkdir {}", dir.display());
        }
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        self.cgroups.push(dir.clone());
        let quota = ((cores * 100_000.0).round() as u64).max(1000);
        let writes: Vec<(&str, String)> = if v2 {
            vec![("cpu.max", format!("{quota} 100000"))]
        } else {
            vec![
                ("cpu.cfs_period_us", "100000".into()),
                ("cpu.cfs_quota_us", quota.to_string()),
            ]
        };
        for (file, value) in writes {
            if self.verbose {
                eprintln!("+ echo {value} > {}", dir.join(file).display());
            }
            fs::write(dir.join(file), &value)
                .with_context(|| format!("cannot write {value} to {}", dir.join(file).display()))?;
        }
        Ok(dir.join("cgroup.procs"))
    }

    /// Starts a long-running process inside `ns`; its output goes to `DIR/<name>.log`.
    /// It gets SIGTERM if loadlens dies, and is stopped when the world is dropped.
    pub fn spawn(&mut self, ns: &str, name: &str, args: &[&str]) -> anyhow::Result<i32> {
        let log = self.dir.join(format!("{name}.log"));
        let f = fs::File::create(&log)?;
        if self.verbose {
            eprintln!("+ ip netns exec {ns} {} &", args.join(" "));
        }
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", ns])
            .args(args)
            .stdin(Stdio::null())
            .stdout(f.try_clone()?)
            .stderr(f);
        // SAFETY: prctl in the child before exec; async-signal-safe.
        unsafe {
            cmd.pre_exec(|| {
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                Ok(())
            });
        }
        if let Some(procs) = &self.spawn_cgroup {
            join_cgroup(&mut cmd, procs)?;
        }
        let child = cmd
            .spawn()
            .with_context(|| format!("cannot start {name}"))?;
        let pid = child.id() as i32;
        self.children.push((name.to_string(), child));
        Ok(pid)
    }

    /// The log of a process started with [`World::spawn`].
    pub fn log(&self, name: &str) -> String {
        fs::read_to_string(self.dir.join(format!("{name}.log"))).unwrap_or_default()
    }

    /// Fails (with the process's log) if `name` has exited.
    pub fn check_alive(&mut self, name: &str) -> anyhow::Result<()> {
        for (n, c) in self.children.iter_mut() {
            if n == name {
                if let Ok(Some(st)) = c.try_wait() {
                    bail!("{name} exited ({st}):\n{}", self.log(name));
                }
            }
        }
        Ok(())
    }

    /// Waits until `addr` accepts TCP connections from inside `ns`.
    pub fn wait_tcp(&mut self, ns: &str, addr: &str, name: &str) -> anyhow::Result<()> {
        let t0 = Instant::now();
        let ns_path = format!("/run/netns/{ns}");
        let addr: std::net::SocketAddr = addr.parse()?;
        loop {
            self.check_alive(name)?;
            let ok = in_netns(&ns_path, move || {
                std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok()
            })?;
            if ok {
                return Ok(());
            }
            // A JVM compiling its source on a busy machine takes seconds.
            if t0.elapsed() > Duration::from_secs(30) {
                bail!(
                    "{name} did not accept connections on {addr} within 30s:\n{}",
                    self.log(name)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Waits until a file exists (a unix socket, a pid file).
    pub fn wait_file(&mut self, path: &Path, name: &str) -> anyhow::Result<()> {
        let t0 = Instant::now();
        while !path.exists() {
            self.check_alive(name)?;
            if t0.elapsed() > Duration::from_secs(10) {
                bail!(
                    "{name} did not create {} within 10s:\n{}",
                    path.display(),
                    self.log(name)
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(())
    }

    /// Stops one process started with [`World::spawn`] (to restart it with another
    /// configuration).
    pub fn stop(&mut self, name: &str) {
        let mut i = 0;
        while i < self.children.len() {
            if self.children[i].0 == name {
                let (_, c) = self.children.remove(i);
                terminate(c);
            } else {
                i += 1;
            }
        }
    }

    /// Writes a file in the world's dir, readable by the servers' unprivileged users.
    pub fn write(&self, rel: &str, content: &[u8]) -> anyhow::Result<PathBuf> {
        let p = self.dir.join(rel);
        if let Some(parent) = p.parent() {
            fs::create_dir_all(parent)?;
            let mut d = parent.to_path_buf();
            while d.starts_with(&self.dir) {
                set_mode(&d, 0o755);
                if !d.pop() {
                    break;
                }
            }
        }
        fs::write(&p, content)?;
        set_mode(&p, 0o644);
        Ok(p)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for (_, c) in self.children.drain(..).rev() {
            terminate(c);
        }
        for ns in self.namespaces.drain(..).rev() {
            remove_namespace(&ns, self.verbose);
        }
        for m in self.mounts.drain(..).rev() {
            super::disk::unmount(&m);
        }
        for cg in self.cgroups.drain(..) {
            remove_cgroup(&cg);
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// SIGTERM, then SIGKILL after 2 s.
fn terminate(mut c: Child) {
    unsafe {
        libc::kill(c.id() as i32, libc::SIGTERM);
    }
    let t0 = Instant::now();
    while t0.elapsed() < Duration::from_secs(2) {
        if let Ok(Some(_)) = c.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let _ = c.kill();
    let _ = c.wait();
}

/// Kills every process left in `ns`, then deletes it.
fn remove_namespace(ns: &str, verbose: bool) {
    if verbose {
        eprintln!("+ ip netns del {ns}");
    }
    for sig in [libc::SIGTERM, libc::SIGKILL] {
        let pids = Command::new("ip")
            .args(["netns", "pids", ns])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
            .unwrap_or_default();
        if !signal_all(&pids, sig) {
            break;
        }
        std::thread::sleep(Duration::from_millis(300));
    }
    let _ = Command::new("ip").args(["netns", "del", ns]).status();
}

/// Makes `cmd`'s process join the cgroup whose `cgroup.procs` is `procs` before it
/// execs (before `ip netns exec`, whose fresh /sys no longer shows the cgroup mounts).
pub fn join_cgroup(cmd: &mut Command, procs: &Path) -> anyhow::Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let path = std::ffi::CString::new(procs.as_os_str().as_bytes())?;
    // SAFETY: only open/write/close (async-signal-safe) between fork and exec, on a
    // path allocated before the fork.
    unsafe {
        cmd.pre_exec(move || {
            let fd = libc::open(path.as_ptr(), libc::O_WRONLY | libc::O_CLOEXEC);
            if fd < 0 {
                return Err(std::io::Error::last_os_error());
            }
            // "0" moves the writing process (cgroup v1 and v2).
            let n = libc::write(fd, b"0".as_ptr().cast(), 1);
            let err = std::io::Error::last_os_error();
            libc::close(fd);
            if n != 1 {
                return Err(err);
            }
            Ok(())
        });
    }
    Ok(())
}

/// Where the lab makes CPU cgroups: cgroup v1's `cpu` hierarchy, or cgroup v2's root
/// when its `cpu` controller is enabled for children. (is v2)
fn cpu_cgroup_root() -> anyhow::Result<(PathBuf, bool)> {
    for v1 in ["/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"] {
        if Path::new(v1).join("cpu.cfs_quota_us").exists()
            || Path::new(v1).join("cpu.cfs_period_us").exists()
        {
            return Ok((v1.into(), false));
        }
    }
    let root = Path::new("/sys/fs/cgroup");
    let enabled = fs::read_to_string(root.join("cgroup.subtree_control")).unwrap_or_default();
    if enabled.split_whitespace().any(|c| c == "cpu") {
        return Ok((root.into(), true));
    }
    bail!("no CPU cgroup to limit a process with: neither cgroup v1's cpu controller (/sys/fs/cgroup/cpu) nor cgroup v2's with `cpu` in /sys/fs/cgroup/cgroup.subtree_control")
}

/// Removes a cgroup once its processes are gone: any left are killed first (a cgroup
/// with tasks cannot be removed).
fn remove_cgroup(dir: &Path) {
    for _ in 0..20 {
        let procs = fs::read_to_string(dir.join("cgroup.procs")).unwrap_or_default();
        if !signal_all(&procs, libc::SIGKILL) {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    // A cgroup's directory is removed with rmdir (its files are not real files).
    let _ = fs::remove_dir(dir);
}

/// Sends `sig` to every pid in a whitespace-separated list (`ip netns pids`,
/// `cgroup.procs`); false when the list held none.
fn signal_all(pids: &str, sig: i32) -> bool {
    let mut any = false;
    for p in pids
        .split_whitespace()
        .filter_map(|p| p.parse::<i32>().ok())
    {
        any = true;
        // SAFETY: kill(2) takes no memory arguments.
        unsafe {
            libc::kill(p, sig);
        }
    }
    any
}

/// Removes worlds whose owner (the pid in their names) is gone.
pub fn clean_stale(verbose: bool) {
    let alive = |pid: &str| Path::new(&format!("/proc/{pid}")).exists();
    let list = Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).to_string())
        .unwrap_or_default();
    for line in list.lines() {
        let ns = line.split_whitespace().next().unwrap_or("");
        if let Some(rest) = ns.strip_prefix(PREFIX) {
            let pid = rest.split('-').next().unwrap_or("");
            if !pid.is_empty() && pid.bytes().all(|b| b.is_ascii_digit()) && !alive(pid) {
                eprintln!("note: removing network namespace {ns} left by a killed lab run");
                remove_namespace(ns, verbose);
            }
        }
    }
    let dirs = cpu_cgroup_root().map(|(base, _)| base).into_iter().chain([
        "/sys/fs/cgroup/blkio".into(),
        files_root(),
        std::env::temp_dir(),
    ]);
    for rd in dirs.filter_map(|d| fs::read_dir(d).ok()) {
        for e in rd.flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            if let Some(rest) = name.strip_prefix("loadlens-lab-") {
                let pid = rest.split('-').next().unwrap_or("");
                if !pid.is_empty() && !alive(pid) {
                    if e.path().join("cgroup.procs").exists() {
                        remove_cgroup(&e.path());
                    } else {
                        // A slow disk's mount first: its files are not the dir's.
                        for m in super::disk::mounts_under(&e.path()) {
                            super::disk::unmount(&m);
                        }
                        let _ = fs::remove_dir_all(e.path());
                    }
                }
            }
        }
    }
}

/// Where a world keeps its files (configs, logs, sockets, the servers' pages): `/dev/shm`
/// when it is a tmpfs that allows exec with room to spare, so the servers' log writes
/// never wait for the host's disk (a build beside the lab saturating it stalled nginx's
/// access-log writes and left the worker off its CPU); the temp dir otherwise.
fn files_root() -> PathBuf {
    const SHM: &str = "/dev/shm";
    const ROOM: u64 = 1 << 30;
    let path = std::ffi::CString::new(SHM).unwrap();
    // SAFETY: plain out-parameters of statfs/statvfs on a NUL-terminated path.
    let (fs, vfs) = unsafe {
        let mut fs: libc::statfs = std::mem::zeroed();
        let mut vfs: libc::statvfs = std::mem::zeroed();
        if libc::statfs(path.as_ptr(), &mut fs) != 0 || libc::statvfs(path.as_ptr(), &mut vfs) != 0
        {
            return std::env::temp_dir();
        }
        (fs, vfs)
    };
    let tmpfs = fs.f_type == libc::TMPFS_MAGIC;
    let exec = vfs.f_flag & libc::ST_NOEXEC == 0;
    let room = vfs.f_bavail.saturating_mul(vfs.f_frsize) >= ROOM;
    if tmpfs && exec && room {
        PathBuf::from(SHM)
    } else {
        std::env::temp_dir()
    }
}

/// Runs `f` on a thread that has joined the network namespace at `ns_path`.
pub fn in_netns<T: Send + 'static>(
    ns_path: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> anyhow::Result<T> {
    let ns_path = ns_path.to_string();
    std::thread::spawn(move || -> anyhow::Result<T> {
        use std::os::fd::AsRawFd;
        let file = fs::File::open(&ns_path).with_context(|| format!("cannot open {ns_path}"))?;
        // SAFETY: setns on a namespace fd we hold; affects only this thread.
        if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
            return Err(std::io::Error::last_os_error()).context("setns");
        }
        Ok(f())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("namespace thread panicked"))?
}

pub(super) fn set_mode(p: &Path, mode: u32) {
    use std::os::unix::fs::PermissionsExt;
    let _ = fs::set_permissions(p, fs::Permissions::from_mode(mode));
}

pub fn which(cmd: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .chain(["/usr/sbin".into(), "/sbin".into()])
            .map(|d| d.join(cmd))
            .find(|p| p.is_file())
    })
}
