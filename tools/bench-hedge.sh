#!/usr/bin/env bash
# acks=all p50/p99 with 1% of S3 requests stalled for 2 s, hedging on vs off, side by side in
# one run (tools/bench_hedge.py), against ../shared/tools/s3-test-server behind s3-fault-proxy.
#
#   tools/bench-hedge.sh [--delay-ms 40] [--stall-rate 0.01] [--hang-s 2] [--messages N]
#
# Uses build/src/cli/skiff (this script builds nothing).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
exec "$repo/test/integration/with-s3.sh" /usr/bin/python3 "$repo/tools/bench_hedge.py" \
  --skiff "$repo/build/src/cli/skiff" "$@"
