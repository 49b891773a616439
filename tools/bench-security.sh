#!/usr/bin/env bash
# Produce over SASL_SSL (SCRAM-SHA-512), SSL and PLAINTEXT listeners of one broker, side by side in
# one run: producer MB/s and broker CPU per GB (tools/bench_security.py; needs openssl, and perf
# for --perf-seconds). Copy the binary first if others may rebuild it meanwhile:
#   cp build/src/cli/skiff /tmp/skiff && tools/bench-security.sh /tmp/skiff [--rounds 6] [--perf-seconds 5]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
skiff=${1:-$repo/build/src/cli/skiff}
shift || true
exec /usr/bin/python3 "$repo/tools/bench_security.py" --skiff "$skiff" "$@"
