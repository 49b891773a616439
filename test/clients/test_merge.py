#!/usr/bin/python3
"""Segment merging under load (docs/lifecycle.md, "Merging"): a confluent-kafka producer streams
with acks=all while a consumer reads both partitions from the beginning; the broker merges
small segments into ~300 KB ones as it goes, is SIGKILLed once in the middle and restarted on
the same store. On S3 every request goes through the fault proxy, 20% of them failing (503
SlowDown, 500, TCP reset). Afterwards: the consumer read every offset once and in order, every
acknowledged record is at its offset with its value, merges happened on both lives of the
broker, the bucket holds far fewer segments than were flushed, and `skiff fsck` is clean.

    test_merge.py --skiff build/src/cli/skiff [--store local|s3]
"""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import create_topic, producer  # noqa: E402
from confluent_kafka import Consumer, TopicPartition  # noqa: E402

PARTS = 2
MERGE_ARGS = ["--merge-target-bytes", "300000", "--merge-age-ms", "1500", "--file-delete-delay-ms", "1000",
              "--retention-ms", "-1", "--manifest-every-segments", "16"]


def value_of(i):
    return f"value-{i}-".encode() + bytes((i * 13 + j) % 256 for j in range(100 + i % 200))


def proxy(path, method="POST"):
    url = os.environ["S3_PROXY_ENDPOINT"] + path
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as r:
        return json.load(r)


def fsck(t, b):
    if b.store == "s3":
        args = [t.skiff, "fsck", f"s3://{os.environ['S3_BUCKET']}/{b.namespace}",
                "--s3-endpoint", os.environ["S3_ENDPOINT"], "--s3-path-style"]
    else:
        args = [t.skiff, "fsck", b.data_dir, "--namespace", "default"]
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    findings = [ln.strip() for ln in r.stdout.splitlines() if ln.startswith("  ")]
    # SIGKILL may leave half of a flush's pair; sources of a merge may wait for their delete.
    harmless = ("gap (warning)", "orphan .index", "orphan .kfs", "merged (warning)", "copy (warning)",
                "compacted (warning)")
    if r.returncode != 0 and not (r.returncode == 1 and findings and all(f.startswith(harmless) for f in findings)):
        raise AssertionError(f"skiff fsck exited {r.returncode}: {r.stdout[-3000:]} {r.stderr[-2000:]}")
    if any(f.startswith("overlap") or f.startswith("corrupt") for f in findings):
        raise AssertionError(f"skiff fsck: {findings[:10]}")
    segments = sum(int(m.group(1)) for m in re.finditer(r"^\S+/\d+: (\d+) segments", r.stdout, re.M))
    return segments, findings


