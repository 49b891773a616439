#!/usr/bin/env bash
# End-to-end produce latency through `skiff serve`: --upload-mode parallel vs sequential, side
# by side in one run, against ../shared/tools/s3-test-server behind s3-fault-proxy holding
# every S3 response for DELAY ms (one simulated round trip).
#
#   tools/bench-broker.sh [DELAY_MS=20] [--messages N] [--size BYTES] [--cores N]
#
# Uses build/src/cli/skiff (this script builds nothing) and Debian's python3-confluent-kafka.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
delay=${1:-20}
shift || true
export BENCH_DELAY_MS=$delay
exec "$repo/test/integration/with-s3.sh" bash -c '
  curl -sf -X POST "$S3_PROXY_ENDPOINT/__proxy/config?delay-ms='"$delay"'" >/dev/null
  /usr/bin/python3 "'"$repo"'/tools/bench_broker.py" --skiff "'"$repo"'/build/src/cli/skiff" "$@"
' bench "$@"
