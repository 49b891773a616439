#!/usr/bin/python3
"""The log's lifecycle seen from outside (docs/lifecycle.md): a restart restores every partition
from its manifest, a corrupt or missing manifest falls back without losing a record, and the
broker listens before its partitions are restored (a slow S3 does not keep the port closed).
"""
import glob
import os
import time
import urllib.error
import urllib.request

import broker
import ckutil


counter = broker.metric_counter


def ready(b):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{b.http_port}/ready", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def one_by_one(b, topic, partition, values):
    """Each value acknowledged before the next is sent: one segment each."""
    p = ckutil.producer(b, **{"linger.ms": 0, "max.in.flight": 1})
    for v in values:
        done = []
        p.produce(topic, v, partition=partition, on_delivery=lambda err, m: done.append(err))
        while not done:
            p.poll(0.01)
        if done[0] is not None:
            raise AssertionError(f"produce {v!r}: {done[0]}")


def read_values(b, topic, partitions):
    got, _ = ckutil.consume_partitions(b, topic, partitions)
    return {p: [m.value() for m in ms] for p, ms in got.items()}


def test_restart_restores_from_manifests(t):
    b = t.broker()
    topic = t.topic("mf")
    ckutil.create_topic(b, topic, 2)
    want = {0: [f"a{i}".encode() for i in range(30)], 1: [f"b{i}".encode() for i in range(10)]}
    for p, vs in want.items():
        one_by_one(b, topic, p, vs)
    b.stop()  # a clean close stores each partition's manifest
    b.start()
    broker.wait_until(lambda: ready(b)[0] == 200, 30, "/ready after the restart")
    if read_values(b, topic, 2) != want:
        raise AssertionError("records differ after a restore from manifests")
    n = counter(b, "skiff_restore_from_manifest_total")
    if n < 2:
        raise AssertionError(f"{n} restores started from a manifest, expected both partitions'")
    # New segments after the manifest: listed by the restore, and the close stores a second
    # manifest of partition 0 (an unchanged partition writes none).
    more = [f"c{i}".encode() for i in range(5)]
    one_by_one(b, topic, 0, more)
    want[0] += more
    b.stop()

    if t.store != "local":
        return
    # Damage on disk: partition 0's newest manifest corrupt, partition 1's manifests gone.
    p0 = sorted(glob.glob(os.path.join(b.data_dir, "**", "skiff~meta", topic, "0", "manifest-*"), recursive=True))
    p1 = glob.glob(os.path.join(b.data_dir, "**", "skiff~meta", topic, "1", "manifest-*"), recursive=True)
    if len(p0) != 2 or not p1:
        raise AssertionError(f"expected two manifests of partition 0 and some of 1 under {b.data_dir}: {p0} {p1}")
    with open(p0[-1], "r+b") as f:
        f.seek(20)
        byte = f.read(1)
        f.seek(20)
        f.write(bytes([byte[0] ^ 0x5A]))
    for path in p1:
        os.remove(path)
    b.start()
    broker.wait_until(lambda: ready(b)[0] == 200, 30, "/ready after the damaged restart")
    if read_values(b, topic, 2) != want:
        raise AssertionError("records differ after a restore with a corrupt and a missing manifest")
    if counter(b, "skiff_restore_manifests_unusable_total") != 1:
        raise AssertionError("the corrupt manifest was not reported unusable")
    if counter(b, "skiff_restore_from_manifest_total") != 1:
        raise AssertionError("partition 0 should restore from its older manifest, partition 1 by a full LIST")
    b.stop()


def test_listens_before_restore(t):
    """Every S3 request held 1 s: the port opens after the catalog is read, the partition is still
    restoring (/ready 503), requests for it are answered (retriable) instead of hanging, and the
    data is all there once /ready turns 200."""
    b = t.broker()
    topic = t.topic("slow")
    ckutil.create_topic(b, topic, 1)
    want = [f"v{i}".encode() for i in range(20)]
    ckutil.produce_all(b, topic, [(0, None, v, None) for v in want])
    b.stop()
    proxy = broker.start_fault_proxy(t, 1000)
    slow = t.broker(s3_endpoint=proxy, start=False)
    slow.namespace = b.namespace
    t0 = time.monotonic()
    slow.start(timeout=120)
    listening = time.monotonic() - t0
    status, body = ready(slow)
    t.log(f"listening after {listening:.1f} s; /ready then: {status} {body.strip()[:120]}")
    if status != 503 or "partitions" not in body:
        raise AssertionError(f"/ready right after listening should wait for the partition: {status} {body}")
    # Metadata is answered while the partition restores.
    md = ckutil.admin(slow).list_topics(topic=topic, timeout=20)
    if topic not in md.topics:
        raise AssertionError("Metadata did not name the topic while its partition was restoring")
    broker.wait_until(lambda: ready(slow)[0] == 200, 90, "/ready once the partition is restored")
    restored = time.monotonic() - t0
    t.log(f"restored after {restored:.1f} s")
    got, _ = ckutil.consume_partitions(slow, topic, 1, timeout=120)
    if [m.value() for m in got[0]] != want:
        raise AssertionError("records differ after the slow restore")
    slow.stop()


if __name__ == "__main__":
    broker.main([(test_restart_restores_from_manifests, 180), (test_listens_before_restore, 300, {"s3"})])
