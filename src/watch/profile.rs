//! The profiler: on-CPU call stacks of the server's threads, sampled by the kernel's
//! perf events (software CPU clock, `frequency_hz` per thread, kernel and user frames),
//! drained from their ring buffers on a thread of its own, then symbolized (blazesym:
//! the kernel through kallsyms, user code through each process's ELF files) and folded
//! into a [`Profile`]. No `perf` binary is involved.
//!
//! User stacks are walked by the kernel through frame pointers: in binaries built
//! without them (Debian's nginx) the callers above the leaf are unreliable, so user
//! frames that fall outside any mapped file are dropped and the leaf (self time) is what
//! counts.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use blazesym::normalize::{Normalizer, UserMeta};
use blazesym::symbolize::source::{Kernel, Process, Source};
use blazesym::symbolize::{Input, Symbolized, Symbolizer};
use blazesym::Pid;
use perf_event::data::Record;
use perf_event::events::Software;
use perf_event::{Builder, SampleFlag, Sampler};

use crate::run::{Profile, Stack, KERNEL_SUFFIX};

/// Ring buffer per thread: ~0.6 s of 99 Hz samples with deep stacks; drained every
/// [`DRAIN_EVERY`].
const RING_BYTES: usize = 64 * 1024;
const DRAIN_EVERY: Duration = Duration::from_millis(50);
/// Threads profiled at most (a php-fpm pool can have hundreds of children).
const MAX_THREADS: usize = 512;
/// Distinct stacks kept in the Run; the rest are counted under their leaf alone.
const MAX_STACKS: usize = 4000;

// Markers in a perf callchain that switch between kernel and user frames.
const PERF_CONTEXT_KERNEL: u64 = -128i64 as u64;
const PERF_CONTEXT_USER: u64 = -512i64 as u64;
const PERF_CONTEXT_MAX: u64 = -4095i64 as u64;

/// Raw stacks as the kernel gave them: (pid, callchain leaf first) → samples.
pub(super) type Raw = HashMap<(i32, Vec<u64>), u64>;

/// A running profiler.
pub struct Profiler {
    frequency_hz: u64,
    kernel: bool,
    /// What could not be sampled and what to change, in one line.
    pub note: Option<String>,
    stop: Arc<AtomicBool>,
    thread: JoinHandle<(Raw, u64)>,
}

impl Profiler {
    /// Starts sampling every thread of `pids`. Err: one line saying why nothing could be
    /// profiled and what to change.
    pub fn start(pids: &[i32], frequency_hz: u64) -> Result<Profiler, String> {
        let mut samplers = Vec::new();
        let mut kernel = true;
        let mut first_err: Option<std::io::Error> = None;
        for (pid, tid) in threads(pids).into_iter().take(MAX_THREADS) {
            let mut opened = open(tid, frequency_hz, kernel);
            if kernel && opened.as_ref().is_err_and(permission) {
                // Kernel frames need perf_event_paranoid ≤ 1 (or CAP_PERFMON): fall
                // back to user frames only.
                kernel = false;
                opened = open(tid, frequency_hz, false);
            }
            match opened {
                Ok(s) => samplers.push((pid, s)),
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        if samplers.is_empty() {
            return Err(match first_err {
                Some(e) if permission(&e) => format!(
                    "profile: not permitted to sample the server ({e}; kernel.perf_event_paranoid={}): run as root or with CAP_PERFMON, or set kernel.perf_event_paranoid=1 for your own processes",
                    paranoid()
                ),
                Some(e) => format!("profile: perf events unavailable ({e})"),
                None => "profile: no server process to sample".to_string(),
            });
        }
        let note = (!kernel).then(|| {
            format!(
                "profile: user frames only, kernel frames not permitted (kernel.perf_event_paranoid={}): run as root or with CAP_PERFMON for the kernel's share",
                paranoid()
            )
        });
        for (_, s) in samplers.iter_mut() {
            let _ = s.enable();
        }
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("loadlens-profile".into())
            .spawn(move || drain(samplers, &flag))
            .map_err(|e| format!("profile: cannot start its thread ({e})"))?;
        Ok(Profiler {
            frequency_hz,
            kernel,
            note,
            stop,
            thread,
        })
    }

    /// Stops sampling and returns the symbolized profile.
    pub fn finish(self) -> Profile {
        self.stop.store(true, Ordering::Relaxed);
        let (raw, lost) = self.thread.join().unwrap_or_default();
        let mut p = fold(&raw, &mut Names::new());
        p.frequency_hz = self.frequency_hz;
        p.kernel = self.kernel;
        p.lost = lost;
        p
    }
}

pub(super) fn permission(e: &std::io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EACCES) | Some(libc::EPERM))
}

pub(super) fn paranoid() -> String {
    std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "?".into())
}

