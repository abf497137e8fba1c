#!/usr/bin/env bash
# Runs benchmarks in release builds and prints their figures next to a reference tool's, measured in
# the same run on the same machine. Usage: Benchmarks/run.sh [kafka|all]
set -euo pipefail
cd "$(dirname "$0")/.."

bench_kafka() {
    swift build -c release --product KafkaBenchmark
    .build/release/KafkaBenchmark
}

case "${1:-all}" in
    kafka) bench_kafka ;;
    all) bench_kafka ;;
    *) echo "unknown benchmark: $1 (kafka, all)" >&2; exit 2 ;;
esac
