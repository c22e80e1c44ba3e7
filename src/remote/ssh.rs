//! The system `ssh`, as loadlens starts it: the destination (`ssh://[user@]host[:port]`),
//! the command line (the user's own `ssh` and config, or `--ssh-command`, like rsync's
//! `-e`), the remote scripts that find the cached build or receive it, and what ssh's
//! failures mean.
//!
//! The build on the server lives in `${LOADLENS_CACHE_DIR:-$HOME/.cache/loadlens}/`,
//! named `loadlens-VERSION-HASH` (the first 16 hex digits of the SHA-256 of the running
//! executable), so a different build is never mistaken for this one and an unchanged
//! one is sent once. It is written to a temporary name, checked (size, `--version`
//! runs: the architecture and the C library fit) and renamed, so a cut transfer never
//! leaves a broken binary under the final name.

use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{bail, Context};

use super::bounded::Size;
use super::protocol::{MAX_BEFORE_HELLO, MISSING, VERSION};

/// Where to ssh: `ssh://[user@]host[:port]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Destination {
    pub user: Option<String>,
    pub host: String,
    pub port: Option<u16>,
    /// As given, for messages and the Run.
    pub text: String,
}

impl Destination {
    pub fn parse(text: &str) -> anyhow::Result<Destination> {
        let hint = "give --watch ssh://[user@]host[:port], e.g. ssh://root@10.0.0.2";
        if !text.starts_with("ssh://") {
            bail!("--watch `{text}`: only ssh:// is known — {hint}");
        }
        let url = url::Url::parse(text).with_context(|| format!("--watch `{text}`: {hint}"))?;
        let host = match url.host() {
            Some(url::Host::Domain(d)) => d.to_string(),
            Some(url::Host::Ipv4(a)) => a.to_string(),
            Some(url::Host::Ipv6(a)) => a.to_string(),
            None => bail!("--watch `{text}` has no host — {hint}"),
        };
        if !matches!(url.path(), "" | "/") || url.query().is_some() || url.password().is_some() {
            bail!("--watch `{text}`: only a user, host and port are read — {hint}");
        }
        let user = (!url.username().is_empty()).then(|| url.username().to_string());
        // A name starting with '-' would be read by ssh as an option.
        if host.starts_with('-') || user.as_deref().is_some_and(|u| u.starts_with('-')) {
            bail!("--watch `{text}`: a host or user cannot start with '-'");
        }
        Ok(Destination {
            user,
            host,
            port: url.port(),
            text: text.to_string(),
        })
    }

    /// `user@host` or `host`, as ssh takes it.
    fn target(&self) -> String {
        match &self.user {
            Some(u) => format!("{u}@{}", self.host),
            None => self.host.clone(),
        }
    }
}

/// How to start ssh: the program and its options (`--ssh-command`, default `ssh`).
#[derive(Debug, Clone)]
pub struct Ssh {
    pub argv: Vec<String>,
    pub dest: Destination,
}

impl Ssh {
    pub fn new(dest: Destination, ssh_command: Option<&str>) -> anyhow::Result<Ssh> {
        let argv = match ssh_command {
            Some(c) => split_words(c).with_context(|| format!("--ssh-command `{c}`"))?,
            None => vec!["ssh".to_string()],
        };
        if argv.is_empty() {
            bail!(
                "--ssh-command is empty: give the ssh program and its options, e.g. 'ssh -i KEY'"
            );
        }
        Ok(Ssh { argv, dest })
    }

    /// ssh running `script` (POSIX sh) on the server. BatchMode: a prompt for a password
    /// or a host key would wait forever for input that is our protocol; the user's own
    /// config (read first by ssh) may still set anything else, ControlMaster included.
    pub fn command(&self, script: &str) -> Command {
        let mut c = Command::new(&self.argv[0]);
        c.args(&self.argv[1..]).args(["-T", "-o", "BatchMode=yes"]);
        if let Some(p) = self.dest.port {
            c.arg("-p").arg(p.to_string());
        }
        // The remote login shell may be any shell: it is handed `sh -c '…'` only, and
        // the scripts hold no single quote.
        debug_assert!(!script.contains('\''));
        c.arg(self.dest.target())
            .arg("--")
            .arg(format!("sh -c '{script}'"));
        c
    }
}

/// The cached build's path on the server, as a shell word.
fn cached(hash: &str) -> String {
    format!("\"${{LOADLENS_CACHE_DIR:-$HOME/.cache/loadlens}}/loadlens-{VERSION}-{hash}\"")
}

