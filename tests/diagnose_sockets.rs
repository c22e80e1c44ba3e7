//! Socket buffers too small for the responses, against real nginx: the server's send
//! buffer (nginx's `listen ... sndbuf=`, or `net.ipv4.tcp_wmem` in the server's
//! namespace) and the client's receive window (`net.ipv4.tcp_rmem` in the client's
//! namespace). Each collapses throughput while the CPUs idle, so each must be the first
//! bottleneck, with the knob that caused it in the fix; with the kernel's defaults
//! neither fires. Sysctls are only ever set inside namespaces the test creates.

mod common;

use common::{run_json, run_json_in, NetnsPair, Nginx};
use serde_json::Value;

/// The bottleneck `id`, ranked first — or behind run-queue-delay only, which tests
/// running beside this one on a small machine cause (the workers wait for a CPU on
/// every round trip): both are then true.
fn the_bottleneck<'a>(run: &'a Value, id: &str) -> &'a Value {
    let all = run["findings"].as_array().unwrap();
    let at = all
        .iter()
        .position(|f| f["id"] == id && f["kind"] == "bottleneck")
        .unwrap_or_else(|| panic!("no bottleneck {id}: {:#}", run["findings"]));
    assert!(
        all[..at]
            .iter()
            .all(|f| f["kind"] != "bottleneck" || f["id"] == "run-queue-delay"),
        "{:#}",
        run["findings"]
    );
    &all[at]
}

fn fact(f: &Value, name: &str) -> f64 {
    f["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .and_then(|e| e["value"].as_f64())
        .unwrap_or_else(|| panic!("no fact {name}: {f:#}"))
}

fn ids(run: &Value) -> Vec<&str> {
    run["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap())
        .collect()
}

/// nginx in the pair's server namespace, loaded with `file`'s responses (`91k.bin`, or
/// `200k.bin` written for the test) from the client namespace.
fn load(ns: &NetnsPair, file: &str) -> Value {
    let ng = Nginx::start_opts(Some(&ns.server), ns.server_ip, "", "sendfile on;", "", "");
    if file == "200k.bin" {
        write_200k(&ng);
    }
    let url = format!("http://{}:{}/{file}", ns.server_ip, ng.port);
    let pid = ng.pid().to_string();
    run_json_in(
        &ns.client,
        &[&url, "-c", "10", "-d", "2s", "--server-pid", &pid],
    )
}

/// A 200 KiB file in nginx's docroot: on loopback, 91 KiB responses through an 8 KiB
/// buffer sometimes pass at full speed (on a busy machine), 200 KiB ones never do.
fn write_200k(ng: &Nginx) {
    use std::os::unix::fs::PermissionsExt;
    let big = ng.root().join("html/200k.bin");
    std::fs::write(&big, vec![b'x'; 204_800]).unwrap();
    std::fs::set_permissions(&big, std::fs::Permissions::from_mode(0o644)).unwrap();
}

#[test]
fn nginx_listen_sndbuf_is_named_as_the_small_send_buffer() {
    let ng = Nginx::start_with_listen("", "sendfile on;", "sndbuf=4k");
    write_200k(&ng);
    let run = run_json(&[&ng.url("/200k.bin"), "-c", "10", "-d", "2s"]);
    let f = the_bottleneck(&run, "small-send-buffer");
    // nginx asked for 4 KiB; the kernel doubles SO_SNDBUF for its bookkeeping.
    assert!(
        fact(f, "socket send buffer (sk_sndbuf)") <= 16_384.0,
        "{f:#}"
    );
    assert!(fact(f, "connections' time spent sending") >= 30.0, "{f:#}");
    let fix = f["fix"].as_str().unwrap();
    assert!(
        fix.starts_with("remove `sndbuf=` from nginx's `listen` (now `listen 127.0.0.1:")
            && fix.contains("sndbuf=4k`)"),
        "{fix}"
    );
}

#[test]
fn a_small_tcp_wmem_in_the_servers_namespace_is_named_with_the_sysctl() {
    // Client and server on the namespace's loopback (64 KiB segments: an 8 KiB buffer
    // sends less than one, and the receiver delays its ACK).
    let ns = NetnsPair::new("wmem");
    ns.server_sysctl("net.ipv4.tcp_wmem", "4096 4096 8192");
    let ng = Nginx::start_opts(Some(&ns.server), "127.0.0.1", "", "sendfile on;", "", "");
    write_200k(&ng);
    let run = run_json_in(&ns.server, &[&ng.url("/200k.bin"), "-c", "10", "-d", "2s"]);
    let f = the_bottleneck(&run, "small-send-buffer");
    let fix = f["fix"].as_str().unwrap();
    assert!(
        fix.starts_with("`sysctl -w net.ipv4.tcp_wmem=\"4096 16384 4194304\"`")
            && fix.contains("now \"4096 4096 8192\""),
        "{fix}"
    );
}

#[test]
fn a_small_tcp_rmem_in_the_clients_namespace_is_the_clients_receive_window() {
    let ns = NetnsPair::new("rmem");
    ns.client_sysctl("net.ipv4.tcp_rmem", "4096 4096 8192");
    // 200 KiB responses: 91 KiB ones through the 8 KiB window once kept the server's
    // connections sending under 30% of the time in a fresh-clone CI run (nothing found).
    let run = load(&ns, "200k.bin");
    let f = the_bottleneck(&run, "client-receive-window");
    assert!(
        fact(f, "sending time held by the receive window") >= 30.0,
        "{f:#}"
    );
    assert!(f["fix"]
        .as_str()
        .unwrap()
        .contains("net.ipv4.tcp_rmem=\"4096 131072 6291456\""));
    // The server's own buffer is the kernel's autotuned one: not the finding.
    assert!(
        !ids(&run).contains(&"small-send-buffer"),
        "{:#}",
        run["findings"]
    );
}

#[test]
fn with_the_kernels_buffers_neither_fires() {
    let ns = NetnsPair::new("bufok");
    let run = load(&ns, "91k.bin");
    let conns = &run["evidence"]["window"]["server_connections"];
    // Watched, and the kernel grew the buffer past its 16 KiB start.
    assert!(conns["sockets_max"].as_u64().unwrap() >= 1, "{conns:#}");
    assert!(
        conns["send_buffer_bytes"].as_f64().unwrap() > 32_768.0,
        "{conns:#}"
    );
    for id in ["small-send-buffer", "client-receive-window"] {
        assert!(!ids(&run).contains(&id), "{id}: {:#}", run["findings"]);
    }
}
