#!/usr/bin/python3
"""What a transaction costs: the same units of work, transactional and idempotent, side by side
in one run against one broker (issue 13).

    tools/bench-txn.sh [--delay-ms 40] [--units 60] [--records 50] [--partitions 4]   (S3 + proxy)
    tools/bench_txn.py --skiff build/src/cli/skiff --local [--units 60] ...           (local store)
    tools/bench_txn.py --skiff build/src/cli/skiff --cluster 3 [--units 60] ...       (3 brokers, etcd, local store)

With --cluster the partitions spread over the brokers, so most markers (and the produce
verification of partitions whose broker does not coordinate the id) cross between brokers.

One unit = --records records spread over --partitions partitions, then made durable:
  txn:   begin_transaction, produce, commit_transaction (AddPartitionsToTxn, the appends, EndTxn:
         prepare stored, markers flushed into each partition, complete stored)
  idem:  produce, flush (the same appends, acks=all, idempotent)
Units alternate between the two producers, so both see the same machine and the same store.
Prints per-unit latency p50/p99 (ms) and their ratio, and the broker's store requests per unit.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from confluent_kafka import Producer  # noqa: E402
from bench_ab import Broker, proxy  # noqa: E402  (one copy of the broker runner)
from bench_broker import pct  # noqa: E402


def store_requests(b):
    doc = json.loads(urllib.request.urlopen(b.http + "/metrics", timeout=10).read())
    total = 0.0
    for section in ("counters",):
        for name, fam in doc[section].items():
            if name == "skiff_store_requests_total":
                total += sum(float(s["value"]) for s in fam["series"])
    return total


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skiff", default=os.path.join(here, "..", "build", "src", "cli", "skiff"))
    ap.add_argument("--local", action="store_true", help="a local data directory instead of S3")
    ap.add_argument("--delay-ms", type=int, default=40)
    ap.add_argument("--units", type=int, default=60)
    ap.add_argument("--records", type=int, default=50)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--cluster", type=int, default=0, help="N brokers with etcd on a local store")
    args = ap.parse_args()
    logdir = tempfile.mkdtemp(prefix="bench-txn-")
    if args.cluster:
        return run_cluster(args, logdir)
    if args.local:
        extra = ["--data-dir", os.path.join(logdir, "data")]
        where = "local directory"
    else:
        proxy(f"config?delay-ms={args.delay_ms}&fail-rate=0")
        extra = ["--s3-bucket", os.environ["S3_BUCKET"], "--s3-endpoint", os.environ["S3_PROXY_ENDPOINT"],
                 "--s3-path-style", "--namespace", f"bench-txn-{int(time.time())}"]
        where = f"S3 test server behind the fault proxy, {args.delay_ms} ms per request"
    b = Broker("txn", args.skiff, logdir, extra)
    try:
        b.create_topic("bench", args.partitions)
        common = {"bootstrap.servers": b.bootstrap, "linger.ms": 0, "log_level": 3}
        txn = Producer(dict(common, **{"transactional.id": "bench-txn"}))
        txn.init_transactions(30)
        idem = Producer(dict(common, **{"enable.idempotence": True, "acks": "all"}))
        lat, reqs = measure(args, txn, idem, lambda: store_requests(b))
        report(args, where, lat, reqs)
    finally:
        b.stop()


def run_cluster(args, logdir):
    from bench_cluster import cluster, create, leader_of
    e, bs, boot = cluster(os.path.abspath(args.skiff), logdir, 3, n=args.cluster)
    try:
        create(boot, "bench", args.partitions)
        owners = [leader_of(boot, "bench", p) for p in range(args.partitions)]
        common = {"bootstrap.servers": boot, "linger.ms": 0, "log_level": 3}
        txn = Producer(dict(common, **{"transactional.id": "bench-txn"}))
        txn.init_transactions(30)
        idem = Producer(dict(common, **{"enable.idempotence": True, "acks": "all"}))
        lat, _ = measure(args, txn, idem, None)
        report(args, f"{args.cluster} brokers with etcd, local directory; partition owners {owners}", lat, None)
    finally:
        for b in bs:
            b.p.terminate()
        for b in bs:
            b.p.wait(30)
        e.stop()


def measure(args, txn, idem, requests):
    """Alternating units of both kinds; per-kind latencies (ms) and store requests (or None)."""
    payload = b"x" * 200

    def unit(kind):
        t0 = time.perf_counter()
        p = txn if kind == "txn" else idem
        if kind == "txn":
            p.begin_transaction()
        for i in range(args.records):
            p.produce("bench", payload, partition=i % args.partitions)
        if kind == "txn":
            p.commit_transaction(30)
        else:
            left = p.flush(30)
            if left:
                raise RuntimeError("idempotent flush left messages")
        return (time.perf_counter() - t0) * 1000

    for _ in range(3):  # warm-up: connections, metadata, partitions restored
        unit("txn")
        unit("idem")
    lat = {"txn": [], "idem": []}
    reqs = {"txn": 0.0, "idem": 0.0}
    for i in range(args.units):
        for kind in (("txn", "idem") if i % 2 == 0 else ("idem", "txn")):
            before = requests() if requests else 0
            lat[kind].append(unit(kind))
            if requests:
                reqs[kind] += requests() - before
    return lat, (reqs if requests else None)


def report(args, where, lat, reqs):
    print(f"store: {where}; {args.units} units per kind of {args.records} records over "
          f"{args.partitions} partitions")
    print(f"{'kind':6} {'p50 ms':>8} {'p99 ms':>8} {'mean ms':>8} {'store req/unit':>15}")
    for kind in ("idem", "txn"):
        v = lat[kind]
        per_unit = f"{reqs[kind] / args.units:15.1f}" if reqs else f"{'-':>15}"
        print(f"{kind:6} {pct(v, 0.5):8.1f} {pct(v, 0.99):8.1f} {statistics.mean(v):8.1f} {per_unit}")
    print(f"txn/idem p50 ratio: {pct(lat['txn'], 0.5) / pct(lat['idem'], 0.5):.2f}")


if __name__ == "__main__":
    main()
