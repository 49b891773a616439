#!/usr/bin/python3
"""A compacted topic through confluent-kafka (docs/lifecycle.md, "Compaction"): 100,000 records
over 1,000 keys, every tenth record of a key a tombstone, into a topic with cleanup.policy=compact
and delete.retention.ms=0. Once the broker has compacted it, a consumer reading from the
beginning sees, for every key, its latest record at the offset it was written at, and for every
key whose latest record is a tombstone, nothing; the offsets it reads only grow.

    test_compaction.py --skiff build/src/cli/skiff [--store local|s3]
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import admin, consume_partitions, produce_all  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402

KEYS = 1000
RECORDS = 100_000


def test_compacted_topic(t):
    b = t.broker(extra_args=["--compaction-interval-ms", "500", "--segment-bytes", "65536"])
    topic = t.topic("compacted")
    a = admin(b)   # must outlive the future
    fut = a.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "delete.retention.ms": "0", "min.compaction.lag.ms": "0"})])
    fut[topic].result(30)
    msgs = []
    for i in range(RECORDS):
        k = i % KEYS
        tomb = (i // KEYS) % 10 == 9 and k % 3 == 0
        msgs.append((0, f"key-{k}".encode(), None if tomb else f"v{i}".encode(), None))
    results = produce_all(b, topic, msgs, **{"linger.ms": 5, "batch.num.messages": 500})
    latest = {}
    for (_, key, value, _h), (part, off) in zip(msgs, results):
        latest[key] = (off, value)
    # The newest segment is never compacted: one record more closes the last real one.
    produce_all(b, topic, [(0, b"closer", b"x", None)])
    broker.wait_until(lambda: broker.metric_counter(b, "skiff_compaction_records_removed_total") >= RECORDS * 0.9,
                      120, "compaction to remove most of the superseded records")
    removed = broker.metric_counter(b, "skiff_compaction_records_removed_total")
    out, highs = consume_partitions(b, topic, 1, timeout=120)
    seen = {}
    last = -1
    problems = []
    for m in out[0]:
        if m.offset() <= last:
            problems.append(f"offset {m.offset()} after {last}")
        last = m.offset()
        if m.key() == b"closer":
            continue
        if m.key() in seen:
            problems.append(f"key {m.key()!r} read twice (offsets {seen[m.key()][0]} and {m.offset()})")
        seen[m.key()] = (m.offset(), m.value())
    live = {k: v for k, v in latest.items() if v[1] is not None}
    for k, (off, value) in live.items():
        if seen.get(k) != (off, value):
            problems.append(f"key {k!r}: expected {value!r} at {off}, read {seen.get(k)}")
        if len(problems) > 10:
            break
    for k in set(seen) - set(live):
        problems.append(f"key {k!r} whose latest record is a tombstone was read: {seen[k]}")
        if len(problems) > 10:
            break
    if problems:
        raise AssertionError("; ".join(problems[:10]))
    t.log(f"{RECORDS} records over {KEYS} keys: {removed} removed by compaction; a consumer from the beginning "
          f"read {len(out[0])} records, the latest of each of the {len(live)} live keys, high watermark {highs[0]}")
    b.stop()


if __name__ == "__main__":
    broker.main([(test_compacted_topic, 300)])
