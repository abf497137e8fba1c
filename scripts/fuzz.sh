#!/usr/bin/env bash
# Builds the named libFuzzer targets of Tests/Fuzz with AddressSanitizer into .build-fuzz, then runs
# each in turn for FUZZ_SECONDS (docs/reliability.md, "Fuzzers"). Installs nothing.
#
#   scripts/fuzz.sh TARGET...      (`make fuzz` passes FUZZ_TARGETS and the FUZZ_* settings)
#
# Environment: SWIFT (default swift), SWIFTPM_FLAGS (what the Makefile gives every swift build),
# FUZZ_SECONDS (30), FUZZ_TIMEOUT (10: seconds an input may take), FUZZ_RSS_MB (2048: memory limit).
# Each target runs on its seed corpus copied to .build-fuzz/fuzz/TARGET/corpus (new inputs collect
# there, never in the repository; a file already there is kept) plus Tests/Fuzz/regressions/TARGET
# when it exists, with leak detection (Tests/Fuzz/lsan.supp names the allocations it may not report).
# A crash, a broken property, a leak, a slow input or a memory blow-up fails the target: the input is
# saved in .build-fuzz/fuzz/TARGET/artifacts and libFuzzer's output is in .build-fuzz/fuzz/TARGET/log,
# of which its summary lines are printed. Exits 1 after the last target when any failed (a last line
# "FAILED: ..."), at once when a build fails.
set -euo pipefail
cd "$(dirname "$0")/.."

[ $# -gt 0 ] || { echo "usage: $0 TARGET..." >&2; exit 2; }
SWIFT=${SWIFT:-swift}
read -r -a SWIFTPM_FLAGS <<< "${SWIFTPM_FLAGS:-}"
FUZZ_SECONDS=${FUZZ_SECONDS:-30}
FUZZ_TIMEOUT=${FUZZ_TIMEOUT:-10}
FUZZ_RSS_MB=${FUZZ_RSS_MB:-2048}

# -DFUZZING makes each Tests/Fuzz executable a libFuzzer entry point (in a normal build it replays
# a corpus); a separate build folder, since sanitized objects differ.
fuzz_build() {
    "$SWIFT" build --scratch-path .build-fuzz -Xswiftc -sanitize=fuzzer,address -Xswiftc -DFUZZING \
        "${SWIFTPM_FLAGS[@]}" "$@"
}

for target in "$@"; do fuzz_build --product "$target" || exit 1; done
bin=$(fuzz_build --show-bin-path)
failed=""
for target in "$@"; do
    work=.build-fuzz/fuzz/$target
    mkdir -p "$work/corpus" "$work/artifacts"
    # -n: inputs found by earlier runs stay; a missing seed corpus is reported and the run goes on.
    cp -n Tests/Fuzz/corpus/"$target"/* "$work/corpus/" || true
    seeds=()
    if [ -d "Tests/Fuzz/regressions/$target" ]; then seeds=("Tests/Fuzz/regressions/$target"); fi
    echo "== $target (${FUZZ_SECONDS}s)"
    # SWIFT_BACKTRACE=enable=no: under AddressSanitizer Swift's backtracer trips over its own memory
    # reads when a crash happens, hiding the crash.
    SWIFT_BACKTRACE=enable=no ASAN_OPTIONS=detect_leaks=1 \
        LSAN_OPTIONS="suppressions=$PWD/Tests/Fuzz/lsan.supp:print_suppressions=0" \
        "$bin/$target" "$work/corpus" "${seeds[@]}" -max_total_time="$FUZZ_SECONDS" -timeout="$FUZZ_TIMEOUT" \
        -rss_limit_mb="$FUZZ_RSS_MB" -detect_leaks=1 -print_final_stats=1 \
        -artifact_prefix="$work/artifacts/" > "$work/log" 2>&1 || failed="$failed $target"
    grep -E "^#[0-9]+ +DONE|^Done [0-9]+ runs|stat::number_of_executed_units|stat::average_exec_per_sec|ERROR|SUMMARY" \
        "$work/log" || true
done
if [ -n "$failed" ]; then echo "FAILED:$failed (see .build-fuzz/fuzz/<target>/log and artifacts/)"; exit 1; fi
echo "all fuzz targets ran ${FUZZ_SECONDS}s without a finding"
