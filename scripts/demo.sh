#!/usr/bin/env bash
# The demo: a local nginx on a loopback port (generated config, temp dir), loaded by
# loadlens with keep-alive and then with a new connection per request. Everything it
# starts is stopped and removed on exit, also on Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
bin=target/release/loadlens
dir=$(mktemp -d /tmp/loadlens-demo.XXXXXX)
chmod 755 "$dir"
cleanup() {
  if [ -f "$dir/nginx.pid" ]; then kill -TERM "$(cat "$dir/nginx.pid")" 2>/dev/null || true; sleep 0.3; fi
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM

port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
mkdir -p "$dir/html" "$dir/tmp"
head -c 1024 /dev/zero | tr '\0' 'x' > "$dir/html/1k.txt"
chmod -R a+rX "$dir"
cat > "$dir/nginx.conf" <<CONF
worker_processes 1;
pid $dir/nginx.pid;
error_log $dir/error.log;
events { worker_connections 4096; }
http {
    access_log off;
    keepalive_requests 1000000;
    client_body_temp_path $dir/tmp; proxy_temp_path $dir/tmp; fastcgi_temp_path $dir/tmp;
    uwsgi_temp_path $dir/tmp; scgi_temp_path $dir/tmp;
    server { listen 127.0.0.1:$port backlog=4096; root $dir/html; }
}
CONF
nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf"
for _ in $(seq 50); do [ -f "$dir/nginx.pid" ] && break; sleep 0.1; done

echo "\$ loadlens run http://127.0.0.1:$port/1k.txt -c 50 -d 5s --latency"
"$bin" run "http://127.0.0.1:$port/1k.txt" -c 50 -d 5s --latency
echo
echo "\$ loadlens run http://127.0.0.1:$port/1k.txt -c 50 -d 5s --connreqs 1"
"$bin" run "http://127.0.0.1:$port/1k.txt" -c 50 -d 5s --connreqs 1
