#!/usr/bin/python3
"""The Iceberg sink (issue 21), measured in one run on the local store:

  1. throughput: --mb MB of ~1 KB JSON values produced into --partitions partitions through a
     broker, the broker stopped (every segment in the store), then `skiff iceberg DIR --topic T
     --once` timed, once with ZSTD pages and once --uncompressed, each into its own warehouse.
     Rows/s and record MB/s over wall time and per CPU-second of the sink process (user+sys from
     getrusage(RUSAGE_CHILDREN) around it).
  2. compression: bytes of the table's data files vs bytes of the topic's .kfs segments, for
     both runs of 1.
  3. produce-to-visible latency: two brokers side by side, `skiff serve --iceberg-topics T
     --iceberg-commit-interval-ms X` with X = 10000 (the default) and 1000, fed at the same
     steady rate in alternation. A poller reads each table's metadata/version-hint.text every
     --poll-ms and, on a new version, vN.metadata.json's current snapshot summary
     "skiff.next-offsets"; a record is visible from the first poll at which next-offsets of
     its partition is above its offset. Latency = that poll's time - the time produce() was
     called. p50/p99 over the records produced after a warm-up.
  4. objects per hour per partition at the default cadence, computed (not run for an hour):
     the 10 s table's objects per commit (data files, manifests, manifest lists, metadata
     files, counted in the table's directory) x commits per hour, per Kafka partition and per
     table partition.

    tools/bench_iceberg.py [--skiff build/src/cli/skiff] [--mb 200] [--partitions 6]
                           [--latency-seconds 60] [--rate 500] [--quick]

--quick is a ~30 s smoke run (20 MB, 10 s of steady produce). Copy the binary first when others
build in the same tree (cp build/src/cli/skiff /tmp/bench-skiff; --skiff /tmp/bench-skiff). Not
part of the test suite.
"""
import argparse
import functools
import glob
import json
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
from confluent_kafka import Producer  # noqa: E402
from bench_ab import Broker  # noqa: E402  (one copy of the broker runner)
from bench_broker import pct  # noqa: E402

TOPIC = "bench"
WORDS = ("order shipped delivered returned pending paid refund customer invoice account "
         "warehouse north south east west express standard priority bulk retail wholesale "
         "discount coupon gift card cash credit debit transfer mobile web store kiosk "
         "partner supplier carrier parcel pallet crate box envelope letter fragile cold").split()
COUNTRIES = ("DE", "FR", "US", "GB", "JP", "BR", "IN", "NL", "SE", "ES")


def json_value(rng, i, size):
    """About `size` bytes of JSON with fields a real event has: ids, enums, amounts and some
    free text (words from a small vocabulary, so it compresses like text, not like padding)."""
    doc = {"id": i, "ts": 1765000000000 + i * 7, "user": f"user-{rng.randrange(100000)}",
           "country": rng.choice(COUNTRIES), "amount": round(rng.random() * 1000, 2),
           "items": [rng.randrange(10000) for _ in range(rng.randrange(1, 6))], "note": ""}
    base = len(json.dumps(doc))
    words = []
    n = base
    while n < size:
        w = rng.choice(WORDS)
        words.append(w)
        n += len(w) + 1
    doc["note"] = " ".join(words)
    return json.dumps(doc, separators=(",", ":")).encode()


def dir_bytes(root, pattern):
    files = glob.glob(os.path.join(root, pattern), recursive=True)
    return sum(os.path.getsize(f) for f in files), len(files)


def live_segment_bytes(topic_dir):
    """Bytes and count of the .kfs segments that make up the log now. The broker merges small
    adjacent segments and deletes the sources only after --file-delete-delay-ms, so both can be
    in the directory: per partition, the segments are walked in base-offset order, the longest
    first, and one that starts at or below the last offset already covered is left out."""
    total = count = 0
    for part in glob.glob(os.path.join(topic_dir, "*")):
        ranges = []
        for f in glob.glob(os.path.join(part, "*.kfs")):
            with open(f, "rb") as fh:
                head = fh.read(16)
                fh.seek(-12, os.SEEK_END)
                last = int.from_bytes(fh.read(8), "big")
            ranges.append((int.from_bytes(head[8:16], "big"), -last, os.path.getsize(f)))
        covered = -1
        for base, neg_last, size in sorted(ranges):
            if base <= covered:
                continue
            covered = -neg_last
            total += size
            count += 1
    return total, count


def children_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


# ---- 1 + 2: throughput and compression -------------------------------------------------------

