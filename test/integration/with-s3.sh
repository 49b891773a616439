#!/usr/bin/env bash
# Runs a command with a real S3 peer on 127.0.0.1: ../shared/tools/s3-test-server (moto that
# verifies SigV4) and ../shared/tools/s3-fault-proxy in front of it. Exports
#   S3_ENDPOINT, S3_BUCKET, AWS_*            (from s3-test-server)
#   S3_PROXY_ENDPOINT                        (the fault proxy, upstream = the server)
# and stops both afterwards. A missing tool is a failure, never a skip.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
shared=${SKIFF_SHARED_DIR:-$here/../../../shared}
server=$shared/tools/s3-test-server
proxy=$shared/tools/s3-fault-proxy
for t in "$server" "$proxy"; do
  if [[ ! -x "$t" ]]; then
    echo "with-s3: $t not found (set SKIFF_SHARED_DIR to the shared/ folder)" >&2
    exit 1
  fi
done

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'
}

workdir=$(mktemp -d)
export S3_TEST_SERVER_DIR=$workdir
port=$(free_port)
proxy_pid=""
cleanup() {
  [[ -n "$proxy_pid" ]] && kill "$proxy_pid" 2>/dev/null || true
  "$server" stop "$port" >/dev/null 2>&1 || true
  rm -rf "$workdir"
}
trap cleanup EXIT

eval "$("$server" start "$port" "${S3_TEST_BUCKET:-skiff-test}")"

"$proxy" --listen 127.0.0.1:0 --port-file "$workdir/proxy.port" --upstream "127.0.0.1:$port" \
  --hang-s 30 --seed 7 2>"$workdir/proxy.log" &
proxy_pid=$!
for _ in $(seq 1 100); do
  [[ -s "$workdir/proxy.port" ]] && break
  sleep 0.05
done
if [[ ! -s "$workdir/proxy.port" ]]; then
  echo "with-s3: the fault proxy did not start" >&2
  cat "$workdir/proxy.log" >&2
  exit 1
fi
export S3_PROXY_ENDPOINT="http://127.0.0.1:$(cat "$workdir/proxy.port")"

set +e
"$@"
rc=$?
set -e
if [[ $rc -ne 0 ]]; then
  echo "with-s3: '$*' failed ($rc); server log tail:" >&2
  tail -n 30 "$workdir/s3-test-server-$port.log" >&2 2>/dev/null || true
fi
exit $rc
