#!/usr/bin/python3
"""Time from `skiff serve` process start to serving a partition of N segments, on S3 with every
request held BENCH_DELAY_MS by s3-fault-proxy, without and with the partition's manifest.

1. Seeds N segments: a broker with manifests off (--manifest-every-segments 0) on the S3 server
   directly (no delay), one acks=all message at a time, so each message is its own segment.
2. "full LIST": a broker with manifests off, through the proxy: restore lists every segment.
3. A broker with manifests on starts, serves the partition and stops cleanly: its close stores
   the manifest.
4. "manifest": a broker with manifests on, through the proxy: restore reads the manifest and
   lists what is newer (nothing).
Steps 2 and 4 alternate for --rounds rounds. Serving = the first ListOffsets that answers with
the high watermark N, polled every 10 ms from the moment the process was started.

Run through tools/bench-restore.sh, which starts the S3 server and the proxy.
"""
import argparse
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_broker import free_port, wait_port  # noqa: E402


def start(skiff, endpoint, bucket, ns, manifests, log):
    port, hport = free_port(), free_port()
    proc = subprocess.Popen(
        [skiff, "serve", "--kafka-addr", f"127.0.0.1:{port}", "--http-addr", f"127.0.0.1:{hport}", "--cores", "1",
         "--s3-bucket", bucket, "--s3-endpoint", endpoint, "--s3-path-style", "--namespace", ns,
         "--manifest-every-segments", "64" if manifests else "0", "--retention-ms", "-1"],
        stdout=log, stderr=subprocess.STDOUT)
    return proc, port


def stop(proc):
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def seed(skiff, endpoint, bucket, ns, n, log):
    proc, port = start(skiff, endpoint, bucket, ns, False, log)
    try:
        wait_port(port)
        boot = f"127.0.0.1:{port}"
        admin = AdminClient({"bootstrap.servers": boot})  # must outlive the future
        admin.create_topics([NewTopic("r", 1, 1)])["r"].result(30)
        p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 0, "max.in.flight": 1,
                      "enable.idempotence": False, "log_level": 3})
        for i in range(n):
            done = []
            p.produce("r", b"x" * 100, partition=0, on_delivery=lambda err, msg: done.append(err))
            while not done:
                p.poll(0.001)
            if done[0] is not None:
                raise RuntimeError(str(done[0]))
            if i and i % 2000 == 0:
                print(f"  seeded {i} segments", file=sys.stderr, flush=True)
    finally:
        stop(proc)


def time_to_serve(skiff, endpoint, bucket, ns, n, manifests, log):
    t0 = time.perf_counter()
    proc, port = start(skiff, endpoint, bucket, ns, manifests, log)
    try:
        wait_port(port, timeout=300)
        c = Consumer({"bootstrap.servers": f"127.0.0.1:{port}", "group.id": "bench", "log_level": 0})
        try:
            while True:
                try:
                    lo, hi = c.get_watermark_offsets(TopicPartition("r", 0), timeout=5)
                    if hi == n:
                        return time.perf_counter() - t0
                except Exception:
                    pass
                if time.perf_counter() - t0 > 300:
                    raise RuntimeError("partition not served within 300 s")
                time.sleep(0.01)
        finally:
            c.close()
    finally:
        stop(proc)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skiff", default="build/src/cli/skiff")
    ap.add_argument("--segments", type=int, default=10000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    endpoint, proxy, bucket = os.environ["S3_ENDPOINT"], os.environ["S3_PROXY_ENDPOINT"], os.environ["S3_BUCKET"]
    delay = os.environ.get("BENCH_DELAY_MS", "0")
    logdir = tempfile.mkdtemp(prefix="bench-restore-")
    log = open(os.path.join(logdir, "broker.log"), "w")
    ns_full, ns_man = f"restore-full-{int(time.time())}", f"restore-man-{int(time.time())}"
    try:
        urllib.request.urlopen(urllib.request.Request(proxy + "/__proxy/config?delay-ms=0", method="POST")).read()
        t = time.perf_counter()
        seed(args.skiff, endpoint, bucket, ns_full, args.segments, log)
        seed(args.skiff, endpoint, bucket, ns_man, args.segments, log)
        print(f"seeded 2 x {args.segments} segments in {time.perf_counter() - t:.0f} s", file=sys.stderr)
        # The manifest of ns_man: one clean start and stop with manifests on.
        # Served first (the restore by a full LIST has finished), so the stop stores the manifest.
        time_to_serve(args.skiff, endpoint, bucket, ns_man, args.segments, True, log)
        urllib.request.urlopen(urllib.request.Request(proxy + f"/__proxy/config?delay-ms={delay}", method="POST")).read()
        full, man = [], []
        for _ in range(args.rounds):
            full.append(time_to_serve(args.skiff, proxy, bucket, ns_full, args.segments, False, log))
            man.append(time_to_serve(args.skiff, proxy, bucket, ns_man, args.segments, True, log))
        print(f"\n## time from process start to serving a partition of {args.segments} segments, "
              f"S3 delay {delay} ms per request, {args.rounds} rounds alternating")
        print(f"{'restore':<10} {'median s':>9} {'min s':>7} {'max s':>7}")
        for name, xs in (("full LIST", full), ("manifest", man)):
            print(f"{name:<10} {statistics.median(xs):9.2f} {min(xs):7.2f} {max(xs):7.2f}")
        print(f"full/manifest median ratio: {statistics.median(full) / statistics.median(man):.1f}")
    finally:
        log.close()
        print(f"broker log: {logdir}/broker.log", file=sys.stderr)


if __name__ == "__main__":
    main()
