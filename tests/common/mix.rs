//! A mix's server and what it saw: nginx with a few locations and a second access log
//! of each request's method and path, read back per path; a Run's results per endpoint.
//! For `tests/targets.rs` and `tests/ray.rs`.

use std::collections::BTreeMap;
use std::path::Path;

use serde_json::Value;

use super::{u, Nginx};

/// Three locations answering 200 (and /p 201), and a second access log of `METHOD PATH
/// STATUS MSEC I LENGTH` (when the request was logged, s since the epoch; the query's
/// `i`; the request's Content-Length; `-` for none).
pub fn nginx(dir: &Path, listen: &str) -> Nginx {
    let http = format!(
        "log_format paths '$request_method $uri $status $msec $arg_i $content_length';\n    access_log {}/paths.log paths;",
        dir.display()
    );
    Nginx::start_with_listen(
        &http,
        r#"location = /a { return 200 "a"; }
           location = /b { return 200 "bb"; }
           location = /c { return 200 "ccc"; }
           location = /p { return 201 "posted"; }"#,
        listen,
    )
}

/// Requests nginx logged per path (after every connection is closed).
pub fn logged(ng: &Nginx, dir: &Path) -> BTreeMap<String, u64> {
    ng.log(); // waits until nginx has logged every request
    let text = std::fs::read_to_string(dir.join("paths.log")).unwrap();
    let mut n = BTreeMap::new();
    for l in text.lines() {
        let path = l.split(' ').nth(1).unwrap().to_string();
        *n.entry(path).or_insert(0) += 1;
    }
    n
}

/// A Run's results per endpoint: name → (requests, responses, errors).
pub fn endpoints(run: &Value) -> BTreeMap<String, (u64, u64, u64)> {
    run["results"]["endpoints"]
        .as_array()
        .expect("results.endpoints")
        .iter()
        .map(|e| {
            (
                e["name"].as_str().unwrap().to_string(),
                (u(e, "requests"), u(e, "responses"), u(e, "errors")),
            )
        })
        .collect()
}
