//! The front server's configuration, one reader per kind: nginx through `nginx -T`
//! (`nginx.rs`), Apache httpd and HAProxy from the files their command line names (or
//! the distribution's default), reduced to the directives the diagnosis names in its
//! fixes and the upstreams they pass requests to. A server loadlens does not know has no
//! reader: it still gets every generic finding, with generic fixes.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::run::{ServerConfig, ServerKind};
use crate::sys::procfs::read_cmdline;

/// Reads the configuration of the server process `pid` of kind `kind`.
pub fn read(kind: ServerKind, pid: i32) -> Result<ServerConfig, String> {
    match kind {
        crate::kinds::nginx::KIND => super::nginx::read(pid),
        crate::kinds::apache::KIND => {
            let args = read_cmdline(pid).map_err(|e| format!("/proc/{pid}/cmdline: {e}"))?;
            read_apache(&apache_conf(&args))
        }
        crate::kinds::haproxy::KIND => {
            let args = read_cmdline(pid).map_err(|e| format!("/proc/{pid}/cmdline: {e}"))?;
            read_haproxy(&haproxy_conf(&args))
        }
        _ => match crate::kinds::of(kind) {
            Some(s) if s.reads_config() => s.read_config(pid),
            _ => Err(format!("no configuration reader for {}", kind.name())),
        },
    }
}

/// Whether loadlens reads the configuration of a server of kind `kind`.
pub fn readable(kind: ServerKind) -> bool {
    matches!(
        kind,
        crate::kinds::nginx::KIND | crate::kinds::apache::KIND | crate::kinds::haproxy::KIND
    ) || crate::kinds::of(kind).is_some_and(|s| s.reads_config())
}

/// Apache directives worth naming with their current values.
const APACHE: &[&str] = &[
    "MaxRequestWorkers",
    "MaxClients",
    "ServerLimit",
    "ThreadsPerChild",
    "StartServers",
    "ListenBacklog",
    "Listen",
    "KeepAlive",
    "MaxKeepAliveRequests",
    "KeepAliveTimeout",
    "AsyncRequestWorkerFactor",
    "ErrorLog",
    "ServerRoot",
];

/// HAProxy keywords worth naming with their current values (any section).
const HAPROXY: &[&str] = &[
    "maxconn",
    "backlog",
    "bind",
    "nbthread",
    "cpu-map",
    "timeout",
    "http-reuse",
    "ulimit-n",
];

fn arg_after(args: &[String], flag: &str) -> Option<String> {
    let i = args.iter().position(|a| a == flag)?;
    args.get(i + 1).cloned()
}

/// `apache2 -d ROOT -f FILE`: FILE relative to ROOT; without `-f`, the distribution's
/// main file.
fn apache_conf(args: &[String]) -> PathBuf {
    let root = arg_after(args, "-d");
    match (arg_after(args, "-f"), root) {
        (Some(f), _) if f.starts_with('/') => PathBuf::from(f),
        (Some(f), Some(r)) => Path::new(&r).join(f),
        (Some(f), None) => Path::new("/etc/apache2").join(f),
        (None, Some(r)) => Path::new(&r).join("apache2.conf"),
        (None, None) if Path::new("/etc/apache2/apache2.conf").exists() => {
            "/etc/apache2/apache2.conf".into()
        }
        (None, None) => "/etc/httpd/conf/httpd.conf".into(),
    }
}

fn haproxy_conf(args: &[String]) -> PathBuf {
    arg_after(args, "-f")
        .unwrap_or_else(|| "/etc/haproxy/haproxy.cfg".into())
        .into()
}

/// Reads Apache's configuration from `conf`, following `Include`/`IncludeOptional`.
pub fn read_apache(conf: &Path) -> Result<ServerConfig, String> {
    let root = conf.parent().unwrap_or(Path::new("/")).to_path_buf();
    let mut lines = Vec::new();
    include_apache(conf, &root, &mut lines, 0)?;
    let (directives, upstreams) = parse_apache(&lines.join("\n"));
    Ok(ServerConfig {
        kind: crate::kinds::apache::KIND,
        conf: conf.display().to_string(),
        directives,
        upstreams,
    })
}

