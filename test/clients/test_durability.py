#!/usr/bin/python3
"""SIGKILL durability: a producer with acks=all streams messages and records which ones the
broker acknowledged (delivery reports); the broker is SIGKILLed mid-stream, twice, and
restarted on the same store (same data dir or S3 namespace, same port; the producer keeps
retrying across the restart). Afterwards every acknowledged message must be readable at the
offset it was acknowledged at, with its exact key and value; unacknowledged ones may or may not
be there; no offset appears twice; nothing unknown appears. The same with SIGTERM, where the
broker must also drain and exit 0 within 30 s while the producer keeps sending.

    test_durability.py --skiff build/src/cli/skiff [--store local|s3]
"""
import os
import json
import signal
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import consume_partitions, create_topic, producer  # noqa: E402

PARTS = 3


def value_of(i):
    return f"value-{i}-".encode() + bytes((i * 7 + j) % 256 for j in range(i % 300))


def stop_mid_stream(t, sig, s3_endpoint=None):
    b = t.broker(s3_endpoint=s3_endpoint)
    topic = t.topic("durable")
    create_topic(b, topic, PARTS)

    acked = {}            # i -> (partition, offset)
    failed = {}           # i -> error
    produced = [0]
    stop = threading.Event()
    lock = threading.Lock()
    p = producer(b, **{"linger.ms": 2, "message.timeout.ms": 45000, "retry.backoff.ms": 200,
                       "queue.buffering.max.messages": 20000, "enable.idempotence": False})

    def cb_for(i):
        def cb(err, m):
            with lock:
                if err is None:
                    acked[i] = (m.partition(), m.offset())
                else:
                    failed[i] = str(err)
        return cb

    def stream():
        i = 0
        while not stop.is_set():
            try:
                p.produce(topic, key=f"key-{i}".encode(), value=value_of(i), on_delivery=cb_for(i))
                i += 1
                produced[0] = i
            except BufferError:
                p.poll(0.05)
                continue
            p.poll(0)
            if i % 50 == 0:
                time.sleep(0.002)   # a steady stream, not one giant burst
        p.flush(90)

    th = broker.CheckedThread(stream, name="producer")
    th.start()
    for round_ in (1, 2):
        target = len(acked) + 1500
        broker.wait_until(lambda: len(acked) >= target or th.error, 90,
                          f"1500 more acknowledgements before stop #{round_} (have {len(acked)})")
        if th.error:
            raise th.error
        with lock:
            before = len(acked)
        if sig == signal.SIGKILL:
            b.kill()
        else:
            b.stop(sig, timeout=30)    # drains and exits 0
        t.log(f"{signal.Signals(sig).name} #{round_}: {before} acknowledged, {produced[0]} produced so far")
        time.sleep(0.5)
        b.start()
    broker.wait_until(lambda: len(acked) >= target + 500 or th.error, 90,
                      "the producer to get acknowledgements after the last restart")
    stop.set()
    th.join(120)
    if th.is_alive():
        raise AssertionError("the producer did not finish flushing within 120 s")
    if th.error:
        raise th.error
    t.log(f"{produced[0]} produced, {len(acked)} acknowledged, {len(failed)} failed "
          f"({sorted(set(failed.values()))[:3]})")

    # Restart once more (SIGTERM, clean) and read everything back.
    b.stop()
    b.start()
    out, highs = consume_partitions(b, topic, PARTS, timeout=120)
    problems = []
    found = {}
    for part, msgs in out.items():
        last = -1
        for m in msgs:
            if m.offset() <= last:
                problems.append(f"p{part}: offset {m.offset()} read after {last}")
            last = m.offset()
            k = m.key() or b""
            if not k.startswith(b"key-"):
                problems.append(f"p{part}@{m.offset()}: unknown key {k!r:.40}")
                continue
            i = int(k[4:])
            if m.value() != value_of(i):
                problems.append(f"p{part}@{m.offset()}: key {k!r} has value {m.value()!r:.60}, "
                                f"expected {value_of(i)!r:.60}")
            found[(part, m.offset())] = i
    lost = []
    for i, pos in sorted(acked.items()):
        if found.get(pos) != i:
            lost.append((i, pos, found.get(pos)))
    if lost:
        problems.append(f"{len(lost)} of {len(acked)} acknowledged messages missing or replaced, "
                        "e.g. (message, acked at (partition, offset), message found there): "
                        f"{lost[:8]}")
    if problems:
        raise AssertionError("; ".join(problems[:12]))
    t.log(f"all {len(acked)} acknowledged messages present; "
          f"{sum(len(v) for v in out.values())} messages in the log")
    b.stop()


