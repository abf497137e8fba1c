#!/bin/sh
# Rules of the source tree that review alone used to keep (`make lint` runs this):
#   - no hand-written Swift file under Sources/ over 450 lines (one reading should hold a file);
#   - librdkafka is called only inside Sources/Kafka/RDKafka/ (rd_kafka_*, RD_KAFKA_*);
#   - the C modules (CRdKafka, CNghttp2, COpenSSL) are imported `internal`, so that the compiler
#     keeps their types out of every package or public declaration.
set -eu
cd "$(dirname "$0")/.."
status=0
limit=450
for file in $(find Sources -name '*.swift' | sort); do
    lines=$(wc -l < "$file")
    if [ "$lines" -gt "$limit" ]; then
        echo "$file: $lines lines (at most $limit: split it by concern)"
        status=1
    fi
done
outside=$(grep -rln 'rd_kafka_\|RD_KAFKA_' Sources --include='*.swift' | grep -v '^Sources/Kafka/RDKafka/' || true)
for file in $outside; do
    echo "$file: calls librdkafka outside Sources/Kafka/RDKafka/ (wrap the call there)"
    status=1
done
plain=$(grep -rn '^\(@_exported \)\?\(public \|package \)\?import \(CRdKafka\|CNghttp2\|COpenSSL\)$' Sources --include='*.swift' || true)
if [ -n "$plain" ]; then
    echo "$plain" | sed 's/$/  (import C modules as `internal import`)/'
    status=1
fi
[ "$status" -eq 0 ] && echo "structure: files within $limit lines, librdkafka inside RDKafka/, C modules imported internal"
exit "$status"
