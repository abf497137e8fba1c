#!/usr/bin/env bash
# Runs benchmarks in release builds and prints their figures next to a reference tool's, measured in
# the same run on the same machine. Usage: Benchmarks/run.sh [NAME|all] (or `make bench BENCH=NAME`).
# Benchmarks report; they never fail on a time.
set -euo pipefail
cd "$(dirname "$0")/.."

SWIFT=${SWIFT:-swift}
# What the Makefile gives every swift build (SWIFTPM_FLAGS: the run path of the librdkafka it uses,
# scripts/librdkafka.sh), so that these builds find the same one. Run directly, not through make:
# the same paths, where scripts/librdkafka.sh built one into the build folder.
prefix="$PWD/.build/librdkafka/prefix"
if [ -z "${SWIFTPM_FLAGS:-}" ] && [ -d "$prefix/lib" ]; then
    export PKG_CONFIG_PATH="$prefix/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
    SWIFTPM_FLAGS="-Xlinker -rpath -Xlinker $prefix/lib"
fi
read -r -a SWIFTPM_FLAGS <<< "${SWIFTPM_FLAGS:-}"
swift_build() { "$SWIFT" build "${SWIFTPM_FLAGS[@]}" "$@"; }
PYTHON=${PYTHON:-/usr/bin/python3}
# One core: the same one for both sides, so neither gets the other's.
PIN=""
if command -v taskset >/dev/null 2>&1; then PIN="taskset -c ${BENCH_CPU:-0}"; fi

usage() {
    echo "unknown benchmark: $1 (kafka, worker, tracing, jsonschema, jsonschema-instructions, simulator, apns-client, apns-client-aioapns, all)" >&2
    exit 2
}

bench_kafka() {
    swift_build -c release --product KafkaBenchmark
    "$(swift_build -c release --show-bin-path)/KafkaBenchmark"
}

