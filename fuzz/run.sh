#!/usr/bin/env bash
# Builds the libFuzzer targets and runs each for a bounded time; any crash,
# timeout (an input taking > FUZZ_INPUT_TIMEOUT s) or OOM (> FUZZ_RSS_MB)
# fails. Used by .ci/run with short times; see fuzz/README.md for longer runs.
#
#   fuzz/run.sh                       every target, FUZZ_SECONDS each
#   fuzz/run.sh jq overlay            just these
#   FUZZ_SECONDS=300 fuzz/run.sh      longer
#   fuzz/run.sh --regressions         only replay fuzz/regressions/<target>/*
#                                     (every run replays them first)
#   fuzz/run.sh --build               only install cargo-fuzz and build
#                                     (.ci/run does it in the background)
#   FUZZ_OPT_LEVEL=1 fuzz/run.sh      a quicker build, slower fuzzing
#
# Works on a stable toolchain: `--sanitizer none` is the only cargo-fuzz
# mode that passes no -Z flag (AddressSanitizer needs -Zsanitizer, so a
# nightly or RUSTC_BOOTSTRAP=1); safe Rust gains little from ASan, and
# without it libFuzzer's RSS limit measures the program, not the shadow.
set -euo pipefail
cd "$(dirname "$0")/.."

CARGO_FUZZ_VERSION=0.13.2
SECONDS_EACH=${FUZZ_SECONDS:-25}
# Two fuzzers at a time: CI has 2 cores and each libFuzzer process is
# single-threaded (the jq and gateway targets' helper threads mostly wait).
PARALLEL=${FUZZ_PARALLEL:-2}
RSS_MB=${FUZZ_RSS_MB:-2048}
INPUT_TIMEOUT=${FUZZ_INPUT_TIMEOUT:-10}
# More codegen units than cargo-fuzz's default of 1: the build is most of
# the CI step's time (the dependency graph includes axum, rmcp, reqwest and
# kube) and fuzzing speed barely changes.
CGU=${FUZZ_CODEGEN_UNITS:-16}
FUZZ_FLAGS=(--sanitizer none --codegen-units "$CGU")
# Optimisation of the instrumented build: the release profile's (3) unless
# FUZZ_OPT_LEVEL says otherwise. CI, which fuzzes each target for seconds,
# builds at 1: the build is most of its fuzz step, and the inputs it runs
# are about half as many.
if [ -n "${FUZZ_OPT_LEVEL:-}" ]; then
  export CARGO_PROFILE_RELEASE_OPT_LEVEL=$FUZZ_OPT_LEVEL
fi
SPECS=${TOOLGATE_SPECS:-$(cd .. && pwd)/shared/specs}

ALL_TARGETS=(spec_load overlay compile request_build jq jsonrpc_intake access)

# Per target: longest input (bytes) and dictionary.
max_len() {
  case $1 in
    spec_load | compile) echo 65536 ;;
    *) echo 16384 ;;
  esac
}
# Per target: RSS limit (MB). Access rules get the gateway pod's own
# limit: a `when` that compiles must evaluate within it (issue 26: one
# that built gigabytes aborted every replica).
rss_mb() {
  case $1 in
    access) echo "${FUZZ_ACCESS_RSS_MB:-512}" ;;
    *) echo "$RSS_MB" ;;
  esac
}
dict() {
  case $1 in
    spec_load | compile) echo fuzz/dict/openapi.dict ;;
    overlay) echo fuzz/dict/overlay.dict ;;
    request_build) echo fuzz/dict/request.dict ;;
    jq) echo fuzz/dict/jq.dict ;;
    jsonrpc_intake) echo fuzz/dict/jsonrpc.dict ;;
    access) echo fuzz/dict/cel.dict ;;
  esac
}

regressions=false
build_only=false
targets=()
for a in "$@"; do
  case $a in
    --regressions) regressions=true ;;
    --build) build_only=true ;;
    *) targets+=("$a") ;;
  esac
