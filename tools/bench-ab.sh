#!/usr/bin/env bash
# Two skiff binaries side by side in one run (before A, after B): acks=all produce latency at
# DELAY ms per S3 request (s3-test-server behind s3-fault-proxy) and broker CPU per GB produced
# on the local store. Build the 'before' commit beside this one first, for example:
#   git worktree add /tmp/skiff-before <commit> && (cd /tmp/skiff-before && meson setup build && ninja -C build src/cli/skiff)
#   tools/bench-ab.sh /tmp/skiff-before/build/src/cli/skiff build/src/cli/skiff 40 [--rounds 6] [--what latency,cpu]
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
a=$1 b=$2 delay=${3:-40}
shift 3 || shift $#
export BENCH_DELAY_MS=$delay
exec "$repo/test/integration/with-s3.sh" bash -c '
  curl -sf -X POST "$S3_PROXY_ENDPOINT/__proxy/config?delay-ms='"$delay"'" >/dev/null
  /usr/bin/python3 "'"$repo"'/tools/bench_ab.py" --a "'"$a"'" --b "'"$b"'" "$@"
' bench "$@"
