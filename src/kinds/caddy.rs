//! Caddy 2: everything loadlens knows of it in one file. The executable is `caddy`
//! (`ServerKind::from_executable`); one Go process serves (no master or workers). Its
//! configuration is the file of `caddy run --config FILE` (Debian's unit:
//! `/etc/caddy/Caddyfile`), a Caddyfile or the JSON it adapts to: Caddy takes the
//! Caddyfile adapter when `--adapter caddyfile` is given or the file's name starts with
//! `Caddyfile`, JSON otherwise. Config test: `caddy validate --config FILE`. Caddy 2
//! ignores SIGUSR1 and SIGHUP: a new configuration goes through its admin API
//! (`caddy reload`), so there is no reload signal.
//!
//! Sources: Caddy's "Caddyfile Concepts" (blocks, directives, the global options block),
//! "Command Line" (`run`, `validate`, `reload`, signals), "JSON Config Structure"
//! (`apps.http.servers.*`), and quic-go's "UDP Buffer Sizes" wiki page: quic-go asks for
//! a 7 MB receive buffer (SO_RCVBUF, then SO_RCVBUFFORCE) and logs "failed to
//! sufficiently increase receive buffer size" when `net.core.rmem_max` holds it lower.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{arg_after, exe, Found, Knob, Knobs, Server, Wording};
use crate::run::{KindInfo, ServerConfig, ServerKind};

pub struct Caddy;

/// Where Debian's package (and Caddy's own docs) keep the Caddyfile.
const DEFAULT_CONF: &str = "/etc/caddy/Caddyfile";

fn args(pid: i32) -> Result<Vec<String>, String> {
    crate::sys::procfs::read_cmdline(pid).map_err(|e| format!("/proc/{pid}/cmdline: {e}"))
}

/// The config file a `caddy` command line names, relative paths under the process's
/// working directory `cwd`.
fn conf_of(args: &[String], cwd: &Path) -> PathBuf {
    let f = arg_after(args, "--config")
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--config=").map(String::from))
        })
        .unwrap_or_else(|| DEFAULT_CONF.into());
    cwd.join(f)
}

/// Whether Caddy reads `file` with the Caddyfile adapter (its rule: `--adapter
/// caddyfile`, or a file named `Caddyfile…`), rather than as JSON.
fn is_caddyfile(args: &[String], file: &Path) -> bool {
    match arg_after(args, "--adapter") {
        Some(a) => a == "caddyfile",
        None => file
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with("Caddyfile")),
    }
}

impl Caddy {
    /// The configuration in `text` (a Caddyfile, or Caddy's JSON when `caddyfile` is
    /// false): each directive's values, and where `reverse_proxy` sends requests.
    pub fn parse(&self, text: &str, caddyfile: bool) -> Result<ServerConfig, String> {
        let mut directives: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut upstreams = Vec::new();
        if caddyfile {
            for f in self.scan(text) {
                if f.name == "reverse_proxy" || f.name == "to" {
                    upstreams.extend(
                        f.value
                            .split_whitespace()
                            .filter(|w| !w.starts_with('/') && *w != "*")
                            .map(upstream),
                    );
                }
                directives.entry(f.name).or_default().push(f.value);
            }
        } else {
            let v: serde_json::Value =
                serde_json::from_str(text).map_err(|e| format!("not Caddy's JSON: {e}"))?;
            json_leaves(&v, &mut directives, 0);
            upstreams = directives
                .get("dial")
                .into_iter()
                .flatten()
                .map(|d| upstream(d))
                .collect();
        }
        Ok(ServerConfig {
            kind: KIND,
            conf: String::new(),
            directives,
            upstreams,
        })
    }
}

