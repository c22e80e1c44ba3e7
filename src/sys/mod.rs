//! The operating system's sources, one module per kind: pure parsers of /proc text
//! ([`procfs`]), netlink sock_diag ([`sockdiag`]), the cgroup ([`cgroup`]), a thread's
//! own CPU use ([`thread_cpu`]). They read and parse; they do not decide what to watch
//! (that is `watch`) or what it means (that is `diagnose`).

pub mod cgroup;
pub mod procfs;
pub mod sockdiag;
pub mod thread_cpu;
pub mod udp;

use std::path::{Path, PathBuf};

/// `dir/*.conf` → the matching files, sorted (as Apache and php-fpm include them); a
/// path without `*` → itself. One `*`, in the file name only.
pub fn glob(path: &Path) -> Vec<PathBuf> {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().to_string())
        .unwrap_or_default();
    let Some((pre, post)) = name.split_once('*') else {
        return vec![path.to_path_buf()];
    };
    let dir = path.parent().unwrap_or(Path::new("/"));
    let mut found: Vec<PathBuf> = std::fs::read_dir(dir)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .map(|n| n.to_string_lossy().to_string())
                .is_some_and(|n| n.starts_with(pre) && n.ends_with(post))
        })
        .collect();
    found.sort();
    found
}