def produce_bulk(b, args):
    """--mb MB of ~1 KB JSON values round-robin over the partitions; returns (rows, record bytes)."""
    p = Producer({"bootstrap.servers": b.bootstrap, "linger.ms": 20, "batch.size": 1 << 20,
                  "compression.type": "none", "queue.buffering.max.kbytes": 512 * 1024, "log_level": 3})
    rng = random.Random(21)
    target = args.mb * 1_000_000
    rows = sent = 0
    errors = []

    def done(err, _msg):
        if err is not None:
            errors.append(err)

    while sent < target:
        key = f"key-{rows % 10000}".encode()
        value = json_value(rng, rows, 1000)
        while True:
            try:
                p.produce(TOPIC, value, key=key, partition=rows % args.partitions, on_delivery=done)
                break
            except BufferError:
                p.poll(0.05)
        p.poll(0)
        rows += 1
        sent += len(key) + len(value)
    if p.flush(120) or errors:
        raise RuntimeError(f"bulk produce failed: {errors[:3]}")
    return rows, sent


def run_sink(args, data, warehouse, extra):
    cmd = [args.skiff, "iceberg", data, "--topic", TOPIC, "--once", "--warehouse", warehouse, "--log-level", "warn",
           *extra]
    cpu0, t0 = children_cpu(), time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, timeout=600)
    wall, cpu = time.perf_counter() - t0, children_cpu() - cpu0
    if p.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} exited {p.returncode}: {p.stderr.decode(errors='replace')[-2000:]}")
    table = os.path.join(data, warehouse, TOPIC)
    data_bytes, data_files = dir_bytes(table, "data/**/*.parquet")
    meta = json.load(open(latest_metadata(table)))
    return {"wall": wall, "cpu": cpu, "data_bytes": data_bytes, "data_files": data_files,
            "commits": len(meta.get("snapshots", [])), "rows": int(current_summary(meta).get("total-records", 0))}


def throughput(args, logdir):
    data = os.path.join(logdir, "bulk")
    b = Broker("bulk", args.skiff, logdir, ["--data-dir", data])
    try:
        b.create_topic(TOPIC, args.partitions)
        t0 = time.perf_counter()
        rows, record_bytes = produce_bulk(b, args)
        produce_s = time.perf_counter() - t0
    finally:
        b.stop()  # SIGTERM flushes every partition: all segments are in the store
    seg_bytes, segs = live_segment_bytes(os.path.join(data, "default", TOPIC))
    runs = {"zstd": run_sink(args, data, "iceberg/zstd", []),
            "uncompressed": run_sink(args, data, "iceberg/uncompressed", ["--uncompressed"])}
    for name, r in runs.items():
        if r["rows"] != rows:
            raise RuntimeError(f"{name}: the table holds {r['rows']} rows, {rows} were produced")
    return {"rows": rows, "record_bytes": record_bytes, "produce_s": produce_s, "seg_bytes": seg_bytes,
            "segments": segs, "runs": runs}


# ---- 3 + 4: produce-to-visible latency and objects per commit ----------------------------------

def latest_metadata(table):
    hint = open(os.path.join(table, "metadata", "version-hint.text")).read().strip()
    return os.path.join(table, "metadata", f"v{hint}.metadata.json")


def current_summary(meta):
    cur = meta.get("current-snapshot-id", -1)
    for s in meta.get("snapshots", []):
        if s["snapshot-id"] == cur:
            return s.get("summary", {})
    return {}


class Poller(threading.Thread):
    """Reads a table's version hint every poll_ms; on a new version, the current snapshot's
    skiff.next-offsets. `seen` is [(monotonic time, {partition: next offset})], in order."""

    def __init__(self, table, poll_ms):
        super().__init__(daemon=True)
        self.table, self.poll_s = table, poll_ms / 1000
        self.seen, self.stop_flag, self.version = [], False, None

    def run(self):
        hint_path = os.path.join(self.table, "metadata", "version-hint.text")
        while not self.stop_flag:
            now = time.perf_counter()
            try:
                with open(hint_path) as f:
                    v = f.read().strip()
                if v and v != self.version:
                    with open(os.path.join(self.table, "metadata", f"v{v}.metadata.json")) as f:
                        meta = json.load(f)
                    nxt = current_summary(meta).get("skiff.next-offsets")
                    if nxt:
                        self.seen.append((now, {int(k): int(x) for k, x in json.loads(nxt).items()}))
                    self.version = v
            except (OSError, ValueError):
                pass  # no table yet, or a file caught mid-write (read again next poll)
            time.sleep(self.poll_s)

    def visible_at(self, part, offset):
        for t, nxt in self.seen:
            if nxt.get(part, 0) > offset:
                return t
        return None


