//! php-fpm: an INI file (`[pool]` sections, `key = value`, `;` comments) and the files
//! its `include=` names (Debian's `pool.d/*.conf`); the config file from the master's
//! title "php-fpm: master process (FILE)"; `php-fpm -t -y FILE`; USR2 to the master
//! (it re-reads the configuration and replaces every child).

use std::path::{Path, PathBuf};

use super::{exe, Found, Knob, Knobs, Server, Wording};
use crate::run::{KindInfo, ServerKind};

pub struct PhpFpm;

/// This kind, as recorded in the Run.
pub const KIND: ServerKind = ServerKind::new("php-fpm");

#[linkme::distributed_slice(crate::run::KINDS)]
static INFO: KindInfo = KindInfo {
    kind: KIND,
    name: "php-fpm",
    title: "php-fpm",
    executable: |n| n.starts_with("php-fpm"),
    ignore_case: false,
};

/// What php-fpm calls each knob, for the fixes (`diagnose` asks through [`super::knob`]).
fn knob(knob: Knob) -> Option<Wording> {
    Some(match knob {
        Knob::Pool => (
            "`pm.max_children` in the pool (each child serves one request at a time)",
            None,
        ),
        Knob::Workers | Knob::Connections => ("`pm.max_children` in the pool", None),
        Knob::Backlog => ("`listen.backlog` in the pool", None),
        Knob::OpenFiles => ("`rlimit_files` in php-fpm.conf", None),
        Knob::Affinity
        | Knob::UpstreamReuse
        | Knob::Reuseport
        | Knob::KeepAlive
        | Knob::UdpBuffer => return None,
    })
}

#[linkme::distributed_slice(super::KNOBS)]
static KNOBS: Knobs = Knobs { kind: KIND, knob };

#[linkme::distributed_slice(super::SERVERS)]
static SERVER: &dyn Server = &PhpFpm;

impl Server for PhpFpm {
    fn kind(&self) -> ServerKind {
        KIND
    }

    fn config_file(&self, pid: i32) -> anyhow::Result<PathBuf> {
        let args = crate::sys::procfs::read_cmdline(pid)
            .map_err(|e| anyhow::anyhow!("cannot read /proc/{pid}/cmdline: {e}"))?;
        let title = args.join(" ");
        if title.contains("pool ") && !title.contains("master") {
            anyhow::bail!("pid {pid} is a php-fpm child: give the master's pid (--server-pid)");
        }
        if let Some(f) = title
            .split_once("master process (")
            .and_then(|(_, r)| r.split_once(')'))
            .map(|(f, _)| f)
        {
            return Ok(PathBuf::from(f));
        }
        // A master whose title was not rewritten: its `-y`/`--fpm-config`.
        let y = args
            .iter()
            .position(|a| a == "-y" || a == "--fpm-config")
            .and_then(|i| args.get(i + 1));
        match y {
            Some(f) => Ok(PathBuf::from(f)),
            None => anyhow::bail!(
                "cannot tell php-fpm {pid}'s config file from its command line `{title}`"
            ),
        }
    }

    fn files(&self, main: &Path) -> Vec<PathBuf> {
        let mut out = vec![main.to_path_buf()];
        let text = std::fs::read_to_string(main).unwrap_or_default();
        let dir = main.parent().unwrap_or(Path::new("/"));
        for f in scan(&text).into_iter().filter(|f| f.name == "include") {
            let p = if f.value.starts_with('/') {
                PathBuf::from(&f.value)
            } else {
                dir.join(&f.value)
            };
            out.extend(crate::sys::glob(&p));
        }
        out
    }

    fn scan(&self, text: &str) -> Vec<Found> {
        scan(text)
    }

    fn insert(&self, text: &str, block: &str, name: &str, value: &str) -> Option<(usize, String)> {
        let header = format!("[{block}]");
        let mut inside = false;
        let mut last_end = None;
        for (start, line) in super::lines(text) {
            let t = line.trim();
            if t.starts_with('[') {
                if inside {
                    break;
                }
                inside = t == header;
                if inside {
                    last_end = Some(start + line.len());
                }
                continue;
            }
            if inside && !t.is_empty() && !t.starts_with(';') && !t.starts_with('#') {
                last_end = Some(start + line.len());
            }
        }
        Some((last_end?, format!("\n{name} = {value}")))
    }

    fn test_command(&self, pid: i32, file: &Path) -> anyhow::Result<Vec<String>> {
        Ok(vec![
            exe(pid)?,
            "-t".into(),
            "-y".into(),
            file.display().to_string(),
        ])
    }

    fn reload_signal(&self, _pid: i32) -> anyhow::Result<i32> {
        Ok(libc::SIGUSR2)
    }
}

/// `key = value` lines with the `[section]` they are in.
pub fn scan(text: &str) -> Vec<Found> {
    let mut out = Vec::new();
    let mut section: Vec<String> = Vec::new();
    for (start, line) in super::lines(text) {
        let t = line.trim_start();
        if t.starts_with(';') || t.starts_with('#') || t.is_empty() {
            continue;
        }
        if let Some(s) = t
            .trim_end()
            .strip_prefix('[')
            .and_then(|s| s.strip_suffix(']'))
        {
            section = vec![s.to_string()];
            continue;
        }
        let Some(eq) = line.find('=') else { continue };
        let name = line[..eq].trim().to_string();
        let mut v = &line[eq + 1..];
        if let Some(i) = v.find(" ;") {
            v = &v[..i];
        }
        let lead = v.len() - v.trim_start().len();
        let from = start + eq + 1 + lead;
        let value = v.trim().to_string();
        out.push(Found {
            name,
            range: from..from + value.len(),
            value,
            block: section.clone(),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::{add, find, set};

    const CONF: &str = "[global]\npid = /run/php.pid\n\n[app]\nuser = nobody\n; pm.max_children = 1\npm = dynamic\npm.max_children = 5\npm.start_servers = 2\n";

    #[test]
    fn edits_a_pool_value_in_place() {
        let f = find(&PhpFpm, CONF, "pm.max_children", None);
        assert_eq!(f.len(), 1, "the commented one is not a directive");
        assert_eq!(f[0].block, vec!["app"]);
        let (t, old) = set(&PhpFpm, CONF, "pm.max_children", None, "60").unwrap();
        assert_eq!(old, "5");
        assert_eq!(t, CONF.replace("max_children = 5", "max_children = 60"));
        let t = add(&PhpFpm, CONF, "app", "pm.max_requests", "500").unwrap();
        assert_eq!(
            t,
            CONF.replace(
                "start_servers = 2\n",
                "start_servers = 2\npm.max_requests = 500\n"
            )
        );
        let t = add(&PhpFpm, CONF, "global", "log_level", "notice").unwrap();
        assert!(
            t.starts_with("[global]\npid = /run/php.pid\nlog_level = notice\n\n[app]"),
            "{t}"
        );
    }
}
