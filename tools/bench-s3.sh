#!/usr/bin/env bash
# S3 client benchmark, skiff vs boto3, against the local S3 test server (moto).
#
#   tools/bench-s3.sh [PATH/TO/skiff-bench-s3] [options]
#   tools/bench-s3.sh --table FILE        print the table of an earlier run's JSON lines
#
# PATH defaults to build/tools/skiff-bench-s3 (this script builds nothing). Options:
#   --sizes LIST         default 1K,64K,1M,8M
#   --concurrency LIST   default 1,8,64
#   --ops LIST           default put,get (GET cells read what the PUT cells wrote)
#   --out FILE           keep the raw JSON lines there (default: a temporary file, path printed)
#   --boto3-checksums when_required   boto3 without its default CRC32 (sent on PUT, checked on GET)
#   anything else (--byte-budget, --max-requests, --min-requests, --requests) goes to both tools.
# Environment: SKIFF_SHARED_DIR (default: ../shared next to the repository), S3_BENCH_PYTHON
# (a python3 with boto3; default: python3 on PATH).
#
# Starts ../shared/tools/s3-test-server on a free port, then for every cell (op, size,
# concurrency) runs the skiff cell and right after it the same boto3 cell, so both see the same
# server conditions. Both tools also report the server process's CPU over each cell, and the
# 1-minute load average is sampled before every cell (the machine may be shared). Prints the
# machine, the versions and a markdown table; exit status 1 if any request failed.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
shared=${SKIFF_SHARED_DIR:-$repo/../shared}
server=$shared/tools/s3-test-server
py=${S3_BENCH_PYTHON:-python3}

