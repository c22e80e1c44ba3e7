//! lighttpd 1.4: everything loadlens knows of it in one file. The executable is
//! `lighttpd`; one process serves with one event loop (`server.max-worker` forks more).
//! Its configuration is the file of `lighttpd -f FILE` (Debian's unit:
//! `/etc/lighttpd/lighttpd.conf`) and the files it `include`s: `name = value` (or `+=`,
//! `:=`) at the top level or inside `$HTTP[…] … { }` conditionals, arrays of
//! `"key" => value` pairs (`fastcgi.server = ( "/" => (( "socket" => …, "max-procs" =>
//! 2 )) )`). Config test: `lighttpd -tt -f FILE`; SIGUSR1 is its graceful restart (the
//! reload of Debian's unit). It is a front (static files, `mod_proxy`) and passes
//! requests to FastCGI, SCGI (uWSGI's protocol with `"scgi-protocol" => "uwsgi"`) or
//! HTTP upstreams, whose `socket` or `host`/`port` are its upstreams.
//!
//! Sources: lighttpd's wiki, "Configuration: File Syntax", "Server.max-workerDetails",
//! "Server.max-connectionsDetails", "Server.listen-backlogDetails", "Docs_ModFastCGI"
//! (`max-procs`), "Docs_ModSCGI" (`scgi-protocol`), lighttpd(8) (`-tt`, signals).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{arg_after, exe, Found, Knob, Knobs, Server, Wording};
use crate::run::{KindInfo, ServerConfig, ServerKind};

pub struct Lighttpd;

/// Where Debian's package keeps the configuration.
const DEFAULT_CONF: &str = "/etc/lighttpd/lighttpd.conf";

/// The directives whose arrays name upstreams.
const BACKENDS: &[&str] = &["fastcgi.server", "scgi.server", "proxy.server"];

/// `text` up to its comment (`#` outside a quoted string).
fn uncommented(line: &str) -> &str {
    let mut quoted = false;
    for (i, c) in line.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' if !quoted => return &line[..i],
            _ => {}
        }
    }
    line
}

/// How the parentheses outside quoted strings change the nesting depth.
fn depth_change(s: &str) -> i32 {
    let mut quoted = false;
    let mut d = 0;
    for c in s.chars() {
        match c {
            '"' => quoted = !quoted,
            '(' if !quoted => d += 1,
            ')' if !quoted => d -= 1,
            _ => {}
        }
    }
    d
}

/// The value at the start of `s` (at byte `at` of the text): a quoted string (its
/// inside), or a bare word (a number, `enable`); `None` for an array.
fn value_at(s: &str, at: usize) -> Option<(String, std::ops::Range<usize>)> {
    let lead = s.len() - s.trim_start().len();
    let t = &s[lead..];
    if let Some(inner) = t.strip_prefix('"') {
        let end = inner.find('"')?;
        let from = at + lead + 1;
        return Some((inner[..end].to_string(), from..from + end));
    }
    let end = t
        .find(|c: char| !(c.is_ascii_alphanumeric() || "._-/:".contains(c)))
        .unwrap_or(t.len());
    if end == 0 {
        return None;
    }
    let from = at + lead;
    Some((t[..end].to_string(), from..from + end))
}

/// Every `"key" => value` pair in `s` (at byte `at` of the text) whose value is a
/// string or a word.
fn pairs(s: &str, at: usize, block: &[String], out: &mut Vec<Found>) {
    let mut from = 0;
    while let Some(i) = s[from..].find("=>") {
        let arrow = from + i;
        let before = s[..arrow].trim_end();
        if let Some(k) = before.strip_suffix('"') {
            if let Some(q) = k.rfind('"') {
                let key = &k[q + 1..];
                if let Some((value, range)) = value_at(&s[arrow + 2..], at + arrow + 2) {
                    out.push(Found {
                        name: key.to_string(),
                        value,
                        range,
                        block: block.to_vec(),
                    });
                }
            }
        }
        from = arrow + 2;
    }
}

/// The directive at the start of a top-level line: its name, and where the text after
/// its operator (`=`, `+=`, `:=`) begins.
fn directive(t: &str) -> Option<(&str, usize)> {
    let end = t
        .find(|c: char| !(c.is_ascii_alphanumeric() || "._-".contains(c)))
        .unwrap_or(t.len());
    if end == 0 {
        return None;
    }
    let rest = &t[end..];
    let ws = rest.len() - rest.trim_start().len();
    let r = &rest[ws..];
    let op = ["+=", ":=", "="].into_iter().find(|o| r.starts_with(o))?;
    Some((&t[..end], end + ws + op.len()))
}

