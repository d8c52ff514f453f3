#!/bin/bash
# Builds microvmd and runs the whole test suite twice: once as built for
# use, once under AddressSanitizer and UndefinedBehaviorSanitizer, where a
# leak or undefined behaviour fails the run. In CI (CI=true) the fuzz
# targets then run for 30 s each (tools/fuzz.sh; FUZZ_SECONDS sets how
# long). Runs as root (the tests start a private system bus, polkitd
# and QEMU guests).
set -euo pipefail
cd "$(dirname "$0")/.."

./tools/install-deps.sh

werror=false
[ "${CI:-}" = true ] && werror=true

# run_suite DIR "MESON TEST ARGS" [MESON SETUP ARGS...]
run_suite() {
  local dir=$1 test_args=$2; shift 2
  if [ ! -d "$dir" ]; then
    meson setup "$dir" -Dwerror="$werror" "$@"
  else
    meson configure "$dir" -Dwerror="$werror" "$@"
  fi
  ninja -C "$dir"
  # shellcheck disable=SC2086
  meson test -C "$dir" --print-errorlogs --num-processes 1 $test_args
}
# The longest real-guest suites (about ten minutes) run once, in the
# sanitizer pass below; every other test runs in both. The Cockpit page
# (npm, esbuild) is built in the plain pass only, and its browser suite
# runs there, once.
run_suite build "--no-suite real-guests-long" -Dcockpit=enabled
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 \
UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  run_suite build-sanitize "" -Db_sanitize=address,undefined -Db_lundef=false -Dcockpit=disabled

if [ "${CI:-}" = true ]; then
  # Seven targets: 15 s each keeps the whole run within its time, now
  # that the two test passes and the browser suite take most of it.
  FUZZ_SECONDS=${FUZZ_SECONDS:-15} ./tools/fuzz.sh
fi
