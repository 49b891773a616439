#!/usr/bin/python3
"""The flush scheduler and the request budget from outside (docs/flush-scheduling.md), with
confluent-kafka producers.

On S3 the test puts its own s3-fault-proxy (5 ms per request) in front of the test server and
counts the PUTs there; on the local store it counts them in the broker's metrics
(skiff_flush_puts_total).

    test_flush_schedule.py --skiff build/src/cli/skiff [--store local|s3] [-k NAME]
"""
import json
import os
import statistics
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import consume_partitions, create_topic  # noqa: E402
from confluent_kafka import Producer  # noqa: E402

PARTITIONS = 16
PRODUCERS = 32
SECONDS = 6
BUDGET = 60  # PUTs per second, the whole broker


def http_json(url, method="GET"):
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as r:
        return json.load(r)


def flush_puts(b):
    doc = http_json(f"http://127.0.0.1:{b.http_port}/metrics")
    fam = doc.get("counters", {}).get("skiff_flush_puts_total")
    return sum(s["value"] for s in fam["series"]) if fam else 0


class PutCounter:
    """Segment-upload PUTs: at the proxy on S3 (what S3 would bill), in the broker's metrics
    on the local store."""

    def __init__(self, b, proxy):
        self.b, self.proxy = b, proxy

    def now(self):
        if self.proxy:
            return http_json(self.proxy + "/__proxy/stats")["by_method"].get("PUT", 0)
        return flush_puts(self.b)


def run_load(t, b, topic):
    """PRODUCERS acks=all producers, each with at most 4 messages outstanding, for SECONDS.
    Returns (acked {(partition, offset): value}, failures, latencies in ms)."""
    acked, failed, lat = {}, [], []
    lock = threading.Lock()
    stop = threading.Event()

    def one(k):
        p = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0,
                      "enable.idempotence": False, "message.timeout.ms": 60000, "request.timeout.ms": 30000,
                      "log_level": 3})
        outstanding = [0]
        i = 0
        while not stop.is_set():
            if outstanding[0] >= 4:
                p.poll(0.01)
                continue
            value = f"p{k}-{i}".encode()
            sent = time.monotonic()

            def cb(err, m, value=value, sent=sent):
                outstanding[0] -= 1
                with lock:
                    if err is None:
                        acked[(m.partition(), m.offset())] = value
                        lat.append((time.monotonic() - sent) * 1000)
                    else:
                        failed.append(str(err))
            outstanding[0] += 1
            p.produce(topic, value=value, partition=(k + i) % PARTITIONS, on_delivery=cb)
            i += 1
            p.poll(0)
        if p.flush(60):
            failed.append("messages left undelivered after 60 s")

    ths = [broker.CheckedThread(one, k) for k in range(PRODUCERS)]
    for th in ths:
        th.start()
    time.sleep(SECONDS)
    stop.set()
    broker.run_threads_checked(ths)
    return acked, failed, lat


def phase(t, name, extra, s3_endpoint, proxy):
    b = t.broker(cores=2, extra_args=extra, s3_endpoint=s3_endpoint)
    topic = t.topic(name)
    create_topic(b, topic, PARTITIONS)
    counter = PutCounter(b, proxy)
    puts0, t0 = counter.now(), time.monotonic()
    acked, failed, lat = run_load(t, b, topic)
    elapsed = time.monotonic() - t0
    puts = counter.now() - puts0
    if failed:
        raise AssertionError(f"{name}: {len(failed)} deliveries failed, e.g. {failed[:3]}")
    out, _ = consume_partitions(b, topic, PARTITIONS, timeout=120)
    served = {(p, m.offset()): m.value() for p, msgs in out.items() for m in msgs}
    missing = [k for k, v in acked.items() if served.get(k) != v]
    if missing:
        raise AssertionError(f"{name}: {len(missing)} of {len(acked)} acknowledged messages not served, "
                             f"e.g. {missing[:5]}")
    p50 = statistics.median(lat)
    p99 = statistics.quantiles(lat, n=100)[98] if len(lat) >= 100 else max(lat)
    t.log(f"{name}: {len(acked)} acknowledged in {elapsed:.1f} s, {puts} segment PUTs "
          f"({puts / elapsed:.0f}/s, {puts / max(1, len(acked)):.3f} per message), "
          f"latency p50 {p50:.1f} ms p99 {p99:.1f} ms")
    b.stop()
    return puts / elapsed, p50, len(acked), puts / max(1, len(acked))


def test_request_budget(t):
    """Under --max-puts-per-second the broker stays within the budget, loses nothing and
    answers every producer; segments grow instead (compared with no budget, same load)."""
    s3_endpoint, proxy = None, None
    if t.store == "s3":
        s3_endpoint = broker.start_fault_proxy(t, 5)
        proxy = s3_endpoint
    free_rate, free_p50, free_n, free_per_msg = phase(t, "unlimited", [], s3_endpoint, proxy)
    rate, p50, n, per_msg = phase(t, "budget", ["--max-puts-per-second", str(BUDGET)], s3_endpoint, proxy)
    # GCRA allows a burst of 2 on top of the rate; the window also holds the tail of the flush.
    if rate > BUDGET * 1.1 + 2:
        raise AssertionError(f"{rate:.1f} PUTs/s under a budget of {BUDGET}")
    if free_rate <= BUDGET:
        raise AssertionError(f"without a budget the same load sent only {free_rate:.1f} PUTs/s: the "
                             "test does not exercise the budget")
    # Segments grow under the budget: fewer PUTs carry each message. (Latency is reported, not
    # asserted: on the test S3 server the unlimited run is already bound by the server itself.)
    if per_msg >= free_per_msg:
        raise AssertionError(f"segments did not grow under the budget: {per_msg:.3f} PUTs per message vs "
                             f"{free_per_msg:.3f} without it")
    t.log(f"p50 latency {p50:.1f} ms under the budget vs {free_p50:.1f} ms without")
    if n < 100:
        raise AssertionError(f"only {n} messages acknowledged under the budget")


if __name__ == "__main__":
    broker.main([
        (test_request_budget, 300),
    ])