impl Lighttpd {
    /// The configuration in `text`: each directive's values (the pairs inside an
    /// array by their key: `max-procs`, `socket`), and the upstreams of its FastCGI,
    /// SCGI and proxy backends (`unix:/path`, `host:port`).
    pub fn parse(&self, text: &str) -> ServerConfig {
        let mut directives: BTreeMap<String, Vec<String>> = BTreeMap::new();
        let mut upstreams = Vec::new();
        let mut host: Option<String> = None;
        for f in self.scan(text) {
            let backend = f.block.iter().any(|b| BACKENDS.contains(&b.as_str()));
            if backend {
                match f.name.as_str() {
                    "socket" => upstreams.push(format!("unix:{}", f.value)),
                    "host" => host = Some(f.value.clone()),
                    "port" => upstreams.push(format!(
                        "{}:{}",
                        host.take().unwrap_or_else(|| "127.0.0.1".into()),
                        f.value
                    )),
                    _ => {}
                }
            }
            directives.entry(f.name).or_default().push(f.value);
        }
        ServerConfig {
            kind: KIND,
            conf: String::new(),
            directives,
            upstreams,
        }
    }
}

/// This kind, as recorded in the Run.
pub const KIND: ServerKind = ServerKind::new("lighttpd");

#[linkme::distributed_slice(crate::run::KINDS)]
static INFO: KindInfo = KindInfo {
    kind: KIND,
    name: "lighttpd",
    title: "lighttpd",
    executable: |n| n == "lighttpd",
    ignore_case: false,
};

#[linkme::distributed_slice(super::SERVERS)]
static SERVER: &dyn Server = &Lighttpd;

/// What lighttpd calls each knob, for the fixes (`diagnose` asks through [`super::knob`]).
fn knob(knob: Knob) -> Option<Wording> {
    Some(match knob {
        Knob::Workers => ("`server.max-worker` (lighttpd's processes, each one event loop; one by default)", Some("server.max-worker")),
        Knob::Connections => ("`server.max-connections` (with `server.max-fds` at least twice as high)", Some("server.max-connections")),
        Knob::Backlog => ("`server.listen-backlog` (1024 by default, within `net.core.somaxconn`)", Some("server.listen-backlog")),
        Knob::OpenFiles => ("`server.max-fds`", Some("server.max-fds")),
        Knob::KeepAlive => ("`server.max-keep-alive-requests` and `server.max-keep-alive-idle`", Some("server.max-keep-alive-requests")),
        Knob::Pool => ("`max-procs` of the backend in `fastcgi.server` (the FastCGI processes lighttpd spawns, each serving one request at a time)", Some("max-procs")),
        Knob::Affinity | Knob::UpstreamReuse | Knob::Reuseport | Knob::UdpBuffer => {
            return None
        }
    })
}

#[linkme::distributed_slice(super::KNOBS)]
static KNOBS: Knobs = Knobs { kind: KIND, knob };

impl Server for Lighttpd {
    fn kind(&self) -> ServerKind {
        KIND
    }

    fn config_file(&self, pid: i32) -> anyhow::Result<PathBuf> {
        let a = crate::sys::procfs::read_cmdline(pid)
            .map_err(|e| anyhow::anyhow!("cannot read /proc/{pid}/cmdline: {e}"))?;
        let cwd = std::fs::read_link(format!("/proc/{pid}/cwd")).unwrap_or_else(|_| "/".into());
        Ok(cwd.join(arg_after(&a, "-f").unwrap_or_else(|| DEFAULT_CONF.into())))
    }

    /// The main file and what its `include "…"` lines name (relative to its directory,
    /// `*` as a glob: Debian's `conf-enabled/*.conf`).
    fn files(&self, main: &Path) -> Vec<PathBuf> {
        let mut out = vec![main.to_path_buf()];
        let text = std::fs::read_to_string(main).unwrap_or_default();
        let dir = main.parent().unwrap_or(Path::new("/"));
        for (_, line) in super::lines(&text) {
            let t = uncommented(line).trim();
            let Some(rest) = t.strip_prefix("include ") else {
                continue;
            };
            let Some((f, _)) = value_at(rest, 0) else {
                continue;
            };
            out.extend(crate::sys::glob(&dir.join(f)));
        }
        out
    }

