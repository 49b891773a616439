#!/usr/bin/python3
"""Produce under S3 back-pressure (docs/quotas.md, docs/retries.md): a store that answers
SlowDown to a share of requests. In one run, for each SlowDown rate (0 first, as the control),
one broker on s3-fault-proxy (--delay-ms per request) takes --producers confluent-kafka
producers (acks=1, so only the broker's bounds hold data back) sending 4 KiB records as fast as
they can for --seconds. Reported per rate: acknowledged MB/s, delivery errors, throttle
callbacks, the broker's peak RSS and peak skiff_produce_buffered_bytes (sampled every 100 ms),
SlowDowns the proxy sent, and whether every acknowledged record was read back by a fresh
broker after a graceful stop.

Run through tools/bench-slowdown.sh, which starts the S3 server and the proxy.
"""
import argparse
import json
import os
import sys
import tempfile
import threading
import time

from confluent_kafka import Consumer, Producer, TopicPartition

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_ab import Broker, metric_sum, proxy  # noqa: E402


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def read_back(b, topic, partitions):
    c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "bench-reader", "enable.auto.commit": False,
                  "auto.offset.reset": "earliest", "log_level": 3})
    highs = {p: c.get_watermark_offsets(TopicPartition(topic, p), timeout=30)[1] for p in range(partitions)}
    c.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    got = set()
    pending = {p for p, h in highs.items() if h > 0}
    deadline = time.monotonic() + 300
    while pending and time.monotonic() < deadline:
        for m in c.consume(1000, 0.5):
            if m.error():
                continue
            got.add(m.value()[:32])
            if m.offset() + 1 >= highs[m.partition()]:
                pending.discard(m.partition())
    c.close()
    return got


def phase(args, skiff, logdir, rate, run):
    proxy("reset")
    proxy(f"config?delay-ms={args.delay_ms}&fail-rate={rate}&fail-mode=503-slowdown&fail-match=.")
    b = Broker(f"slowdown-{int(rate * 100)}", skiff, logdir,
               ["--s3-bucket", os.environ["S3_BUCKET"], "--s3-endpoint", os.environ["S3_PROXY_ENDPOINT"],
                "--s3-path-style", "--namespace", f"slowdown-{run}-{int(rate * 100)}",
                "--max-buffered-bytes", str(args.max_buffered_mb << 20)])
    topic = "bench"
    b.create_topic(topic, args.partitions)
    partitions = args.partitions
    acked, errors, throttles = [], [], [0]
    lock = threading.Lock()
    stop = threading.Event()
    peak = {"rss": 0.0, "buffered": 0.0}

    def sampler():
        while not stop.is_set():
            peak["rss"] = max(peak["rss"], rss_mb(b.proc.pid))
            try:
                peak["buffered"] = max(peak["buffered"], metric_sum(b, "gauges", "skiff_produce_buffered_bytes"))
            except Exception:
                pass
            time.sleep(0.1)

    def producer(k):
        def on_throttle(ev):
            if ev.throttle_time > 0:
                with lock:
                    throttles[0] += 1

        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "1", "linger.ms": 5, "enable.idempotence": False,
                      "message.timeout.ms": 120000, "queue.buffering.max.kbytes": 65536, "log_level": 3,
                      "throttle_cb": on_throttle})

        def report(err, m):
            with lock:
                (errors if err else acked).append(err or m.value()[:32])

        i = 0
        pad = b"x" * (args.size - 32)
        while not stop.is_set():
            key = f"p{k:03d}-{i:012d}-{rate:.2f}".encode().ljust(32, b"-")
            try:
                p.produce(topic, key + pad, on_delivery=report)
                i += 1
            except BufferError:
                p.poll(0.01)
            p.poll(0)
        p.flush(180)

    s = threading.Thread(target=sampler)
    s.start()
    ths = [threading.Thread(target=producer, args=(k,)) for k in range(args.producers)]
    t0 = time.monotonic()
    for t in ths:
        t.start()
    time.sleep(args.seconds)
    stop.set()
    for t in ths:
        t.join()
    elapsed = time.monotonic() - t0
    s.join()
    stats = json.loads(proxy("stats"))
    proxy("config?fail-rate=0")
    # acks=1 answers once buffered: what was acknowledged is durable after a graceful stop
    # (which flushes), so read it back from a fresh broker on the same namespace.
    b.stop()
    v = Broker(f"slowdown-{int(rate * 100)}-verify", skiff, logdir,
               ["--s3-bucket", os.environ["S3_BUCKET"], "--s3-endpoint", os.environ["S3_PROXY_ENDPOINT"],
                "--s3-path-style", "--namespace", f"slowdown-{run}-{int(rate * 100)}"])
    got = read_back(v, topic, partitions)
    v.stop()
    lost = len(set(acked) - got)
    return {
        "rate": rate, "acked": len(acked), "mb_s": len(acked) * args.size / elapsed / 1e6, "errors": len(errors),
        "first_error": str(errors[0]) if errors else "", "throttles": throttles[0], "rss_mb": peak["rss"],
        "buffered_mb": peak["buffered"] / 1e6, "slowdowns": stats.get("failed", {}).get("503-slowdown", 0),
        "requests": stats.get("requests", 0), "lost": lost,
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skiff", required=True)
    ap.add_argument("--rates", default="0,0.3")
    ap.add_argument("--delay-ms", type=int, default=20)
    ap.add_argument("--producers", type=int, default=4)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--size", type=int, default=4096)
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--max-buffered-mb", type=int, default=64)
    args = ap.parse_args()
    logdir = tempfile.mkdtemp(prefix="bench-slowdown-")
    run = str(int(time.time()))
    rows = [phase(args, args.skiff, logdir, float(r), run) for r in args.rates.split(",")]
    print(f"{args.producers} producers, acks=1, {args.size} B records, {args.seconds:g} s per rate, "
          f"{args.delay_ms} ms per S3 request, --max-buffered-bytes {args.max_buffered_mb} MiB; logs in {logdir}")
    print("| SlowDown share of requests | S3 requests | SlowDowns | acked | MB/s | delivery errors | throttle callbacks "
          "| peak RSS MB | peak buffered MB | acked records lost |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['rate']:.0%} | {r['requests']} | {r['slowdowns']} | {r['acked']} | {r['mb_s']:.2f} | {r['errors']} "
              f"| {r['throttles']} | {r['rss_mb']:.0f} | {r['buffered_mb']:.1f} | {r['lost']} |")
        if r["first_error"]:
            print(f"  first delivery error at {r['rate']:.0%}: {r['first_error']}")


if __name__ == "__main__":
    main()