/// An upstream as Caddy writes it (`localhost:9000`, `http://127.0.0.1:9000`,
/// `unix//run/php.sock`) as the watch's discovery reads addresses (`host:port`,
/// `unix:/path`).
fn upstream(w: &str) -> String {
    if let Some(p) = w.strip_prefix("unix/") {
        return format!("unix:{p}");
    }
    let w = w
        .strip_prefix("http://")
        .or_else(|| w.strip_prefix("h2c://"))
        .unwrap_or(w);
    w.trim_end_matches('/').to_string()
}

/// Every leaf of Caddy's JSON by its key (`listen`, `protocols`, `dial`, `idle_timeout`,
/// `keep_alive`…), arrays of scalars as one value joined by spaces.
fn json_leaves(v: &serde_json::Value, out: &mut BTreeMap<String, Vec<String>>, depth: u32) {
    use serde_json::Value;
    let Value::Object(m) = v else {
        if let Value::Array(a) = v {
            for x in a {
                json_leaves(x, out, depth + 1);
            }
        }
        return;
    };
    if depth > 32 {
        return;
    }
    for (k, x) in m {
        let scalar = |x: &Value| match x {
            Value::String(s) => Some(s.clone()),
            Value::Number(n) => Some(n.to_string()),
            Value::Bool(b) => Some(b.to_string()),
            _ => None,
        };
        match x {
            Value::Array(a) if !a.is_empty() && a.iter().all(|y| scalar(y).is_some()) => {
                let words: Vec<String> = a.iter().filter_map(scalar).collect();
                if k == "dial" {
                    out.entry(k.clone()).or_default().extend(words);
                } else {
                    out.entry(k.clone()).or_default().push(words.join(" "));
                }
            }
            Value::Object(_) | Value::Array(_) => json_leaves(x, out, depth + 1),
            _ => out.entry(k.clone()).or_default().extend(scalar(x)),
        }
    }
}

/// A Caddyfile line without its comment (`#` at the start of a token).
fn uncommented(line: &str) -> &str {
    let mut prev_space = true;
    for (i, c) in line.char_indices() {
        if c == '#' && prev_space {
            return &line[..i];
        }
        prev_space = c.is_whitespace();
    }
    line
}

/// This kind, as recorded in the Run.
pub const KIND: ServerKind = ServerKind::new("caddy");

#[linkme::distributed_slice(crate::run::KINDS)]
static INFO: KindInfo = KindInfo {
    kind: KIND,
    name: "Caddy",
    title: "Caddy",
    executable: |n| n.starts_with("caddy"),
    ignore_case: false,
};

#[linkme::distributed_slice(super::SERVERS)]
static SERVER: &dyn Server = &Caddy;

/// What Caddy calls each knob, for the fixes (`diagnose` asks through [`super::knob`]).
fn knob(knob: Knob) -> Option<Wording> {
    Some(match knob {
        Knob::Workers => ("`GOMAXPROCS` in Caddy's environment (the Go threads running at once; every CPU by default)", None),
        Knob::Backlog => ("the listen backlog Go reads from `net.core.somaxconn` when Caddy starts (raise the sysctl, then restart Caddy)", None),
        Knob::OpenFiles => ("`LimitNOFILE=` in caddy.service", None),
        Knob::KeepAlive => ("the `servers` global option's `timeouts { idle … }` (client keep-alive, 5m by default)", Some("idle")),
        Knob::UpstreamReuse => ("`keepalive` and `keepalive_idle_conns` in `reverse_proxy`'s `transport http { … }`", Some("keepalive_idle_conns")),
        Knob::UdpBuffer => ("Caddy's QUIC (quic-go) asks for a 7 MB receive buffer itself and gets at most `net.core.rmem_max`: Caddy has no directive for it, raise the sysctl and restart Caddy", None),
        Knob::Connections | Knob::Affinity | Knob::Reuseport | Knob::Pool => return None,
    })
}

#[linkme::distributed_slice(super::KNOBS)]
static KNOBS: Knobs = Knobs { kind: KIND, knob };

impl Server for Caddy {
    fn kind(&self) -> ServerKind {
        KIND
    }