    /// Top-level directives (their value as written, a quoted string's inside), each
    /// `"key" => value` pair of an array under its directive's name, conditionals
    /// (`$HTTP["host"] == "x" {`) as blocks.
    fn scan(&self, text: &str) -> Vec<Found> {
        let mut out = Vec::new();
        let mut blocks: Vec<String> = Vec::new();
        let mut open: Option<String> = None;
        let mut depth = 0;
        for (start, line) in super::lines(text) {
            let body = uncommented(line);
            if depth > 0 {
                let mut b = blocks.clone();
                b.extend(open.clone());
                pairs(body, start, &b, &mut out);
                depth += depth_change(body);
                if depth <= 0 {
                    depth = 0;
                    open = None;
                }
                continue;
            }
            let lead = body.len() - body.trim_start().len();
            let mut t = body.trim();
            let mut at = start + lead;
            while let Some(r) = t.strip_prefix('}') {
                blocks.pop();
                at += t.len() - r.trim_start().len();
                t = r.trim_start();
            }
            if t.is_empty() {
                continue;
            }
            if t.starts_with('$') || t.starts_with("else") {
                if let Some(label) = t.strip_suffix('{') {
                    blocks.push(label.trim().to_string());
                }
                continue;
            }
            let Some((name, after)) = directive(t) else {
                continue;
            };
            let rest = &t[after..];
            let v_lead = rest.len() - rest.trim_start().len();
            let v = rest.trim();
            let from = at + after + v_lead;
            let (value, range) = match value_at(v, from) {
                Some((value, range)) if range.end - from >= v.trim_end_matches('"').len() => {
                    (value, range)
                }
                _ => (v.to_string(), from..from + v.len()),
            };
            out.push(Found {
                name: name.to_string(),
                value,
                range,
                block: blocks.clone(),
            });
            if v.starts_with('(') {
                let mut b = blocks.clone();
                b.push(name.to_string());
                pairs(v, from, &b, &mut out);
            }
            let d = depth_change(v);
            if d > 0 {
                depth = d;
                open = Some(name.to_string());
            }
        }
        out
    }

    /// A new top-level directive after the last one (lighttpd reads them in order),
    /// or inside the conditional labelled `block`.
    fn insert(&self, text: &str, block: &str, name: &str, value: &str) -> Option<(usize, String)> {
        let last = self
            .scan(text)
            .into_iter()
            .rfind(|f| f.block.last().map_or(block.is_empty(), |b| b == block))?;
        let line_end = text[last.range.end..]
            .find('\n')
            .map_or(text.len(), |i| last.range.end + i);
        let indent = super::indent_at(text, last.range.start).to_string();
        Some((line_end, format!("\n{indent}{name} = {value}")))
    }

    fn test_command(&self, pid: i32, file: &Path) -> anyhow::Result<Vec<String>> {
        Ok(vec![
            exe(pid)?,
            "-tt".into(),
            "-f".into(),
            file.display().to_string(),
        ])
    }

    fn reload_signal(&self, _pid: i32) -> anyhow::Result<i32> {
        Ok(libc::SIGUSR1)
    }

    fn reads_config(&self) -> bool {
        true
    }

