//! uWSGI: everything loadlens knows of it in one file. The executable is `uwsgi` (Debian:
//! `uwsgi-core`, the Python plugin `uwsgi-plugin-python3`); a master process forks
//! `processes` workers, each serving one request at a time (or `threads` at a time):
//! an upstream whose pool is `processes` × `threads`. Its configuration is the INI file
//! of `uwsgi --ini FILE` (or `uwsgi FILE.ini`), `[uwsgi]` section, `key = value`, `;`
//! and `#` comments, with options given on the command line (`--processes 4`, `-p 4`)
//! taking precedence. uWSGI has no configuration test; SIGHUP to the master reloads
//! it gracefully (workers finish their requests). Its backlog is `listen` (100 by
//! default; uWSGI refuses to start when it exceeds `net.core.somaxconn`).
//!
//! Sources: uWSGI's "Configuring uWSGI" (INI, command line), "Things to know"
//! (`processes`, `threads`, `listen`), "Managing the uWSGI server" (SIGHUP: graceful
//! reload), and the option list (`max-fd`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Found, Knob, Knobs, Server, Wording};
use crate::run::{KindInfo, ServerConfig, ServerKind};

pub struct Uwsgi;

/// Short options and aliases, as the option list spells the full names.
const ALIASES: &[(&str, &str)] = &[
    ("p", "processes"),
    ("workers", "processes"),
    ("l", "listen"),
    ("s", "socket"),
    ("uwsgi-socket", "socket"),
    ("M", "master"),
];

/// An option's canonical name.
fn canonical(name: &str) -> &str {
    ALIASES
        .iter()
        .find(|(a, _)| *a == name)
        .map_or(name, |(_, c)| *c)
}

/// The INI file a `uwsgi` command line names: `--ini FILE`, `--ini=FILE`, or a first
/// argument ending in `.ini`; relative to the process's working directory `cwd`.
fn conf_of(args: &[String], cwd: &Path) -> Option<PathBuf> {
    let f = super::arg_after(args, "--ini")
        .or_else(|| {
            args.iter()
                .find_map(|a| a.strip_prefix("--ini=").map(String::from))
        })
        .or_else(|| {
            args.iter()
                .skip(1)
                .find(|a| !a.starts_with('-') && a.ends_with(".ini"))
                .cloned()
        })?;
    Some(cwd.join(f))
}

/// The options given on the command line (`--processes 4`, `--processes=4`, `-p 4`,
/// `--master`), canonical names.
fn options(args: &[String]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut i = 1;
    while i < args.len() {
        let a = &args[i];
        let name = a.strip_prefix("--").or_else(|| a.strip_prefix('-'));
        i += 1;
        let Some(name) = name else { continue };
        if let Some((n, v)) = name.split_once('=') {
            out.push((canonical(n).to_string(), v.to_string()));
            continue;
        }
        let value = match args.get(i) {
            Some(v) if !v.starts_with('-') => {
                i += 1;
                v.clone()
            }
            _ => "true".to_string(),
        };
        out.push((canonical(name).to_string(), value));
    }
    out
}

impl Uwsgi {
    /// The configuration of an INI file's `[uwsgi]` section with the command line's
    /// options over it (the last value of an option wins where uWSGI takes one).
    pub fn parse(&self, ini: &str, args: &[String]) -> ServerConfig {
        let mut directives: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for f in self.scan(ini) {
            if f.block.first().is_some_and(|b| b == "uwsgi") {
                directives
                    .entry(canonical(&f.name).to_string())
                    .or_default()
                    .push(f.value);
            }
        }
        for (name, value) in options(args) {
            if name == "ini" {
                continue;
            }
            let e = directives.entry(name.clone()).or_default();
            if ["processes", "threads", "listen", "max-fd"].contains(&name.as_str()) {
                e.clear();
            }
            e.push(value);
        }
        ServerConfig {
            kind: KIND,
            conf: String::new(),
            directives,
            upstreams: Vec::new(),
        }
    }
}

/// This kind, as recorded in the Run.
pub const KIND: ServerKind = ServerKind::new("uwsgi");

#[linkme::distributed_slice(crate::run::KINDS)]
static INFO: KindInfo = KindInfo {
    kind: KIND,
    name: "uWSGI",
    title: "uWSGI",
    executable: |n| n == "uwsgi" || n.starts_with("uwsgi-core"),
    ignore_case: false,
};

#[linkme::distributed_slice(super::SERVERS)]
static SERVER: &dyn Server = &Uwsgi;

/// What uWSGI calls each knob, for the fixes (`diagnose` asks through [`super::knob`]).
fn knob(knob: Knob) -> Option<Wording> {
    Some(match knob {
        Knob::Pool | Knob::Workers => ("`processes` in uWSGI's ini (× `threads` when set: each worker, or each of its threads, serves one request at a time)", Some("processes")),
        Knob::Backlog => ("`listen` in uWSGI's ini (the socket's backlog, 100 by default, at most `net.core.somaxconn`)", Some("listen")),
        Knob::OpenFiles => ("`max-fd` in uWSGI's ini", Some("max-fd")),
        Knob::Connections
        | Knob::Affinity
        | Knob::UpstreamReuse
        | Knob::Reuseport
        | Knob::KeepAlive
        | Knob::UdpBuffer => return None,
    })
}

#[linkme::distributed_slice(super::KNOBS)]
static KNOBS: Knobs = Knobs { kind: KIND, knob };

impl Server for Uwsgi {
    fn kind(&self) -> ServerKind {
        KIND
    }