/// Runs the cached build's `watch --stdio`, or says it is missing and the machine's
/// architecture (one line starting with [`MISSING`]).
pub fn watch_script(hash: &str, max_duration_s: u64) -> String {
    let f = cached(hash);
    format!(
        "f={f}; if [ -x \"$f\" ]; then exec \"$f\" watch --stdio --max-duration {max_duration_s}s; fi; echo \"{MISSING} $(uname -m)\""
    )
}

/// Receives the build on standard input: to a temporary name, its size checked, run
/// once (`--version`), then renamed into place. Prints `loadlens-bootstrap: ok`, or
/// `loadlens-bootstrap: cannot run: …` with the loader's message.
pub fn upload_script(hash: &str, size: u64) -> String {
    let f = cached(hash);
    format!(
        "set -e; f={f}; d=$(dirname \"$f\"); mkdir -p \"$d\"; t=\"$f.part.$$\"; cleanup() {{ rm -f \"$t\"; }}; trap cleanup EXIT; cat > \"$t\"; n=$(wc -c < \"$t\"); if [ \"$n\" -ne {size} ]; then echo \"loadlens-bootstrap: received $n of {size} bytes\"; exit 3; fi; chmod 755 \"$t\"; if ! out=$(\"$t\" --version 2>&1); then echo \"loadlens-bootstrap: cannot run: $out\"; exit 3; fi; mv -f \"$t\" \"$f\"; echo \"loadlens-bootstrap: ok\""
    )
}

/// Sends `exe` to the server's cache over a second ssh session (`cat > tmp && chmod
/// && mv`); fails with what the server said when it cannot run there.
pub fn upload(ssh: &Ssh, exe: &Path, hash: &str) -> anyhow::Result<()> {
    let file = std::fs::File::open(exe)
        .with_context(|| format!("cannot read this loadlens ({})", exe.display()))?;
    let size = file.metadata()?.len();
    let mut child = ssh
        .command(&upload_script(hash, size))
        .stdin(Stdio::from(file))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start `{}`", ssh.argv[0]))?;
    // What ssh says goes on being read (so it never blocks on a full pipe); the first
    // 64 KiB are kept, as for the watch's channel.
    let mut err = child.stderr.take().expect("piped");
    let stderr = std::thread::spawn(move || {
        let mut kept = Vec::new();
        let _ = (&mut err).take(64 << 10).read_to_end(&mut kept);
        let _ = std::io::copy(&mut err, &mut std::io::sink());
        kept
    });
    // The script prints one line, after the login shell's chatter: bounded as the
    // chatter before the watch's hello is.
    let mut stdout = Vec::new();
    let read = child
        .stdout
        .take()
        .expect("piped")
        .take(MAX_BEFORE_HELLO + 1)
        .read_to_end(&mut stdout);
    if stdout.len() as u64 > MAX_BEFORE_HELLO {
        let _ = child.kill();
        let _ = child.wait();
        bail!(
            "copying loadlens to {}: the server sent more than {} back (`{:.60}`), where the copy prints one line: a login script printing without end — the copy was stopped",
            ssh.dest.host,
            Size(MAX_BEFORE_HELLO),
            String::from_utf8_lossy(&stdout[..60])
        );
    }
    read.context("cannot read ssh's output")?;
    let status = child.wait().context("ssh failed")?;
    let out = std::process::Output {
        status,
        stdout,
        stderr: stderr.join().unwrap_or_default(),
    };
    let said = String::from_utf8_lossy(&out.stdout);
    if out.status.success() && said.contains("loadlens-bootstrap: ok") {
        return Ok(());
    }
    let host = &ssh.dest.host;
    if let Some(why) = said.split("loadlens-bootstrap: cannot run: ").nth(1) {
        bail!(
            "this loadlens cannot run on {host}: {} — build loadlens on (or for) that machine; a newer C library there, or a static build (--target x86_64-unknown-linux-musl), fixes a glibc mismatch",
            why.trim()
        );
    }
    if let Some(why) = said.split("loadlens-bootstrap: ").nth(1) {
        bail!("copying loadlens to {host} failed: {}", why.trim());
    }
    bail!(
        "copying loadlens to {host} failed: {}",
        failure(
            &ssh.dest,
            out.status.code(),
            &String::from_utf8_lossy(&out.stderr)
        )
    )
}

