#!/usr/bin/env bash
# Objects per partition per day at 1 MB/s with and without segment merging (two brokers side
# by side on local data directories). See tools/bench_merge.py.
#   tools/bench-merge.sh [--seconds 120] [--rate 1000000] [--skiff PATH]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
exec /usr/bin/python3 "$repo/tools/bench_merge.py" "$@"
