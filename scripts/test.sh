#!/usr/bin/env bash
# `make test` after its dependencies are installed: the format check, one build of every
# test binary, then the binaries in two lanes.
#
# - Side by side (TEST_JOBS at a time, 3 by default, the longest first), beside clippy,
#   the fuzz targets' check and the doc tests: the binaries whose loads are built to give
#   the same result on a busy machine (rate-limited or open-loop loads, counts from the
#   server's own log, faults decisive whatever the host runs). Most of their time is
#   spent waiting for servers, sleeps and timeouts, not on a CPU.
# - Then one at a time, alone on the machine: the binaries whose diagnosis reads the
#   host's quiet (QUIET below): lab worlds loaded to saturation, A/B pairs, the CI gate
#   that refuses a Run while another process is busy. A new test file runs side by side
#   unless it is named here.
#
# Every binary runs whatever failed before (as `cargo test --no-fail-fast`); the exit
# status is 1 when anything failed, and the failures are listed last.
set -uo pipefail
cd "$(dirname "$0")/.."

QUIET="lab tune diagnose_path diagnose_tails diagnose_time kinds udp ci"
# Started first among the side-by-side ones (the longest, measured), so the lane ends
# together; the others follow in name order.
LONGEST="ray remote compare html history sweep hostile_channel engine_nginx engine_h3 diagnose_servers stages"
JOBS=${TEST_JOBS:-3}
CARGO=${CARGO:-cargo}
LINK=()
command -v mold >/dev/null 2>&1 && LINK=(mold -run)

logs=$(mktemp -d "${TMPDIR:-/tmp}/loadlens-test.XXXXXX")
trap 'rm -rf "$logs"' EXIT
failed=()

"$CARGO" fmt --all -- --check || exit 1

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

# Lane 1: clippy, the fuzz targets (their crate is a workspace member: clippy checks
# them with the same dependencies) and the doc tests, beside the side-by-side binaries.
(
  "${LINK[@]}" "$CARGO" clippy --workspace --all-targets --no-default-features -- -D warnings &&
    "$CARGO" test --doc
) >"$logs/checks.out" 2>&1 &
checks=$!

side=()
for n in $LONGEST; do [ -n "${bin[$n]:-}" ] && side+=("$n"); done
for n in $(printf '%s\n' "${!bin[@]}" | sort); do
  case " $QUIET $LONGEST " in *" $n "*) continue ;; esac
  side+=("$n")
done
export logs
for n in "${!bin[@]}"; do export "BIN_$n=${bin[$n]}"; done
echo "     Running ${#side[@]} test binaries side by side ($JOBS at a time) beside clippy"
printf '%s\n' "${side[@]}" | xargs -P "$JOBS" -I{} bash -c '
  n={}; v=BIN_$n; t0=$SECONDS
  CARGO_MANIFEST_DIR=$PWD "${!v}" >"$logs/$n.out" 2>&1; rc=$?
  echo $rc >"$logs/$n.rc"
  echo "     $n: exit $rc after $((SECONDS - t0)) s"'
for n in "${side[@]}"; do show "$n"; done

wait "$checks"
rc=$?
echo "     Checks: clippy --workspace --all-targets, cargo test --doc"
cat "$logs/checks.out"
[ "$rc" = 0 ] || failed+=("clippy or doc tests")

# Lane 2: one at a time, nothing else running.
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
