//! `loadlens doctor`: which evidence this machine gives and what adds noise, each with
//! the command that changes it (the checks: `watch::doctor`).

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use clap::Args;

use crate::watch::doctor::{assess, Check, Facts, Status};

/// Say which evidence this machine gives loadlens (perf events, tracefs, schedstat,
/// cgroups, sock_diag, a server's threads, io_uring) and why not, and what adds noise
/// to a measurement (other busy processes, CPU frequency scaling, SMT), each with the
/// command to change it. Exits 0 whatever it finds.
#[derive(Args, Debug)]
pub struct DoctorArgs {
    /// A server's pid: check that its threads and open files can be read (the off-CPU
    /// watch and the discovery need them).
    #[arg(long, value_name = "PID")]
    pid: Option<i32>,
}

pub fn cmd(a: DoctorArgs) -> anyhow::Result<ExitCode> {
    if let Some(pid) = a.pid {
        if pid <= 0 || !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            anyhow::bail!("no process {pid}: give the server's pid (e.g. --pid $(pgrep -o nginx))");
        }
    }
    let facts = Facts::read(a.pid, crate::engine::uring_probe());
    let text = render(&facts, &assess(&facts));
    std::io::stdout().lock().write_all(text.as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

/// The checks as a table: what, yes/no/noise/ok, what the machine says, the fix.
fn render(f: &Facts, checks: &[Check]) -> String {
    let mut o = String::new();
    let who = if f.euid == 0 {
        "root".to_string()
    } else {
        format!("uid {}", f.euid)
    };
    let _ = writeln!(o, "What this machine gives loadlens (as {who}):");
    for c in checks {
        let _ = writeln!(o, "  {:<21} {:<5}  {}", c.what, c.status.label(), c.says);
        if !c.fix.is_empty() && c.status != Status::Yes {
            let _ = writeln!(o, "  {:<21} {:<5}  fix: {}", "", "", c.fix);
        }
    }
    o
}