# The table: one row per cell, skiff next to the other tool, from the JSON lines in $1.
render() {
  "$py" - "$1" <<'PYEOF'
import json, os, platform, subprocess, sys
import boto3, botocore
rows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
meta = next((r for r in rows if r.get("tool") == "meta" and "date" in r), {})
loads = [r["load1"] for r in rows if r.get("tool") == "meta" and "load1" in r]
rows = [r for r in rows if r.get("tool") != "meta"]
cells, order = {}, []
for r in rows:
    k = (r["op"], r["size"], r["concurrency"])
    if k not in cells:
        cells[k] = {}
        order.append(k)
    cells[k]["skiff" if r["tool"] == "skiff" else "other"] = r
B = next((r["tool"] for r in rows if r["tool"] != "skiff"), "boto3")
model = next((l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name")), "?")
try:
    moto_v = __import__("moto").__version__
except Exception:  # noqa: BLE001
    moto_v = "?"
curl_v = subprocess.run(["curl-config", "--version"], capture_output=True, text=True).stdout.strip() or "?"
print(f"- date: {meta.get('date', '?')}")
print(f"- machine: {os.cpu_count()} CPUs ({model}), Linux {platform.release()}")
if loads:
    print(f"- 1-min load average before the cells: min {min(loads):.1f}, mean {sum(loads) / len(loads):.1f}, "
          f"max {max(loads):.1f}")
print(f"- skiff: {meta.get('bench', '?')} ({curl_v}); boto3 {boto3.__version__}, botocore "
      f"{botocore.__version__}, Python {platform.python_version()}{'' if B == 'boto3' else f' (as {B})'}; "
      f"server: moto {moto_v} (s3-test-server)")
print()
print(f"| op | size | conc | n | skiff p50/p99 ms | {B} p50/p99 ms | skiff MiB/s (req/s) | {B} MiB/s (req/s) "
      f"| skiff CPU µs/req | {B} CPU µs/req | CPU ratio {B}/skiff | moto CPU ms/req (util %) skiff / {B} cell |")
print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
def lat(r):
    return f"{r['p50_ms']:.1f} / {r['p99_ms']:.1f}" if r else "-"
def thr(r):
    if not r:
        return "-"
    m = r["mib_per_s"]
    return f"{m:.1f} ({r['req_per_s']:.0f})" if m >= 1 else f"{m:.2f} ({r['req_per_s']:.0f})"
def cpu(r):
    return f"{r['cpu_us_per_req']:.0f}" if r else "-"
def srv(r):
    if not r or "server_cpu_util" not in r:
        return "-"
    return f"{r['server_cpu_us_per_req'] / 1000:.1f} ({100 * r['server_cpu_util']:.0f}%)"
errors = 0
for k in order:
    s, b = cells[k].get("skiff"), cells[k].get("other")
    errors += sum(r["errors"] for r in (s, b) if r)
    ratio = f"{b['cpu_us_per_req'] / s['cpu_us_per_req']:.1f}×" if s and b and s["cpu_us_per_req"] > 0 else "-"
    n = (s or b)["requests"]
    print(f"| {k[0]} | {k[1]} | {k[2]} | {n} | {lat(s)} | {lat(b)} | {thr(s)} | {thr(b)} | {cpu(s)} | {cpu(b)} "
          f"| {ratio} | {srv(s)} / {srv(b)} |")
print()
retries = {t: sum(r["retries"] for r in rows if r["tool"] == t) for t in ("skiff", B)}
print(f"Failed requests: {errors}; retries: skiff {retries['skiff']}, {B} {retries[B]}.")
PYEOF
}

bench=$repo/build/tools/skiff-bench-s3
if [[ $# -gt 0 && $1 != -* ]]; then
  bench=$1
  shift
fi
sizes=1K,64K,1M,8M
concs=1,8,64
ops=put,get
out=""
boto3_extra=()
extra=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --sizes) sizes=$2; shift 2 ;;
    --concurrency) concs=$2; shift 2 ;;
    --ops) ops=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --boto3-checksums) boto3_extra=(--checksums "$2"); shift 2 ;;
    --table) render "$2"; exit 0 ;;
    -h|--help) awk 'NR > 1 && /^#/ { sub(/^# ?/, ""); print; next } NR > 1 { exit }' "$0"; exit 0 ;;
    *) [[ $# -ge 2 ]] || { echo "bench-s3: $1 needs a value" >&2; exit 2; }
       extra+=("$1" "$2"); shift 2 ;;
  esac
done

if [[ ! -x $bench ]]; then
  echo "bench-s3: $bench not found; build it: ninja -C build tools/skiff-bench-s3" >&2
  exit 1
fi
if [[ ! -x $server ]]; then
  echo "bench-s3: $server not found (set SKIFF_SHARED_DIR to the shared/ folder)" >&2
  exit 1
fi
if ! "$py" -c 'import boto3' 2>/dev/null; then
  echo "bench-s3: '$py' has no boto3; set S3_BENCH_PYTHON to a python3 that has it" >&2
  exit 1
fi

workdir=$(mktemp -d)
export S3_TEST_SERVER_DIR=$workdir
port=$("$py" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()')
cleanup() {
  "$server" stop "$port" >/dev/null 2>&1 || true
  rm -rf "$workdir"
}
trap cleanup EXIT
eval "$("$server" start "$port" skiff-bench 2>/dev/null)"
[[ -z $out ]] && out=$(mktemp --suffix=.jsonl /tmp/bench-s3.XXXXXX)
printf '{"tool": "meta", "date": "%s", "bench": "%s"}\n' "$(date -u '+%Y-%m-%d %H:%M UTC')" "$bench" >"$out"

echo "bench-s3: server $S3_ENDPOINT (moto pid $S3_TEST_SERVER_PID), raw results in $out" >&2
rc=0
IFS=, read -r -a op_list <<<"$ops"
IFS=, read -r -a size_list <<<"$sizes"
IFS=, read -r -a conc_list <<<"$concs"
for op in "${op_list[@]}"; do
  for size in "${size_list[@]}"; do
    for conc in "${conc_list[@]}"; do
      cell=(--ops "$op" --sizes "$size" --concurrency "$conc" --json --server-pid "$S3_TEST_SERVER_PID" "${extra[@]}")
      echo "bench-s3: $op $size c=$conc" >&2
      printf '{"tool": "meta", "load1": %s}\n' "$(cut -d' ' -f1 /proc/loadavg)" >>"$out"
      "$bench" "${cell[@]}" >>"$out" || rc=1
      "$py" "$repo/tools/bench_s3_boto3.py" "${cell[@]}" "${boto3_extra[@]}" >>"$out" || rc=1
    done
  done
done

render "$out"
exit $rc
