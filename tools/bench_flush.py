#!/usr/bin/python3
"""The storage floor against acks=all latency through `skiff serve` (docs/flush-scheduling.md).

In one run, for each simulated S3 round trip (s3-fault-proxy --delay-ms), rounds alternate:
  floor     skiff-bench-s3 --ops pair: a 1 KiB object and a 64-byte one PUT together through the
            same proxy and S3, timed as one (signing included: tens of microseconds)
  adaptive  one confluent-kafka producer, acks=all, one 1 KiB record at a time, to a broker on
            the default (adaptive) flush schedule
  linger2   the same to a broker with --flush-linger-ms 2 (the old fixed default)
The two brokers get alternate messages, so both see the same machine noise.

Run through tools/bench-flush.sh, which starts the S3 server and the proxy.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from confluent_kafka import Producer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ab import Broker  # noqa: E402  (one copy of the broker runner)


def proxy_delay(ms):
    url = os.environ["S3_PROXY_ENDPOINT"] + f"/__proxy/config?delay-ms={ms}"
    urllib.request.urlopen(urllib.request.Request(url, method="POST"), timeout=10).read()


def floor(bench_s3, n):
    env = dict(os.environ, S3_ENDPOINT=os.environ["S3_PROXY_ENDPOINT"])
    out = subprocess.run([bench_s3, "--ops", "pair", "--sizes", "1K", "--concurrency", "1", "--requests", str(n),
                          "--prefix", f"floor-{time.monotonic_ns()}", "--json", "--raw"],
                         capture_output=True, text=True, env=env, timeout=600)
    if out.returncode != 0:
        raise RuntimeError(f"skiff-bench-s3 failed: {out.stderr[-500:]}")
    lines = [json.loads(x) for x in out.stdout.splitlines() if x.startswith("{")]
    return lines[-1]["latency_ms"]


def pct(v, p):
    s = sorted(v)
    return s[min(len(s) - 1, int(p * (len(s) - 1) + 0.5))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skiff", required=True)
    ap.add_argument("--bench-s3", required=True)
    ap.add_argument("--delays", default="5,40")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--per-round", type=int, default=40)
    args = ap.parse_args()
    bucket = os.environ["S3_BUCKET"]
    endpoint = os.environ["S3_PROXY_ENDPOINT"]
    logdir = tempfile.mkdtemp(prefix="bench-flush-")
    run = str(int(time.time()))
    brokers = {}
    try:
        for name, extra in (("adaptive", []), ("linger2", ["--flush-linger-ms", "2"])):
            brokers[name] = Broker(f"flush-{name}", args.skiff, logdir,
                                   ["--s3-bucket", bucket, "--s3-endpoint", endpoint, "--s3-path-style",
                                    "--namespace", f"flush-{name}-{run}"] + extra)
            brokers[name].create_topic("bench")
        producers = {name: Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0,
                                     "enable.idempotence": False, "max.in.flight": 1, "log_level": 3})
                     for name, b in brokers.items()}
        payload = os.urandom(512).hex().encode()
        print("| S3 round trip | series | n | p50 ms | p99 ms | p50 / floor p50 | p99 / floor p99 |")
        print("|---:|---|---:|---:|---:|---:|---:|")
        for delay in [int(x) for x in args.delays.split(",")]:
            proxy_delay(delay)
            lat = {"floor": [], "adaptive": [], "linger2": []}
            for name, p in producers.items():  # warm the connections at this delay
                p.produce("bench", payload)
                p.flush(30)
            for _ in range(args.rounds):
                lat["floor"] += floor(args.bench_s3, args.per_round)
                for i in range(2 * args.per_round):
                    name = ("adaptive", "linger2")[i % 2]
                    p = producers[name]
                    got = []
                    sent = time.perf_counter()
                    p.produce("bench", payload, on_delivery=lambda err, m: got.append((err, time.perf_counter())))
                    p.flush(30)  # blocks in librdkafka until the delivery report is served
                    if not got:
                        raise RuntimeError(f"{name}: no delivery report within 30 s")
                    err, at = got[0]
                    if err is not None:
                        raise RuntimeError(f"{name}: delivery failed: {err}")
                    lat[name].append((at - sent) * 1000)
            f50, f99 = pct(lat["floor"], 0.5), pct(lat["floor"], 0.99)
            for name in ("floor", "adaptive", "linger2"):
                v = lat[name]
                print(f"| {delay} ms | {name} | {len(v)} | {pct(v, 0.5):.2f} | {pct(v, 0.99):.2f} | "
                      f"{pct(v, 0.5) / f50:.3f} | {pct(v, 0.99) / f99:.3f} |", flush=True)
    finally:
        for b in brokers.values():
            b.stop()


if __name__ == "__main__":
    main()
