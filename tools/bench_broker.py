#!/usr/bin/python3
"""End-to-end produce latency through `skiff serve`, parallel vs sequential segment uploads.

Two brokers run side by side against the same S3 (through s3-fault-proxy, which holds each
response for --delay-ms, i.e. one simulated round trip), one with --upload-mode parallel and
one with --upload-mode sequential. A librdkafka producer (confluent-kafka, acks=all) sends one
message at a time to each broker in alternation, so both see the same machine noise; the
latency of each message is produce() to its delivery report.

Run through tools/bench-broker.sh, which starts the S3 server and the proxy.
"""
import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def wait_port(port, timeout=20):
    end = time.time() + timeout
    while time.time() < end:
        try:
            socket.create_connection(("127.0.0.1", port), 0.2).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"broker on {port} did not start")


def start_broker(skiff, mode, endpoint, bucket, ns, logdir, cores):
    port, hport = free_port(), free_port()
    log = open(os.path.join(logdir, f"{mode}.log"), "w")
    p = subprocess.Popen(
        [skiff, "serve", "--kafka-addr", f"127.0.0.1:{port}", "--http-addr", f"127.0.0.1:{hport}",
         "--s3-bucket", bucket, "--s3-endpoint", endpoint, "--s3-path-style", "--namespace", ns,
         "--upload-mode", mode, "--cores", str(cores)],
        stdout=log, stderr=subprocess.STDOUT)
    wait_port(port)
    return p, port


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skiff", required=True)
    ap.add_argument("--messages", type=int, default=300)
    ap.add_argument("--size", type=int, default=1024)
    ap.add_argument("--cores", type=int, default=1)
    args = ap.parse_args()
    endpoint = os.environ["S3_PROXY_ENDPOINT"]
    bucket = os.environ["S3_BUCKET"]
    delay = os.environ.get("BENCH_DELAY_MS", "?")
    logdir = tempfile.mkdtemp(prefix="bench-broker-")
    run = str(int(time.time()))
    brokers = {}
    try:
        for mode in ("parallel", "sequential"):
            brokers[mode] = start_broker(args.skiff, mode, endpoint, bucket, f"bench-{mode}-{run}", logdir,
                                         args.cores)
        producers = {}
        for mode, (_, port) in brokers.items():
            b = f"127.0.0.1:{port}"
            admin = AdminClient({"bootstrap.servers": b})  # must outlive the future
            admin.create_topics([NewTopic("bench", 1, 1)])["bench"].result(30)
            producers[mode] = Producer({"bootstrap.servers": b, "acks": "all", "linger.ms": 0,
                                        "enable.idempotence": False, "max.in.flight": 1})
        payload = os.urandom(args.size // 2).hex().encode()
        lat = {m: [] for m in producers}

        def one(mode):
            done = []
            t0 = time.perf_counter()
            producers[mode].produce("bench", payload, on_delivery=lambda err, msg: done.append(err))
            while not done:
                producers[mode].poll(0.001)
            if done[0] is not None:
                raise RuntimeError(f"{mode}: {done[0]}")
            lat[mode].append((time.perf_counter() - t0) * 1000)

        for _ in range(10):  # warm-up: connections, metadata
            for m in producers:
                one(m)
        lat = {m: [] for m in producers}
        for _ in range(args.messages):
            for m in ("parallel", "sequential"):
                one(m)
        print(f"produce latency, acks=all, one message in flight, {args.size} B, S3 delay {delay} ms per request,"
              f" {args.messages} messages per mode, interleaved")
        print(f"{'mode':<11} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
        for m in ("parallel", "sequential"):
            xs = lat[m]
            print(f"{m:<11} {pct(xs, .5):8.1f} {pct(xs, .9):8.1f} {pct(xs, .99):8.1f} {statistics.mean(xs):8.1f}")
        print(f"sequential/parallel p50 ratio: {pct(lat['sequential'], .5) / pct(lat['parallel'], .5):.2f}")
    finally:
        for p, _ in brokers.values():
            p.send_signal(signal.SIGTERM)
        for p, _ in brokers.values():
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(logdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
