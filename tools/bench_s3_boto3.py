#!/usr/bin/env python3
"""boto3 counterpart of skiff-bench-s3: the same cells, keys and JSON lines.

For every cell (op, size, concurrency) a boto3 client is created first (not timed), then
`concurrency` threads of a ThreadPoolExecutor share a request counter and loop until the
cell's requests are done. Latency is per request (perf_counter); CPU is getrusage(RUSAGE_SELF)
user+sys around the cell, which covers every thread of the process. With --server-pid the
server process's CPU over the cell is reported too (/proc/PID/stat).

Keys are PREFIX/<size in bytes>/<i>, as in skiff-bench-s3, so GET cells read what the PUT cells
(of either tool) wrote. Needs a python3 with boto3; credentials and region come from the
usual AWS environment variables. Exit status 1 when any request failed, 2 on bad usage.
"""
import argparse
import itertools
import json
import math
import os
import random
import resource
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import boto3
import botocore.config


def parse_size(s):
    s = s.strip().upper()
    digits = len(s) - len(s.lstrip("0123456789"))
    if digits == 0:
        raise argparse.ArgumentTypeError(f"bad size '{s}'")
    n, unit = int(s[:digits]), s[digits:]
    mult = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20,
            "MIB": 1 << 20, "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}.get(unit)
    if mult is None or n == 0:
        raise argparse.ArgumentTypeError(f"bad size '{s}'")
    return n * mult


def size_label(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20}M"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10}K"
    return str(n)


