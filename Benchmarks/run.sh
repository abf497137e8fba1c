#!/usr/bin/env bash
# Runs benchmarks in release builds and prints their figures next to a reference tool's, measured in
# the same run on the same machine. Usage: Benchmarks/run.sh [kafka|apns-client|all]
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

case "${1:-all}" in
    kafka) bench_kafka ;;
    apns-client) bench_apns_client ;;
    all) bench_kafka; bench_apns_client ;;
    *) echo "unknown benchmark: $1 (kafka, apns-client, all)" >&2; exit 2 ;;
esac
