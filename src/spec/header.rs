//! What the user puts in a request's headers, checked before any load: each `-H`
//! header (and a mix's, a HAR's, a replayed log's method) as the wire allows it, and a
//! URL's credentials taken out of the record and sent as `Authorization`.

/// Takes the credentials out of a URL (`http://user:pw@host/`): the URL to record (user
/// kept, password dropped) and the `Authorization` value curl, ab and k6 would send.
pub fn split_credentials(url: &str) -> (String, Option<String>) {
    use base64::Engine;
    let Ok(mut u) = url::Url::parse(url) else {
        return (url.to_string(), None);
    };
    if u.username().is_empty() && u.password().is_none() {
        return (url.to_string(), None);
    }
    let decode = |s: &str| {
        percent_encoding::percent_decode_str(s)
            .decode_utf8_lossy()
            .into_owned()
    };
    let pair = format!(
        "{}:{}",
        decode(u.username()),
        decode(u.password().unwrap_or(""))
    );
    let _ = u.set_password(None);
    (
        u.to_string(),
        Some(format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(pair)
        )),
    )
}

/// Checks one `Name: value` header: the message says what is wrong with it.
pub(crate) fn check_header(h: &str) -> Result<(), String> {
    // CR, LF or NUL would put a second header (or a second request) on the
    // wire: header injection.
    if h.bytes().any(|b| matches!(b, b'\r' | b'\n' | 0)) {
        return Err(format!(
            "invalid header `{}`: CR, LF and NUL are not allowed in a header",
            h.escape_debug()
        ));
    }
    // Other control characters are not field content either (RFC 9110 §5.5):
    // servers answer 400 to them.
    if h.bytes().any(|b| (b < 0x20 && b != b'\t') || b == 0x7f) {
        return Err(format!(
            "invalid header `{}`: control characters (other than tab) are not allowed in a header",
            h.escape_debug()
        ));
    }
    match h.split_once(':') {
        Some((name, _)) if is_token(name.trim_end()) && !name.starts_with(' ') => Ok(()),
        _ => Err(format!(
            "invalid header `{}`: expected `Name: value` with a token name",
            h.escape_debug()
        )),
    }
}

/// An RFC 9110 token: one or more tchar (letters, digits and ``!#$%&'*+-.^_`|~``).
pub(crate) fn is_token(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

#[cfg(test)]
mod tests {
    use super::super::tests::spec;
    use super::super::{RequestBytes, Spec};
    use super::*;

    #[test]
    fn credentials_in_the_url_become_basic_auth_and_leave_the_record() {
        let (url, auth) = split_credentials("http://user:p%40ss@127.0.0.1:8080/x");
        assert_eq!(url, "http://user@127.0.0.1:8080/x");
        // base64("user:p@ss")
        assert_eq!(auth.as_deref(), Some("Basic dXNlcjpwQHNz"));
        assert_eq!(split_credentials("http://127.0.0.1/").1, None);
        let s = Spec {
            authorization: auth,
            ..spec("http://127.0.0.1/")
        };
        let t = s.target().unwrap();
        let req = RequestBytes::build(&s, &t, b"");
        let text = String::from_utf8(req.keep).unwrap();
        assert!(
            text.contains("Authorization: Basic dXNlcjpwQHNz\r\n"),
            "{text}"
        );
    }

    /// NUL cannot come through argv, but a script building a Spec could pass one.
    #[test]
    fn header_bytes_that_break_the_wire_are_refused() {
        // The last three found by the cli fuzz target: control characters that are not
        // CR/LF/NUL were sent as they were (httparse, like servers, refuses them).
        for h in [
            "X: a\0b",
            "X: a\rb",
            "X: a\nb",
            "X\0: v",
            "X: a\x15b",
            "X: \x1b[0m",
            "X: a\x7f",
        ] {
            let s = Spec {
                headers: vec![h.into()],
                ..spec("http://127.0.0.1/")
            };
            assert!(s.check_flags().is_err(), "{h:?}");
        }
        let ok = Spec {
            headers: vec!["X-Token_1.a: v\tw".into()],
            method: "M-SEARCH".into(),
            ..spec("http://127.0.0.1/")
        };
        ok.check_flags().unwrap();
    }
}
