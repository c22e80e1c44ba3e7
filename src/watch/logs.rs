//! The servers' error logs as evidence: where each watched server writes its error log
//! (nginx's `error_log` from `nginx -T`, php-fpm's `error_log` from the config its
//! master was started with), what was appended to them during the load window, and the
//! known messages in it, counted by class with the first example. The experts behind
//! the published investigations read these first: "accept4() failed (24: Too many open
//! files)", "worker_connections are not enough", "server reached pm.max_children".
//!
//! Reading is bounded ([`MAX_BYTES`] per file) and never fails the run: a log that
//! cannot be read is a one-line note. A log rotated during the run (its inode changed,
//! or it shrank) is read from its start.

use std::collections::BTreeMap;
use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;

use crate::run::{LogClass, Role, ServerConfig, ServerLog, ServerProcess};

/// At most this much of each log is read per run.
pub const MAX_BYTES: u64 = 4 << 20;

/// Message classes: an id and the substrings (all must appear) that identify a line.
/// nginx's texts are from its source (`ngx_event_accept.c`, `ngx_http_upstream.c`, …);
/// php-fpm's from `fpm_process_ctl.c`.
const CLASSES: &[(&str, &[&str])] = &[
    ("too-many-open-files", &["Too many open files"]),
    (
        "worker-connections-not-enough",
        &["worker_connections are not enough"],
    ),
    ("max-children-reached", &["reached", "max_children"]),
    // Apache's mpm_event/worker/prefork: "AH00484: server reached MaxRequestWorkers
    // setting, consider raising the MaxRequestWorkers setting".
    (
        "max-request-workers-reached",
        &["reached MaxRequestWorkers setting"],
    ),
    (
        "cannot-assign-address",
        &["(99: Cannot assign requested address)"],
    ),
    (
        "connect-refused",
        &["connect() ", "(111: Connection refused)"],
    ),
    ("upstream-timed-out", &["upstream timed out"]),
    (
        "upstream-prematurely-closed",
        &["upstream prematurely closed"],
    ),
    ("no-live-upstreams", &["no live upstreams"]),
    (
        "upstream-buffered-to-file",
        &["upstream response is buffered to a temporary file"],
    ),
    (
        "request-body-too-large",
        &["client intended to send too large body"],
    ),
    // nginx's limit_req and limit_conn refusing a request (not their dry runs, which
    // log "limiting requests, dry run").
    ("limiting-requests", &["limiting requests, excess"]),
    ("limiting-connections", &["limiting connections by zone"]),
    ("ssl-handshake", &["SSL_do_handshake() failed"]),
    ("connect-failed", &["connect() ", "failed ("]),
    ("slow-script", &["executing too slow"]),
];

/// The class of one log line, if it is a known message.
pub fn classify(line: &str) -> Option<&'static str> {
    CLASSES
        .iter()
        .find(|(_, needles)| needles.iter().all(|n| line.contains(n)))
        .map(|(id, _)| *id)
}

/// Counts the classes of `text` (what was appended during the window).
pub fn summarize(text: &str) -> (Vec<LogClass>, u64, Option<String>) {
    let mut by: BTreeMap<&str, LogClass> = BTreeMap::new();
    let (mut other, mut other_example) = (0, None);
    let trim = |l: &str| l.chars().take(300).collect::<String>();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        match classify(line) {
            Some(c) => {
                let e = by.entry(c).or_insert_with(|| LogClass {
                    class: c.to_string(),
                    count: 0,
                    example: trim(line),
                });
                e.count += 1;
            }
            None => {
                other += 1;
                other_example.get_or_insert_with(|| trim(line));
            }
        }
    }
    let mut classes: Vec<LogClass> = by.into_values().collect();
    classes.sort_by(|a, b| b.count.cmp(&a.count).then(a.class.cmp(&b.class)));
    (classes, other, other_example)
}

/// A log being watched: where it ended when the window began.
#[derive(Debug, Clone)]
pub struct Tail {
    pub path: String,
    pub server: String,
    start: Option<(u64, u64)>,
    note: Option<String>,
}

impl Tail {
    /// Remembers where `path` ends now (its inode and size).
    pub fn start(path: &str, server: &str) -> Tail {
        let (start, note) = match std::fs::metadata(path) {
            Ok(m) => (Some((m.ino(), m.len())), None),
            // Not there yet: nginx creates it on the first message.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => (Some((0, 0)), None),
            Err(e) => (None, Some(format!("{path} not read: {e}"))),
        };
        Tail {
            path: path.to_string(),
            server: server.to_string(),
            start,
            note,
        }
    }