def latency(args, logdir):
    cadences = (10000, 1000)
    brokers, pollers, producers, sent = {}, {}, {}, {}
    try:
        for ms in cadences:
            data = os.path.join(logdir, f"lat-{ms}")
            extra = ["--data-dir", data, "--iceberg-topics", TOPIC, "--iceberg-commit-interval-ms", str(ms)]
            brokers[ms] = Broker(f"lat-{ms}", args.skiff, logdir, extra)
            brokers[ms].create_topic(TOPIC, args.partitions)
            producers[ms] = Producer({"bootstrap.servers": brokers[ms].bootstrap, "linger.ms": 5, "log_level": 3})
            pollers[ms] = Poller(os.path.join(data, "iceberg", "default", TOPIC), args.poll_ms)
            pollers[ms].start()
            sent[ms] = {}
        rng = random.Random(7)
        errors = []

        def done(ms, t_send, err, msg):
            if err is not None:
                errors.append(err)
            else:
                sent[ms][(msg.partition(), msg.offset())] = t_send

        # Steady rate, both brokers fed in alternation within each 10 ms tick.
        tick = 0.01
        per_tick = args.rate * tick
        start = time.perf_counter()
        warm_until = start + args.warmup
        end = start + args.latency_seconds
        owed, i = 0.0, 0
        while True:
            now = time.perf_counter()
            if now >= end:
                break
            owed += per_tick
            while owed >= 1:
                value = json_value(rng, i, 1000)
                for ms in cadences:
                    t = time.perf_counter()
                    producers[ms].produce(TOPIC, value, partition=i % args.partitions,
                                          on_delivery=functools.partial(done, ms, t if t >= warm_until else None))
                owed -= 1
                i += 1
            for p in producers.values():
                p.poll(0)
            sleep = start + tick * (round((now - start) / tick) + 1) - time.perf_counter()
            if sleep > 0:
                time.sleep(sleep)
        for p in producers.values():
            if p.flush(60):
                raise RuntimeError("latency produce did not finish")
        if errors:
            raise RuntimeError(f"latency produce failed: {errors[:3]}")
        # Until every measured record is visible (a commit after the last produce) or a timeout.
        deadline = time.perf_counter() + max(cadences) / 1000 * 2 + 15
        results = {}
        for ms in cadences:
            want = {k: t for k, t in sent[ms].items() if t is not None}
            while time.perf_counter() < deadline:
                if all(pollers[ms].visible_at(p, o) is not None for (p, o) in max_offsets(want)):
                    break
                time.sleep(0.1)
            lat, missing = [], 0
            for (p, o), t in want.items():
                v = pollers[ms].visible_at(p, o)
                if v is None:
                    missing += 1
                else:
                    lat.append((v - t) * 1000)
            results[ms] = {"lat": lat, "missing": missing, "records": len(want)}
        for pl in pollers.values():
            pl.stop_flag = True
        objects = objects_per_commit(os.path.join(logdir, "lat-10000", "iceberg", "default", TOPIC))
        return results, objects, i
    finally:
        for pl in pollers.values():
            pl.stop_flag = True
        for b in brokers.values():
            b.stop()


def max_offsets(want):
    """The highest measured offset of each partition (visible => all lower ones are)."""
    top = {}
    for p, o in want:
        top[p] = max(top.get(p, -1), o)
    return list(top.items())


def objects_per_commit(table):
    meta = json.load(open(latest_metadata(table)))
    commits = [s for s in meta.get("snapshots", []) if s.get("summary", {}).get("operation") == "append"]
    data_files = sum(int(s["summary"].get("added-data-files", 0)) for s in commits)
    md = os.path.join(table, "metadata")
    lists = len(glob.glob(os.path.join(md, "snap-*.avro")))
    manifests = len(glob.glob(os.path.join(md, "*.avro"))) - lists
    versions = len(glob.glob(os.path.join(md, "v*.metadata.json")))
    n = max(1, len(commits))
    return {"commits": len(commits), "data_files": data_files / n, "manifests": manifests / n, "lists": lists / n,
            "metadata": (versions - 1) / n}  # v1 is the table's creation, not a commit


# ---- report ---------------------------------------------------------------------------------------