done
[ ${#targets[@]} -gt 0 ] || targets=("${ALL_TARGETS[@]}")

if ! cargo fuzz --version 2>/dev/null | grep -q "$CARGO_FUZZ_VERSION"; then
  echo "installing cargo-fuzz $CARGO_FUZZ_VERSION"
  start=$(date +%s)
  cargo install cargo-fuzz --locked --version "$CARGO_FUZZ_VERSION" --quiet
  echo "cargo-fuzz installed in $(($(date +%s) - start)) s"
fi

# The main workspace's `cargo fmt --all` does not reach this one.
cargo fmt --manifest-path fuzz/Cargo.toml --all -- --check

start=$(date +%s)
cargo fuzz build "${FUZZ_FLAGS[@]}"
echo "fuzz build: $(($(date +%s) - start)) s"
$build_only && exit 0
bin_dir=fuzz/target/x86_64-unknown-linux-gnu/release

# What fuzzing found once is replayed every time, before new inputs.
status=0
for t in "${targets[@]}"; do
  files=(fuzz/regressions/"$t"/*)
  [ -e "${files[0]}" ] || continue
  echo "== regressions: $t (${#files[@]} inputs)"
  "$bin_dir/$t" -rss_limit_mb="$(rss_mb "$t")" -timeout="$INPUT_TIMEOUT" "${files[@]}" || status=1
done
if [ $status -ne 0 ]; then
  echo "a fuzz regression input fails again (fuzz/regressions/)" >&2
  exit 1
fi
$regressions && exit 0

start=$(date +%s)
python3 fuzz/seed.py "$SPECS" fuzz/corpus
echo "seeds: $(($(date +%s) - start)) s"

mkdir -p fuzz/artifacts fuzz/logs
run_one() {
  local t=$1
  mkdir -p "fuzz/artifacts/$t"
  # NB: the outer timeout is a backstop for a process that stops
  # responding altogether (libFuzzer's own timers run in-process).
  timeout --kill-after=30 $((SECONDS_EACH + 120)) \
    "$bin_dir/$t" "fuzz/corpus/$t" \
    -max_total_time="$SECONDS_EACH" -max_len="$(max_len "$t")" \
    -rss_limit_mb="$(rss_mb "$t")" -timeout="$INPUT_TIMEOUT" \
    -dict="$(dict "$t")" -artifact_prefix="fuzz/artifacts/$t/" \
    -print_final_stats=1 >"fuzz/logs/$t.log" 2>&1
}

failed=()
pids=()
names=()
wait_one() {
  local pid=${pids[0]} t=${names[0]}
  pids=("${pids[@]:1}")
  names=("${names[@]:1}")
  if wait "$pid"; then
    local execs
    execs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "fuzz/logs/$t.log" | grep -o '[0-9]*$' || echo '?')
    echo "fuzz $t: ok ($execs inputs in ${SECONDS_EACH} s)"
  else
    failed+=("$t")
    echo "fuzz $t: FAILED; log:"
    tail -n 80 "fuzz/logs/$t.log"
    for f in "fuzz/artifacts/$t"/*; do
      [ -f "$f" ] || continue
      local size
      size=$(wc -c <"$f")
      if [ "$size" -le 4096 ]; then
        echo "reproducer $f ($size bytes), base64:"
        base64 -w0 "$f"
        echo
      else
        echo "reproducer $f ($size bytes; minimise: cargo fuzz tmin --sanitizer none $t $f)"
      fi
    done
  fi
}
for t in "${targets[@]}"; do
  run_one "$t" &
  pids+=($!)
  names+=("$t")
  [ ${#pids[@]} -lt "$PARALLEL" ] || wait_one
done
while [ ${#pids[@]} -gt 0 ]; do wait_one; done

if [ ${#failed[@]} -gt 0 ]; then
  echo "fuzz targets failed: ${failed[*]} (reproducers under fuzz/artifacts/)" >&2
  exit 1
fi