def test_sigkill_mid_stream(t):
    stop_mid_stream(t, signal.SIGKILL)


def test_sigterm_mid_stream(t):
    stop_mid_stream(t, signal.SIGTERM)


def proxy(path, method="GET"):
    url = os.environ["S3_PROXY_ENDPOINT"] + path
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as r:
        return json.load(r)


def test_sigkill_with_s3_faults(t):
    """The same through the S3 fault proxy (with-s3.sh): 10% of all S3 requests, reads and
    writes, get a 503 SlowDown, a 500 or a TCP reset. Acknowledged still means stored."""
    if not os.environ.get("S3_PROXY_ENDPOINT"):
        raise AssertionError("S3_PROXY_ENDPOINT is not set: run through with-s3.sh")
    proxy("/__proxy/reset", "POST")
    proxy("/__proxy/config?fail-rate=0.1&fail-mode=503-slowdown,500,reset&fail-match=.", "POST")
    try:
        stop_mid_stream(t, signal.SIGKILL, s3_endpoint=os.environ["S3_PROXY_ENDPOINT"])
    finally:
        proxy("/__proxy/config?fail-rate=0", "POST")
    stats = proxy("/__proxy/stats")
    t.log(f"S3 through the proxy: {stats['requests']} requests, faults injected {stats['failed']}")
    if stats["failed_total"] < 3:
        raise AssertionError(f"only {stats['failed_total']} S3 faults were injected; the test "
                             "did not exercise the broker's retries")


def test_idempotent_retry_across_restart(t):
    """An idempotent producer's batch is stored, the broker restarts (SIGKILL, so nothing but the
    store survives), and the producer sends the same batch again (its answer was lost): it must
    be answered as a duplicate with the original offset and not be written twice. The broker
    rebuilds its producer table from the log's batch headers."""
    from test_bad_input import connect, parse_produce_response, produce_request, record_batch, recv_response
    b = t.broker()
    topic = t.topic("idem-restart")
    create_topic(b, topic, 1)
    pid = 4242

    def send(batch, corr):
        with connect(b) as s:
            s.sendall(produce_request(7, corr, topic, 0, batch))
            resp = recv_response(s, timeout=30)
        if resp is None:
            raise AssertionError("Produce: connection closed")
        return parse_produce_response(7, resp)[1][0]

    first = record_batch([(b"k0", b"v0"), (b"k1", b"v1")], producer_id=pid, epoch=0, sequence=0)
    second = record_batch([(b"k2", b"v2")], producer_id=pid, epoch=0, sequence=2)
    r1, r2 = send(first, 1), send(second, 2)
    if (r1[2], r1[3], r2[2], r2[3]) != (0, 0, 0, 2):
        raise AssertionError(f"first sends: {r1}, {r2}")
    b.stop(signal.SIGKILL, expect_rc=None)
    b.start()
    # The retry of the last batch: a duplicate, answered with its original offset. The broker
    # listens before the partition is restored and answers LEADER_NOT_AVAILABLE (5, retriable,
    # nothing written) meanwhile; a producer retries, and so does this one.
    deadline = time.monotonic() + 60
    again = send(second, 3)
    while again[2] == 5 and time.monotonic() < deadline:
        time.sleep(0.1)
        again = send(second, 3)
    if again[2] != 0 or again[3] != 2:
        raise AssertionError(f"the retried batch after a restart: error {again[2]}, base offset {again[3]} "
                             f"(expected 0 and its original offset 2)")
    # The next batch in sequence is accepted; one out of sequence is refused.
    nxt = send(record_batch([(b"k3", b"v3")], producer_id=pid, epoch=0, sequence=3), 4)
    gap = send(record_batch([(b"k9", b"v9")], producer_id=pid, epoch=0, sequence=9), 5)
    if (nxt[2], nxt[3]) != (0, 3) or gap[2] != 45:
        raise AssertionError(f"after the restart: next {nxt}, gap {gap} (expected offset 3, then error 45)")
    out, highs = consume_partitions(b, topic, 1)
    vals = [m.value() for m in out[0]]
    if vals != [b"v0", b"v1", b"v2", b"v3"] or highs[0] != 4:
        raise AssertionError(f"the log holds {vals} (high watermark {highs[0]})")
    b.stop()


if __name__ == "__main__":
    broker.main([(test_sigkill_mid_stream, 240), (test_sigterm_mid_stream, 240),
                 (test_sigkill_with_s3_faults, 240, {"s3"}), (test_idempotent_retry_across_restart, 120)])