    fn read_config(&self, pid: i32) -> Result<ServerConfig, String> {
        let file = self.config_file(pid).map_err(|e| e.to_string())?;
        let mut text = String::new();
        for f in self.files(&file) {
            let t = std::fs::read_to_string(&f).map_err(|e| format!("{}: {e}", f.display()))?;
            text.push_str(&t);
            text.push('\n');
        }
        let mut c = self.parse(&text);
        c.conf = file.display().to_string();
        Ok(c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kinds::{find, set};

    /// Debian 12's /etc/lighttpd/lighttpd.conf (lighttpd 1.4.69), with the tuning
    /// lines a site adds and a FastCGI backend in a conditional.
    const DEBIAN: &str = r#"server.modules = (
	"mod_indexfile",
	"mod_access",
	"mod_alias",
 	"mod_redirect",
)

server.document-root        = "/var/www/html"
server.upload-dirs          = ( "/var/cache/lighttpd/uploads" )
server.errorlog             = "/var/log/lighttpd/error.log"
server.pid-file             = "/run/lighttpd.pid"
server.username             = "www-data"
server.groupname            = "www-data"
server.port                 = 80

# features
#https://redmine.lighttpd.net/projects/lighttpd/wiki/Server_feature-flagsDetails
server.feature-flags       += ("server.h2proto" => "enable")
server.feature-flags       += ("server.h2c"     => "enable")
server.feature-flags       += ("server.graceful-shutdown-timeout" => 5)
#server.feature-flags       += ("server.graceful-restart-bg" => "enable")

# strict parsing and normalization of URL for consistency and security
# https://redmine.lighttpd.net/projects/lighttpd/wiki/Server_http-parseoptsDetails
# (might need to explicitly set "url-path-2f-decode" = "disable"
#  if a specific application is encoding URLs inside url-path)
server.http-parseopts = (
  "header-strict"           => "enable",# default
  "host-strict"             => "enable",# default
  "host-normalize"          => "enable",# default
  "url-normalize-unreserved"=> "enable",# recommended highly
  "url-normalize-required"  => "enable",# recommended
  "url-ctrls-reject"        => "enable",# recommended
  "url-path-2f-decode"      => "enable",# recommended highly (unless breaks app)
 #"url-path-2f-reject"      => "enable",
  "url-path-dotseg-remove"  => "enable",# recommended highly (unless breaks app)
 #"url-path-dotseg-reject"  => "enable",
 #"url-query-20-plus"       => "enable",# consistency in query string
)

index-file.names            = ( "index.php", "index.html" )
url.access-deny             = ( "~", ".inc" )
static-file.exclude-extensions = ( ".php", ".pl", ".fcgi" )

# default listening port for IPv6 falls back to the IPv4 port
include_shell "/usr/share/lighttpd/use-ipv6.pl " + server.port
include_shell "/usr/share/lighttpd/create-mime.conf.pl"
include "/etc/lighttpd/conf-enabled/*.conf"

#server.compat-module-load   = "disable"
server.modules += (
	"mod_dirlisting",
	"mod_staticfile",
)
server.max-worker = 4
server.max-connections = 2048 # twice the default
$HTTP["url"] =~ "^/app" {
  fastcgi.server = ( "/app" =>
    (( "socket" => "/run/php/app.sock",
       "check-local" => "disable",
       "max-procs" => 2,
    )),
    ( "host" => "10.0.0.7", "port" => 9000 )
  )
}
"#;

    #[test]
    fn reads_debians_config_and_its_knobs() {
        let c = Lighttpd.parse(DEBIAN);
        assert_eq!(c.get("server.max-worker").as_deref(), Some("4"));
        assert_eq!(c.get("server.max-connections").as_deref(), Some("2048"));
        assert_eq!(c.get("server.port").as_deref(), Some("80"));
        assert_eq!(
            c.get("server.document-root").as_deref(),
            Some("/var/www/html")
        );
        assert_eq!(c.get("max-procs").as_deref(), Some("2"));
        assert_eq!(c.get("url-path-2f-reject"), None, "commented out");
        assert_eq!(c.upstreams, ["unix:/run/php/app.sock", "10.0.0.7:9000"]);
        let f = find(&Lighttpd, DEBIAN, "max-procs", None);
        assert_eq!(
            f[0].block,
            [
                r#"$HTTP["url"] =~ "^/app""#.to_string(),
                "fastcgi.server".into()
            ]
        );
        // An edit replaces the value's bytes only.
        let (t, old) = set(&Lighttpd, DEBIAN, "server.max-connections", None, "8192").unwrap();
        assert_eq!(old, "2048");
        assert_eq!(
            t,
            DEBIAN.replace("max-connections = 2048", "max-connections = 8192")
        );
        let (t, old) = set(&Lighttpd, DEBIAN, "max-procs", None, "8").unwrap();
        assert_eq!(old, "2");
        assert_eq!(
            t,
            DEBIAN.replace("\"max-procs\" => 2", "\"max-procs\" => 8")
        );
        let (t, _) = set(&Lighttpd, DEBIAN, "server.document-root", None, "/srv").unwrap();
        assert!(
            t.contains("server.document-root        = \"/srv\"\n"),
            "{t}"
        );
        let t = crate::kinds::add(&Lighttpd, DEBIAN, "", "server.listen-backlog", "4096").unwrap();
        assert!(
            t.contains(
                "server.max-connections = 2048 # twice the default\nserver.listen-backlog = 4096\n"
            ),
            "{t}"
        );
        // The fixes name lighttpd's own directives.
        let (phrase, setting) = knob(Knob::Connections).unwrap();
        assert!(phrase.contains("server.max-connections"));
        assert_eq!(setting, Some("server.max-connections"));
    }

    /// Debian's conf-available/15-fastcgi-php.conf: lighttpd spawns php-cgi itself.
    #[test]
    fn reads_debians_fastcgi_php() {
        let text = include_str!("../../tests/data/kinds/lighttpd-15-fastcgi-php.conf");
        let c = Lighttpd.parse(text);
        assert_eq!(c.get("max-procs").as_deref(), Some("1"));
        assert_eq!(c.get("bin-path").as_deref(), Some("/usr/bin/php-cgi"));
        assert_eq!(c.get("PHP_FCGI_CHILDREN").as_deref(), Some("4"));
        assert_eq!(c.upstreams, ["unix:/run/lighttpd/php.socket"]);
    }

    /// The configuration Debian's package installs, read where it is.
    #[test]
    fn reads_the_installed_file_when_present() {
        let Ok(text) = std::fs::read_to_string(DEFAULT_CONF) else {
            return;
        };
        let c = Lighttpd.parse(&text);
        assert_eq!(c.get("server.port").as_deref(), Some("80"), "{c:?}");
        assert!(Lighttpd
            .files(Path::new(DEFAULT_CONF))
            .iter()
            .all(|f| f.exists()));
    }
}
