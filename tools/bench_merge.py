#!/usr/bin/python3
"""Objects per partition per day at 1 MB/s, with and without segment merging, side by side.

Two brokers run at once on local data directories, identical but for --merge-target-bytes
(the default, 32 MiB, against 0). Each gets one partition and an acks=all producer writing
--rate bytes a second in 1 KiB records; each broker flushes every 100 ms (--flush-linger-ms
100), as a busy partition does. After --seconds, the objects (.kfs and .index) in each
partition's directory are counted.

Per day: without merging, the objects grow linearly (measured rate x 86,400). With merging,
they are the merged segments (one per half-target-to-target bytes written, measured mean size)
plus a tail of not-yet-merged small ones (bounded by half the target): both are reported.

    tools/bench-merge.sh [--seconds 120] [--rate 1000000] [--skiff build/src/cli/skiff]
"""
import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_broker import free_port, wait_port  # noqa: E402


def counter(hport, name):
    with urllib.request.urlopen(f"http://127.0.0.1:{hport}/metrics", timeout=10) as r:
        fam = json.load(r).get("counters", {}).get(name)
    return sum(s["value"] for s in fam["series"]) if fam else 0


def start(skiff, data, merge, log):
    port, hport = free_port(), free_port()
    args = [skiff, "serve", "--kafka-addr", f"127.0.0.1:{port}", "--http-addr", f"127.0.0.1:{hport}",
            "--cores", "1", "--data-dir", data, "--retention-ms", "-1", "--flush-linger-ms", "100",
            "--flush-interval-ms", "100", "--file-delete-delay-ms", "5000"]
    if not merge:
        args += ["--merge-target-bytes", "0"]
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT), port, hport


def produce(port, rate, seconds, stats):
    boot = f"127.0.0.1:{port}"
    admin = AdminClient({"bootstrap.servers": boot})
    admin.create_topics([NewTopic("m", 1, 1)])["m"].result(30)
    p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 20, "enable.idempotence": True})
    value = b"x" * 1000
    per_tick = max(1, rate // 1000 // 20)   # records every 50 ms
    t0 = time.monotonic()
    sent = 0
    while time.monotonic() - t0 < seconds:
        for _ in range(per_tick):
            p.produce("m", value=value)
            sent += len(value)
        p.poll(0)
        # Pace to the rate.
        ahead = sent / rate - (time.monotonic() - t0)
        if ahead > 0:
            time.sleep(ahead)
    p.flush(60)
    stats["bytes"] = sent
    stats["seconds"] = time.monotonic() - t0


def objects(data):
    d = os.path.join(data, "default", "m", "0")
    kfs = [os.path.getsize(os.path.join(d, f)) for f in os.listdir(d) if f.endswith(".kfs")]
    idx = [f for f in os.listdir(d) if f.endswith(".index")]
    return kfs, len(idx)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skiff", default=os.path.join(os.path.dirname(__file__), "../build/src/cli/skiff"))
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--rate", type=int, default=1_000_000)
    opts = ap.parse_args()
    root = tempfile.mkdtemp(prefix="skiff-bench-merge-")
    procs = []
    try:
        runs = {}
        for merge in (False, True):
            data = os.path.join(root, "merge" if merge else "plain")
            log = open(os.path.join(root, ("merge" if merge else "plain") + ".log"), "w")
            proc, port, hport = start(os.path.abspath(opts.skiff), data, merge, log)
            procs.append(proc)
            wait_port(port)
            runs[merge] = {"data": data, "port": port, "hport": hport, "stats": {}}
        threads = [threading.Thread(target=produce, args=(r["port"], opts.rate, opts.seconds, r["stats"]))
                   for r in runs.values()]
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        time.sleep(8)   # the last merges and their deletes (5 s delay)
        target = 32 << 20
        print(f"objects per partition at {opts.rate / 1e6:.1f} MB/s, one flush per 100 ms, "
              f"{opts.seconds} s, merge target {target >> 20} MiB:")
        out = {}
        for merge, r in runs.items():
            kfs, idx = objects(r["data"])
            flushes = counter(r["hport"], "skiff_flushes_total")
            merges = counter(r["hport"], "skiff_merges_total")
            secs = r["stats"]["seconds"]
            big = [s for s in kfs if s >= target // 2]
            out[merge] = (kfs, idx, flushes, merges, secs, big)
            name = "merging" if merge else "no merging"
            print(f"  {name:>10}: {len(kfs) + idx:6d} objects ({len(kfs)} .kfs, {idx} .index) after {flushes} "
                  f"flushes, {merges} merges, {r['stats']['bytes'] / 1e6:.0f} MB written")
        kfs, idx, flushes, _, secs, _ = out[False]
        plain_day = (len(kfs) + idx) / secs * 86400
        kfs_m, idx_m, _, _, secs_m, big = out[True]
        mean = sum(big) / len(big) if big else target * 0.75
        merged_day = 2 * (opts.rate * 86400 / mean)
        tail = 2 * ((target // 2) / max(1, runs[True]["stats"]["bytes"] / max(1, out[True][2] or 1)))
        print(f"  per day, no merging: {plain_day:,.0f} objects ({flushes / secs:.1f} flushes/s x 2 objects x 86,400 s)")
        print(f"  per day, merging:    {merged_day:,.0f} objects in merged segments (mean {mean / 2**20:.1f} MiB) "
              f"+ at most {tail:,.0f} not yet merged")
        print(f"  ratio: {plain_day / (merged_day + tail):,.0f} x fewer objects with merging")
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(60)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