    /// Reads what was appended since [`Tail::start`] and classifies it.
    pub fn finish(&self) -> ServerLog {
        let mut log = ServerLog {
            path: self.path.clone(),
            server: self.server.clone(),
            note: self.note.clone(),
            ..ServerLog::default()
        };
        let Some((ino, len)) = self.start else {
            return log;
        };
        let mut f = match std::fs::File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return log,
            Err(e) => {
                log.note = Some(format!("{} not read: {e}", self.path));
                return log;
            }
        };
        let Ok(m) = f.metadata() else { return log };
        // Rotated (a new file) or truncated: everything in it is from the window.
        let from = if m.ino() != ino || m.len() < len {
            0
        } else {
            len
        };
        let avail = m.len().saturating_sub(from);
        if avail > MAX_BYTES {
            log.note = Some(format!(
                "{}: {} bytes appended during the run, the first {} read",
                self.path, avail, MAX_BYTES
            ));
        }
        let mut buf = Vec::new();
        if f.seek(SeekFrom::Start(from)).is_ok() {
            let _ = f.take(MAX_BYTES).read_to_end(&mut buf);
        }
        log.bytes_read = buf.len() as u64;
        let (classes, other, example) = summarize(&String::from_utf8_lossy(&buf));
        log.classes = classes;
        log.other_lines = other;
        log.other_example = example;
        log
    }
}

/// The error logs of the watched servers: the front's from its configuration, php-fpm
/// masters' from theirs.
pub fn find(procs: &[ServerProcess], config: Option<&ServerConfig>) -> Vec<Tail> {
    let mut out: Vec<Tail> = Vec::new();
    let mut add = |path: String, server: &str| {
        if !out.iter().any(|t| t.path == path) {
            out.push(Tail::start(&path, server));
        }
    };
    if let Some(cfg) = config {
        let paths = match cfg.kind {
            crate::kinds::nginx::KIND => nginx_error_logs(cfg),
            crate::kinds::apache::KIND => apache_error_logs(cfg),
            _ => Vec::new(),
        };
        for p in paths {
            add(p, cfg.kind.name());
        }
    }
    for p in procs
        .iter()
        .filter(|p| p.kind == crate::kinds::php_fpm::KIND && p.role != Role::Worker)
    {
        if let Some(path) = php_fpm_error_log(p.pid) {
            add(path, "php-fpm");
        }
    }
    out
}

/// nginx's error logs: every `error_log` file in the running configuration (global and
/// per server), or Debian's default when none is set. `stderr`, `syslog:` and
/// `memory:` targets are not files.
pub fn nginx_error_logs(cfg: &ServerConfig) -> Vec<String> {
    let set: Vec<String> = cfg
        .directives
        .get("error_log")
        .into_iter()
        .flatten()
        .filter_map(|v| v.split_whitespace().next())
        .filter(|p| p.starts_with('/'))
        .map(String::from)
        .collect();
    if set.is_empty() && !cfg.directives.contains_key("error_log") {
        vec!["/var/log/nginx/error.log".to_string()]
    } else {
        set
    }
}

/// Apache's error logs: every `ErrorLog` that is a file (not `syslog:` or a `|pipe`),
/// relative to the ServerRoot; Debian's default when none could be resolved (its
/// `${APACHE_LOG_DIR}` comes from envvars, which loadlens does not run).
pub fn apache_error_logs(cfg: &ServerConfig) -> Vec<String> {
    let root = cfg
        .get("ServerRoot")
        .map(|r| r.split(" | ").next().unwrap_or("").to_string())
        .or_else(|| {
            std::path::Path::new(&cfg.conf)
                .parent()
                .map(|p| p.display().to_string())
        })
        .unwrap_or_default();
    let set: Vec<String> = cfg
        .get("ErrorLog")
        .unwrap_or_default()
        .split(" | ")
        .map(|v| v.trim().trim_matches('"'))
        .filter(|v| !v.is_empty() && !v.starts_with('|') && !v.starts_with("syslog"))
        .map(|v| v.replace("${APACHE_LOG_DIR}", "/var/log/apache2"))
        .map(|v| {
            if v.starts_with('/') {
                v
            } else {
                format!("{root}/{v}")
            }
        })
        .collect();
    if set.is_empty() {
        vec!["/var/log/apache2/error.log".to_string()]
    } else {
        set
    }
}

/// php-fpm's error log: `error_log` in the global section of the config its master was
/// started with (`-y`/`--fpm-config` on its command line, else Debian's
/// `/etc/php/VERSION/fpm/php-fpm.conf`), relative paths under `/var/log` as php-fpm
/// resolves them.
pub fn php_fpm_error_log(master: i32) -> Option<String> {
    let args = crate::sys::procfs::read_cmdline(master).ok()?;
    let from_args = args.iter().enumerate().find_map(|(i, a)| {
        if a == "-y" || a == "--fpm-config" {
            args.get(i + 1).cloned()
        } else {
            a.strip_prefix("--fpm-config=").map(String::from)
        }
    });
    // The master's title names its config too: "php-fpm: master process (/etc/php/…)".
    let from_title = args
        .first()
        .and_then(|t| Some(t.split_once('(')?.1.trim_end_matches(')').to_string()))
        .filter(|p| p.starts_with('/'));
    let conf = from_args.or(from_title)?;
    let text = std::fs::read_to_string(&conf).ok()?;
    Some(php_fpm_error_log_in(&text))
}

