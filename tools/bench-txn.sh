#!/usr/bin/env bash
# Transactional vs idempotent units of work, side by side in one run (tools/bench_txn.py),
# against ../shared/tools/s3-test-server behind s3-fault-proxy (--delay-ms per request).
#
#   tools/bench-txn.sh [--delay-ms 40] [--units 60] [--records 50] [--partitions 4]
#   SKIFF=/path/to/skiff tools/bench-txn.sh ...   (another binary)
#
# Uses build/src/cli/skiff unless SKIFF names another (this script builds nothing).
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
exec "$repo/test/integration/with-s3.sh" /usr/bin/python3 "$repo/tools/bench_txn.py" \
  --skiff "${SKIFF:-$repo/build/src/cli/skiff}" "$@"
