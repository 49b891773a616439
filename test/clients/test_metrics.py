#!/usr/bin/python3
"""The observability endpoint under a real produce/consume run (issue #5): counters move as
they should, histograms and per-partition gauges are there, /metrics/prometheus, /traces with
a produce linked to the flush that acknowledged it, /health and /ready, and no secret in any
of them or in the broker's log.

    test_metrics.py --skiff build/src/cli/skiff [--store local|s3]
"""
import json
import os
import sys
import urllib.error
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
import ckutil  # noqa: E402


def get(b, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{b.http_port}{path}", timeout=10) as r:
        return r.status, r.read().decode()


def series(doc, name, **labels):
    """Sum of the series of `name` whose labels include `labels`."""
    for section in ("counters", "gauges", "histograms"):
        fam = doc.get(section, {}).get(name)
        if fam is None:
            continue
        total = 0
        found = False
        for s in fam["series"]:
            if all(s["labels"].get(k) == v for k, v in labels.items()):
                found = True
                total += s["total"]["count"] if section == "histograms" else s["value"]
        if found:
            return total
    raise AssertionError(f"metric {name} {labels} not in /metrics")


def test_metrics_move(t):
    b = t.broker()
    topic = t.topic("m")
    ckutil.create_topic(b, topic, 2)
    _, before = get(b, "/metrics")
    before = json.loads(before)
    n = 500
    msgs = [(i % 2, f"k{i}".encode(), b"v" * 100, None) for i in range(n)]
    ckutil.produce_all(b, topic, msgs)
    got, _ = ckutil.consume_partitions(b, topic, 2)
    assert sum(len(v) for v in got.values()) == n, "consumed count"

    status, text = get(b, "/metrics")
    assert status == 200
    m = json.loads(text)
    assert m["schema"] == "skiff.metrics.v1"
    assert len(m["cores"]) == b.cores, m["cores"]

    produced = series(m, "skiff_kafka_produce_requests_total", acks="all") - \
        series(before, "skiff_kafka_produce_requests_total", acks="all")
    assert produced > 0, "acks=all produce requests counted"
    assert series(m, "skiff_kafka_produce_duration_seconds", acks="all") >= produced
    assert series(m, "skiff_kafka_produce_bytes_total") >= n * 100
    assert series(m, "skiff_kafka_fetch_requests_total") > 0
    assert series(m, "skiff_kafka_fetch_bytes_total") >= n * 100
    flushes = series(m, "skiff_flushes_total")
    assert flushes > 0
    # Every flush stores both objects: as many .kfs as .index PUTs.
    kfs = series(m, "skiff_store_requests_total", op="put", kind="kfs")
    idx = series(m, "skiff_store_requests_total", op="put", kind="index")
    assert kfs == idx == flushes, (kfs, idx, flushes)
    assert series(m, "skiff_flush_duration_seconds") == flushes
    for p in (0, 1):
        hw = series(m, "skiff_partition_high_watermark", topic=topic, partition=str(p))
        assert hw == n // 2, (p, hw)
    assert series(m, "skiff_partitions_owned") == 2
    if b.store == "s3":
        assert series(m, "skiff_s3_requests_total", op="put", kind="kfs") >= flushes

    status, prom = get(b, "/metrics/prometheus")
    assert status == 200
    assert "# TYPE skiff_kafka_produce_requests_total counter" in prom
    assert "skiff_flush_duration_seconds_bucket{" in prom
    assert f'skiff_partition_high_watermark{{core="' in prom or "skiff_partition_high_watermark{" in prom

    status, tr = get(b, "/traces?root=produce&limit=20&linked=1")
    assert status == 200
    traces = json.loads(tr)["traces"]
    assert traces, "produce traces recorded"
    linked = [s for tr_ in traces for s in tr_["spans"] if s["name"] == "produce" and s.get("links")]
    assert linked, "a produce span links to its flush"
    status, chrome = get(b, "/traces?format=chrome")
    assert status == 200 and "traceEvents" in chrome

    assert get(b, "/health")[0] == 200
    status, ready = get(b, "/ready")
    assert status == 200, ready

    secret = os.environ.get("AWS_SECRET_ACCESS_KEY")
    if secret:
        for path in ("/metrics", "/metrics/prometheus", "/traces", "/traces?format=chrome", "/ready"):
            assert secret not in get(b, path)[1], f"secret in {path}"
    b.stop()
    if secret:
        with open(b.log_path, errors="replace") as f:
            assert secret not in f.read(), "secret in the broker log"


def proxy(path, method="GET"):
    url = os.environ["S3_PROXY_ENDPOINT"] + path
    with urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10) as r:
        return json.load(r)


def get_any(b, path):
    """(status, body) also for 4xx/5xx answers."""
    try:
        return get(b, path)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_ready_follows_restore(t):
    """A partition whose restore fails at start-up (its LIST fails at the S3 fault proxy) keeps
    /ready at 503 naming it; once S3 answers again the broker restores it by itself and /ready
    turns 200, and the data is there."""
    if not os.environ.get("S3_PROXY_ENDPOINT"):
        raise AssertionError("S3_PROXY_ENDPOINT is not set: run through with-s3.sh")
    b = t.broker(s3_endpoint=os.environ["S3_PROXY_ENDPOINT"])
    topic = t.topic("ready")
    ckutil.create_topic(b, topic, 1)
    ckutil.produce_all(b, topic, [(0, b"k", b"before the restart", None)])
    b.stop()
    proxy("/__proxy/reset", "POST")
    match = urllib.parse.quote(f"list-type=2.*{topic}")
    proxy(f"/__proxy/config?fail-rate=1&fail-mode=500&fail-match={match}", "POST")
    try:
        b.start(timeout=90)
        # The broker listens before its partitions restore: /ready says "restoring" first, then
        # (its first readiness round) how many are restored.
        seen = []

        def failing_restore_reported():
            seen.append(get_any(b, "/ready"))
            return seen[-1][0] == 503 and "0 of 1 partitions restored" in seen[-1][1]
        broker.wait_until(failing_restore_reported, 20, f"/ready to report the failing restore (last: {seen[-1:]})")
    finally:
        proxy("/__proxy/config?fail-rate=0", "POST")
    broker.wait_until(lambda: get_any(b, "/ready")[0] == 200, 30, "/ready to turn 200 after S3 recovered")
    got, _ = ckutil.consume_partitions(b, topic, 1)
    if [m.value() for m in got[0]] != [b"before the restart"]:
        raise AssertionError(f"after recovery the partition holds {[m.value() for m in got[0]]}")
    b.stop()


if __name__ == "__main__":
    broker.main([(test_metrics_move, 180), (test_ready_follows_restore, 240, {"s3"})])