/// The `error_log` of a php-fpm configuration's global section (its default when unset).
pub fn php_fpm_error_log_in(conf: &str) -> String {
    let mut global = true;
    for line in conf.lines().map(str::trim) {
        if line.starts_with('[') {
            global = line == "[global]";
            continue;
        }
        if !global {
            continue;
        }
        if let Some((k, v)) = line.split_once('=') {
            if k.trim() == "error_log" {
                let v = v.trim().trim_matches('"');
                return if v.starts_with('/') {
                    v.to_string()
                } else {
                    format!("/var/log/{v}")
                };
            }
        }
    }
    "/var/log/php-fpm.log".to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(name: &str) -> String {
        let p = format!("{}/tests/data/logs/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
    }

    #[test]
    fn classifies_lines_captured_from_nginx_and_php_fpm() {
        let nginx = data("lab-nginx-error.log");
        let (classes, _, _) = summarize(&nginx);
        let ids: Vec<&str> = classes.iter().map(|c| c.class.as_str()).collect();
        for want in [
            "too-many-open-files",
            "worker-connections-not-enough",
            "cannot-assign-address",
        ] {
            assert!(ids.contains(&want), "{want} not in {ids:?}");
        }
        let php = data("lab-php-fpm-error.log");
        let (classes, _, _) = summarize(&php);
        let max = classes
            .iter()
            .find(|c| c.class == "max-children-reached")
            .unwrap();
        assert!(max.count >= 1 && max.example.contains("pm.max_children"));
    }

    #[test]
    fn known_texts_and_others() {
        for (line, want) in [
            ("2026/11/23 04:00:00 [crit] 7#7: accept4() failed (24: Too many open files)", Some("too-many-open-files")),
            ("[error] 7#7: *1 connect() failed (111: Connection refused) while connecting to upstream", Some("connect-refused")),
            ("[error] 7#7: *9 upstream timed out (110: Connection timed out) while reading response header from upstream", Some("upstream-timed-out")),
            ("[error] 7#7: *9 no live upstreams while connecting to upstream", Some("no-live-upstreams")),
            ("[warn] 7#7: *3 an upstream response is buffered to a temporary file /tmp/1 while reading upstream", Some("upstream-buffered-to-file")),
            ("[error] 7#7: *2 limiting requests, excess: 5.000 by zone \"one\"", Some("limiting-requests")),
            ("[notice] 7#7: signal process started", None),
        ] {
            assert_eq!(classify(line), want, "{line}");
        }
        let (c, other, ex) = summarize("a\n[notice] x\n\n");
        assert!(c.is_empty());
        assert_eq!((other, ex.as_deref()), (2, Some("a")));
    }

    #[test]
    fn config_paths() {
        let mut cfg = ServerConfig::default();
        assert_eq!(nginx_error_logs(&cfg), ["/var/log/nginx/error.log"]);
        cfg.directives.insert(
            "error_log".into(),
            vec!["/srv/e.log warn".into(), "stderr".into()],
        );
        assert_eq!(nginx_error_logs(&cfg), ["/srv/e.log"]);
        let conf = "[global]\npid = /run/x.pid\nerror_log = /srv/php.log\n[www]\nerror_log = no\n";
        assert_eq!(php_fpm_error_log_in(conf), "/srv/php.log");
        assert_eq!(
            php_fpm_error_log_in("[global]\nerror_log = php8.2-fpm.log\n"),
            "/var/log/php8.2-fpm.log"
        );
    }

    #[test]
    fn only_what_was_appended_during_the_window_and_rotation() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("error.log");
        let ps = p.to_str().unwrap();
        std::fs::write(&p, "old accept4() failed (24: Too many open files)\n").unwrap();
        let t = Tail::start(ps, "nginx");
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new().append(true).open(&p).unwrap();
        writeln!(f, "new worker_connections are not enough").unwrap();
        let log = t.finish();
        assert_eq!(log.classes.len(), 1);
        assert_eq!(log.classes[0].class, "worker-connections-not-enough");
        // Rotated: a new file in its place is read whole.
        let t = Tail::start(ps, "nginx");
        std::fs::remove_file(&p).unwrap();
        std::fs::write(&p, "accept4() failed (24: Too many open files)\n").unwrap();
        assert_eq!(t.finish().classes[0].class, "too-many-open-files");
        // Missing: nothing, no failure.
        let t = Tail::start(dir.path().join("none.log").to_str().unwrap(), "nginx");
        assert_eq!(t.finish().bytes_read, 0);
    }
}