    fn config_file(&self, pid: i32) -> anyhow::Result<PathBuf> {
        let a = crate::sys::procfs::read_cmdline(pid)
            .map_err(|e| anyhow::anyhow!("cannot read /proc/{pid}/cmdline: {e}"))?;
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_else(|_| "/".into());
        conf_of(&a, &cwd).ok_or_else(|| {
            anyhow::anyhow!(
                "uWSGI {pid} was started without an INI file (`{}`): its options are on its command line, change them there",
                a.join(" ")
            )
        })
    }

    fn scan(&self, text: &str) -> Vec<Found> {
        super::php_fpm::scan(text)
    }

    fn insert(&self, text: &str, block: &str, name: &str, value: &str) -> Option<(usize, String)> {
        super::php_fpm::PhpFpm.insert(text, block, name, value)
    }

    fn test_command(&self, pid: i32, _file: &Path) -> anyhow::Result<Vec<String>> {
        anyhow::bail!(
            "uWSGI {pid} has no configuration test: check the INI file by starting a uWSGI of its own with it"
        )
    }

    fn reload_signal(&self, _pid: i32) -> anyhow::Result<i32> {
        Ok(libc::SIGHUP)
    }

    fn reads_config(&self) -> bool {
        true
    }

    fn read_config(&self, pid: i32) -> Result<ServerConfig, String> {
        let a = crate::sys::procfs::read_cmdline(pid)
            .map_err(|e| format!("/proc/{pid}/cmdline: {e}"))?;
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_else(|_| "/".into());
        let (text, conf) = match conf_of(&a, &cwd) {
            Some(f) => (
                std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?,
                f.display().to_string(),
            ),
            None => (String::new(), String::new()),
        };
        let mut c = self.parse(&text, &a);
        c.conf = conf;
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::{find, set};

    /// uwsgi-core's example /usr/share/doc/uwsgi-core/examples/conffile/multi.ini
    /// (Debian 12, uWSGI 2.0.21), with `threads` and `listen` a site adds.
    const MULTI: &str = "[uwsgi]\n\n; socket 0\nsocket = :3033\n; socket 1\nsocket = :3034\n; socket 2\nsocket = pippo1.sock\n; socket 3\nsocket = pippo2.sock\n; socket 4\nsocket = 127.0.0.1:1717\n\nmap-socket = 0:1,2,3,4\nmap-socket = 1:4\nmap-socket = 2:10\nmap-socket = 3:5,6,9\nmap-socket = 4:7,8,9\n\n\nvacuum = true\nmemory-report = true\nmaster = true\nprocesses = 10\n;mount = /app1=werkzeug.testapp:test_app\nthreads = 2\nlisten = 64\n";

    fn args(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    #[test]
    fn reads_the_ini_and_the_command_line_over_it() {
        let c = Uwsgi.parse(MULTI, &args("uwsgi --ini multi.ini"));
        assert_eq!(c.get("processes").as_deref(), Some("10"));
        assert_eq!(c.get("threads").as_deref(), Some("2"));
        assert_eq!(c.get("listen").as_deref(), Some("64"));
        assert_eq!(c.directives["socket"].len(), 5);
        assert_eq!(c.get("mount"), None, "commented out");
        // The command line wins; aliases are one option.
        let c = Uwsgi.parse(MULTI, &args("uwsgi --ini multi.ini -p 3 --listen=128"));
        assert_eq!(c.get("processes").as_deref(), Some("3"));
        assert_eq!(c.get("listen").as_deref(), Some("128"));
        let c = Uwsgi.parse(
            "",
            &args("uwsgi --workers 6 --master --http-socket 127.0.0.1:9000"),
        );
        assert_eq!(c.get("processes").as_deref(), Some("6"));
        assert_eq!(c.get("master").as_deref(), Some("true"));
        assert_eq!(c.get("http-socket").as_deref(), Some("127.0.0.1:9000"));
        // An edit in place.
        let (t, old) = set(&Uwsgi, MULTI, "processes", None, "16").unwrap();
        assert_eq!(old, "10");
        assert_eq!(t, MULTI.replace("processes = 10", "processes = 16"));
        assert_eq!(find(&Uwsgi, MULTI, "listen", None)[0].block, ["uwsgi"]);
        let (phrase, setting) = knob(Knob::Pool).unwrap();
        assert!(phrase.contains("`processes`"), "{phrase}");
        assert_eq!(setting, Some("processes"));
    }

    #[test]
    fn the_ini_from_the_command_line() {
        let cwd = Path::new("/srv/app");
        assert_eq!(
            conf_of(&args("uwsgi --ini conf/app.ini"), cwd).unwrap(),
            Path::new("/srv/app/conf/app.ini")
        );
        assert_eq!(
            conf_of(&args("uwsgi --ini=/etc/uwsgi/a.ini"), cwd).unwrap(),
            Path::new("/etc/uwsgi/a.ini")
        );
        assert_eq!(
            conf_of(&args("/usr/bin/uwsgi app.ini"), cwd).unwrap(),
            Path::new("/srv/app/app.ini")
        );
        assert!(conf_of(&args("uwsgi --processes 2"), cwd).is_none());
    }

    /// The example as installed, when uwsgi-core's documentation is there.
    #[test]
    fn reads_the_installed_example() {
        let p = "/usr/share/doc/uwsgi-core/examples/conffile/multi.ini";
        let Ok(text) = std::fs::read_to_string(p) else {
            return;
        };
        assert_eq!(
            Uwsgi.parse(&text, &[]).get("processes").as_deref(),
            Some("10")
        );
    }
}
