#!/usr/bin/env bash
# Runs benchmarks in release builds and prints their figures next to a reference tool's, measured in
# the same run on the same machine. Usage: Benchmarks/run.sh [kafka|apns-client|apns-simulator|all]
set -euo pipefail
cd "$(dirname "$0")/.."

bench_kafka() {
    swift build -c release --product KafkaBenchmark
    .build/release/KafkaBenchmark
}

# The APNs client against nghttpd with 4 connections x 100 streams, next to h2load against the same
# nghttpd with the same connections, streams and body. Certificates are made here, in a temp dir.
bench_apns_client() {
    local count="${APNS_BENCH_COUNT:-100000}"
    swift build -c release --product APNsClientBenchmark
    local dir
    dir="$(mktemp -d)"
    local pid=""
    trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' RETURN
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
bench_apns_simulator() {
    local count="${APNS_BENCH_COUNT:-20000}"
    swift build -c release --product APNsClientBenchmark
    swift build -c release --product apns-simulator
    local dir
    dir="$(mktemp -d)"
    local pid=""
    trap '[ -n "$pid" ] && kill "$pid" 2>/dev/null; rm -rf "$dir"' RETURN
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
        com.example.app "$token" "$count" 4 2>&1 | grep -v "Pool is busy"
}

case "${1:-all}" in
    kafka) bench_kafka ;;
    apns-client) bench_apns_client ;;
    apns-simulator) bench_apns_simulator ;;
    all) bench_kafka; bench_apns_client; bench_apns_simulator ;;
    *) echo "unknown benchmark: $1 (kafka, apns-client, apns-simulator, all)" >&2; exit 2 ;;
esac
