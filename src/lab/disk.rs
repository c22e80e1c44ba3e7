//! A slow disk for a lab world: an ext4 filesystem on a loop device over a file in the
//! world's own directory, mounted inside it, whose reads are held to one every
//! `read_ms` for the processes of a cgroup of the world's (cgroup v1's
//! `blkio.throttle.read_iops_device`, v2's `io.max riops=`). Nothing of the host's
//! disks is touched: the device is the world's loop device, the throttle applies to it
//! only and to the cgroup's processes only. A process reading it past the page cache
//! waits in state D (`io_schedule`), as on a slow or overloaded disk. The device-mapper
//! `delay` target would do the same without a cgroup, but many kernels (this one) have
//! no device-mapper; the loop device and blkio are in every distribution's kernel.
//!
//! The mount is undone by the world when it ends (after its processes are gone); the
//! loop device goes with the mount (`mount -o loop` sets autoclear), the cgroup with
//! the world's other cgroups.

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use super::world::{which, World};

/// A mounted slow disk: where it is mounted, and the `cgroup.procs` whose processes
/// read it slowly.
pub struct SlowDisk {
    pub dir: PathBuf,
    pub procs: PathBuf,
}

/// The image's size: room for the files a scenario serves, small in /dev/shm.
const IMAGE_MB: u64 = 16;

impl World {
    /// Makes, mounts and throttles a slow disk named `name`: one read every `read_ms`
    /// for the processes of its cgroup.
    pub fn slow_disk(&mut self, name: &str, read_ms: u32) -> anyhow::Result<SlowDisk> {
        for need in ["mkfs.ext4", "mount", "losetup"] {
            if which(need).is_none() {
                bail!("`{need}` not found: install e2fsprogs, mount (util-linux)");
            }
        }
        let image = self.dir.join(format!("{name}.img"));
        let f = fs::File::create(&image)
            .with_context(|| format!("cannot create {}", image.display()))?;
        f.set_len(IMAGE_MB << 20)?;
        drop(f);
        let img = image.display().to_string();
        self.cmd(&["mkfs.ext4", "-q", "-F", &img])?;
        let dir = self.dir.join(name);
        fs::create_dir_all(&dir)?;
        let mnt = dir.display().to_string();
        self.cmd(&["mount", "-o", "loop", &img, &mnt])?;
        self.mounts.push(dir.clone());
        // The loop device mounted there: its device number names it to the throttle.
        let dev = self.cmd(&["losetup", "-j", &img])?;
        let dev = dev.split(':').next().unwrap_or("").trim().to_string();
        if dev.is_empty() {
            bail!("no loop device found for {img} after mounting it");
        }
        let rdev = fs::metadata(&dev)
            .with_context(|| format!("cannot stat {dev}"))?
            .rdev();
        let (major, minor) = (libc::major(rdev), libc::minor(rdev));
        let iops = (1000 / read_ms.max(1)).max(1);
        let procs = self.io_cgroup(name, &format!("{major}:{minor}"), iops)?;
        super::world::set_mode(&dir, 0o755);
        Ok(SlowDisk { dir, procs })
    }

    /// A cgroup of the world's whose processes read device `dev` (`MAJ:MIN`) at most
    /// `iops` times a second; returns its `cgroup.procs`.
    fn io_cgroup(&mut self, name: &str, dev: &str, iops: u32) -> anyhow::Result<PathBuf> {
        let v1 = Path::new("/sys/fs/cgroup/blkio");
        let v2 = Path::new("/sys/fs/cgroup");
        let (base, file, value) = if v1.join("blkio.throttle.read_iops_device").exists() {
            (
                v1,
                "blkio.throttle.read_iops_device",
                format!("{dev} {iops}"),
            )
        } else if fs::read_to_string(v2.join("cgroup.subtree_control"))
            .unwrap_or_default()
            .split_whitespace()
            .any(|c| c == "io")
        {
            (v2, "io.max", format!("{dev} riops={iops}"))
        } else {
            bail!("no I/O cgroup to slow a disk with: neither cgroup v1's blkio controller (/sys/fs/cgroup/blkio) nor cgroup v2's with `io` in /sys/fs/cgroup/cgroup.subtree_control")
        };
        let dir = base.join(format!(
            "{}-{name}",
            self.dir.file_name().unwrap_or_default().to_string_lossy()
        ));
        fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        self.cgroups.push(dir.clone());
        if self.verbose {
            eprintln!("+ echo {value} > {}", dir.join(file).display());
        }
        fs::write(dir.join(file), &value)
            .with_context(|| format!("cannot write {value} to {}", dir.join(file).display()))?;
        Ok(dir.join("cgroup.procs"))
    }
}

/// Unmounts `dir` (lazily when busy: the world's processes are gone, so only a reader
/// outside it can hold it).
pub(super) fn unmount(dir: &Path) {
    let ok = std::process::Command::new("umount")
        .arg(dir)
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !ok {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(dir)
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// The mounts under `dir` (a world's directory left by a killed run), deepest first.
pub(super) fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let table = fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut found: Vec<PathBuf> = table
        .lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .map(PathBuf::from)
        .filter(|m| m.starts_with(dir))
        .collect();
    found.sort_by_key(|m| std::cmp::Reverse(m.components().count()));
    found
}
