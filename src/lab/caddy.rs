//! Caddy beside a test: HTTP/3 (and https over TCP) on a free loopback port, with the
//! docroot of the lab's nginx and a JSON access log the test reads back. Stopped when
//! dropped, as the other servers of `testbed.rs`.

use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::testbed::{free_port, spawn, stop_child, write_docroot, READY};

/// A running Caddy (Debian's package) on a free loopback port serving https over TCP
/// and HTTP/3 over UDP on the same port, with a self-signed certificate for `localhost`
/// made for it, the docroot of [`Nginx`] (`1k.txt`, `91k.bin`) and a JSON access log.
/// It never touches the machine's own Caddy: `admin off`, and its HOME and XDG
/// directories are its temp dir. Stopped when dropped.
pub struct Caddy {
    child: Child,
    pub dir: tempfile::TempDir,
    pub port: u16,
}

/// One line of Caddy's JSON access log.
#[derive(Debug, Clone)]
pub struct CaddyLine {
    pub status: u16,
    /// The request's protocol as Caddy logs it: `HTTP/3.0`, `HTTP/2.0`, `HTTP/1.1`.
    pub proto: String,
    pub uri: String,
    /// The client's address and port (for QUIC, its UDP socket's).
    pub remote: String,
}

impl Caddy {
    /// Caddy on a free loopback port; `site_extra` goes inside the site block.
    pub fn start(site_extra: &str) -> Caddy {
        for attempt in 0..5 {
            let dir = tempfile::tempdir().expect("cannot make a temp dir");
            let root = dir.path().to_path_buf();
            write_docroot(&root);
            let (crt, key) = (root.join("c.pem"), root.join("k.pem"));
            let st = Command::new("openssl")
                .args([
                    "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
                ])
                .args([
                    "-subj",
                    "/CN=localhost",
                    "-addext",
                    "subjectAltName=DNS:localhost",
                ])
                .arg("-keyout")
                .arg(&key)
                .arg("-out")
                .arg(&crt)
                .stderr(Stdio::null())
                .status()
                .expect("openssl must be installed (make test does it)");
            assert!(st.success(), "openssl could not make a certificate");
            let port = free_port();
            let conf = format!(
                "{{\n\tadmin off\n\tauto_https off\n\tservers {{\n\t\tprotocols h1 h2 h3\n\t}}\n}}\n\
                 https://localhost:{port} {{\n\tbind 127.0.0.1\n\ttls {crt} {key}\n\troot * {html}\n\t{site_extra}\n\tfile_server\n\
                 \tlog {{\n\t\toutput file {log}\n\t\tformat json\n\t}}\n}}\n",
                crt = crt.display(),
                key = key.display(),
                html = root.join("html").display(),
                log = root.join("access.log").display(),
            );
            let conf_path = root.join("Caddyfile");
            std::fs::write(&conf_path, conf).expect("cannot write the Caddyfile");
            let mut cmd = Command::new("caddy");
            cmd.arg("run")
                .arg("--config")
                .arg(&conf_path)
                .arg("--adapter")
                .arg("caddyfile")
                .env("HOME", &root)
                .env("XDG_DATA_HOME", root.join("data"))
                .env("XDG_CONFIG_HOME", root.join("config"))
                .current_dir(&root)
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(root.join("caddy.err")).expect("a log file"));
            let mut child = spawn(cmd, "caddy must be installed (make test does it)");
            let t0 = Instant::now();
            while t0.elapsed() < READY {
                if let Ok(Some(_)) = child.try_wait() {
                    break;
                }
                // Ready once the TCP port answers and the UDP port (HTTP/3) is bound.
                let tcp = TcpStream::connect(("127.0.0.1", port)).is_ok();
                if tcp && udp_bound(port) {
                    return Caddy { child, dir, port };
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            let _ = child.kill();
            let _ = child.wait();
            let err = std::fs::read_to_string(root.join("caddy.err")).unwrap_or_default();
            if attempt == 4 || !err.contains("address already in use") {
                panic!("caddy did not start:\n{err}");
            }
        }
        unreachable!()
    }

    /// The https URL of `path` (the certificate is for `localhost`).
    pub fn https_url(&self, path: &str) -> String {
        format!("https://localhost:{}{path}", self.port)
    }

    /// The access log: every line, once no line has been added for 300 ms (a request is
    /// logged when its response is done; 10 s at most).
    pub fn log(&self) -> Vec<CaddyLine> {
        let path = self.dir.path().join("access.log");
        let t0 = Instant::now();
        let mut last = None;
        let text = loop {
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            if last.as_ref() == Some(&text.len()) || t0.elapsed() > READY {
                break text;
            }
            last = Some(text.len());
            std::thread::sleep(Duration::from_millis(300));
        };
        text.lines()
            .filter(|l| l.contains("\"handled request\""))
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("access log line {l:?}: {e}"));
                let r = &v["request"];
                CaddyLine {
                    status: v["status"].as_u64().unwrap_or(0) as u16,
                    proto: r["proto"].as_str().unwrap_or("").to_string(),
                    uri: r["uri"].as_str().unwrap_or("").to_string(),
                    remote: format!(
                        "{}:{}",
                        r["remote_ip"].as_str().unwrap_or(""),
                        r["remote_port"].as_str().unwrap_or("")
                    ),
                }
            })
            .collect()
    }
}

impl Drop for Caddy {
    fn drop(&mut self) {
        stop_child(&mut self.child);
    }
}

/// Whether a UDP socket is bound to `port` on this machine (/proc/net/udp, udp6).
fn udp_bound(port: u16) -> bool {
    let hex = format!(":{port:04X} ");
    ["/proc/net/udp", "/proc/net/udp6"].iter().any(|f| {
        std::fs::read_to_string(f)
            .unwrap_or_default()
            .lines()
            .skip(1)
            .any(|l| {
                l.split_whitespace()
                    .nth(1)
                    .is_some_and(|a| format!("{a} ").ends_with(&hex))
            })
    })
}