def requests_for(args, size):
    if args.requests:
        return args.requests
    return max(args.min_requests, min(args.max_requests, args.byte_budget // size))


def cpu_self():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime, ru.ru_stime


def cpu_of(pid):
    """utime + stime of a process (all threads) in seconds, or None."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except OSError:
        return None
    fields = stat[stat.rfind(")") + 1:].split()  # fields[0] is field 3 (state)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def percentile(sorted_vals, p):
    if not sorted_vals:
        return 0.0
    rank = min(max(math.ceil(p * len(sorted_vals)), 1), len(sorted_vals))
    return sorted_vals[rank - 1]  # nearest rank, as in skiff-bench-s3


def make_client(args, conc):
    kw = {}
    if args.checksums == "when_required":  # no CRC32 on PUT, no x-amz-checksum-mode on GET
        kw = {"request_checksum_calculation": "when_required", "response_checksum_validation": "when_required"}
    cfg = botocore.config.Config(max_pool_connections=conc, s3={"addressing_style": "path"}, **kw)
    session = boto3.session.Session()
    return session.client("s3", endpoint_url=args.endpoint, region_name=args.region, config=cfg)


def run_cell(args, op, size, conc, payload):
    n = requests_for(args, size)
    client = make_client(args, conc)
    body = payload[:size]
    latency_ms = [0.0] * n
    counter = itertools.count()  # next() on it is atomic under the GIL
    errors = []
    retries = [0]
    lock = threading.Lock()

    def worker():
        while True:
            i = next(counter)
            if i >= n:
                return
            key = f"{args.prefix}/{size}/{i}"
            t0 = time.perf_counter()
            try:
                if op == "put":
                    resp = client.put_object(Bucket=args.bucket, Key=key, Body=body)
                else:
                    resp = client.get_object(Bucket=args.bucket, Key=key)
                    got = resp["Body"].read()
                    if len(got) != size:
                        raise RuntimeError(f"{len(got)} bytes, expected {size}")
                attempts = resp["ResponseMetadata"].get("RetryAttempts", 0)
                if attempts:
                    with lock:
                        retries[0] += attempts
            except Exception as e:  # noqa: BLE001 - every failure is counted and reported
                with lock:
                    errors.append(f"{op.upper()} {key}: {e!r}")
            latency_ms[i] = (time.perf_counter() - t0) * 1000.0

    with ThreadPoolExecutor(max_workers=conc) as pool:
        server0 = cpu_of(args.server_pid)
        u0, s0 = cpu_self()
        t0 = time.perf_counter()
        futures = [pool.submit(worker) for _ in range(conc)]
        for f in futures:
            f.result()
        wall = time.perf_counter() - t0
        u1, s1 = cpu_self()
        server1 = cpu_of(args.server_pid)

    lat = sorted(latency_ms)
    user, sys_ = u1 - u0, s1 - s0
    cpu = user + sys_
    j = {
        "tool": "boto3" if args.checksums == "default" else "boto3-nocrc", "op": op, "size": size_label(size), "size_bytes": size, "concurrency": conc,
        "requests": n, "errors": len(errors), "retries": retries[0], "wall_s": wall,
        "p50_ms": percentile(lat, 0.50), "p99_ms": percentile(lat, 0.99), "mean_ms": sum(lat) / n,
        "max_ms": lat[-1], "req_per_s": n / wall, "mib_per_s": n * size / wall / (1 << 20),
        "cpu_s": cpu, "user_s": user, "sys_s": sys_, "cpu_us_per_req": cpu / n * 1e6, "cpu_util": cpu / wall,
    }
    if server0 is not None and server1 is not None:
        j["server_cpu_s"] = server1 - server0
        j["server_cpu_us_per_req"] = (server1 - server0) / n * 1e6
        j["server_cpu_util"] = (server1 - server0) / wall
    if errors:
        j["first_error"] = errors[0]
    return j


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--endpoint", default=os.environ.get("S3_ENDPOINT"))
    ap.add_argument("--bucket", default=os.environ.get("S3_BUCKET"))
    ap.add_argument("--region", default=os.environ.get("AWS_REGION") or "us-east-1")
    ap.add_argument("--sizes", default="1K,64K,1M,8M")
    ap.add_argument("--concurrency", default="1,8,64")
    ap.add_argument("--ops", default="put,get")
    ap.add_argument("--requests", type=int, default=0, help="requests per cell (overrides the next three)")
    ap.add_argument("--byte-budget", type=parse_size, default=256 << 20)
    ap.add_argument("--max-requests", type=int, default=200)
    ap.add_argument("--min-requests", type=int, default=16)
    ap.add_argument("--prefix", default="bench")
    ap.add_argument("--server-pid", type=int, default=0)
    ap.add_argument("--checksums", choices=("default", "when_required"), default="default",
                    help="boto3's flexible checksums: its defaults (CRC32 sent on PUT and checked on GET) "
                         "or only when an operation requires them")
    ap.add_argument("--json", action="store_true", help="one JSON line per cell (default: a readable line)")
    args = ap.parse_args()
    if not args.endpoint or not args.bucket:
        ap.error("--endpoint and --bucket are needed (or S3_ENDPOINT, S3_BUCKET)")
    try:
        sizes = [parse_size(s) for s in args.sizes.split(",") if s]
        concs = [int(c) for c in args.concurrency.split(",") if c]
    except (ValueError, argparse.ArgumentTypeError) as e:
        ap.error(str(e))
    ops = [o for o in args.ops.split(",") if o]
    if not sizes or not concs or not ops or any(o not in ("put", "get") for o in ops) or min(concs) < 1:
        ap.error("bad --sizes, --concurrency or --ops")

    payload = random.Random(1).randbytes(max(sizes))

    # One untimed request with a throwaway client: imports and lazy loading are warm.
    make_client(args, 1).put_object(Bucket=args.bucket, Key=f"{args.prefix}/warmup", Body=b"")

    total_errors = 0
    for op in ops:
        for size in sizes:
            for conc in concs:
                j = run_cell(args, op, size, conc, payload)
                total_errors += j["errors"]
                if args.json:
                    print(json.dumps(j), flush=True)
                else:
                    print(f"{op:<3} {j['size']:>5} c={conc:<3} n={j['requests']:<4} p50 {j['p50_ms']:8.2f} ms  "
                          f"p99 {j['p99_ms']:8.2f} ms  {j['req_per_s']:8.1f} req/s  {j['mib_per_s']:8.2f} MiB/s  "
                          f"cpu {j['cpu_us_per_req']:7.1f} us/req" + (f"  ERRORS {j['errors']}" if j["errors"] else ""),
                          flush=True)
                if j["errors"]:
                    print(f"bench_s3_boto3: {op}/{j['size']}/c{conc}: {j['errors']} errors, first: {j['first_error']}",
                          file=sys.stderr)
    return 1 if total_errors else 0


if __name__ == "__main__":
    sys.exit(main())
