#!/usr/bin/python3
"""Client quotas and admission from outside (docs/quotas.md), with confluent-kafka clients.

- A client id over its produce quota is told to wait (throttle_time_ms, seen by librdkafka's
  throttle callback) and held to the rate; another client id on the same broker is not.
- A quota set through the Kafka API (AlterClientQuotas, client-id entity) is enforced the same
  way at once, for the client id it names only, kept across a restart, and gone once removed.
- A fetch quota slows a consumer down the same way; every record is still read, in order.
- On S3 only (the local store is never slow enough to fill a buffer): behind a store that
  takes 400 ms per request, a partition's buffer bound fills, produces wait for room and are
  answered with throttle_time_ms instead of errors, and every acknowledged record is kept.

    test_quotas.py --skiff build/src/cli/skiff [--store local|s3] [-k NAME]
"""
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import consume_partitions, create_topic  # noqa: E402
from confluent_kafka import Producer  # noqa: E402

QUOTA = 40 * 1024       # bytes per second
MESSAGES = 200
SIZE = 1000             # 200 KB per client: the 1 s burst, then about 4 s at the quota


counter = broker.metric_counter


def produce_all(b, topic, client_id, n=MESSAGES, size=SIZE, acks="all", rounds=10, **conf):
    """Produces n messages as `client_id` in `rounds` waves (each waits for the previous one's
    acknowledgements, as a steady producer does: a throttle delays the requests after the one
    that went over, never that one's answer); returns (seconds, throttle times seen in s,
    acked values)."""
    throttles, acked, errors = [], [], []
    # Small batches: the quota throttles the requests after the one that went over, so the
    # bytes must come in many requests (Kafka's quotas work the same way).
    p = Producer({"bootstrap.servers": b.bootstrap, "client.id": client_id, "acks": acks, "linger.ms": 5,
                  "batch.size": 16384,
                  "enable.idempotence": False, "message.timeout.ms": 120000, "log_level": 3,
                  "throttle_cb": lambda ev: throttles.append(ev.throttle_time), **conf})

    def report(err, m):
        (errors if err else acked).append(err or m.value())

    start = time.monotonic()
    for i in range(n):
        value = f"{client_id}-{i:06d}-".encode().ljust(size, b"x")
        while True:
            try:
                p.produce(topic, value, on_delivery=report)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
        if (i + 1) % max(1, n // rounds) == 0 and p.flush(120) != 0:
            raise AssertionError(f"{client_id}: messages still undelivered after 120 s")
    if p.flush(120) != 0:
        raise AssertionError(f"{client_id}: messages still undelivered after 120 s")
    p.poll(0.2)  # serve the last throttle callbacks
    elapsed = time.monotonic() - start
    if errors:
        raise AssertionError(f"{client_id}: {len(errors)} deliveries failed, first: {errors[0]}")
    return elapsed, throttles, acked


def test_produce_quota(t):
    b = t.broker(extra_args=["--client-quotas", f"slow-app:produce={QUOTA}"])
    topic = t.topic("pq")
    create_topic(b, topic, 1)
    free_s, free_thr, free_acked = produce_all(b, topic, "free-app")
    slow_s, slow_thr, slow_acked = produce_all(b, topic, "slow-app")
    t.log(f"free-app: {free_s:.2f} s, {len(free_thr)} throttles; slow-app: {slow_s:.2f} s, "
          f"{len(slow_thr)} throttles (max {max(slow_thr or [0]):.2f} s)")
    # 200 KB in 10 waves at 40 KiB/s with a 1 s burst: the last wave's throttle is never waited
    # for, so at least (200 - 40 - 20) KB / 40 KiB/s = 3.4 s.
    if slow_s < 2.8:
        raise AssertionError(f"slow-app sent {MESSAGES * SIZE} bytes in {slow_s:.2f} s, over its quota of {QUOTA} B/s")
    if not slow_thr or max(slow_thr) <= 0:
        raise AssertionError("slow-app was never told to wait (no throttle_time_ms in its answers)")
    if free_thr and max(free_thr) > 0:
        raise AssertionError(f"free-app has no quota but was throttled: {free_thr}")
    if free_s >= slow_s / 2:
        raise AssertionError(f"free-app took {free_s:.2f} s, not much faster than slow-app's {slow_s:.2f} s")
    if counter(b, "skiff_quota_throttled_total", kind="produce") == 0:
        raise AssertionError("skiff_quota_throttled_total{kind=produce} did not count the throttles")
    out, _ = consume_partitions(b, topic, 1)
    got = [m.value() for m in out[0]]
    if sorted(got) != sorted(free_acked + slow_acked):
        raise AssertionError(f"read {len(got)} records, {len(free_acked) + len(slow_acked)} were acknowledged")


def test_fetch_quota(t):
    b = t.broker(extra_args=["--quota-fetch-bytes-per-second", str(QUOTA)])
    topic = t.topic("fq")
    create_topic(b, topic, 1)
    _, produce_thr, acked = produce_all(b, topic, "writer")
    if produce_thr and max(produce_thr) > 0:
        raise AssertionError("a fetch quota throttled a producer")
    throttles = []
    start = time.monotonic()
    out, _ = consume_partitions(b, topic, 1, timeout=120, **{"client.id": "reader",
                                                          "max.partition.fetch.bytes": 16384,
                                                          "throttle_cb": lambda ev: throttles.append(ev.throttle_time)})
    elapsed = time.monotonic() - start
    got = [m.value() for m in out[0]]
    t.log(f"read {len(got)} records in {elapsed:.2f} s, {len(throttles)} throttles")
    if got != acked:
        raise AssertionError(f"read {len(got)} records, not the {len(acked)} acknowledged ones in order")
    if elapsed < 3.0:
        raise AssertionError(f"a consumer read {MESSAGES * SIZE} bytes in {elapsed:.2f} s, over its quota")
    if counter(b, "skiff_quota_throttled_total", kind="fetch") == 0:
        raise AssertionError("skiff_quota_throttled_total{kind=fetch} did not count the throttles")


def test_admission_under_slow_store(t):
    proxy = broker.start_fault_proxy(t, 400)
    b = t.broker(extra_args=["--max-partition-buffered-bytes", "65536"], s3_endpoint=proxy)
    topic = t.topic("adm")
    create_topic(b, topic, 1)
    # 1 MB in 8 KB records, acks=1: answered once buffered, so only the bound holds them back.
    elapsed, throttles, acked = produce_all(b, topic, "bulk", n=128, size=8192, acks="1")
    waits = counter(b, "skiff_log_room_waits_total")
    t.log(f"{len(acked)} acknowledged in {elapsed:.2f} s; {len(throttles)} throttle callbacks "
          f"(max {max(throttles or [0]):.2f} s); {waits:.0f} appends waited for room")
    if waits == 0 or counter(b, "skiff_produce_admission_throttled_total") == 0:
        raise AssertionError("the 64 KiB bound never made a produce wait: the test exercises nothing")
    if not throttles or max(throttles) <= 0:
        raise AssertionError("produces waited for room but no answer carried throttle_time_ms")
    out, _ = consume_partitions(b, topic, 1, timeout=120)
    got = [m.value() for m in out[0]]
    if got != acked:
        raise AssertionError(f"read {len(got)} records, not the {len(acked)} acknowledged ones in order")



def test_quota_set_through_the_api(t):
    from test_admin_apis import alter_client_quotas  # noqa: E402
    b = t.broker()
    topic = t.topic("apiq")
    create_topic(b, topic, 1)
    entity = [("client-id", "api-slow")]
    if alter_client_quotas(b, [(entity, [("producer_byte_rate", float(QUOTA))])]) != [(0, None)]:
        raise AssertionError("AlterClientQuotas refused a producer_byte_rate")
    free_s, free_thr, _ = produce_all(b, topic, "api-free")
    slow_s, slow_thr, _ = produce_all(b, topic, "api-slow")
    t.log(f"api-free: {free_s:.2f} s, {len(free_thr)} throttles; api-slow: {slow_s:.2f} s, {len(slow_thr)} throttles")
    if slow_s < 2.8 or not slow_thr or max(slow_thr) <= 0:
        raise AssertionError(f"api-slow was not held to its quota: {slow_s:.2f} s, throttles {slow_thr}")
    if free_thr and max(free_thr) > 0:
        raise AssertionError(f"api-free has no quota but was throttled: {free_thr}")
    b.restart()
    again_s, again_thr, _ = produce_all(b, topic, "api-slow")
    if again_s < 2.8 or not again_thr:
        raise AssertionError(f"after a restart api-slow was not held to its quota: {again_s:.2f} s")
    if alter_client_quotas(b, [(entity, [("producer_byte_rate", None)])]) != [(0, None)]:
        raise AssertionError("removing the quota was refused")
    gone_s, gone_thr, _ = produce_all(b, topic, "api-slow")
    t.log(f"after a restart: {again_s:.2f} s; after the removal: {gone_s:.2f} s, {len(gone_thr)} throttles")
    if gone_thr and max(gone_thr) > 0:
        raise AssertionError(f"api-slow was still throttled after its quota was removed: {gone_thr}")


if __name__ == "__main__":
    tests = [(test_produce_quota, 180), (test_fetch_quota, 180), (test_quota_set_through_the_api, 240)]
    if "s3" in sys.argv[sys.argv.index("--store") + 1:sys.argv.index("--store") + 2] if "--store" in sys.argv else []:
        tests.append((test_admission_under_slow_store, 240))
    broker.main(tests)
