#!/usr/bin/env bash
# Runs the named test targets one at a time (tests within a target run in parallel, except in the
# targets named in SERIAL_TEST_TARGETS, which run one test at a time): builds the tests once, prints
# the librdkafka the tests run with (`apns-worker --version`), then runs each target with
# `swift test --skip-build --filter '^TARGET\.'`. Suites named in ALONE_TESTS (TARGET.Suite, space
# separated) run after the rest of their target, in a process of their own, one test at a time:
# they look at something the whole process shares (a sweep every producer runs). Installs nothing.
#
#   scripts/test.sh TARGET...      (`make test` passes TEST_TARGETS, after installing the peers)
#
# Environment: SWIFT (default swift), SWIFTPM_FLAGS (what the Makefile gives every swift build: the
# run path of the librdkafka it uses, scripts/librdkafka.sh), SERIAL_TEST_TARGETS.
# Each target's output goes to .build/test-TARGET.log and is printed after it ran. A target that
# fails, or that runs no test ("Test run with 0 tests": a filter that silently matches nothing is
# not a pass), is listed on a last line "FAILED: ..." and the script exits 1; else it says "all test
# targets passed". Before that line, the failing targets' failed expectations and tests are printed
# again (their "✘" lines, and XCTest's "error:" lines): where only the end of a long run's output is
# kept, as by CI services, what failed is still there.
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -gt 0 ] || { echo "usage: $0 TARGET..." >&2; exit 2; }
SWIFT=${SWIFT:-swift}
read -r -a SWIFTPM_FLAGS <<< "${SWIFTPM_FLAGS:-}"
SERIAL_TEST_TARGETS=${SERIAL_TEST_TARGETS:-}
ALONE_TESTS=${ALONE_TESTS:-}

(set -x; "$SWIFT" build --build-tests "${SWIFTPM_FLAGS[@]}")
echo "== apns-worker --version (the librdkafka the tests run with; KafkaTests checks it is the headers')"
"$("$SWIFT" build "${SWIFTPM_FLAGS[@]}" --show-bin-path)/apns-worker" --version

mkdir -p .build
failed=""
for target in "$@"; do
    echo "== $target"
    log=.build/test-$target.log
    serial=()
    case " $SERIAL_TEST_TARGETS " in *" $target "*) serial=(--no-parallel) ;; esac
    alone=()
    skip=()
    for suite in $ALONE_TESTS; do
        case "$suite" in "$target".*) alone+=("$suite"); skip+=(--skip "^$suite[/.]") ;; esac
    done
    "$SWIFT" test --skip-build "${SWIFTPM_FLAGS[@]}" "${serial[@]}" --filter "^$target\\." "${skip[@]}" > "$log" 2>&1 \
        || failed="$failed $target"
    for suite in "${alone[@]}"; do
        echo "== $suite (alone)" >> "$log"
        "$SWIFT" test --skip-build "${SWIFTPM_FLAGS[@]}" --no-parallel --filter "^$suite[/.]" >> "$log" 2>&1 \
            || failed="$failed $target"
    done
    cat "$log"
    if grep -q "Test run with 0 tests" "$log"; then failed="$failed $target(ran-no-test)"; fi
done
echo "== the ten slowest tests"
for target in "$@"; do cat ".build/test-$target.log"; done \
    | grep -aoE '(✔|✘) Test "[^"]*"( with [0-9]+ test cases)? (passed|failed) after [0-9.]+ seconds' \
    | sed -E 's/^(✔|✘) Test "([^"]*)".* after ([0-9.]+) seconds/\3 s  \2/' | sort -rn | head -n 10 | cut -c1-160 || true
if [ -n "$failed" ]; then
    for target in $failed; do
        target=${target%(ran-no-test)}
        echo "== what failed in $target (.build/test-$target.log)"
        grep -aE '✘|: error: |Fatal error|Crash|signal [0-9]+' ".build/test-$target.log" | cut -c1-400 | head -n 40 || true
    done
    echo "FAILED:$failed"
    exit 1
fi
echo "all test targets passed"
