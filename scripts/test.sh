#!/usr/bin/env bash
# `make test` after its dependencies are installed: the format check, one build of every
# test binary, then the binaries in two lanes.
#
# Clippy (the fuzz targets too: their crate is a workspace member) runs beside the build,
# in a target directory of its own: each leaves a core idle at times (one large crate,
# the links) that the other fills.
#
# - Side by side (TEST_JOBS at a time, 3 by default, the longest first): the binaries
#   whose loads are built to give the same result on a busy machine (rate-limited or
#   open-loop loads, counts from the server's own log, faults decisive whatever the host
#   runs). Much of their time is spent waiting for servers, sleeps and timeouts, not on
#   a CPU.
# - Then one at a time, alone on the machine: the binaries whose diagnosis reads the
#   host's quiet or whose client must keep a schedule (QUIET below): lab worlds loaded
#   to saturation, the diagnosis paths, tails and timing, the server kinds, the QUIC
#   buffer drops, the CI gate that refuses a Run while another process is busy; and
#   HTTP/3's rate stages (a starved client sent 420 of 450: requests due that no stream
#   task claimed are not counted). tune runs side by side: its pairs' loads begin once
#   the reloaded server's workers have settled (a pool reloaded to 50 php-fpm children
#   beside three binaries served nothing in the first 1 s load after it, before that
#   wait; 5 of 5 emulated side lanes passed it, 211-228 s, on a 2-core host at load
#   10-20). A new test file runs side by side unless it is named here.
#
# Every binary runs whatever failed before (as `cargo test --no-fail-fast`); the exit
# status is 1 when anything failed, and the failures are listed last.
set -uo pipefail
cd "$(dirname "$0")/.."

QUIET="lab diagnose_path diagnose_tails diagnose_time kinds udp ci engine_h3"
# Started first among the side-by-side ones (the longest, measured), so the lane ends
# together; the others follow in name order.
LONGEST="tune ray remote compare html history hostile_channel engine_nginx diagnose_servers stages"
JOBS=${TEST_JOBS:-3}
CARGO=${CARGO:-cargo}
LINK=()
command -v mold >/dev/null 2>&1 && LINK=(mold -run)

logs=$(mktemp -d "${TMPDIR:-/tmp}/loadlens-test.XXXXXX")
trap 'rm -rf "$logs"' EXIT
failed=()

"$CARGO" fmt --all -- --check || exit 1

"${LINK[@]}" "$CARGO" clippy --workspace --all-targets --no-default-features \
  --target-dir "${CARGO_TARGET_DIR:-target}/clippy" -- -D warnings >"$logs/clippy.out" 2>&1 &
clippy=$!
trap 'kill "$clippy" 2>/dev/null; rm -rf "$logs"' EXIT

# One build: cargo names each binary it made ("Executable tests/lab.rs (target/…)").
"${LINK[@]}" "$CARGO" test --no-run 2>&1 | tee "$logs/build"
[ "${PIPESTATUS[0]}" -eq 0 ] || exit 1
declare -A bin
while read -r name path; do
  bin[$name]=$path
done < <(sed -n 's/^ *Executable \(unittests \)\?\(.*\) (\(.*\))$/\2 \3/p' "$logs/build" |
  sed 's|^tests/\([^ ]*\)\.rs |\1 |; s|^src/lib.rs |lib |; s|^src/main.rs |main |')
[ -n "${bin[lab]:-}" ] || { echo "test.sh: no test binaries found in cargo's output" >&2; exit 1; }

# Prints side-by-side binary NAME's output (kept in $logs while the lane ran).
show() {
  local name=$1
  echo "     Running $name (${bin[$name]})"
  cat "$logs/$name.out"
  [ "$(cat "$logs/$name.rc")" = 0 ] || failed+=("$name")
}

"$CARGO" test --doc || failed+=("doc tests")

side=()
for n in $LONGEST; do [ -n "${bin[$n]:-}" ] && side+=("$n"); done
for n in $(printf '%s\n' "${!bin[@]}" | sort); do
  case " $QUIET $LONGEST " in *" $n "*) continue ;; esac
  side+=("$n")
done
export logs
for n in "${!bin[@]}"; do export "BIN_$n=${bin[$n]}"; done
echo "     Running ${#side[@]} test binaries side by side ($JOBS at a time)"
printf '%s\n' "${side[@]}" | xargs -P "$JOBS" -I{} bash -c '
  n={}; v=BIN_$n; t0=$SECONDS
  CARGO_MANIFEST_DIR=$PWD "${!v}" >"$logs/$n.out" 2>&1; rc=$?
  echo $rc >"$logs/$n.rc"
  echo "     $n: exit $rc after $((SECONDS - t0)) s"'
for n in "${side[@]}"; do show "$n"; done

wait "$clippy"
rc=$?
echo "     Clippy: --workspace --all-targets -D warnings"
cat "$logs/clippy.out"
[ "$rc" = 0 ] || failed+=("clippy")

# One at a time, nothing else running: first, up to 30 s for what the side-by-side binaries
# left ending (a Ray node's shutdown, a browser) — the CPUs over 15% busy in a second.
cpu_busy_pct() {
  local b1 t1 b2 t2
  read -r b1 t1 < <(awk '/^cpu /{b=$2+$3+$4+$7+$8+$9; print b, b+$5+$6}' /proc/stat)
  sleep 1
  read -r b2 t2 < <(awk '/^cpu /{b=$2+$3+$4+$7+$8+$9; print b, b+$5+$6}' /proc/stat)
  echo $(((b2 - b1) * 100 / (t2 > t1 ? t2 - t1 : 1)))
}
for _ in $(seq 30); do
  pct=$(cpu_busy_pct)
  [ "$pct" -lt 15 ] && break
  echo "     waiting for a quiet host before the binaries that need one: CPUs ${pct}% busy"
done
for n in $QUIET; do
  [ -n "${bin[$n]:-}" ] || { failed+=("$n (not built)"); continue; }
  echo "     Running $n (${bin[$n]})"
  CARGO_MANIFEST_DIR=$PWD "${bin[$n]}" 2>&1
  [ "$?" = 0 ] || failed+=("$n")
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "test.sh: FAILED: ${failed[*]}"
  exit 1
fi
echo "test.sh: every test binary passed"
