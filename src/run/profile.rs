//! Where the server's CPU went: on-CPU call stacks of the watched server processes,
//! sampled by the kernel (perf events, CPU clock) over the load window, symbolized and
//! folded. Filled by `watch::profile`; read by the rules and the views (top table,
//! flame graph).
//!
//! Compact on purpose: frame names are stored once and stacks refer to them by index.

use std::collections::{BTreeMap, BTreeSet};

use serde::{Deserialize, Serialize};

/// Suffix of kernel frames in `frames` (the flame-graph convention: inferno colours them
/// apart).
pub const KERNEL_SUFFIX: &str = "_[k]";

/// A profile of the server over the load window.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Profile {
    /// Samples per second per thread asked of the kernel (CPU clock).
    pub frequency_hz: u64,
    /// Samples kept, in all processes.
    pub samples: u64,
    /// Samples the kernel could not write (ring buffer full).
    pub lost: u64,
    /// Whether kernel frames were sampled (they need `perf_event_paranoid` ≤ 1 or root).
    pub kernel: bool,
    /// Frame names. Kernel frames end in `_[k]`; user code no symbol covers is named by
    /// its file, `[libz.so.1.2.13]`.
    pub frames: Vec<String>,
    /// Distinct stacks per process, root first, with their sample counts.
    pub stacks: Vec<Stack>,
    /// The top table of the busiest front worker (most samples).
    #[serde(default)]
    pub top: Option<Top>,
}

/// One distinct stack of one process.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Stack {
    pub pid: i32,
    /// Indexes into [`Profile::frames`], root first, leaf last.
    pub frames: Vec<u32>,
    pub count: u64,
}

/// Where one process's CPU went.
#[derive(Debug, Clone, Default, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Top {
    pub pid: i32,
    pub samples: u64,
    /// Shares of its samples whose leaf was in the kernel / in user space, percent.
    pub kernel_pct: f64,
    pub user_pct: f64,
    /// Functions by self share, most first.
    pub functions: Vec<TopFunction>,
}

/// A function in the top table.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct TopFunction {
    /// Without the `_[k]` suffix.
    pub name: String,
    pub kernel: bool,
    /// Percent of samples with this function as the leaf (running itself).
    pub self_pct: f64,
    /// Percent of samples with this function anywhere on the stack.
    pub total_pct: f64,
}

