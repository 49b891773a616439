#!/usr/bin/env bash
# Time from `skiff serve` start to serving a partition of N segments at DELAY ms per S3 request
# (s3-test-server behind s3-fault-proxy), without and with its partition manifest.
#   tools/bench-restore.sh [DELAY_MS] [--segments N] [--rounds R] [--skiff PATH]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
delay=${1:-40}
shift || true
export BENCH_DELAY_MS=$delay
exec "$repo/test/integration/with-s3.sh" /usr/bin/python3 "$repo/tools/bench_restore.py" "$@"
