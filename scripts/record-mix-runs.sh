#!/usr/bin/env bash
# Records the mixed Runs of the golden views (tests/data/runs/mix-{before,after}.json):
# a four-target mix (two GETs of one file, a HEAD, a 404, a POST nginx answers 405)
# against a local nginx with one worker (bench/lib.sh), watched, three repetitions of
# 2 s at -c 10 -t 1 (so `compare` has samples for per-endpoint verdicts); before: a new
# connection per request (--connreqs 1), after: keep-alive.
# Release build first (`cargo build --release`); then bless the goldens:
#   INSTA_UPDATE=always cargo test --test golden_views
set -euo pipefail
cd "$(dirname "$0")/.."
. bench/lib.sh
bin=$(realpath "${LOADLENS_BIN:-${CARGO_TARGET_DIR:-target}/release/loadlens}")
out=$(realpath tests/data/runs)
start_nginx record-mix
cat > "$dir/mix.jsonl" <<'MIX'
{"url": "/1k.txt", "weight": 5}
{"url": "/1k.txt?v=2", "weight": 1}
{"method": "HEAD", "url": "/1k.txt", "weight": 2}
{"url": "/missing", "weight": 1}
{"method": "POST", "url": "/1k.txt", "body": "q=1", "weight": 1, "name": "post a form"}
MIX
cd "$dir"
"$bin" run "http://127.0.0.1:$port/" --targets mix.jsonl -c 10 -t 1 -d 2s --repeat 3 --pause 500ms --connreqs 1 -q --json "$out/mix-before.json"
sleep 1
"$bin" run "http://127.0.0.1:$port/" --targets mix.jsonl -c 10 -t 1 -d 2s --repeat 3 --pause 500ms -q --json "$out/mix-after.json"
