//! The server's profile: on-CPU stacks of a real nginx during the load, the top table,
//! the flame graph, and a run without permission that goes on and says what to change.

mod common;

use common::{loadlens, run_json, Nginx};

#[test]
fn profile_of_a_real_nginx_and_its_flame_graph() {
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("flame.svg");
    let run = run_json(&[
        &ng.url("/1k.bin"),
        "-c",
        "10",
        "-t",
        "1",
        "-d",
        "2s",
        "--flamegraph",
        svg.to_str().unwrap(),
    ]);
    let p = &run["evidence"]["profile"];
    assert!(p["samples"].as_u64().unwrap() >= 50, "{}", p["samples"]);
    assert!(p["kernel"].as_bool().unwrap(), "root samples kernel frames");
    // The top table is the nginx worker's, and its kernel share is the bulk of a
    // static server's CPU.
    let top = &p["top"];
    let worker = run["evidence"]["topology"]["processes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["pid"] == top["pid"])
        .unwrap();
    assert_eq!(worker["role"], "worker");
    assert!(top["kernel_pct"].as_f64().unwrap() > 30.0, "{top}");
    let first = top["functions"][0]["name"].as_str().unwrap();
    // The flame graph: a whole SVG, searchable (inferno's script), with that function.
    let text = std::fs::read_to_string(&svg).unwrap();
    assert!(
        text.starts_with("<?xml"),
        "{}",
        &text[..100.min(text.len())]
    );
    assert!(text.trim_end().ends_with("</svg>"));
    assert!(text.contains("search"), "inferno's search");
    assert!(text.contains(first), "{first} not in the flame graph");
    assert!(text.contains("nginx (front)"));
}

#[test]
fn without_permission_the_run_goes_on_and_says_what_to_change() {
    // nginx runs as root, its worker as nobody; loadlens as another user may sample
    // neither.
    let ng = Nginx::start("", "");
    let dir = tempfile::tempdir().unwrap();
    std::fs::set_permissions(
        dir.path(),
        std::os::unix::fs::PermissionsExt::from_mode(0o777),
    )
    .unwrap();
    let json = dir.path().join("run.json");
    let out = std::process::Command::new("setpriv")
        .args(["--reuid=65533", "--regid=65533", "--clear-groups"])
        .arg(env!("CARGO_BIN_EXE_loadlens"))
        .args(["run", &ng.url("/1k.bin"), "-c", "4", "-t", "1", "-d", "1s"])
        .args(["--profile", "--server-pid", &ng.pid().to_string(), "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let hint: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("profile: not permitted"))
        .collect();
    assert_eq!(hint.len(), 1, "{stdout}");
    assert!(hint[0].contains("perf_event_paranoid"), "{}", hint[0]);
    assert!(hint[0].contains("CAP_PERFMON"), "{}", hint[0]);
    // The off-CPU watch, which --profile brings, is one note of its own.
    let off: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("off-CPU: not permitted"))
        .collect();
    assert_eq!(off.len(), 1, "{stdout}");
    assert!(off[0].contains("CAP_PERFMON"), "{}", off[0]);
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert!(run["results"]["responses"].as_u64().unwrap() > 0);
    assert!(run["evidence"]["profile"].is_null());
    assert!(run["evidence"]["offcpu"].is_null());
}

#[test]
fn a_bad_profile_rate_is_refused() {
    let out = loadlens()
        .args(["run", "http://127.0.0.1:9/", "--profile-hz", "0"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--profile-hz"));
}

/// Not root, perf refused, and the server runs as loadlens's own user: the off-CPU watch
/// samples the worker's state, call and wait channel from /proc instead, and still names
/// what it blocked in. The case: nginx (master and worker as uid 65533) logging into a
/// FIFO this test reads 64 KiB of every 250 ms.
#[test]
fn without_perf_the_off_cpu_time_is_sampled_from_proc() {
    if std::fs::read_to_string("/proc/sys/kernel/perf_event_paranoid")
        .is_ok_and(|p| p.trim().parse::<i32>().is_ok_and(|v| v < 2))
    {
        // Kernel frames are then permitted to this user: the switches are watched.
        common::skip_or_fail("perf_event_paranoid < 2: perf is not refused here");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let mode = |p: &std::path::Path, m| {
        std::fs::set_permissions(p, std::os::unix::fs::PermissionsExt::from_mode(m)).unwrap()
    };
    mode(d, 0o777);
    std::fs::write(d.join("1k.bin"), vec![b'x'; 1024]).unwrap();
    let fifo = d.join("access.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o666) }, 0);
    mode(&fifo, 0o666);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let p = d.display();
    std::fs::write(
        d.join("nginx.conf"),
        format!(
            "worker_processes 1;\npid {p}/nginx.pid;\nerror_log {p}/error.log;\nevents {{ worker_connections 256; }}\nhttp {{\n  access_log {p}/access.fifo;\n  client_body_temp_path {p}/cb; proxy_temp_path {p}/px; fastcgi_temp_path {p}/fc; uwsgi_temp_path {p}/uw; scgi_temp_path {p}/sc;\n  server {{ listen 127.0.0.1:{port}; root {p}; }}\n}}\n"
        ),
    )
    .unwrap();
    // The log shipper that lags: open before nginx (its open of the FIFO waits for a
    // reader), 64 KiB every 250 ms until the test ends.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let reader = {
        let (fifo, stop) = (fifo.clone(), stop.clone());
        std::thread::spawn(move || {
            use std::io::Read;
            let mut f = std::fs::File::open(fifo).unwrap();
            let mut buf = vec![0u8; 64 * 1024];
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                if f.read(&mut buf).unwrap_or(0) == 0 {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(250));
            }
        })
    };
    let as_user = |bin: &str| {
        let mut c = std::process::Command::new("setpriv");
        c.args(["--reuid=65533", "--regid=65533", "--clear-groups", bin]);
        c
    };
    let started = as_user("nginx")
        .args(["-p", &p.to_string(), "-c", &format!("{p}/nginx.conf")])
        .status()
        .unwrap();
    assert!(started.success(), "nginx as uid 65533");
    struct Stop(std::path::PathBuf);
    impl Drop for Stop {
        fn drop(&mut self) {
            if let Ok(pid) = std::fs::read_to_string(&self.0) {
                let _ = std::process::Command::new("kill").arg(pid.trim()).status();
            }
        }
    }
    let _nginx = Stop(d.join("nginx.pid"));
    common::wait_for("nginx to listen", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() && d.join("nginx.pid").exists()
    });
    let master = std::fs::read_to_string(d.join("nginx.pid")).unwrap();
    let json = d.join("run.json");
    let out = as_user(env!("CARGO_BIN_EXE_loadlens"))
        .arg("run")
        .arg(format!("http://127.0.0.1:{port}/1k.bin"))
        .args(["-c", "10", "-t", "1", "-d", "3s", "--profile"])
        .args(["--server-pid", master.trim(), "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let note: Vec<&str> = stdout.lines().filter(|l| l.contains("off-CPU:")).collect();
    assert_eq!(note.len(), 1, "{stdout}");
    assert!(
        note[0].contains("sampled the threads' states from /proc"),
        "{}",
        note[0]
    );
    let run: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    let off = &run["evidence"]["offcpu"];
    // The rate held, at most 100 Hz, lowered when the sampling would cost over 1% of a
    // core (busy machine), never below 10 Hz.
    let hz = off["sampled_hz"].as_u64().unwrap();
    assert!((10..=100).contains(&hz), "{off}");
    // The blocked worker is the run's bottleneck, first (on a busy host a wait for a CPU
    // may stand beside it: no lack of a CPU blocks a write).
    let top = &run["findings"][0];
    assert_eq!(top["id"], "worker-blocked", "{}", run["findings"]);
    let title = top["title"].as_str().unwrap();
    assert!(
        title.contains("write() on ") && title.contains("access.fifo"),
        "{title}"
    );
    assert!(
        off["stalls"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["ms"].as_f64().unwrap() >= 100.0),
        "{off}"
    );
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    drop(_nginx);
    // nginx gone, the FIFO's writer closes: the reader sees its end.
    reader.join().unwrap();
}
