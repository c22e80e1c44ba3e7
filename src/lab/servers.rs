//! Real servers for the lab, from Debian's packages, with generated configs: nginx
//! (static, reverse proxy, FastCGI) and php-fpm.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};

use super::world::World;

/// An nginx instance: its config is assembled from these parts.
pub struct Nginx<'a> {
    /// Names its directory, log and process in the world.
    pub name: &'a str,
    /// `worker_processes`.
    pub workers: &'a str,
    /// `listen` address:port.
    pub listen: String,
    /// After the address in `listen`: `backlog=10`, `reuseport`.
    pub listen_opts: &'a str,
    /// `worker_connections` in the events block.
    pub worker_connections: &'a str,
    /// Top level of the config (`worker_cpu_affinity`, …).
    pub main_extra: String,
    /// Inside `http {}` (upstream blocks, gzip, …).
    pub http_extra: String,
    /// Inside `server {}` (locations).
    pub server_extra: String,
    /// The logging lines of `http {}`: `access_log off;` (the lab's default), or a
    /// `log_format` and an `access_log` a test reads back.
    pub logging: String,
    /// `error_log`'s level: `warn`, or `info` for a test that reads every line.
    pub error_log_level: &'a str,
}

impl Default for Nginx<'_> {
    fn default() -> Self {
        Nginx {
            name: "nginx",
            workers: "1",
            listen: String::new(),
            listen_opts: "backlog=4096",
            worker_connections: "16384",
            main_extra: String::new(),
            http_extra: String::new(),
            server_extra: String::new(),
            logging: "access_log off;".into(),
            error_log_level: "warn",
        }
    }
}

/// The docroot shared by every nginx of a world: `1k.bin`, `91k.bin`, `1m.txt`,
/// `words.txt`.
pub fn docroot(w: &World) -> anyhow::Result<PathBuf> {
    w.write("html/1k.bin", &[b'x'; 1024])?;
    let big: Vec<u8> = (0..93_184u32).map(|i| (i * 7 % 251) as u8).collect();
    w.write("html/91k.bin", &big)?;
    // Compressible text (for the gzip fix of slow-link).
    let line = b"loadlens lab: a line of text that compresses well over a slow link.\n";
    let text: Vec<u8> = line.iter().copied().cycle().take(1 << 20).collect();
    w.write("html/1m.txt", &text)?;
    // Text that compresses like prose (for gzip-cpu): words drawn by a fixed LCG.
    let words = [
        "the",
        "server",
        "load",
        "worker",
        "request",
        "latency",
        "kernel",
        "socket",
        "of",
        "and",
        "queue",
        "connection",
        "nginx",
        "upstream",
        "buffer",
        "a",
        "to",
        "in",
        "throughput",
        "second",
        "profile",
        "memory",
        "core",
        "interrupt",
        "is",
        "with",
    ];
    let (mut x, mut prose) = (12345u32, String::new());
    while prose.len() < 64 * 1024 {
        x = x.wrapping_mul(1_103_515_245).wrapping_add(12345);
        prose.push_str(words[(x >> 16) as usize % words.len()]);
        prose.push(if (x >> 8) % 13 == 0 { '\n' } else { ' ' });
    }
    w.write("html/words.txt", prose.as_bytes())?;
    Ok(w.dir.join("html"))
}

/// The configuration of nginx `n` whose files (pid, error log, temp dirs) go in `d`,
/// serving `root`. `n.workers` empty leaves `worker_processes` to `n.main_extra`.
pub fn nginx_conf(n: &Nginx, d: &str, root: &Path) -> String {
    format!(
        r#"{workers}
pid {d}/nginx.pid;
error_log {d}/error.log {level};
{main_extra}
events {{ worker_connections {worker_connections}; }}
http {{
    {logging}
    keepalive_requests 1000000;
    types {{ text/plain txt; application/octet-stream bin; }}
    client_body_temp_path {d}/tmp;
    proxy_temp_path {d}/tmp;
    fastcgi_temp_path {d}/tmp;
    uwsgi_temp_path {d}/tmp;
    scgi_temp_path {d}/tmp;
    {http_extra}
    server {{
        listen {listen} {listen_opts};
        root {root};
        {server_extra}
    }}
}}
"#,
        workers = if n.workers.is_empty() {
            String::new()
        } else {
            format!("worker_processes {};", n.workers)
        },
        level = n.error_log_level,
        logging = n.logging,
        worker_connections = n.worker_connections,
        main_extra = n.main_extra,
        http_extra = n.http_extra,
        listen = n.listen,
        listen_opts = n.listen_opts,
        root = root.display(),
        server_extra = n.server_extra,
    )
}