/// (pid, tid) of every thread of `pids`.
pub(super) fn threads(pids: &[i32]) -> Vec<(i32, i32)> {
    let mut out = Vec::new();
    for &pid in pids {
        let tids: Vec<i32> = std::fs::read_dir(format!("/proc/{pid}/task"))
            .map(|d| {
                d.flatten()
                    .filter_map(|e| e.file_name().to_str()?.parse().ok())
                    .collect()
            })
            .unwrap_or_default();
        out.extend(tids.into_iter().map(|t| (pid, t)));
    }
    out
}

fn open(tid: i32, hz: u64, kernel: bool) -> std::io::Result<Sampler> {
    Builder::new(Software::CPU_CLOCK)
        .observe_pid(tid)
        .any_cpu()
        .sample_frequency(hz)
        .sample(SampleFlag::TID | SampleFlag::CALLCHAIN)
        .exclude_kernel(!kernel)
        .exclude_hv(true)
        .enabled(false)
        .build()?
        .sampled(RING_BYTES)
}

/// The drain loop: moves samples out of every ring buffer until told to stop, then once
/// more.
fn drain(mut samplers: Vec<(i32, Sampler)>, stop: &AtomicBool) -> (Raw, u64) {
    let mut raw = Raw::new();
    let mut lost = 0;
    loop {
        let last = stop.load(Ordering::Relaxed);
        for (pid, s) in samplers.iter_mut() {
            if last {
                let _ = s.disable();
            }
            while let Some(rec) = s.next_record() {
                match rec.parse_record() {
                    Ok(Record::Sample(sample)) => {
                        if let Some(chain) = sample.callchain() {
                            *raw.entry((*pid, chain.to_vec())).or_default() += 1;
                        }
                    }
                    Ok(Record::Lost(l)) => lost += l.lost,
                    _ => {}
                }
            }
        }
        if last {
            return (raw, lost);
        }
        std::thread::sleep(DRAIN_EVERY);
    }
}

/// Frame names, interned.
pub(super) struct Names {
    index: HashMap<String, u32>,
    names: Vec<String>,
}

impl Names {
    pub(super) fn new() -> Names {
        Names {
            index: HashMap::new(),
            names: Vec::new(),
        }
    }

    pub(super) fn id(&mut self, name: &str) -> u32 {
        if let Some(&i) = self.index.get(name) {
            return i;
        }
        let i = self.names.len() as u32;
        self.names.push(name.to_string());
        self.index.insert(name.to_string(), i);
        i
    }
}

/// Each callchain's frame names, root first, kernel frames suffixed `_[k]`; user frames
/// outside every mapped file are dropped (a bogus caller from a frame-pointer walk)
/// unless the leaf itself.
pub(super) fn symbolize<'a>(
    chains: impl Iterator<Item = (i32, &'a [u64])> + Clone,
) -> HashMap<(i32, Vec<u64>), Vec<String>> {
    let symbolizer = Symbolizer::new();
    // Kernel addresses, all processes together.
    let mut kaddrs: Vec<u64> = Vec::new();
    let mut uaddrs: BTreeMap<i32, Vec<u64>> = BTreeMap::new();
    for (pid, chain) in chains.clone() {
        for (addr, kernel) in frames(chain) {
            if kernel {
                kaddrs.push(addr);
            } else {
                uaddrs.entry(pid).or_default().push(addr);
            }
        }
    }
    kaddrs.sort_unstable();
    kaddrs.dedup();
    let kernel_names = symbolize_kernel(&symbolizer, &kaddrs);
    let mut user_names: BTreeMap<i32, HashMap<u64, Option<String>>> = BTreeMap::new();
    for (pid, addrs) in uaddrs.iter_mut() {
        addrs.sort_unstable();
        addrs.dedup();
        user_names.insert(*pid, symbolize_user(&symbolizer, *pid, addrs));
    }
    let mut out = HashMap::new();
    for (pid, chain) in chains {
        let mut names = Vec::new();
        for (i, (addr, kernel)) in frames(chain).enumerate() {
            let name = if kernel {
                Some(format!(
                    "{}{KERNEL_SUFFIX}",
                    kernel_names
                        .get(&addr)
                        .map(String::as_str)
                        .unwrap_or("[kernel]")
                ))
            } else {
                match user_names.get(&pid).and_then(|m| m.get(&addr)) {
                    Some(Some(n)) => Some(n.clone()),
                    _ if i == 0 => Some("[unknown]".to_string()),
                    _ => None,
                }
            };
            names.extend(name);
        }
        names.reverse();
        out.insert((pid, chain.to_vec()), names);
    }
    out
}