/// `part` as a percentage of `whole`; 0 when `whole` is.
fn percent(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

/// A frame name without the kernel suffix, and whether it was a kernel frame.
pub fn split_frame(name: &str) -> (&str, bool) {
    match name.strip_suffix(KERNEL_SUFFIX) {
        Some(n) => (n, true),
        None => (name, false),
    }
}

impl Profile {
    /// Samples of the processes `pids` (all processes when empty).
    pub fn samples_of(&self, pids: &[i32]) -> u64 {
        self.of(pids).map(|s| s.count).sum()
    }

    fn of<'a>(&'a self, pids: &'a [i32]) -> impl Iterator<Item = &'a Stack> + 'a {
        self.stacks
            .iter()
            .filter(move |s| pids.is_empty() || pids.contains(&s.pid))
    }

    /// Of `pids`, the process with the most samples (none when none was sampled).
    pub fn busiest(&self, pids: &[i32]) -> Option<i32> {
        pids.iter()
            .map(|&pid| (pid, self.samples_of(&[pid])))
            .filter(|&(_, n)| n > 0)
            .max_by_key(|&(_, n)| n)
            .map(|(pid, _)| pid)
    }

    /// Percent of the samples of `pids` with a frame anywhere on the stack matching
    /// `pred` (name without the kernel suffix, kernel?). 0 without samples.
    pub fn share(&self, pids: &[i32], pred: impl Fn(&str, bool) -> bool) -> f64 {
        let matching: Vec<bool> = self
            .frames
            .iter()
            .map(|f| {
                let (n, k) = split_frame(f);
                pred(n, k)
            })
            .collect();
        let (mut hit, mut all) = (0u64, 0u64);
        for s in self.of(pids) {
            all += s.count;
            if s.frames.iter().any(|&i| matching[i as usize]) {
                hit += s.count;
            }
        }
        percent(hit, all)
    }

    /// Like [`Profile::share`], but only the leaf frame counts (self time).
    pub fn self_share(&self, pids: &[i32], pred: impl Fn(&str, bool) -> bool) -> f64 {
        let (mut hit, mut all) = (0u64, 0u64);
        for s in self.of(pids) {
            all += s.count;
            if let Some(&leaf) = s.frames.last() {
                let (n, k) = split_frame(&self.frames[leaf as usize]);
                if pred(n, k) {
                    hit += s.count;
                }
            }
        }
        percent(hit, all)
    }

    /// The top table of `pid`: its `n` functions with the most self time.
    pub fn top_of(&self, pid: i32, n: usize) -> Top {
        let mut own: BTreeMap<u32, u64> = BTreeMap::new();
        let mut anywhere: BTreeMap<u32, u64> = BTreeMap::new();
        let (mut total, mut kernel) = (0u64, 0u64);
        for s in self.of(&[pid]) {
            total += s.count;
            if let Some(&leaf) = s.frames.last() {
                *own.entry(leaf).or_default() += s.count;
                if split_frame(&self.frames[leaf as usize]).1 {
                    kernel += s.count;
                }
            }
            let distinct: BTreeSet<u32> = s.frames.iter().copied().collect();
            for f in distinct {
                *anywhere.entry(f).or_default() += s.count;
            }
        }
        let pct = |v: u64| percent(v, total);
        let mut functions: Vec<TopFunction> = own
            .iter()
            .map(|(&f, &c)| {
                let (name, k) = split_frame(&self.frames[f as usize]);
                TopFunction {
                    name: name.to_string(),
                    kernel: k,
                    self_pct: pct(c),
                    total_pct: pct(anywhere.get(&f).copied().unwrap_or(c)),
                }
            })
            .collect();
        functions.sort_by(|a, b| {
            b.self_pct
                .total_cmp(&a.self_pct)
                .then_with(|| a.name.cmp(&b.name))
        });
        functions.truncate(n);
        Top {
            pid,
            samples: total,
            kernel_pct: pct(kernel),
            user_pct: pct(total - kernel),
            functions,
        }
    }

    /// The folded-stack lines (`root;…;leaf COUNT`) of every process, each stack under a
    /// root frame `label(pid)`: the input of a flame graph.
    pub fn folded(&self, label: impl Fn(i32) -> String) -> Vec<String> {
        let mut merged: BTreeMap<String, u64> = BTreeMap::new();
        for s in &self.stacks {
            let mut line = label(s.pid).replace(';', ":");
            for &f in &s.frames {
                line.push(';');
                line.push_str(&self.frames[f as usize].replace(';', ":"));
            }
            *merged.entry(line).or_default() += s.count;
        }
        merged
            .into_iter()
            .map(|(l, c)| format!("{l} {c}"))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn profile() -> Profile {
        Profile {
            frequency_hz: 99,
            samples: 10,
            frames: vec![
                "ngx_worker_process_cycle".into(),
                "tcp_sendmsg_[k]".into(),
                "malloc".into(),
                "inet_hash_connect_[k]".into(),
            ],
            stacks: vec![
                Stack {
                    pid: 1,
                    frames: vec![0, 1],
                    count: 6,
                },
                Stack {
                    pid: 1,
                    frames: vec![0, 2],
                    count: 3,
                },
                Stack {
                    pid: 2,
                    frames: vec![0, 3],
                    count: 1,
                },
            ],
            ..Profile::default()
        }
    }

    #[test]
    fn shares_and_the_top_table() {
        let p = profile();
        assert_eq!(p.samples_of(&[1]), 9);
        assert_eq!(p.samples_of(&[]), 10);
        let tcp = p.share(&[1], |n, k| k && n.starts_with("tcp_"));
        assert!((tcp - 66.67).abs() < 0.01, "{tcp}");
        assert_eq!(p.share(&[1], |n, _| n == "ngx_worker_process_cycle"), 100.0);
        assert_eq!(
            p.self_share(&[1], |n, _| n == "ngx_worker_process_cycle"),
            0.0
        );
        let top = p.top_of(1, 10);
        assert_eq!(top.samples, 9);
        assert_eq!(top.functions[0].name, "tcp_sendmsg");
        assert!(top.functions[0].kernel);
        assert!((top.kernel_pct - 66.67).abs() < 0.01);
        assert_eq!(top.functions[1].name, "malloc");
        assert!((top.functions[1].total_pct - 33.33).abs() < 0.01);
    }

    #[test]
    fn folded_lines_merge_processes_under_their_label() {
        let lines = profile().folded(|_| "nginx (front)".into());
        assert_eq!(
            lines,
            vec![
                "nginx (front);ngx_worker_process_cycle;inet_hash_connect_[k] 1",
                "nginx (front);ngx_worker_process_cycle;malloc 3",
                "nginx (front);ngx_worker_process_cycle;tcp_sendmsg_[k] 6",
            ]
        );
    }
}
