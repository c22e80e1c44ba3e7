#!/usr/bin/env bash
# Installs the Debian packages loadlens's tests, demo and benchmarks use, when missing.
# Usage: scripts/install-deps.sh [test|demo|bench|ray]
# `test` and `ray` also make the Python virtual environment with Ray that `run --ray` and
# its test use (~/.cache/loadlens-venv, from ray/requirements.lock).
set -euo pipefail
what=${1:-test}

need=()
want() { command -v "$1" >/dev/null 2>&1 || need+=("$2"); }
want nginx nginx-light
want openssl openssl
want ip iproute2
want taskset util-linux
want setpriv util-linux
want pgrep procps
want sysctl procps
want chrt util-linux
want prlimit util-linux
# The remote watch's test (tests/remote.rs) starts its own sshd and ssh.
[ "$what" = test ] && want ssh openssh-client
[ "$what" = test ] && { [ -x /usr/sbin/sshd ] || need+=(openssh-server); }
# mold links the test binaries faster (the Makefile uses it when present).
[ "$what" = test ] && want mold mold
# The JUnit file is validated against its schema (tests/ci.rs).
[ "$what" = test ] && want xmllint libxml2-utils
# A JVM upstream (tests/upstream.rs: its IPv4-mapped listener).
[ "$what" = test ] && want java default-jre-headless
# A lossy link in a test's namespaces (tests/diagnose_time.rs; the kernel may have no netem).
[ "$what" = test ] && { command -v nft >/dev/null 2>&1 || [ -x /usr/sbin/nft ] || need+=(nftables); }
# The lab's slow disk (slow-disk): an ext4 image on a loop device (mkfs.ext4, losetup).
[ "$what" = test ] && want mkfs.ext4 e2fsprogs
[ "$what" = test ] && want losetup mount
# nginx's echo module: a delay the config sets (tests/history.rs: a planted step).
[ "$what" = test ] && { [ -e /usr/lib/nginx/modules/ngx_http_echo_module.so ] || need+=(libnginx-mod-http-echo); }
# HTTP/3 (tests/engine_h3.rs; bench/h3-cost): Caddy serves it by default.
{ [ "$what" = test ] || [ "$what" = bench ]; } && want caddy caddy
# Server kinds of their own file (tests/kinds.rs): lighttpd in front of uWSGI (its
# Python plugin), and Tomcat 10.
[ "$what" = test ] && want lighttpd lighttpd
[ "$what" = test ] && want uwsgi uwsgi-core
[ "$what" = test ] && { ls /usr/lib/uwsgi/plugins/python3*_plugin.so >/dev/null 2>&1 || need+=(uwsgi-plugin-python3); }
[ "$what" = test ] && { [ -e /usr/share/tomcat10/bin/bootstrap.jar ] || need+=(tomcat10); }
# The HTML report is opened in a real browser by its test.
[ "$what" = test ] && want chromium chromium
ls /usr/sbin/php-fpm* >/dev/null 2>&1 || need+=(php-fpm)
# The lab's servers other than nginx (apache-workers, haproxy-maxconn; Caddy with
# HTTP/3 for tests/udp.rs, run with setpriv from util-linux).
if [ "$what" = test ] || [ "$what" = demo ]; then
  [ -x /usr/sbin/apache2 ] || need+=(apache2)
  [ -x /usr/sbin/haproxy ] || need+=(haproxy)
  want caddy caddy
  want setpriv util-linux
fi
# python3: the ray companion, and the lab's single-threaded upstream (http.server).
[ "$what" = demo ] && want python3 python3
if [ "$what" = test ] || [ "$what" = ray ]; then
  want python3 python3
  python3 -c 'import venv, ensurepip' >/dev/null 2>&1 || need+=(python3-venv)
fi
if [ "$what" = bench ]; then
  want wrk wrk
  want ab apache2-utils
  want h2load nghttp2-client
  # bench/vs-peers compiles its floor client (bench/floor.c) against liburing.
  want gcc gcc
  # bench/vs-peers makes its TLS modes' certificate with openssl.
  want openssl openssl
  [ -f /usr/include/liburing.h ] || need+=(liburing-dev)
fi

if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "error: missing ${need[*]}: run 'sudo apt-get install ${need[*]}' (or run this as root)" >&2
    exit 2
  fi
  echo "installing: ${need[*]}" >&2
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
  # Debian may start the packaged services; loadlens's tests and lab start their own.
  if command -v systemctl >/dev/null 2>&1; then
    systemctl disable --now nginx >/dev/null 2>&1 || true
    systemctl disable --now 'php*-fpm' >/dev/null 2>&1 || true
    systemctl disable --now apache2 haproxy caddy lighttpd tomcat10 >/dev/null 2>&1 || true
    # The remote watch's test starts its own sshd; the packaged one is not needed.
    systemctl disable --now ssh >/dev/null 2>&1 || true
  fi
fi

# Ray for `run --ray` and tests/ray.rs: a virtual environment made from the lock file,
# remade when the lock file changes.
if [ "$what" = test ] || [ "$what" = ray ]; then
  venv="$HOME/.cache/loadlens-venv"
  lock="$(cd "$(dirname "$0")/.." && pwd)/ray/requirements.lock"
  if ! cmp -s "$lock" "$venv/requirements.lock" || ! "$venv/bin/python3" -c 'import ray' >/dev/null 2>&1; then
    echo "installing Ray into $venv (ray/requirements.lock)" >&2
    rm -rf "$venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --no-input --disable-pip-version-check -r "$lock"
    cp "$lock" "$venv/requirements.lock"
  fi
fi

if ! command -v cargo >/dev/null 2>&1; then
  for d in "$HOME/.cargo/bin" /usr/local/cargo/bin; do
    [ -x "$d/cargo" ] && { echo "note: cargo is in $d; add it to PATH" >&2; exit 0; }
  done
  echo "error: cargo (Rust, stable) is required: install it with rustup" >&2
  exit 2
fi
