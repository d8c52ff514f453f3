#!/bin/bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (-Dfuzzing=true:
# ASan, UBSan and libFuzzer's coverage) and runs each for a bounded time,
# starting from its seed corpus in tests/fuzz/corpus/<target>/. Fails on
# any crash, leak, critical, broken invariant, slow input or excess memory;
# the input that did it is kept in build-fuzz/artifacts/ and its path
# printed. The seed corpus is only read: what the fuzzer finds goes to a
# scratch directory.
#
#   FUZZ_SECONDS   how long each target runs (default 60)
#   FUZZ_TARGETS   which targets, space-separated (default: all of them)
#
# To rerun one input: build-fuzz/tests/fuzz/TARGET FILE, with the
# environment set below.
set -euo pipefail
cd "$(dirname "$0")/.."

seconds=${FUZZ_SECONDS:-60}
read -r -a targets <<< "${FUZZ_TARGETS:-fuzz-spec fuzz-records fuzz-http fuzz-qmp fuzz-bus fuzz-agent-protocol fuzz-dns}"
build=build-fuzz
artifacts=$build/artifacts

if [ ! -f "$build/build.ninja" ]; then
  CC=clang-14 meson setup "$build" -Dfuzzing=true -Dbuildtype=debugoptimized
fi
ninja -C "$build" "${targets[@]/#/tests/fuzz/}"

# GLib's slice allocator would hide blocks from ASan and leaks from LSan.
export G_SLICE=always-malloc
export G_DEBUG=fatal-criticals
export LANG=C.UTF-8
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1

scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
mkdir -p "$artifacts"

dict_for() {
  case $1 in
    fuzz-http) echo tests/fuzz/http.dict ;;
    fuzz-agent-protocol) echo tests/fuzz/agent.dict ;;
    fuzz-dns)  echo tests/fuzz/dns.dict ;;
    *)         echo tests/fuzz/json.dict ;;
  esac
}

failed=()
for target in "${targets[@]}"; do
  log=$scratch/$target.log
  mkdir -p "$scratch/$target"
  echo "== $target: ${seconds}s"
  if "$build/tests/fuzz/$target" \
       -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
       -dict="$(dict_for "$target")" -print_final_stats=1 \
       -artifact_prefix="$artifacts/$target-" \
       "$scratch/$target" "tests/fuzz/corpus/$target" > "$log" 2>&1; then
    grep -E '^#[0-9]+[[:space:]]+DONE' "$log" | tail -n 1
    grep -E '^stat::(number_of_executed_units|average_exec_per_sec)' "$log"
  else
    echo "$target FAILED:"
    # From the first report of a sanitizer, libFuzzer, GLib or the target.
    first=$(grep -n -m 1 -E '^==[0-9]+==|ERROR: libFuzzer|^ALARM|-CRITICAL \*\*|^invariant: ' \
              "$log" | cut -d: -f1)
    tail -n +"${first:-1}" "$log" | head -n 80
    grep -E 'Test unit written' "$log" || true
    failed+=("$target")
  fi
done

echo "fuzzing: $(( ${#targets[@]} - ${#failed[@]} )) passed, ${#failed[@]} failed"
if [ ${#failed[@]} -gt 0 ]; then
  echo "failed: ${failed[*]}"
  exit 1
fi
