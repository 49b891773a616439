#!/usr/bin/env python3
"""Segment reader benchmark: `skiff cat --parallel 1` against `--parallel 16` over ~100 segments
behind s3-fault-proxy holding every S3 answer for 40 ms (one round trip per request).

    test/integration/with-s3.sh tools/bench_reader.py --skiff build/src/cli/skiff [--delay-ms 40]

A broker writes the topic (small segments), stops, then `skiff cat` reads it twice through the
proxy. Prints both wall times, the ratio and the reader's --stats lines. Then, to show where the
time goes: a run that only starts up and lists (no segment planned), and both reads again with
the proxy's delay at 0 (what the S3 test server itself costs per GET).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import time
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "test", "clients"))
import broker  # noqa: E402


class _ctx:
    def __init__(self, workdir):
        self.workdir = workdir
        self.cleanups = []


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--skiff", required=True)
    p.add_argument("--delay-ms", type=int, default=40)
    p.add_argument("--segments", type=int, default=100)
    a = p.parse_args()
    skiff = os.path.abspath(a.skiff)
    work = tempfile.mkdtemp(prefix="skiff-bench-reader-")
    ctx = _ctx(work)
    b = broker.Broker(skiff, work, "bench", "s3",
                      extra_args=["--auto-create-topics", "true", "--default-partitions", "1",
                                  "--segment-bytes", "16384", "--flush-interval-ms", "1"])
    try:
        b.start()
        topic = "bench"
        # ~16 KiB per segment: segments * 160 records of ~100 bytes.
        data = b"".join(b"%08d " % i + b"x" * 90 + b"\n" for i in range(a.segments * 160))
        r = subprocess.run(["kcat", "-P", "-b", b.bootstrap, "-t", topic, "-X", "acks=all", "-X", "linger.ms=20",
                            "-X", "batch.size=16000"], input=data, capture_output=True, timeout=120)
        if r.returncode != 0:
            raise SystemExit(f"kcat -P failed: {r.stderr.decode(errors='replace')}")
        b.stop()
        proxy = broker.start_fault_proxy(ctx, a.delay_ms)
        target = [f"s3://{os.environ['S3_BUCKET']}/{b.namespace}/{topic}", "--s3-endpoint", proxy,
                  "--s3-path-style", "--s3-region", os.environ.get("AWS_REGION", "us-east-1"), "--stats"]

        def cat(extra, label):
            t0 = time.monotonic()
            r = subprocess.run([skiff, "cat"] + target + extra, capture_output=True, timeout=600)
            took = time.monotonic() - t0
            if r.returncode != 0:
                raise SystemExit(f"skiff cat {' '.join(extra)} exited {r.returncode}: {r.stderr.decode()}")
            lines = r.stdout.count(b"\n")
            last = (r.stderr.decode().strip().splitlines() or [""])[-1]
            print(f"{label}: {took:6.2f} s, {lines} records; {last}", flush=True)
            return took

        times = {par: cat(["--parallel", str(par)], f"--parallel {par:2d}") for par in (1, 16)}
        print(f"delay {a.delay_ms} ms per request: --parallel 16 is {times[1] / times[16]:.1f}x faster than "
              f"--parallel 1", flush=True)
        # Where the time goes: start-up, S3 client and LIST requests without any GET of a segment.
        fixed = cat(["--partition", "999999"], "start-up and listing only")
        print(f"without that fixed part: --parallel 16 is {(times[1] - fixed) / (times[16] - fixed):.1f}x faster",
              flush=True)
        # The S3 test server's own cost per GET (the proxy's delay at 0).
        urllib.request.urlopen(urllib.request.Request(proxy + "/__proxy/config?delay-ms=0", method="POST"),
                               timeout=10).read()
        for par in (1, 16):
            cat(["--parallel", str(par)], f"delay 0, --parallel {par:2d}")
    finally:
        b.cleanup()
        for fn in ctx.cleanups:
            fn()


if __name__ == "__main__":
    main()
