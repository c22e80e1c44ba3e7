//! An sshd of the test's own on SERVER_IP:22 inside a server namespace: its own host
//! key, config, authorized, client and wrong keys in a temp dir; never the machine's own
//! sshd, /etc/ssh, ~/.ssh or keys. Its sessions' $LOADLENS_CACHE_DIR and $TMPDIR are in
//! that dir too, so a test sees what the remote side cached and left.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use super::{wait_for, NetnsPair};

pub const SSHD: &str = "/usr/sbin/sshd";

/// An sshd of the test's own on SERVER_IP:22 inside a server namespace.
pub struct Sshd {
    pub dir: tempfile::TempDir,
    child: Child,
}

impl Sshd {
    pub fn start(ns: &NetnsPair) -> Sshd {
        let dir = tempfile::Builder::new()
            .prefix("loadlens-test-sshd")
            .tempdir()
            .unwrap();
        let d = dir.path();
        for (key, file) in [
            ("host", "host_key"),
            ("client", "client_key"),
            ("wrong", "wrong_key"),
        ] {
            let out = Command::new("ssh-keygen")
                .args(["-q", "-t", "ed25519", "-N", "", "-C"])
                .arg(format!("loadlens-test-{key}"))
                .arg("-f")
                .arg(d.join(file))
                .output()
                .expect("ssh-keygen (openssh-client)");
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys")).unwrap();
        std::fs::create_dir(d.join("cache")).unwrap();
        std::fs::create_dir(d.join("tmp")).unwrap();
        let conf = format!(
            "ListenAddress {ip}:22\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n\
             PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile none\n\
             SetEnv LOADLENS_CACHE_DIR={d}/cache TMPDIR={d}/tmp\n",
            ip = ns.server_ip,
            d = d.display()
        );
        std::fs::write(d.join("sshd_config"), conf).unwrap();
        // sshd wants its privilege-separation directory, /run/sshd: a tmpfs on /run in
        // the mount namespace `ip netns exec` makes (a slave of the host's: nothing
        // shows outside it).
        let child = Command::new("ip")
            .args(["netns", "exec", &ns.server, "sh", "-c"])
            .arg(format!(
                "mount -t tmpfs loadlens-sshd /run && mkdir -m 755 /run/sshd && exec {SSHD} -D -e -f {}/sshd_config",
                d.display()
            ))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(d.join("sshd.log")).unwrap())
            .spawn()
            .unwrap();
        let mut sshd = Sshd { dir, child };
        let addr = format!("{}:22", ns.server_ip);
        let server = ns.server.clone();
        wait_for("sshd to listen", || {
            if let Ok(Some(st)) = sshd.child.try_wait() {
                panic!("sshd exited ({st}): {}", sshd.log());
            }
            let a: std::net::SocketAddr = addr.parse().unwrap();
            loadlens::lab::world::in_netns(&format!("/run/netns/{server}"), move || {
                std::net::TcpStream::connect_timeout(&a, std::time::Duration::from_millis(200))
                    .is_ok()
            })
            .unwrap_or(false)
        });
        sshd
    }

    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.path("sshd.log")).unwrap_or_default()
    }

    /// `--ssh-command` with `key`, a known-hosts file of the test's own.
    pub fn ssh_command(&self, key: &str, checking: &str) -> String {
        // Each way of checking keeps its own known hosts: `accept-new` adds the key.
        format!(
            "ssh -F /dev/null -i {} -o UserKnownHostsFile={} -o StrictHostKeyChecking={checking} -o IdentitiesOnly=yes",
            self.path(key).display(),
            self.path(&format!("known_hosts_{checking}")).display()
        )
    }

    /// The builds in the cache (no partial uploads left).
    pub fn cached(&self) -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(self.path("cache"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        v.sort();
        v
    }

    /// What the remote side left in its temp dir ($TMPDIR of its sessions).
    pub fn tmp_left(&self) -> Vec<PathBuf> {
        std::fs::read_dir(self.path("tmp"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect()
    }

    /// Remote watches still running (their command line names this test's cache).
    pub fn remote_watches(&self) -> String {
        let out = Command::new("pgrep")
            .arg("-af")
            .arg(format!("{}/loadlens", self.path("cache").display()))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).to_string()
    }
}

impl Drop for Sshd {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
