#!/usr/bin/env bash
# Produce under S3 back-pressure: 0% vs 30% of PUTs answered SlowDown, in one run
# (tools/bench_slowdown.py), against ../shared/tools/s3-test-server behind s3-fault-proxy.
#
#   tools/bench-slowdown.sh [--rates 0,0.3] [--producers 4] [--seconds 20] [--max-buffered-mb 64]
#
# Uses build/src/cli/skiff (this script builds nothing).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
exec "$repo/test/integration/with-s3.sh" /usr/bin/python3 "$repo/tools/bench_slowdown.py" \
  --skiff "$repo/build/src/cli/skiff" "$@"