def merge_under_load(t, s3_endpoint=None):
    b = t.broker(extra_args=MERGE_ARGS, s3_endpoint=s3_endpoint)
    topic = t.topic("merge")
    create_topic(b, topic, PARTS)

    acked = {}   # i -> (partition, offset)
    lock = threading.Lock()
    stop = threading.Event()
    p = producer(b, **{"linger.ms": 5, "message.timeout.ms": 60000, "retry.backoff.ms": 200,
                       "queue.buffering.max.messages": 20000})

    def cb_for(i):
        def cb(err, m):
            if err is None:
                with lock:
                    acked[i] = (m.partition(), m.offset())
        return cb

    def produce():
        i = 0
        while not stop.is_set():
            try:
                p.produce(topic, key=f"key-{i}".encode(), value=value_of(i), partition=i % PARTS,
                          on_delivery=cb_for(i))
                i += 1
            except BufferError:
                p.poll(0.05)
                continue
            p.poll(0)
            if i % 20 == 0:
                time.sleep(0.004)   # a steady stream: about 5,000 records a second at most
        p.flush(120)

    seen = {q: [] for q in range(PARTS)}   # (offset, key, value) in the order read
    consume_stop = threading.Event()

    def consume():
        c = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "merge-reader", "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", "check.crcs": True,
                      "max.partition.fetch.bytes": 65536})
        c.assign([TopicPartition(topic, q, 0) for q in range(PARTS)])
        try:
            while not consume_stop.is_set():
                for m in c.consume(500, 0.2):
                    if m.error():
                        continue   # broker restarting: the consumer retries on its own
                    seen[m.partition()].append((m.offset(), m.key(), m.value()))
        finally:
            c.close()

    pth = broker.CheckedThread(produce, name="producer")
    cth = broker.CheckedThread(consume, name="consumer")
    pth.start()
    cth.start()
    merges = 0
    broker.wait_until(lambda: broker.metric_counter(b, "skiff_merges_total") >= 3 or pth.error, 120,
                      "three merges before the SIGKILL")
    merges += broker.metric_counter(b, "skiff_merges_total")
    flushed = broker.metric_counter(b, "skiff_flushes_total")
    with lock:
        before = len(acked)
    b.kill()
    t.log(f"SIGKILL after {before} acknowledged records, {merges} merges of {flushed} flushed segments")
    time.sleep(0.5)
    b.start()
    target = before + 3000
    broker.wait_until(lambda: (len(acked) >= target and broker.metric_counter(b, "skiff_merges_total") >= 3)
                      or pth.error, 180, "3,000 more acknowledgements and three merges after the restart")
    flushed += broker.metric_counter(b, "skiff_flushes_total")
    stop.set()
    pth.join(150)
    if pth.is_alive():
        raise AssertionError("the producer did not finish flushing within 150 s")
    if pth.error:
        raise pth.error

    # The consumer catches up with the high watermarks.
    hw = {}
    wc = Consumer({"bootstrap.servers": b.bootstrap, "group.id": "merge-hw"})
    for q in range(PARTS):
        hw[q] = wc.get_watermark_offsets(TopicPartition(topic, q), timeout=20)[1]
    wc.close()
    broker.wait_until(lambda: all(seen[q] and seen[q][-1][0] + 1 >= hw[q] for q in range(PARTS)) or cth.error,
                      120, f"the consumer to reach the high watermarks {hw}")
    consume_stop.set()
    cth.join(30)
    if cth.error:
        raise cth.error

    problems = []
    at = {}
    for q in range(PARTS):
        last = -1
        for off, k, v in seen[q]:
            if off <= last:
                problems.append(f"p{q}: offset {off} read after {last}")
            last = off
            at[(q, off)] = (k, v)
    for i, pos in sorted(acked.items()):
        got = at.get(pos)
        if got is None:
            problems.append(f"record {i} acknowledged at {pos} was not read")
        elif got != (f"key-{i}".encode(), value_of(i)):
            problems.append(f"record {i} at {pos}: read {got[0]!r}")
        if len(problems) > 10:
            break
    if problems:
        raise AssertionError("; ".join(problems[:10]))
    # Merging catches up once the stream stops (a few groups per partition a second).
    last, still = broker.metric_counter(b, "skiff_merges_total"), 0
    deadline = time.monotonic() + 60
    while still < 4 and time.monotonic() < deadline:
        time.sleep(1)
        now = broker.metric_counter(b, "skiff_merges_total")
        still = still + 1 if now == last else 0
        last = now
    merges += last
    time.sleep(2)   # the last merges' sources: their delete delay and manifest
    b.stop()
    segments, findings = fsck(t, b)
    t.log(f"{len(acked)} acknowledged records all read once, in order; {merges} merges; "
          f"{flushed} segments flushed, {segments} in the bucket now; fsck warnings: {sorted(set(f.split(':')[0] for f in findings))}")
    if merges < 6:
        raise AssertionError(f"only {merges} merges")
    if segments * 3 > flushed:
        raise AssertionError(f"{segments} segments in the bucket after {flushed} flushes: merging did not keep up")


def test_merge_under_load(t):
    if t.store != "s3":
        merge_under_load(t)
        return
    if not os.environ.get("S3_PROXY_ENDPOINT"):
        raise AssertionError("S3_PROXY_ENDPOINT is not set: run through with-s3.sh")
    proxy("/__proxy/reset")
    proxy("/__proxy/config?fail-rate=0.2&fail-mode=503-slowdown,500,reset&fail-match=.")
    try:
        merge_under_load(t, s3_endpoint=os.environ["S3_PROXY_ENDPOINT"])
    finally:
        proxy("/__proxy/config?fail-rate=0")
    stats = proxy("/__proxy/stats", "GET")
    t.log(f"S3 through the proxy: {stats['requests']} requests, {stats['failed_total']} failed on purpose")
    if stats["failed_total"] < 20:
        raise AssertionError(f"only {stats['failed_total']} S3 faults were injected")


if __name__ == "__main__":
    broker.main([(test_merge_under_load, 600)])
