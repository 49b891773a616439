#!/usr/bin/python3
"""acks=all latency when a few S3 requests stall: hedging on against hedging off (docs/retries.md).

One s3-fault-proxy in front of the S3 test server holds every answer for --delay-ms and lets
--stall-rate of all requests (PUTs and GETs) hang for --hang-s seconds before dropping the
connection. Two brokers use it at once:
  hedged    the default: a segment PUT or GET unanswered after the recent p99 is sent again
  unhedged  --hedge-after-ms off: the stalled request waits for the hang and the S3 client's retry
One confluent-kafka producer per broker, acks=all, one 1 KiB record at a time; the two brokers get
alternate messages, so both see the same machine and the same proxy.

Reports p50/p99/max per broker, the ratio of each to the request time, and the hedged broker's
extra requests (skiff_store_hedges_total over skiff_flush_puts_total).

Run through tools/bench-hedge.sh, which starts the S3 server and the proxy.
"""
import argparse
import json
import os
import sys
import tempfile
import time

from confluent_kafka import Producer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ab import Broker, metric_sum, proxy  # noqa: E402  (one copy of the broker runner)
from bench_flush import pct  # noqa: E402


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skiff", required=True)
    ap.add_argument("--delay-ms", type=int, default=40)
    ap.add_argument("--stall-rate", type=float, default=0.01)
    ap.add_argument("--hang-s", type=float, default=2.0)
    ap.add_argument("--messages", type=int, default=600, help="per broker")
    ap.add_argument("--warmup", type=int, default=60, help="per broker, before the stalls start")
    args = ap.parse_args()
    bucket = os.environ["S3_BUCKET"]
    endpoint = os.environ["S3_PROXY_ENDPOINT"]
    logdir = tempfile.mkdtemp(prefix="bench-hedge-")
    run = str(int(time.time()))
    brokers = {}
    try:
        proxy(f"config?delay-ms={args.delay_ms}&fail-rate=0")
        for name, extra in (("hedged", []), ("unhedged", ["--hedge-after-ms", "off"])):
            brokers[name] = Broker(f"hedge-{name}", args.skiff, logdir,
                                   ["--s3-bucket", bucket, "--s3-endpoint", endpoint, "--s3-path-style",
                                    "--namespace", f"hedge-{name}-{run}"] + extra)
            brokers[name].create_topic("bench")
        producers = {name: Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0,
                                     "enable.idempotence": False, "max.in.flight": 1, "log_level": 3,
                                     "message.timeout.ms": 60000})
                     for name, b in brokers.items()}
        payload = os.urandom(512).hex().encode()

        def send(name):
            p = producers[name]
            got = []
            sent = time.perf_counter()
            p.produce("bench", payload, on_delivery=lambda err, m: got.append((err, time.perf_counter())))
            p.flush(60)
            if not got:
                raise RuntimeError(f"{name}: no delivery report within 60 s")
            err, at = got[0]
            if err is not None:
                raise RuntimeError(f"{name}: delivery failed: {err}")
            return (at - sent) * 1000

        # Warm-up without stalls: the hedged broker learns the request time's p99.
        for i in range(2 * args.warmup):
            send(("hedged", "unhedged")[i % 2])
        base = {n: (metric_sum(b, "counters", "skiff_store_hedges_total"),
                    metric_sum(b, "counters", "skiff_flush_puts_total")) for n, b in brokers.items()}
        proxy("reset")
        proxy(f"config?fail-rate={args.stall_rate}&fail-mode=timeout&hang-s={args.hang_s}&fail-match=.")
        lat = {"hedged": [], "unhedged": []}
        for i in range(2 * args.messages):
            name = ("hedged", "unhedged")[i % 2]
            lat[name].append(send(name))
        stats = json.loads(proxy("stats"))
        proxy("config?fail-rate=0")
        print(f"S3 request time {args.delay_ms} ms; {args.stall_rate:.1%} of requests stalled {args.hang_s:g} s; "
              f"proxy: {json.dumps({k: stats.get(k) for k in ('requests', 'failed') if k in stats})}")
        print("| series | n | p50 ms | p99 ms | max ms | p50 / request | p99 / request | hedges / PUTs |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|")
        for name, v in lat.items():
            b = brokers[name]
            hedges = metric_sum(b, "counters", "skiff_store_hedges_total") - base[name][0]
            puts = metric_sum(b, "counters", "skiff_flush_puts_total") - base[name][1]
            ratio = f"{hedges / puts:.3f}" if puts else "-"
            print(f"| {name} | {len(v)} | {pct(v, 0.5):.1f} | {pct(v, 0.99):.1f} | {max(v):.1f} | "
                  f"{pct(v, 0.5) / args.delay_ms:.2f} | {pct(v, 0.99) / args.delay_ms:.2f} | {ratio} |", flush=True)
    finally:
        for b in brokers.values():
            b.stop()


if __name__ == "__main__":
    main()