/// Appends the lines of `file` to `out`, each `Include` replaced by the files it names
/// (a `*` in the last part of the path is expanded; relative paths are under the
/// ServerRoot). Bounded in depth: an include loop ends.
fn include_apache(
    file: &Path,
    root: &Path,
    out: &mut Vec<String>,
    depth: u32,
) -> Result<(), String> {
    let text = std::fs::read_to_string(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let mut root = root.to_path_buf();
    for line in text.lines() {
        let t = line.trim();
        let mut words = t.split_whitespace();
        let key = words.next().unwrap_or("").to_ascii_lowercase();
        let arg = words.next().unwrap_or("").trim_matches('"');
        if key == "serverroot" {
            root = PathBuf::from(arg);
        }
        if (key == "include" || key == "includeoptional") && depth < 8 {
            let path = if arg.starts_with('/') {
                PathBuf::from(arg)
            } else {
                root.join(arg)
            };
            for f in crate::sys::glob(&path) {
                // IncludeOptional: a missing file is no error; Include of an unreadable
                // one is not worth failing the whole reading for either.
                let _ = include_apache(&f, &root, out, depth + 1);
            }
            continue;
        }
        out.push(line.to_string());
    }
    Ok(())
}

/// The Apache directives of interest and where it proxies (`ProxyPass … URL`,
/// `SetHandler "proxy:unix:/path|fcgi://…"`), as `host:port` or `unix:/path`.
pub fn parse_apache(text: &str) -> (BTreeMap<String, Vec<String>>, Vec<String>) {
    let mut dirs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut upstreams = Vec::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || t.starts_with('<') || t.is_empty() {
            continue;
        }
        let (key, rest) = t.split_once(char::is_whitespace).unwrap_or((t, ""));
        let rest = rest.trim().trim_matches('"').to_string();
        if let Some(name) = APACHE.iter().find(|d| d.eq_ignore_ascii_case(key)) {
            dirs.entry(name.to_string()).or_default().push(rest.clone());
        }
        let target = match key.to_ascii_lowercase().as_str() {
            "proxypass" => rest.split_whitespace().nth(1).map(String::from),
            "sethandler" => rest.strip_prefix("proxy:").map(String::from),
            _ => None,
        };
        if let Some(u) = target.and_then(|t| upstream_of_url(&t)) {
            if !upstreams.contains(&u) {
                upstreams.push(u);
            }
        }
    }
    (dirs, upstreams)
}

/// `http://127.0.0.1:9000/app` → `127.0.0.1:9000`; `unix:/run/php.sock|fcgi://x/` →
/// `unix:/run/php.sock`.
fn upstream_of_url(u: &str) -> Option<String> {
    if let Some(path) = u.strip_prefix("unix:") {
        return Some(format!("unix:{}", path.split('|').next()?));
    }
    let (_, rest) = u.split_once("://")?;
    let host = rest.split('/').next()?;
    (!host.is_empty()).then(|| host.to_string())
}

/// Reads HAProxy's configuration file.
pub fn read_haproxy(conf: &Path) -> Result<ServerConfig, String> {
    let text = std::fs::read_to_string(conf).map_err(|e| format!("{}: {e}", conf.display()))?;
    let (directives, upstreams) = parse_haproxy(&text);
    Ok(ServerConfig {
        kind: crate::kinds::haproxy::KIND,
        conf: conf.display().to_string(),
        directives,
        upstreams,
    })
}

