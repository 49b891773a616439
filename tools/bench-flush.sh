#!/usr/bin/env bash
# The storage floor against acks=all latency through `skiff serve`, adaptive flush schedule vs a
# fixed 2 ms linger, at 5 and 40 ms per S3 request (tools/bench_flush.py), against
# ../shared/tools/s3-test-server behind s3-fault-proxy.
#
#   tools/bench-flush.sh [--delays 5,40] [--rounds N] [--per-round N]
#
# Uses build/src/cli/skiff and build/tools/skiff-bench-s3 (this script builds nothing).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
exec "$repo/test/integration/with-s3.sh" /usr/bin/python3 "$repo/tools/bench_flush.py" \
  --skiff "$repo/build/src/cli/skiff" --bench-s3 "$repo/build/tools/skiff-bench-s3" "$@"