    fn config_file(&self, pid: i32) -> anyhow::Result<PathBuf> {
        let a = args(pid).map_err(anyhow::Error::msg)?;
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_else(|_| "/".into());
        Ok(conf_of(&a, &cwd))
    }

    /// The Caddyfile's directives: the first word of each line is its name, the rest
    /// its value (a trailing `{` opens a block labelled by the line, `}` closes one).
    /// The unlabelled block at the top is the global options block (`global`). Caddy's
    /// JSON has no directives to edit in place: empty.
    fn scan(&self, text: &str) -> Vec<Found> {
        let mut out = Vec::new();
        let mut blocks: Vec<String> = Vec::new();
        for (start, line) in super::lines(text) {
            let body = uncommented(line);
            let lead = body.len() - body.trim_start().len();
            let mut t = body.trim();
            if t.is_empty() {
                continue;
            }
            if t.starts_with('}') {
                blocks.pop();
                t = t[1..].trim();
                if t.is_empty() {
                    continue;
                }
            }
            let opens = t.ends_with('{');
            let t = t.trim_end_matches('{').trim_end();
            if t.is_empty() {
                if opens {
                    blocks.push(if blocks.is_empty() && out.is_empty() {
                        "global".into()
                    } else {
                        String::new()
                    });
                }
                continue;
            }
            let name_end = t.find(char::is_whitespace).unwrap_or(t.len());
            let rest = &t[name_end..];
            let v_lead = rest.len() - rest.trim_start().len();
            let value = rest.trim();
            let from = start + lead + name_end + v_lead;
            // A site address opening the top level (`:8443 {`, `example.com {`) is a
            // block's label, not a directive.
            let site = blocks.is_empty();
            if !site {
                out.push(Found {
                    name: t[..name_end].to_string(),
                    value: value.to_string(),
                    range: from..from + value.len(),
                    block: blocks.clone(),
                });
            }
            if opens {
                blocks.push(t.to_string());
            }
        }
        out
    }

    fn insert(&self, text: &str, block: &str, name: &str, value: &str) -> Option<(usize, String)> {
        let last = self
            .scan(text)
            .into_iter()
            .rfind(|f| f.block.last().is_some_and(|b| b == block))?;
        let line_end = text[last.range.end..]
            .find('\n')
            .map_or(text.len(), |i| last.range.end + i);
        let indent = super::indent_at(text, last.range.start).to_string();
        Some((line_end, format!("\n{indent}{name} {value}")))
    }

    fn test_command(&self, pid: i32, file: &Path) -> anyhow::Result<Vec<String>> {
        let a = args(pid).map_err(anyhow::Error::msg)?;
        let mut cmd = vec![
            exe(pid)?,
            "validate".into(),
            "--config".into(),
            file.display().to_string(),
        ];
        if is_caddyfile(&a, file) {
            cmd.extend(["--adapter".into(), "caddyfile".into()]);
        }
        Ok(cmd)
    }

    fn reload_signal(&self, pid: i32) -> anyhow::Result<i32> {
        anyhow::bail!(
            "Caddy {pid} reloads through its admin API, not a signal (Caddy 2 ignores SIGUSR1 and SIGHUP): run `caddy reload --config FILE`"
        )
    }

    fn reads_config(&self) -> bool {
        true
    }