/// ssh's failure in one line: what it said, and what it usually means.
pub fn failure(dest: &Destination, code: Option<i32>, stderr: &str) -> String {
    let said: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with("Warning: Permanently added"))
        .collect();
    let said = said.join("; ");
    let host = &dest.host;
    let hint = if said.contains("Permission denied") {
        format!("authentication to {host} failed (no password prompt in BatchMode): load the key into ssh-agent, or give it with --ssh-command 'ssh -i KEY'")
    } else if said.contains("Host key verification failed")
        || said.contains("REMOTE HOST IDENTIFICATION HAS CHANGED")
    {
        format!("the host key of {host} is unknown or changed: connect once with `ssh {}` to check and accept it", dest.target())
    } else if said.contains("Could not resolve hostname") {
        format!("cannot resolve {host}")
    } else if said.contains("Connection refused")
        || said.contains("timed out")
        || said.contains("No route to host")
    {
        format!("cannot connect to {host}: is sshd running there, on this port?")
    } else if code == Some(127) || said.contains("not found") {
        format!("{host} could not run the watch (no POSIX sh?)")
    } else {
        format!("ssh to {host} failed")
    };
    match code {
        Some(c) => format!("{hint} (ssh exited {c}: {said})"),
        None => format!("{hint} (ssh was killed: {said})"),
    }
}

/// The first 16 hex digits of the SHA-256 of a file (the running build).
pub fn build_hash(exe: &Path) -> anyhow::Result<String> {
    let mut f = std::fs::File::open(exe)
        .with_context(|| format!("cannot read this loadlens ({})", exe.display()))?;
    let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        ctx.update(&buf[..n]);
    }
    let digest = ctx.finish();
    Ok(digest.as_ref()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect())
}

/// Splits a command line into words as sh would (single and double quotes,
/// backslashes; no expansions).
pub fn split_words(s: &str) -> anyhow::Result<Vec<String>> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut in_word = false;
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(x) => cur.push(x),
                        None => bail!("unterminated single quote"),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.next() {
                            Some(x @ ('"' | '\\' | '$' | '`')) => cur.push(x),
                            Some(x) => {
                                cur.push('\\');
                                cur.push(x);
                            }
                            None => bail!("unterminated double quote"),
                        },
                        Some(x) => cur.push(x),
                        None => bail!("unterminated double quote"),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some(x) => cur.push(x),
                    None => bail!("a trailing backslash"),
                }
            }
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut cur));
                    in_word = false;
                }
            }
            c => {
                in_word = true;
                cur.push(c);
            }
        }
    }
    if in_word {
        words.push(cur);
    }
    Ok(words)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn destinations() {
        let d = Destination::parse("ssh://root@10.77.0.2:22").unwrap();
        assert_eq!(
            (d.user.as_deref(), d.host.as_str(), d.port),
            (Some("root"), "10.77.0.2", Some(22))
        );
        let d = Destination::parse("ssh://web1").unwrap();
        assert_eq!((d.user, d.host.as_str(), d.port), (None, "web1", None));
        let d = Destination::parse("ssh://[::1]:2222").unwrap();
        assert_eq!((d.host.as_str(), d.port), ("::1", Some(2222)));
        for bad in [
            "web1",
            "http://web1",
            "ssh://",
            "ssh://-oProxyCommand=x",
            "ssh://h/path",
        ] {
            assert!(Destination::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_ssh_command_line() {
        let dest = Destination::parse("ssh://u@h:2200").unwrap();
        let ssh = Ssh::new(dest, Some("ssh -F /dev/null -i '/tmp/a key' -o X=y")).unwrap();
        let c = ssh.command("echo hi");
        let args: Vec<String> = c.get_args().map(|a| a.to_string_lossy().into()).collect();
        assert_eq!(c.get_program(), "ssh");
        assert_eq!(
            args,
            [
                "-F",
                "/dev/null",
                "-i",
                "/tmp/a key",
                "-o",
                "X=y",
                "-T",
                "-o",
                "BatchMode=yes",
                "-p",
                "2200",
                "u@h",
                "--",
                "sh -c 'echo hi'"
            ]
        );
    }

    #[test]
    fn words_split_as_sh_would() {
        assert_eq!(
            split_words(r#"ssh -o "A=b c" 'd e' f\ g """#).unwrap(),
            ["ssh", "-o", "A=b c", "d e", "f g", ""]
        );
        assert!(split_words("ssh 'open").is_err());
    }

    #[test]
    fn scripts_hold_no_single_quote() {
        assert!(!watch_script("0123456789abcdef", 600).contains('\''));
        assert!(!upload_script("0123456789abcdef", 42).contains('\''));
    }

    #[test]
    fn ssh_failures_are_named() {
        let d = Destination::parse("ssh://root@h").unwrap();
        let m = failure(&d, Some(255), "root@h: Permission denied (publickey).\n");
        assert!(m.starts_with("authentication to h failed"), "{m}");
        assert!(m.contains("Permission denied (publickey)"), "{m}");
        let m = failure(&d, Some(255), "Host key verification failed.\n");
        assert!(m.contains("host key of h is unknown"), "{m}");
        let m = failure(
            &d,
            Some(255),
            "ssh: connect to host h port 22: Connection refused\n",
        );
        assert!(m.contains("cannot connect to h"), "{m}");
    }
}
