#!/usr/bin/env bash
# Runs benchmarks in release builds and prints their figures next to a reference tool's, measured in
# the same run on the same machine. Usage: Benchmarks/run.sh [NAME|all] (or `make bench BENCH=NAME`).
# Benchmarks report; they never fail on a time.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
PYTHON=${PYTHON:-/usr/bin/python3}
# One core: the same one for both sides, so neither gets the other's.
PIN=""
if command -v taskset >/dev/null 2>&1; then PIN="taskset -c ${BENCH_CPU:-0}"; fi

usage() {
    echo "unknown benchmark: $1 (kafka, jsonschema, jsonschema-instructions, all)" >&2
    exit 2
}

bench_kafka() {
    "$SWIFT" build -c release --product KafkaBenchmark
    "$("$SWIFT" build -c release --show-bin-path)/KafkaBenchmark"
}

bench_jsonschema() {
    local dir=Benchmarks/JSONSchemaBenchmark
    local schema=schemas/notification-event.schema.json
    local inputs=("$dir/inputs/alert-valid.json" "$dir/inputs/background-priority-10-invalid.json")
    "$SWIFT" build -c release --product JSONSchemaBenchmark >&2
    local bin
    bin="$("$SWIFT" build -c release --show-bin-path)/JSONSchemaBenchmark"
    local swift_out python_out
    swift_out=$(mktemp)
    python_out=$(mktemp)
    trap 'rm -f "$swift_out" "$python_out"' RETURN
    echo "running Swift (JSONSchema) ..." >&2
    $PIN "$bin" "$schema" "${inputs[@]}" >"$swift_out"
    echo "running Python (jsonschema) ..." >&2
    $PIN "$PYTHON" "$dir/jsonschema_bench.py" "$schema" "${inputs[@]}" >"$python_out"
    "$PYTHON" - "$swift_out" "$python_out" <<'PY'
import sys
def load(path):
    rows, notes = {}, []
    for line in open(path):
        if line.startswith("#"):
            notes.append(line.strip()); continue
        parts = line.split()
        rows[(parts[0], parts[1])] = float(parts[2])
    return rows, notes
swift, _ = load(sys.argv[1])
python, notes = load(sys.argv[2])
print(f"{'measure':<20} {'event':<42} {'Swift /s':>12} {'Python /s':>12} {'ratio':>8}")
for key, s in swift.items():
    p = python.get(key)
    ratio = f"{s / p:7.1f}x" if p else "       -"
    ptext = f"{p:12,.0f}" if p else f"{'-':>12}"
    print(f"{key[0]:<20} {key[1]:<42} {s:12,.0f} {ptext} {ratio}")
for n in notes:
    print(n)
print("(one core each, median of 3 runs; full-decode = parse + schema + APNs rules, Swift only)")
PY
}

# Instructions per validation under callgrind (Swift and Python, schema-only): deterministic, so it
# compares the two even on a loaded machine. Slow (Python under valgrind): about two minutes.
bench_jsonschema_instructions() {
    local dir=Benchmarks/JSONSchemaBenchmark
    local schema=schemas/notification-event.schema.json
    "$SWIFT" build -c release --product JSONSchemaBenchmark >&2
    local bin
    bin="$("$SWIFT" build -c release --show-bin-path)/JSONSchemaBenchmark"
    # Total instructions at two iteration counts; the difference over the extra iterations is the
    # cost of one validation, without start-up and schema compilation.
    count() {
        local out
        out=$(mktemp)
        BENCH_ONLY=schema-only BENCH_ITERATIONS=$1 valgrind --tool=callgrind --callgrind-out-file="$out" \
            "${@:2}" >/dev/null 2>&1
        callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }'
        rm -f "$out"
    }
    printf "%-40s %16s %16s %8s\n" "event (schema-only)" "Swift instr." "Python instr." "ratio"
    for input in "$dir/inputs/alert-valid.json" "$dir/inputs/background-priority-10-invalid.json"; do
        local s1 s2 p1 p2
        s1=$(count 1000 "$bin" "$schema" "$input")
        s2=$(count 11000 "$bin" "$schema" "$input")
        p1=$(count 100 "$PYTHON" "$dir/jsonschema_bench.py" "$schema" "$input")
        p2=$(count 1100 "$PYTHON" "$dir/jsonschema_bench.py" "$schema" "$input")
        "$PYTHON" -c "import sys; s=($s2-$s1)/10000; p=($p2-$p1)/1000; print(f'{sys.argv[1]:<40} {s:16,.0f} {p:16,.0f} {p/s:7.1f}x')" \
            "$(basename "$input")"
    done
}

case "${1:-all}" in
    kafka) bench_kafka ;;
    jsonschema) bench_jsonschema ;;
    jsonschema-instructions) bench_jsonschema_instructions ;;
    all) bench_kafka; bench_jsonschema ;;
    *) usage "$1" ;;
esac