    fn read_config(&self, pid: i32) -> Result<ServerConfig, String> {
        let a = args(pid)?;
        let file = self.config_file(pid).map_err(|e| e.to_string())?;
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        let mut c = self.parse(&text, is_caddyfile(&a, &file))?;
        c.conf = file.display().to_string();
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::{add, find, set};

    const CADDYFILE: &str = "{\n\tservers {\n\t\tprotocols h1 h2 h3\n\t\ttimeouts {\n\t\t\tidle 30s\n\t\t}\n\t}\n}\n\n:8443 {\n\ttls internal # a test certificate\n\troot * /srv\n\treverse_proxy /api/* 127.0.0.1:9000 unix//run/php.sock {\n\t\ttransport http {\n\t\t\tkeepalive_idle_conns 4\n\t\t}\n\t}\n\tfile_server\n}\n";

    #[test]
    fn directives_in_their_blocks() {
        let f = find(&Caddy, CADDYFILE, "protocols", None);
        assert_eq!(f[0].value, "h1 h2 h3");
        assert_eq!(f[0].block, ["global", "servers"]);
        let f = find(&Caddy, CADDYFILE, "tls", None);
        assert_eq!(
            (f[0].value.as_str(), f[0].block.clone()),
            ("internal", vec![":8443".to_string()])
        );
        let (t, old) = set(&Caddy, CADDYFILE, "keepalive_idle_conns", None, "64").unwrap();
        assert_eq!(old, "4");
        assert_eq!(
            t,
            CADDYFILE.replace("keepalive_idle_conns 4", "keepalive_idle_conns 64")
        );
        let t = add(&Caddy, CADDYFILE, "transport http", "keepalive", "90s").unwrap();
        assert!(
            t.contains("keepalive_idle_conns 4\n\t\t\tkeepalive 90s\n"),
            "{t}"
        );
        // Every byte but the value's is kept.
        assert_eq!(t.len(), CADDYFILE.len() + "\n\t\t\tkeepalive 90s".len());
    }

    #[test]
    fn reads_a_caddyfile_and_its_json() {
        let c = Caddy.parse(CADDYFILE, true).unwrap();
        assert_eq!(c.get("idle").as_deref(), Some("30s"));
        assert_eq!(c.upstreams, ["127.0.0.1:9000", "unix:/run/php.sock"]);
        // What `caddy adapt` makes of a site with HTTP/3 and a proxy.
        let json = r#"{"apps":{"http":{"servers":{"srv0":{"listen":[":8443"],"protocols":["h1","h2","h3"],"idle_timeout":30000000000,
            "routes":[{"handle":[{"handler":"reverse_proxy","transport":{"protocol":"http","keep_alive":{"max_idle_conns_per_host":4}},
            "upstreams":[{"dial":"127.0.0.1:9000"}]}]}]}}}}}"#;
        let c = Caddy.parse(json, false).unwrap();
        assert_eq!(c.get("listen").as_deref(), Some(":8443"));
        assert_eq!(c.get("protocols").as_deref(), Some("h1 h2 h3"));
        assert_eq!(c.get("max_idle_conns_per_host").as_deref(), Some("4"));
        assert_eq!(c.upstreams, ["127.0.0.1:9000"]);
        assert!(Caddy.parse("not json", false).unwrap_err().contains("JSON"));
    }

    #[test]
    fn the_config_file_and_adapter_from_the_command_line() {
        let a: Vec<String> = ["caddy", "run", "--config", "conf/Caddyfile"]
            .map(String::from)
            .into();
        let f = conf_of(&a, Path::new("/srv/site"));
        assert_eq!(f, Path::new("/srv/site/conf/Caddyfile"));
        assert!(is_caddyfile(&a, &f));
        let a: Vec<String> = ["caddy", "run", "--config=/etc/caddy/caddy.json"]
            .map(String::from)
            .into();
        let f = conf_of(&a, Path::new("/"));
        assert_eq!(f, Path::new("/etc/caddy/caddy.json"));
        assert!(!is_caddyfile(&a, &f));
        let a: Vec<String> = [
            "caddy",
            "run",
            "--config",
            "site.conf",
            "--adapter",
            "caddyfile",
        ]
        .map(String::from)
        .into();
        assert!(is_caddyfile(&a, &conf_of(&a, Path::new("/"))));
        assert_eq!(
            conf_of(&["caddy".to_string()], Path::new("/x")),
            Path::new(DEFAULT_CONF)
        );
    }
}
