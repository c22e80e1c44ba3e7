//! Apache httpd: one directive per line (names without case), `<Section>` blocks; the
//! config file from `-d ROOT -f FILE` (or the distribution's); `apache2 -t` with the
//! same `-d`/`-f`; USR1 to the parent, a graceful restart (children finish their
//! requests). `ServerLimit` and `ThreadLimit` are read only at a full start: a graceful
//! restart keeps them (Apache's mpm_common docs).

use std::path::{Path, PathBuf};

use super::{arg_after, exe, Found, Knob, Knobs, Server, Wording};
use crate::run::{KindInfo, ServerKind};

pub struct Apache;

fn args(pid: i32) -> anyhow::Result<Vec<String>> {
    crate::sys::procfs::read_cmdline(pid)
        .map_err(|e| anyhow::anyhow!("cannot read /proc/{pid}/cmdline: {e}"))
}

/// This kind, as recorded in the Run.
pub const KIND: ServerKind = ServerKind::new("apache");

#[linkme::distributed_slice(crate::run::KINDS)]
static INFO: KindInfo = KindInfo {
    kind: KIND,
    name: "Apache",
    title: "Apache httpd",
    executable: |n| matches!(n, "apache2" | "httpd" | "httpd2"),
    ignore_case: true,
};

/// What Apache calls each knob, for the fixes (`diagnose` asks through [`super::knob`]).
fn knob(knob: Knob) -> Option<Wording> {
    Some(match knob {
        Knob::KeepAlive => (
            "`KeepAlive On` with `MaxKeepAliveRequests 1000` and `KeepAliveTimeout 5`",
            Some("KeepAlive"),
        ),
        Knob::Workers => (
            "`ServerLimit` × `ThreadsPerChild` (the MPM's processes and threads)",
            Some("ThreadsPerChild"),
        ),
        Knob::Connections => (
            "`MaxRequestWorkers` (with `ServerLimit` × `ThreadsPerChild` at least as high)",
            Some("MaxRequestWorkers"),
        ),
        Knob::Backlog => ("Apache's `ListenBacklog`", Some("ListenBacklog")),
        Knob::OpenFiles => (
            "`APACHE_ULIMIT_MAX_FILES` in /etc/apache2/envvars (or `LimitNOFILE=` in its unit)",
            None,
        ),
        Knob::UpstreamReuse => ("`enablereuse=on` on the `ProxyPass` worker", None),
        Knob::Pool => (
            "`MaxRequestWorkers` (with `ServerLimit` × `ThreadsPerChild` at least as high)",
            Some("MaxRequestWorkers"),
        ),
        Knob::Affinity | Knob::Reuseport | Knob::UdpBuffer => return None,
    })
}

#[linkme::distributed_slice(super::KNOBS)]
static KNOBS: Knobs = Knobs { kind: KIND, knob };

#[linkme::distributed_slice(super::SERVERS)]
static SERVER: &dyn Server = &Apache;

impl Server for Apache {
    fn kind(&self) -> ServerKind {
        KIND
    }

    fn config_file(&self, pid: i32) -> anyhow::Result<PathBuf> {
        let a = args(pid)?;
        let root = arg_after(&a, "-d");
        Ok(match (arg_after(&a, "-f"), root) {
            (Some(f), _) if f.starts_with('/') => PathBuf::from(f),
            (Some(f), Some(r)) => Path::new(&r).join(f),
            (Some(f), None) => Path::new("/etc/apache2").join(f),
            (None, Some(r)) => Path::new(&r).join("apache2.conf"),
            (None, None) if Path::new("/etc/apache2/apache2.conf").exists() => {
                "/etc/apache2/apache2.conf".into()
            }
            (None, None) => "/etc/httpd/conf/httpd.conf".into(),
        })
    }

    fn scan(&self, text: &str) -> Vec<Found> {
        let mut out = Vec::new();
        let mut blocks: Vec<String> = Vec::new();
        for (start, line) in super::lines(text) {
            let t = line.trim();
            if t.starts_with("</") {
                blocks.pop();
                continue;
            }
            if let Some(open) = t.strip_prefix('<') {
                blocks.push(open.trim_end_matches('>').to_string());
                continue;
            }
            if let Some((name, range)) = super::key_value(line, start, false) {
                out.push(Found {
                    name,
                    value: text[range.clone()].to_string(),
                    range,
                    block: blocks.clone(),
                });
            }
        }
        out
    }

    fn same_name(&self, a: &str, b: &str) -> bool {
        a.eq_ignore_ascii_case(b)
    }

    /// Apache's top level is the only block tune adds to (`""`): after the last line.
    fn insert(&self, text: &str, block: &str, name: &str, value: &str) -> Option<(usize, String)> {
        if !block.is_empty() {
            return None;
        }
        let nl = if text.is_empty() || text.ends_with('\n') {
            ""
        } else {
            "\n"
        };
        Some((text.len(), format!("{nl}{name} {value}\n")))
    }

    fn test_command(&self, pid: i32, file: &Path) -> anyhow::Result<Vec<String>> {
        let a = args(pid)?;
        let mut cmd = vec![exe(pid)?, "-t".to_string()];
        if let Some(d) = arg_after(&a, "-d") {
            cmd.extend(["-d".to_string(), d]);
        }
        cmd.extend(["-f".to_string(), file.display().to_string()]);
        Ok(cmd)
    }

    fn reload_signal(&self, _pid: i32) -> anyhow::Result<i32> {
        Ok(libc::SIGUSR1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::{find, set};

    #[test]
    fn names_without_case_values_in_place() {
        let conf =
            "ServerLimit 1\n<IfModule mpm_event_module>\n  maxrequestworkers   4\n</IfModule>\n";
        let f = find(&Apache, conf, "MaxRequestWorkers", None);
        assert_eq!(f[0].block, vec!["IfModule mpm_event_module"]);
        let (t, old) = set(&Apache, conf, "MaxRequestWorkers", None, "128").unwrap();
        assert_eq!(old, "4");
        assert_eq!(t, conf.replace("   4\n", "   128\n"));
    }
}