/// Starts nginx inside `ns` and waits until it accepts connections from `ready_from`.
/// Returns the master's pid.
pub fn start_nginx(w: &mut World, ns: &str, ready_from: &str, n: &Nginx) -> anyhow::Result<i32> {
    let root = docroot(w)?;
    let d = w.dir.join(n.name);
    std::fs::create_dir_all(d.join("tmp"))?;
    let d = d.display().to_string();
    let conf = nginx_conf(n, &d, &root);
    let conf_path = w.write(&format!("{}/nginx.conf", n.name), conf.as_bytes())?;
    let conf_path = conf_path.display().to_string();
    let err = format!("{d}/error.log");
    let pid = w.spawn(
        ns,
        n.name,
        &[
            "nginx",
            "-p",
            &d,
            "-e",
            &err,
            "-c",
            &conf_path,
            "-g",
            "daemon off;",
        ],
    )?;
    w.wait_tcp(ready_from, &n.listen, n.name)?;
    Ok(pid)
}

/// The upstream of the proxy scenarios: a second nginx in the server namespace on
/// 127.0.0.1:8081, serving the same docroot.
pub(super) fn start_upstream(w: &mut World) -> anyhow::Result<i32> {
    let s = w.server();
    start_nginx(
        w,
        &s,
        &s,
        &Nginx {
            name: "upstream",
            listen: "127.0.0.1:8081".into(),
            ..Nginx::default()
        },
    )
}

/// The pids of a process's children (nginx workers, php-fpm children).
pub fn children(pid: i32) -> Vec<i32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .unwrap_or_default()
        .split_whitespace()
        .filter_map(|p| p.parse().ok())
        .collect()
}

/// Debian's php-fpm binary (`php-fpm8.2` on bookworm).
pub fn php_fpm_binary() -> anyhow::Result<String> {
    let mut found: Vec<String> = std::fs::read_dir("/usr/sbin")
        .context("cannot list /usr/sbin")?
        .flatten()
        .map(|e| e.file_name().to_string_lossy().to_string())
        .filter(|n| n.starts_with("php-fpm"))
        .collect();
    found.sort();
    match found.pop() {
        Some(b) => Ok(format!("/usr/sbin/{b}")),
        None => bail!("php-fpm is not installed: apt-get install php-fpm (make test installs it)"),
    }
}

/// Starts php-fpm inside `ns` listening on `listen` (a path or `127.0.0.1:9000`), with
/// `pm` lines for the pool, serving `DIR/php/app.php` that sleeps `sleep_ms`.
/// Returns the master's pid.
pub fn start_php_fpm(
    w: &mut World,
    ns: &str,
    listen: &str,
    pm: &str,
    sleep_ms: u32,
) -> anyhow::Result<i32> {
    let bin = php_fpm_binary()?;
    let app = format!(
        "<?php\nif ({sleep_ms} > 0) {{ usleep({us}); }}\necho \"ok\\n\";\n",
        us = sleep_ms * 1000
    );
    w.write("php/app.php", app.as_bytes())?;
    let d = w.dir.join("php").display().to_string();
    let conf = php_fpm_conf(&d, listen, pm);
    let conf_path = w.write("php/php-fpm.conf", conf.as_bytes())?;
    let conf_path = conf_path.display().to_string();
    let pid = w.spawn(ns, "php-fpm", &[&bin, "-n", "-F", "-y", &conf_path])?;
    if listen.starts_with('/') {
        w.wait_file(std::path::Path::new(listen), "php-fpm")?;
    } else {
        w.wait_tcp(ns, listen, "php-fpm")?;
    }
    Ok(pid)
}

/// php-fpm's configuration: its pid and error log in `d`, one pool `app` of `nobody`
/// on `listen` with `pm` lines.
pub fn php_fpm_conf(d: &str, listen: &str, pm: &str) -> String {
    format!(
        r#"[global]
pid = {d}/php-fpm.pid
error_log = {d}/error.log
daemonize = no

[app]
user = nobody
group = nogroup
listen = {listen}
listen.mode = 0666
listen.backlog = 4096
{pm}
"#
    )
}

/// php-fpm's error log (where "server reached pm.max_children" appears).
pub fn php_fpm_log(w: &World) -> String {
    std::fs::read_to_string(w.dir.join("php/error.log")).unwrap_or_default()
}
