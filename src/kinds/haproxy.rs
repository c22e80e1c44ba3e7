//! HAProxy: sections (`global`, `defaults`, `frontend NAME`, …) of `keyword args` lines,
//! `#` comments; the config file from `-f`; `haproxy -c -f FILE`; USR2 to the master of
//! master-worker mode (`-W` or `master-worker` in `global`), which starts new workers on
//! the new configuration while the old ones finish. A HAProxy without a master has no
//! reload signal (its reload is a new process taking over with `-sf`): refused.

use std::path::{Path, PathBuf};

use super::{arg_after, exe, Found, Knob, Knobs, Server, Wording};
use crate::run::{KindInfo, ServerKind};

pub struct Haproxy;

/// Keywords that open a section.
const SECTIONS: &[&str] = &[
    "global",
    "defaults",
    "frontend",
    "backend",
    "listen",
    "resolvers",
    "peers",
    "userlist",
    "program",
    "mailers",
    "cache",
    "http-errors",
    "ring",
];

fn args(pid: i32) -> anyhow::Result<Vec<String>> {
    crate::sys::procfs::read_cmdline(pid)
        .map_err(|e| anyhow::anyhow!("cannot read /proc/{pid}/cmdline: {e}"))
}

/// This kind, as recorded in the Run.
pub const KIND: ServerKind = ServerKind::new("haproxy");

#[linkme::distributed_slice(crate::run::KINDS)]
static INFO: KindInfo = KindInfo {
    kind: KIND,
    name: "HAProxy",
    title: "HAProxy",
    executable: |n| n.starts_with("haproxy"),
    ignore_case: false,
};

/// What HAProxy calls each knob, for the fixes (`diagnose` asks through [`super::knob`]).
fn knob(knob: Knob) -> Option<Wording> {
    Some(match knob {
        Knob::KeepAlive => (
            "`option http-keep-alive` with `timeout http-keep-alive`",
            None,
        ),
        Knob::Workers => ("`nbthread` in the global section", Some("nbthread")),
        Knob::Connections => (
            "`maxconn` in the global section (and the frontend's)",
            Some("maxconn"),
        ),
        Knob::Backlog => (
            "`backlog` on the frontend (it follows the frontend's `maxconn`)",
            Some("backlog"),
        ),
        Knob::OpenFiles => ("`ulimit-n` (HAProxy derives it from `maxconn`)", None),
        Knob::Affinity => ("`cpu-map`", None),
        Knob::UpstreamReuse => ("`http-reuse always` in the backend", None),
        Knob::Reuseport | Knob::Pool | Knob::UdpBuffer => return None,
    })
}

#[linkme::distributed_slice(super::KNOBS)]
static KNOBS: Knobs = Knobs { kind: KIND, knob };

#[linkme::distributed_slice(super::SERVERS)]
static SERVER: &dyn Server = &Haproxy;

impl Server for Haproxy {
    fn kind(&self) -> ServerKind {
        KIND
    }

    fn config_file(&self, pid: i32) -> anyhow::Result<PathBuf> {
        Ok(arg_after(&args(pid)?, "-f")
            .unwrap_or_else(|| "/etc/haproxy/haproxy.cfg".into())
            .into())
    }

    fn scan(&self, text: &str) -> Vec<Found> {
        let mut out = Vec::new();
        let mut section = Vec::new();
        for (start, line) in super::lines(text) {
            let Some((name, range)) = super::key_value(line, start, true) else {
                continue;
            };
            let value = text[range.clone()].to_string();
            if SECTIONS.contains(&name.as_str()) {
                let label = if value.is_empty() {
                    name
                } else {
                    format!("{name} {value}")
                };
                section = vec![label];
                continue;
            }
            out.push(Found {
                name,
                value,
                range,
                block: section.clone(),
            });
        }
        out
    }

    fn insert(&self, text: &str, block: &str, name: &str, value: &str) -> Option<(usize, String)> {
        let mut inside = false;
        let mut last: Option<(usize, usize)> = None;
        for (start, line) in super::lines(text) {
            let Some((key, range)) = super::key_value(line, start, true) else {
                continue;
            };
            if SECTIONS.contains(&key.as_str()) {
                if inside {
                    break;
                }
                let v = &text[range];
                let label = if v.is_empty() {
                    key.clone()
                } else {
                    format!("{key} {v}")
                };
                inside = label == block;
                if inside {
                    last = Some((start, start + line.len()));
                }
                continue;
            }
            if inside {
                last = Some((start, start + line.len()));
            }
        }
        let (line_start, end) = last?;
        let indent = super::indent_at(text, line_start + 1).to_string();
        let indent = if indent.is_empty() {
            "    ".into()
        } else {
            indent
        };
        Some((end, format!("\n{indent}{name} {value}")))
    }

    fn test_command(&self, pid: i32, file: &Path) -> anyhow::Result<Vec<String>> {
        Ok(vec![
            exe(pid)?,
            "-c".into(),
            "-f".into(),
            file.display().to_string(),
        ])
    }

    fn reload_signal(&self, pid: i32) -> anyhow::Result<i32> {
        let a = args(pid)?;
        let file = self.config_file(pid)?;
        let in_file = std::fs::read_to_string(&file)
            .map(|t| self.scan(&t).iter().any(|f| f.name == "master-worker"))
            .unwrap_or(false);
        if a.iter().any(|x| x == "-W" || x == "-Ws") || in_file {
            Ok(libc::SIGUSR2)
        } else {
            anyhow::bail!(
                "HAProxy {pid} runs without a master (no -W, no `master-worker` in global): it has no graceful reload signal; start it in master-worker mode (-W) and give the master's pid"
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::{add, find, set};

    const CONF: &str = "global\n    maxconn 20  # the fault\n    nbthread 1\ndefaults\n    mode http\nbackend app\n    server s1 127.0.0.1:8081\n";

    #[test]
    fn keywords_in_their_sections() {
        let f = find(&Haproxy, CONF, "maxconn", None);
        assert_eq!(
            (f[0].value.as_str(), f[0].block.clone()),
            ("20", vec!["global".to_string()])
        );
        let (t, _) = set(&Haproxy, CONF, "maxconn", None, "4096").unwrap();
        assert_eq!(t, CONF.replace("maxconn 20 ", "maxconn 4096 "));
        let t = add(&Haproxy, CONF, "backend app", "http-reuse", "always").unwrap();
        assert!(
            t.ends_with("    server s1 127.0.0.1:8081\n    http-reuse always\n"),
            "{t}"
        );
    }
}
