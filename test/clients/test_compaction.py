#!/usr/bin/python3
"""A compacted topic through confluent-kafka (docs/lifecycle.md, "Compaction"): 100,000 records
over 1,000 keys, every tenth record of a key a tombstone, into a topic with cleanup.policy=compact
and delete.retention.ms=0. Once the broker has compacted it, a consumer reading from the
beginning sees, for every key, its latest record at the offset it was written at, and for every
key whose latest record is a tombstone, nothing; the offsets it reads only grow.

And the same with the broker SIGKILLed in the middle of compaction, four times (a small key map
makes each pass a chain of rounds, so a kill lands inside one): after every restart each live
key's latest record is still there, at its offset, read once; in the end the log is compacted
and `skiff fsck` finds no overlap or corruption.

    test_compaction.py --skiff build/src/cli/skiff [--store local|s3]
"""
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import admin, consume_partitions, produce_all  # noqa: E402
from confluent_kafka.admin import NewTopic  # noqa: E402
from test_merge import fsck  # noqa: E402

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


def read_check(b, topic, latest, complete):
    """Reads the partition from the beginning. Always: offsets grow, no key twice at one offset,
    every live key's latest record at its offset. `complete`: nothing but those (and the
    closers). Returns (problems, records read)."""
    out, _ = consume_partitions(b, topic, 1, timeout=120)
    problems = []
    last = -1
    seen = {}
    for m in out[0]:
        if m.offset() <= last:
            problems.append(f"offset {m.offset()} after {last}")
        last = m.offset()
        if m.key() == b"closer":
            continue
        seen.setdefault(m.key(), []).append((m.offset(), m.value()))
    for k, (off, value) in latest.items():
        versions = seen.get(k, [])
        if value is not None and (off, value) not in versions:
            problems.append(f"key {k!r}: latest {value!r} at {off} missing; read {versions[-3:]}")
        if complete and value is not None and versions != [(off, value)]:
            problems.append(f"key {k!r}: read {versions[-3:]} after compaction, expected only {(off, value)}")
        if complete and value is None and versions:
            problems.append(f"key {k!r} whose latest record is a tombstone was read: {versions[-3:]}")
        if len(problems) > 10:
            break
    return problems, len(out[0])


def test_sigkill_during_compaction(t):
    seed = int(os.environ.get("SKIFF_TEST_SEED", str(random.randrange(1 << 30))))
    rng = random.Random(seed)
    t.log(f"seed {seed} (SKIFF_TEST_SEED)")
    b = t.broker(extra_args=["--compaction-interval-ms", "200", "--segment-bytes", "32768",
                             "--compaction-map-bytes", "65536", "--file-delete-delay-ms", "300"])
    topic = t.topic("compacted-kill")
    a = admin(b)   # must outlive the future
    fut = a.create_topics([NewTopic(topic, 1, 1, config={
        "cleanup.policy": "compact", "delete.retention.ms": "0", "min.compaction.lag.ms": "0"})])
    fut[topic].result(30)
    latest = {}
    per_round = 15_000
    for r in range(4):
        msgs = []
        for i in range(r * per_round, (r + 1) * per_round):
            k = i % KEYS
            tomb = (i // KEYS) % 10 == 9 and k % 3 == 0
            msgs.append((0, f"key-{k}".encode(), None if tomb else f"v{i}".encode(), None))
        results = produce_all(b, topic, msgs, **{"linger.ms": 5, "batch.num.messages": 500})
        for (_, key, value, _h), (part, off) in zip(msgs, results):
            latest[key] = (off, value)
        produce_all(b, topic, [(0, b"closer", b"x", None)])
        broker.wait_until(lambda: broker.metric_counter(b, "skiff_compaction_segments_total") >= 1, 120,
                          "a compaction rewrite before the SIGKILL")
        delay = rng.uniform(0, 0.4)
        time.sleep(delay)
        rewritten = broker.metric_counter(b, "skiff_compaction_segments_total")
        passes = broker.metric_counter(b, "skiff_compactions_total")
        b.kill()
        t.log(f"round {r}: SIGKILL {delay * 1000:.0f} ms after the first rewrite "
              f"({passes} passes done, {rewritten} segments rewritten)")
        b.start()
        b.wait_restored()
        problems, n = read_check(b, topic, latest, complete=False)
        if problems:
            raise AssertionError(f"after the SIGKILL of round {r}: " + "; ".join(problems[:10]))
    # One more record closes the last segment; then compaction finishes.
    produce_all(b, topic, [(0, b"closer", b"x", None)])
    deadline = time.monotonic() + 120
    while True:
        problems, n = read_check(b, topic, latest, complete=True)
        if not problems:
            break
        if time.monotonic() > deadline:
            raise AssertionError("not compacted within 120 s: " + "; ".join(problems[:10]))
        time.sleep(1)
    b.stop()
    segments, findings = fsck(t, b)
    live = sum(1 for v in latest.values() if v[1] is not None)
    t.log(f"{4 * per_round} records over {KEYS} keys, 4 SIGKILLs during compaction: a consumer from the "
          f"beginning read {n} records, the latest of each of the {live} live keys; {segments} segments; "
          f"fsck warnings: {sorted(set(f.split(':')[0] for f in findings))}")


if __name__ == "__main__":
    broker.main([(test_compacted_topic, 300), (test_sigkill_during_compaction, 400)])
