# Shared by the bench scripts: a local nginx on a free loopback port serving 1k.txt,
# removed on exit. Source it, then call `start_nginx NAME`; it sets $dir and $port.
start_nginx() {
  dir=$(mktemp -d "/tmp/loadlens-bench-$1.XXXXXX")
  chmod 755 "$dir"
  trap 'stop_nginx' EXIT INT TERM
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
  mkdir -p "$dir/html" "$dir/tmp"
  head -c 1024 /dev/zero | tr '\0' x > "$dir/html/1k.txt"
  chmod -R a+rX "$dir"
  cat > "$dir/nginx.conf" <<CONF
worker_processes 1;
pid $dir/nginx.pid;
events { worker_connections 1024; }
http {
  access_log off;
  client_body_temp_path $dir/tmp; proxy_temp_path $dir/tmp; fastcgi_temp_path $dir/tmp;
  uwsgi_temp_path $dir/tmp; scgi_temp_path $dir/tmp;
  server { listen 127.0.0.1:$port; root $dir/html; }
}
CONF
  nginx -p "$dir" -e "$dir/error.log" -c "$dir/nginx.conf"
  sleep 0.3
}

stop_nginx() {
  [ -f "$dir/nginx.pid" ] && kill -TERM "$(cat "$dir/nginx.pid")" 2>/dev/null || true
  sleep 0.3
  rm -rf "$dir"
}
