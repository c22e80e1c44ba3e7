//! nginx's configuration as it runs: `nginx -T` with the master's own binary, prefix and
//! config file (from /proc/PID/exe and /proc/PID/cmdline), reduced to the directives the
//! diagnosis names in its fixes.

use std::collections::BTreeMap;
use std::io::Read;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::run::NginxConfig;

/// Directives worth naming with their current values.
const DIRECTIVES: &[&str] = &[
    "worker_processes",
    "worker_connections",
    "worker_rlimit_nofile",
    "multi_accept",
    "listen",
    "keepalive",
    "keepalive_requests",
    "keepalive_timeout",
    "proxy_buffer_size",
    "proxy_buffers",
    "proxy_busy_buffers_size",
    "proxy_http_version",
    "fastcgi_keep_conn",
    "access_log",
    "gzip",
    "gzip_comp_level",
    "sendfile",
];

impl NginxConfig {
    /// The first value of a directive.
    pub fn first(&self, name: &str) -> Option<&str> {
        self.directives.get(name)?.first().map(|s| s.as_str())
    }
}

/// Parses the directives of interest out of `nginx -T` output (comments dropped; one
/// directive per `;`).
pub fn parse(text: &str) -> BTreeMap<String, Vec<String>> {
    let mut out: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for line in text.lines() {
        let line = line.split('#').next().unwrap_or("");
        for stmt in line.split([';', '{', '}']) {
            let mut words = stmt.split_whitespace();
            let Some(name) = words.next() else { continue };
            if DIRECTIVES.contains(&name) {
                out.entry(name.to_string())
                    .or_default()
                    .push(words.collect::<Vec<_>>().join(" "));
            }
        }
    }
    out
}

/// Runs `nginx -T` as the master `pid` was started; `None` (with the reason) when it
/// cannot be read.
pub fn read(pid: i32) -> Result<NginxConfig, String> {
    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).map_err(|e| e.to_string())?;
    let mut args: Vec<String> = cmdline
        .split(|&b| b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).to_string())
        .collect();
    // The master rewrites its title to "nginx: master process nginx -c FILE ...", one
    // string over the original argv: split it again (paths with spaces are not kept).
    if let Some(rest) = args
        .first()
        .and_then(|a| a.strip_prefix("nginx: master process "))
    {
        args = rest.split_whitespace().map(String::from).collect();
    }
    let mut cmd = Command::new(format!("/proc/{pid}/exe"));
    cmd.arg("-T");
    let mut conf = String::from("(default)");
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "-c" | "-p" | "-e" => {
                if let Some(v) = it.next() {
                    if a == "-c" {
                        conf = v.clone();
                    }
                    cmd.arg(a).arg(v);
                }
            }
            _ => {}
        }
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run nginx -T: {e}"))?;
    let mut out = String::new();
    let mut stdout = child.stdout.take().expect("piped");
    let reader = std::thread::spawn(move || {
        let _ = stdout.read_to_string(&mut out);
        out
    });
    let t0 = Instant::now();
    loop {
        if let Some(st) = child.try_wait().map_err(|e| e.to_string())? {
            if !st.success() {
                return Err(format!("nginx -T failed ({st})"));
            }
            break;
        }
        if t0.elapsed() > Duration::from_secs(5) {
            let _ = child.kill();
            return Err("nginx -T took more than 5 s".into());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let text = reader.join().unwrap_or_default();
    Ok(NginxConfig {
        conf,
        directives: parse(&text),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_directives() {
        let t = "# configuration file /etc/nginx/nginx.conf:\nworker_processes 1;\nevents { worker_connections 768; }\nhttp {\n upstream app { server 127.0.0.1:8081; keepalive 32; }\n server { listen 10.0.0.2:8080 backlog=10; listen [::]:80; # comment; listen 9;\n location / { proxy_buffers 8 4k; proxy_buffer_size 4k; } }\n}\n";
        let d = parse(t);
        assert_eq!(d["worker_processes"], vec!["1"]);
        assert_eq!(d["worker_connections"], vec!["768"]);
        assert_eq!(d["listen"], vec!["10.0.0.2:8080 backlog=10", "[::]:80"]);
        assert_eq!(d["keepalive"], vec!["32"]);
        assert_eq!(d["proxy_buffers"], vec!["8 4k"]);
        assert!(!d.contains_key("server"));
    }
}
