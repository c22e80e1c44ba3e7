//! `lab run NAME --watch-ssh`: the scenario's server namespace watched the way a
//! server on another machine is, over ssh (`run --watch ssh://root@10.77.0.2`), so the
//! remote watch gives the same diagnosis as the local one on the same faults.
//!
//! An OpenSSH server of the world's own runs inside its server namespace, with keys
//! made for the world in its directory (host key, client key, `authorized_keys`,
//! `known_hosts`): never the machine's sshd, /etc/ssh or ~/.ssh. The build goes to the
//! world's directory too (`SetEnv LOADLENS_CACHE_DIR`), so it goes with the world.
//! sshd wants its privilege-separation directory, `/run/sshd`: a tmpfs on /run in the
//! mount namespace `ip netns exec` makes for it (a slave of the host's: nothing shows
//! outside it).

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context};

use super::world::{which, World, SERVER_IP};

/// Where Debian's openssh-server puts the daemon.
const SSHD: &str = "/usr/sbin/sshd";

/// Starts the world's sshd in its server namespace; returns the flags that make
/// `loadlens run` watch through it (`--watch ssh://… --ssh-command …`).
pub fn serve(w: &mut World) -> anyhow::Result<Vec<String>> {
    if !Path::new(SSHD).exists() || which("ssh").is_none() || which("ssh-keygen").is_none() {
        bail!("--watch-ssh needs OpenSSH's server and client: apt-get install openssh-server openssh-client (the lab starts its own sshd; the machine's is not used)");
    }
    let d = w.dir.join("ssh");
    std::fs::create_dir_all(d.join("cache"))?;
    // tune's locks and backups there (`kinds::live::state_dir`): they go with the world.
    std::fs::create_dir_all(d.join("state"))?;
    for key in ["host_key", "client_key"] {
        let out = Command::new("ssh-keygen")
            .args(["-q", "-t", "ed25519", "-N", "", "-C", "loadlens-lab", "-f"])
            .arg(d.join(key))
            .output()
            .context("cannot run ssh-keygen")?;
        if !out.status.success() {
            bail!(
                "ssh-keygen failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
    }
    std::fs::copy(d.join("client_key.pub"), d.join("authorized_keys"))?;
    let conf = d.join("sshd_config");
    std::fs::write(
        &conf,
        format!(
            "ListenAddress {SERVER_IP}:22\nHostKey {d}/host_key\nAuthorizedKeysFile {d}/authorized_keys\n\
             PermitRootLogin prohibit-password\nPasswordAuthentication no\n\
             KbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\nPidFile none\n\
             SetEnv LOADLENS_CACHE_DIR={d}/cache LOADLENS_STATE_DIR={d}/state\n",
            d = d.display()
        ),
    )?;
    // Not in a CPU cgroup a scenario made for its servers: the watch is not the server.
    let cgroup = w.spawn_cgroup.take();
    let script = format!(
        "mount -t tmpfs loadlens-lab-sshd /run && mkdir -m 755 /run/sshd && exec {SSHD} -D -e -f {}",
        conf.display()
    );
    let server = w.server();
    let started = w.spawn(&server, "sshd", &["sh", "-c", &script]);
    w.spawn_cgroup = cgroup;
    started?;
    w.wait_tcp(&server, &format!("{SERVER_IP}:22"), "sshd")?;
    let ssh = format!(
        "ssh -F /dev/null -i {k} -o UserKnownHostsFile={h} -o StrictHostKeyChecking=accept-new -o IdentitiesOnly=yes",
        k = d.join("client_key").display(),
        h = d.join("known_hosts").display()
    );
    Ok(vec![
        "--watch".into(),
        format!("ssh://root@{SERVER_IP}"),
        "--ssh-command".into(),
        ssh,
    ])
}