/// HAProxy keywords of interest, each value prefixed by its section (`global: 20`,
/// `frontend web: 100`), and every backend `server`'s address.
pub fn parse_haproxy(text: &str) -> (BTreeMap<String, Vec<String>>, Vec<String>) {
    let mut dirs: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut upstreams = Vec::new();
    let mut section = String::new();
    for line in text.lines() {
        let t = line.split('#').next().unwrap_or("").trim();
        if t.is_empty() {
            continue;
        }
        let mut words = t.split_whitespace();
        let key = words.next().unwrap_or("");
        let rest: Vec<&str> = words.collect();
        if !line.starts_with(char::is_whitespace)
            && matches!(
                key,
                "global" | "defaults" | "frontend" | "backend" | "listen" | "peers" | "resolvers"
            )
        {
            section = std::iter::once(key)
                .chain(rest.first().copied())
                .collect::<Vec<_>>()
                .join(" ");
            continue;
        }
        if HAPROXY.contains(&key) {
            dirs.entry(key.to_string())
                .or_default()
                .push(format!("{section}: {}", rest.join(" ")));
        }
        if key == "server" {
            if let Some(addr) = rest.get(1) {
                let a = addr.strip_prefix("unix@").map(|p| format!("unix:{p}"));
                let a = a.unwrap_or_else(|| addr.to_string());
                if !upstreams.contains(&a) {
                    upstreams.push(a);
                }
            }
        }
    }
    (dirs, upstreams)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apache_directives_includes_and_proxies() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        std::fs::create_dir(d.join("mods-enabled")).unwrap();
        std::fs::write(
            d.join("mods-enabled/mpm_event.conf"),
            "<IfModule mpm_event_module>\n\tServerLimit 1\n\tThreadsPerChild 8\n\tMaxRequestWorkers 8\n</IfModule>\n",
        )
        .unwrap();
        std::fs::write(
            d.join("apache2.conf"),
            format!(
                "ServerRoot \"{}\"\n# MaxRequestWorkers 999\nIncludeOptional mods-enabled/*.conf\nIncludeOptional none/*.conf\nListen 127.0.0.1:8080\nProxyPass /app http://127.0.0.1:9000/app\n<FilesMatch \\.php$>\n  SetHandler \"proxy:unix:/run/php/php8.2-fpm.sock|fcgi://localhost\"\n</FilesMatch>\n",
                d.display()
            ),
        )
        .unwrap();
        let c = read_apache(&d.join("apache2.conf")).unwrap();
        assert_eq!(c.get("maxrequestworkers").as_deref(), Some("8"));
        assert_eq!(c.get("ThreadsPerChild").as_deref(), Some("8"));
        assert_eq!(c.get("Listen").as_deref(), Some("127.0.0.1:8080"));
        assert_eq!(
            c.upstreams,
            vec!["127.0.0.1:9000", "unix:/run/php/php8.2-fpm.sock"]
        );
    }

    #[test]
    fn apache_conf_from_command_line() {
        let a = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        assert_eq!(
            apache_conf(&a(
                "/usr/sbin/apache2 -d /srv/ap -f httpd.conf -DFOREGROUND"
            )),
            PathBuf::from("/srv/ap/httpd.conf")
        );
        assert_eq!(
            apache_conf(&a("/usr/sbin/apache2 -f /tmp/x.conf")),
            PathBuf::from("/tmp/x.conf")
        );
    }

    #[test]
    fn haproxy_sections_and_servers() {
        let text = "global\n    maxconn 20\n    nbthread 2\ndefaults\n    mode http\n    timeout connect 5s\nfrontend web\n    bind 10.0.0.1:8080\n    maxconn 100 # per frontend\n    default_backend app\nbackend app\n    server s1 127.0.0.1:8081 check\n    server s2 unix@/run/app.sock\n";
        let (d, ups) = parse_haproxy(text);
        assert_eq!(d["maxconn"], vec!["global: 20", "frontend web: 100"]);
        assert_eq!(d["bind"], vec!["frontend web: 10.0.0.1:8080"]);
        assert_eq!(d["nbthread"], vec!["global: 2"]);
        assert_eq!(ups, vec!["127.0.0.1:8081", "unix:/run/app.sock"]);
    }
}