def report(args, tp, lat, objects, lat_records):
    mb = tp["record_bytes"] / 1e6
    print(f"\n## Iceberg sink, local store, {args.partitions} partitions, ~1 KB JSON values")
    print(f"produced {tp['rows']} records, {mb:.1f} MB (key+value) in {tp['produce_s']:.1f} s; "
          f"{tp['segments']} segments, {tp['seg_bytes'] / 1e6:.1f} MB of .kfs")
    print("\n### segments -> committed Parquet (`skiff iceberg DIR --topic T --once`, one reactor)")
    print(f"{'pages':<13} {'wall s':>7} {'cpu s':>7} {'rows/s':>9} {'MB/s':>7} {'rows/cpu-s':>11} "
          f"{'MB/cpu-s':>9} {'files':>6} {'commits':>8}")
    for name, r in tp["runs"].items():
        print(f"{name:<13} {r['wall']:7.2f} {r['cpu']:7.2f} {tp['rows'] / r['wall']:9.0f} {mb / r['wall']:7.1f} "
              f"{tp['rows'] / r['cpu']:11.0f} {mb / r['cpu']:9.1f} {r['data_files']:6d} {r['commits']:8d}")
    print("\n### compression: table data files vs topic segments")
    print(f"{'pages':<13} {'data MB':>8} {'.kfs MB':>8} {'table/segments':>15} {'table/records':>14}")
    for name, r in tp["runs"].items():
        print(f"{name:<13} {r['data_bytes'] / 1e6:8.1f} {tp['seg_bytes'] / 1e6:8.1f} "
              f"{r['data_bytes'] / tp['seg_bytes']:15.3f} {r['data_bytes'] / tp['record_bytes']:14.3f}")
    print(f"\n### produce-to-visible latency (`skiff serve --iceberg-topics`), {args.rate} records/s per broker "
          f"for {args.latency_seconds:.0f} s ({lat_records} records each), poll every {args.poll_ms} ms")
    print(f"{'commit every':<13} {'records':>8} {'p50 ms':>8} {'p99 ms':>8} {'max ms':>8} {'not visible':>12}")
    for ms, r in lat.items():
        xs = r["lat"] or [float("nan")]
        print(f"{ms / 1000:>11.0f} s {r['records']:8d} {pct(xs, .5):8.0f} {pct(xs, .99):8.0f} {max(xs):8.0f} "
              f"{r['missing']:12d}")
    per_commit = objects["data_files"] + objects["manifests"] + objects["lists"] + objects["metadata"]
    per_hour = 3600 / 10 * per_commit
    print(f"\n### objects at the default cadence (10 s; measured over {objects['commits']} commits of the 10 s table)")
    print(f"per commit: {objects['data_files']:.2f} data files, {objects['manifests']:.2f} manifests, "
          f"{objects['lists']:.2f} manifest lists, {objects['metadata']:.2f} metadata files "
          f"(+ the version-hint.text overwrite)")
    print(f"per hour: {per_hour:.0f} new objects per table ({3600 / 10 * objects['data_files']:.0f} data files); "
          f"{per_hour / args.partitions:.0f} per Kafka partition "
          f"({3600 / 10 * objects['data_files'] / args.partitions:.0f} data files) with {args.partitions} partitions "
          f"in one day(timestamp) table partition")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--skiff", default=os.path.join(here, "..", "build", "src", "cli", "skiff"))
    ap.add_argument("--mb", type=int, default=200, help="MB of record bytes for the throughput run")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rate", type=int, default=500, help="records/s per broker in the latency run")
    ap.add_argument("--latency-seconds", type=float, default=60)
    ap.add_argument("--warmup", type=float, default=3, help="seconds of the latency run not measured")
    ap.add_argument("--poll-ms", type=int, default=20)
    ap.add_argument("--quick", action="store_true", help="a ~30 s smoke run")
    ap.add_argument("--keep", action="store_true", help="keep the data directories")
    args = ap.parse_args()
    if args.quick:
        args.mb, args.latency_seconds, args.warmup = 20, 10, 1
    args.skiff = os.path.abspath(args.skiff)
    logdir = tempfile.mkdtemp(prefix="bench-iceberg-")
    t0 = time.perf_counter()
    try:
        tp = throughput(args, logdir)
        lat, objects, n = latency(args, logdir)
        report(args, tp, lat, objects, n)
        load = os.getloadavg()
        print(f"\n(whole run {time.perf_counter() - t0:.0f} s on {os.cpu_count()} cores, load average at the end "
              f"{load[0]:.1f} {load[1]:.1f} {load[2]:.1f}; logs in {logdir})")
    finally:
        if not args.keep:
            for d in glob.glob(os.path.join(logdir, "*")):
                if os.path.isdir(d):
                    shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