bench_jsonschema() {
    local dir=Benchmarks/JSONSchemaBenchmark
    local schema=schemas/notification-event.schema.json
    local inputs=("$dir/inputs/alert-valid.json" "$dir/inputs/background-priority-10-invalid.json")
    swift_build -c release --product JSONSchemaBenchmark >&2
    local bin
    bin="$(swift_build -c release --show-bin-path)/JSONSchemaBenchmark"
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
    swift_build -c release --product JSONSchemaBenchmark >&2
    # Valgrind runs a copy without debug information: valgrind 3.19 (Debian 12) cannot read the DWARF
    # that Swift 6.3's toolchain writes ("Possibly corrupted debuginfo file. I can't recover."), and
    # only the instruction total is needed here, not where they go.
    local bin
    bin="$(mktemp)"
    trap 'rm -f "$bin"' RETURN
    objcopy --strip-debug "$(swift_build -c release --show-bin-path)/JSONSchemaBenchmark" "$bin"
    # Total instructions at two iteration counts; the difference over the extra iterations is the
    # cost of one validation, without start-up and schema compilation.
    count() {
        local out total
        out=$(mktemp)
        BENCH_ONLY=schema-only BENCH_ITERATIONS=$1 valgrind --tool=callgrind --callgrind-out-file="$out" \
            "${@:2}" >/dev/null 2>&1
        total=$(callgrind_annotate "$out" 2>/dev/null | awk '/PROGRAM TOTALS/ { gsub(",", "", $1); print $1 }')
        rm -f "$out"
        if [ -z "$total" ]; then
            echo "callgrind counted nothing for: ${*:2} (run it under valgrind by hand to see why)" >&2
            return 1
        fi
        echo "$total"
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

# ---------------------------------------------------------------------------------------------
# simulator: h2load (4 connections x 100 streams, TLS, 256-byte JSON bodies, token auth) against
# apns-simulator and against nghttpd serving the same path, alternating, ROUNDS times; then aioapns
# against the simulator, to show the simulator outruns a real client by far. The simulator runs at its
# default threads (one per core), nghttpd at its own (one); SIMULATOR_THREADS=N pins the simulator.
bench_simulator() {
    local rounds="${ROUNDS:-3}" requests="${REQUESTS:-200000}" aioapns_count="${AIOAPNS_COUNT:-5000}"
    local python=/usr/bin/python3
    # Globals (not locals): the EXIT trap runs after this function has returned.
    work="$(mktemp -d)"
    sim_pid=""
    nghttpd_pid=""
    cleanup_simulator() {
        if [ -n "$sim_pid" ]; then kill "$sim_pid" 2>/dev/null || true; wait "$sim_pid" 2>/dev/null || true; fi
        if [ -n "$nghttpd_pid" ]; then kill "$nghttpd_pid" 2>/dev/null || true; wait "$nghttpd_pid" 2>/dev/null || true; fi
        if [ -n "$work" ]; then rm -rf "$work"; fi
    }
    trap cleanup_simulator EXIT

    echo "== building apns-simulator (release)"
    swift_build -c release --product apns-simulator >/dev/null
    local bin; bin="$(swift_build -c release --show-bin-path)/apns-simulator"

    # Key, token and body made for this run only.
    openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$work/AuthKey.p8"
    local team=BENCHTEAM1 kid=BENCHKEY01 topic=com.example.bench
    local device=00fc13adff785122b4ad28809a3420982341241421348097878e577c991de8f0
    local jwt; jwt="$("$python" -c 'import jwt,sys,time; print(jwt.encode({"iss":sys.argv[2],"iat":int(time.time())}, open(sys.argv[1]).read(), algorithm="ES256", headers={"kid":sys.argv[3]}))' "$work/AuthKey.p8" "$team" "$kid")"
    "$python" -c 'import sys; shell="{\"aps\":{\"alert\":\"\"}}"; sys.stdout.write("{\"aps\":{\"alert\":\"" + "x"*(256-len(shell)) + "\"}}")' > "$work/body.json"

    "$bin" --port 0 ${SIMULATOR_THREADS:+--threads "$SIMULATOR_THREADS"} --tls-dir "$work/tls" --token-key "$team:$kid:$work/AuthKey.p8" --device "$device=$topic" \
        --record-limit 0 > "$work/sim.out" &
    sim_pid=$!
    for _ in $(seq 100); do grep -q '^listening on' "$work/sim.out" 2>/dev/null && break; sleep 0.1; done
    local sim_port; sim_port="$(head -1 "$work/sim.out" | sed 's/.*://')"

    # nghttpd serves the same path (an empty file) with the same certificate.
    mkdir -p "$work/htdocs/3/device" && : > "$work/htdocs/3/device/$device"
    local nghttpd_port; nghttpd_port="$("$python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    nghttpd --htdocs="$work/htdocs" "$nghttpd_port" "$work/tls/server-key.pem" "$work/tls/server.pem" >/dev/null 2>&1 &
    nghttpd_pid=$!
    sleep 0.5

    h2load_run() {  # port -> prints "req/s 2xx"
        h2load -n "$requests" -c 4 -m 100 -d "$work/body.json" \
            -H "authorization: bearer $jwt" -H "apns-topic: $topic" -H "apns-push-type: alert" \
            "https://127.0.0.1:$1/3/device/$device" 2>&1 |
            awk '/^finished in/ {rps=$4} /^status codes:/ {ok=$3} END {printf "%s %s\n", rps, ok}'
    }

    echo "== h2load -n $requests -c 4 -m 100, 256-byte bodies, TLS (req/s, higher is better)"
    printf "%-6s %16s %16s %8s\n" round apns-simulator nghttpd ratio
    local sum_sim=0 sum_ref=0
    for round in $(seq "$rounds"); do
        read -r sim_rps sim_ok <<<"$(h2load_run "$sim_port")"
        read -r ref_rps ref_ok <<<"$(h2load_run "$nghttpd_port")"
        [ "$sim_ok" = "$requests" ] || echo "warning: simulator answered $sim_ok/$requests with 2xx"
        [ "$ref_ok" = "$requests" ] || echo "warning: nghttpd answered $ref_ok/$requests with 2xx"
        printf "%-6s %16.0f %16.0f %8.2f\n" "$round" "$sim_rps" "$ref_rps" "$(echo "$sim_rps / $ref_rps" | bc -l)"
        sum_sim="$(echo "$sum_sim + $sim_rps" | bc -l)"
        sum_ref="$(echo "$sum_ref + $ref_rps" | bc -l)"
    done
    printf "%-6s %16.0f %16.0f %8.2f\n" mean "$(echo "$sum_sim / $rounds" | bc -l)" "$(echo "$sum_ref / $rounds" | bc -l)" \
        "$(echo "$sum_sim / $sum_ref" | bc -l)"

    echo "== aioapns (Python, token auth, 4 connections) against apns-simulator"
    "$python" Benchmarks/aioapns_send.py "$sim_port" "$work/tls/ca.pem" "$work/AuthKey.p8" "$kid" "$team" "$topic" \
        "$device" "$aioapns_count" 4
}

# ---------------------------------------------------------------------------------------------
# The APNs client against nghttpd with 4 connections x 100 streams, next to h2load against the same
# nghttpd with the same connections, streams and body. Certificates are made here, in a temp dir.
bench_apns_client() {
    local count="${APNS_BENCH_COUNT:-100000}"
    swift_build -c release --product APNsClientBenchmark
    # Globals and an EXIT trap: the server is stopped and the folder removed however the run ends.
    dir="$(mktemp -d)"
    pid=""
    trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi; rm -rf "$dir"' EXIT
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/ca.key" -out "$dir/ca.pem" \
        -days 1 -subj "/CN=bench CA" 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$dir/server.key" -out "$dir/server.csr" \
        -subj "/CN=localhost" 2>/dev/null
    printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\n' > "$dir/ext"
    openssl x509 -req -in "$dir/server.csr" -CA "$dir/ca.pem" -CAkey "$dir/ca.key" -CAcreateserial \
        -out "$dir/server.pem" -days 1 -extfile "$dir/ext" 2>/dev/null
    local token=00aa11bb22cc33dd44ee55ff66778899aabbccddeeff00112233445566778899
    mkdir -p "$dir/doc/3/device"
    printf '{}' > "$dir/doc/3/device/$token"
    printf '{"aps":{"alert":"benchmark"}}' > "$dir/body.json"
    local port
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
    nghttpd -m 100 -d "$dir/doc" "$port" "$dir/server.key" "$dir/server.pem" >/dev/null 2>&1 &
    pid=$!
    for _ in $(seq 100); do python3 -c "import socket,sys; socket.create_connection((\"127.0.0.1\", $port))" 2>/dev/null && break; sleep 0.05; done
    echo "h2load (reference), nghttpd -m 100, $count POSTs, 4 connections x 100 streams:"
    h2load -n "$count" -c 4 -m 100 -d "$dir/body.json" -H "apns-topic: com.example.app" \
        "https://127.0.0.1:$port/3/device/$token" | grep -E "^finished in|requests:|status codes:|time for request:"
    echo "apns-client, same nghttpd, same load:"
    /usr/bin/time -f "  wall %e s, max RSS %M KiB (time)" .build/release/APNsClientBenchmark \
        --host 127.0.0.1 --port "$port" --ca-file "$dir/ca.pem" --token "$token" --count "$count" \
        --connections 4 --streams 100
}

# The APNs client against the simulator (release, token auth), next to aioapns against the same
# simulator with the same number of connections.
bench_apns_client_aioapns() {
    local count="${APNS_BENCH_COUNT:-20000}"
    swift_build -c release --product APNsClientBenchmark
    swift_build -c release --product apns-simulator
    # Globals and an EXIT trap: the server is stopped and the folder removed however the run ends.
    dir="$(mktemp -d)"
    pid=""
    trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi; rm -rf "$dir"' EXIT
    openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$dir/AuthKey.p8"
    local token=00aa11bb22cc33dd44ee55ff66778899aabbccddeeff00112233445566778899
    .build/release/apns-simulator --port 0 --tls-dir "$dir/tls" --token-key "TEAM123456:KEY1234567:$dir/AuthKey.p8" \
        --accept-any-device --threads 1 > "$dir/simulator.out" 2>&1 &
    pid=$!
    local port=""
    for _ in $(seq 200); do
        port="$(sed -n 's/^listening on .*:\([0-9]*\)$/\1/p' "$dir/simulator.out")"
        [ -n "$port" ] && break
        sleep 0.05
    done
    echo "apns-client against the simulator (1 thread), $count notifications, 4 connections x 100 streams:"
    .build/release/APNsClientBenchmark --host localhost --port "$port" --ca-file "$dir/tls/ca.pem" --token "$token" \
        --count "$count" --connections 4 --streams 100 --key-file "$dir/AuthKey.p8"
    echo "aioapns (reference) against the same simulator, 4 connections:"
    /usr/bin/python3 Benchmarks/aioapns_send.py "$port" "$dir/tls/ca.pem" "$dir/AuthKey.p8" KEY1234567 TEAM123456 \
        com.example.app "$token" "$count" 4
}

# The worker end to end: a backlog in the mock cluster drained by the real worker (4 connections to the
# simulator), next to the same pipeline with an instant APNs. WORKER_BENCH_EVENTS, _ROUNDS,
# _MAX_IN_FLIGHT, _MODES, _PERF (a directory: profile each worker with perf record) tune it.
bench_worker() {
    swift_build -c release --product WorkerBenchmark
    "$(swift_build -c release --show-bin-path)/WorkerBenchmark"
}

# Span export's cost: the worker's drain with tracing off, on with every span sampled, and on at a
# 5 % sample (posted to scripts/otlp-receiver.py --discard, a sink that answers without decoding),
# alternated off, 1, 0.05, 0.05, 1, off in one run. CPU per event is the measured worker's own
# (user + sys over the results). TRACING_BENCH_EVENTS (100,000) sets the backlog.
bench_tracing() {
    swift_build -c release --product WorkerBenchmark
    local bin venv=.build/peers/venv/bin/python log
    bin="$(swift_build -c release --show-bin-path)/WorkerBenchmark"
    [ -x "$venv" ] || scripts/peers.sh
    log=$(mktemp)
    $venv scripts/otlp-receiver.py --port 0 --discard > "$log" 2>&1 &
    local receiver=$!
    # shellcheck disable=SC2064 # the pid and file now
    trap "kill $receiver 2>/dev/null; rm -f $log" RETURN
    local port=""
    for _ in $(seq 100); do
        port=$(sed -n 's/^listening //p' "$log")
        [ -n "$port" ] && break
        sleep 0.1
    done
    [ -n "$port" ] || { echo "the OTLP sink did not start: $(cat "$log")" >&2; return 1; }
    local events=${TRACING_BENCH_EVENTS:-100000}
    for sample in off 1 0.05 0.05 1 off; do
        local tracing=()
        [ "$sample" != off ] && tracing=(APNS_WORKER_TRACING_ENDPOINT="http://127.0.0.1:$port"
            APNS_WORKER_TRACING_SAMPLE_RATIO="$sample")
        env "${tracing[@]}" WORKER_BENCH_MODES=worker WORKER_BENCH_EVENTS="$events" "$bin" \
            | sed -n 's/^json //p' \
            | "$PYTHON" -c 'import json, sys
for line in sys.stdin:
    run = json.loads(line)
    print("tracing %-4s: %6.0f events/s, worker CPU %6.1f us/event, peak RSS %4.0f MiB" % (sys.argv[1], run["rate"], run["cpuSeconds"] / run["results"] * 1e6, run["peakRSSKiB"] / 1024))' "$sample"
    done
}

case "${1:-all}" in
    kafka) bench_kafka ;;
    worker) bench_worker ;;
    tracing) bench_tracing ;;
    jsonschema) bench_jsonschema ;;
    jsonschema-instructions) bench_jsonschema_instructions ;;
    simulator) bench_simulator ;;
    apns-client) bench_apns_client ;;
    apns-client-aioapns) bench_apns_client_aioapns ;;
    all) bench_kafka; bench_worker; bench_jsonschema; bench_simulator; bench_apns_client; bench_apns_client_aioapns ;;
    *) usage "$1" ;;
esac
