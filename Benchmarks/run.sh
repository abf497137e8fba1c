#!/usr/bin/env bash
# Benchmarks: release builds, figures printed next to a reference tool's in the same run.
#   Benchmarks/run.sh simulator     h2load against apns-simulator and against nghttpd, side by side
# Each benchmark is one self-contained function below; add yours as another function + case.
set -euo pipefail
cd "$(dirname "$0")/.."

# ---------------------------------------------------------------------------------------------
# simulator: h2load (4 connections x 100 streams, TLS, 256-byte JSON bodies, token auth) against
# apns-simulator and against nghttpd serving the same path, alternating, ROUNDS times; then aioapns
# against the simulator, to show the simulator outruns a real client by far.
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
    swift build -c release --product apns-simulator >/dev/null
    local bin; bin="$(swift build -c release --show-bin-path)/apns-simulator"

    # Key, token and body made for this run only.
    openssl ecparam -name prime256v1 -genkey -noout 2>/dev/null | openssl pkcs8 -topk8 -nocrypt -out "$work/AuthKey.p8"
    local team=BENCHTEAM1 kid=BENCHKEY01 topic=com.example.bench
    local device=00fc13adff785122b4ad28809a3420982341241421348097878e577c991de8f0
    local jwt; jwt="$("$python" -c 'import jwt,sys,time; print(jwt.encode({"iss":sys.argv[2],"iat":int(time.time())}, open(sys.argv[1]).read(), algorithm="ES256", headers={"kid":sys.argv[3]}))' "$work/AuthKey.p8" "$team" "$kid")"
    "$python" -c 'import sys; shell="{\"aps\":{\"alert\":\"\"}}"; sys.stdout.write("{\"aps\":{\"alert\":\"" + "x"*(256-len(shell)) + "\"}}")' > "$work/body.json"

    "$bin" --port 0 --tls-dir "$work/tls" --token-key "$team:$kid:$work/AuthKey.p8" --device "$device=$topic" \
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

case "${1:-}" in
    simulator) bench_simulator ;;
    *)
        echo "usage: $0 BENCH   (BENCH: simulator)" >&2
        exit 2
        ;;
esac
