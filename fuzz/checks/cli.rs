//! The command line as `loadlens` parses it, shared by the `cli` fuzz target and its
//! smoke test (`tests/fuzz_seeds.rs`). The input is an argument list, NUL-separated
//! (`run\0http://h/\0-H\0X: y`); each argument also goes alone through the unit and URL
//! parsers. Nothing may panic, and a command line that is accepted must give a request
//! that is one well-formed HTTP/1.1 head (no header injected, every line CRLF-ended)
//! and a recorded URL without a password.

/// Returns whether the input was accepted as a `run` (for the smoke test's count).
pub fn check(data: &[u8]) -> bool {
    let Ok(text) = std::str::from_utf8(data) else {
        return false;
    };
    let args: Vec<&str> = text.split('\0').collect();
    for a in &args {
        let _ = loadlens::units::parse_duration(a);
        let _ = loadlens::units::parse_count(a);
        let (url, _) = loadlens::spec::split_credentials(a);
        if let Ok(u) = url::Url::parse(&url) {
            assert!(u.password().is_none(), "{a:?} kept its password");
        }
    }
    let argv = std::iter::once("loadlens").chain(args.iter().copied());
    let Ok(Some((spec, request))) = loadlens::cli::dry_run(argv) else {
        return false;
    };
    assert!(spec.connections >= spec.threads && spec.threads >= 1);
    if let Ok(u) = url::Url::parse(&spec.url) {
        assert!(
            u.password().is_none(),
            "{} recorded with its password",
            spec.url
        );
    }
    for (bytes, last) in [(&request.keep, false), (&request.last, true)] {
        let mut headers = [httparse::EMPTY_HEADER; 128];
        let mut req = httparse::Request::new(&mut headers);
        let status = req.parse(bytes);
        let Ok(httparse::Status::Complete(head_len)) = status else {
            panic!(
                "not one request head: {status:?}\n{}",
                String::from_utf8_lossy(bytes)
            );
        };
        assert_eq!(req.method, Some(spec.method.as_str()));
        // Every header on the wire is one we meant: the request line, Host unless
        // given, the user's, Content-Length, Authorization, Connection: close.
        let head = &bytes[..head_len];
        let lines = head.windows(2).filter(|w| w == b"\r\n").count();
        assert_eq!(lines - 2, req.headers.len(), "a line that is not a header");
        assert_eq!(
            head.iter().filter(|b| **b == b'\n').count(),
            lines,
            "a bare LF"
        );
        assert!(req.headers.len() <= spec.headers.len() + 4);
        let closes = req
            .headers
            .iter()
            .any(|h| h.name.eq_ignore_ascii_case("connection"));
        assert!(
            !last || closes,
            "the last request of a connection says close"
        );
        assert_eq!(bytes.len() - head_len, spec.body_bytes);
    }
    true
}