/// Symbolizes the raw callchains and folds them: root first, kernel frames suffixed.
/// `count` is whatever the raw map counts (samples, or microseconds off CPU).
pub(super) fn fold(raw: &Raw, names: &mut Names) -> Profile {
    let named = symbolize(raw.keys().map(|(pid, chain)| (*pid, chain.as_slice())));
    let mut stacks: BTreeMap<(i32, Vec<u32>), u64> = BTreeMap::new();
    let mut samples = 0;
    for ((pid, chain), &count) in raw.iter() {
        samples += count;
        let ids = named[&(*pid, chain.clone())]
            .iter()
            .map(|n| names.id(n))
            .collect();
        *stacks.entry((*pid, ids)).or_default() += count;
    }
    let mut stacks: Vec<Stack> = stacks
        .into_iter()
        .map(|((pid, frames), count)| Stack { pid, frames, count })
        .collect();
    if stacks.len() > MAX_STACKS {
        // Keep the heaviest stacks whole; the rest keep only their leaf.
        stacks.sort_by_key(|s| std::cmp::Reverse(s.count));
        let rest = stacks.split_off(MAX_STACKS);
        let mut leaves: BTreeMap<(i32, Vec<u32>), u64> = BTreeMap::new();
        for s in rest {
            let leaf = s.frames.last().copied().into_iter().collect();
            *leaves.entry((s.pid, leaf)).or_default() += s.count;
        }
        stacks.extend(leaves.into_iter().map(|((pid, frames), count)| Stack {
            pid,
            frames,
            count,
        }));
    }
    Profile {
        samples,
        frames: std::mem::take(&mut names.names),
        stacks,
        ..Profile::default()
    }
}

/// A callchain's addresses, leaf first, each with whether it is a kernel address.
fn frames(chain: &[u64]) -> impl Iterator<Item = (u64, bool)> + '_ {
    let mut kernel = false;
    chain.iter().filter_map(move |&a| {
        if a >= PERF_CONTEXT_MAX {
            if a == PERF_CONTEXT_KERNEL {
                kernel = true;
            } else if a == PERF_CONTEXT_USER {
                kernel = false;
            }
            return None;
        }
        Some((a, kernel))
    })
}

fn symbolize_kernel(sym: &Symbolizer, addrs: &[u64]) -> HashMap<u64, String> {
    let src = Source::Kernel(Kernel::default());
    let Ok(found) = sym.symbolize(&src, Input::AbsAddr(addrs)) else {
        return HashMap::new();
    };
    addrs
        .iter()
        .zip(found)
        .filter_map(|(&a, s)| match s {
            Symbolized::Sym(s) => Some((a, s.name.to_string())),
            Symbolized::Unknown(_) => None,
        })
        .collect()
}

/// Each user address's function, or `[file]` when no symbol covers it; `None` when it
/// lies outside every mapped file.
fn symbolize_user(sym: &Symbolizer, pid: i32, addrs: &[u64]) -> HashMap<u64, Option<String>> {
    let src = Source::Process(Process::new(Pid::from(pid as u32)));
    let found = sym
        .symbolize(&src, Input::AbsAddr(addrs))
        .unwrap_or_default();
    let normalizer = Normalizer::new();
    let modules = normalizer
        .normalize_user_addrs(Pid::from(pid as u32), addrs)
        .ok();
    let module = |i: usize| -> Option<String> {
        let m = modules.as_ref()?;
        let (_, meta) = m.outputs.get(i)?;
        match m.meta.get(*meta)? {
            UserMeta::Elf(e) => Some(format!("[{}]", e.path.file_name()?.to_string_lossy())),
            _ => None,
        }
    };
    addrs
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let name = match found.get(i) {
                Some(Symbolized::Sym(s)) => Some(s.name.to_string()),
                _ => module(i),
            };
            (a, name)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callchain_contexts_split_kernel_and_user_frames() {
        let chain = [
            PERF_CONTEXT_KERNEL,
            0xffff_ffff_8100_0000,
            0xffff_ffff_8100_0010,
            PERF_CONTEXT_USER,
            0x4000,
            0x5000,
        ];
        let f: Vec<(u64, bool)> = frames(&chain).collect();
        assert_eq!(
            f,
            vec![
                (0xffff_ffff_8100_0000, true),
                (0xffff_ffff_8100_0010, true),
                (0x4000, false),
                (0x5000, false)
            ]
        );
    }

    /// Profiles a busy thread of this very process: its own function is on top.
    #[test]
    fn profiles_a_busy_process() {
        if unsafe { libc::geteuid() } != 0
            && paranoid() != "-1"
            && paranoid() != "0"
            && paranoid() != "1"
        {
            return; // not permitted here; the lab tests cover the root path
        }
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let spin = std::thread::spawn(move || {
            let mut x = 0u64;
            while !s.load(Ordering::Relaxed) {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(7));
            }
            x
        });
        let pid = std::process::id() as i32;
        let p = Profiler::start(&[pid], 199).expect("profile");
        std::thread::sleep(Duration::from_millis(600));
        let p = p.finish();
        stop.store(true, Ordering::Relaxed);
        spin.join().unwrap();
        assert!(p.samples >= 20, "{} samples", p.samples);
        let top = p.top_of(pid, 5);
        assert!(top.user_pct > 50.0, "{top:?}");
    }
}
