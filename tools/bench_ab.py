#!/usr/bin/python3
"""Two skiff binaries side by side in one run: before (A) and after (B) a change.

  latency  acks=all produce latency through each broker, both on the same S3 (s3-test-server
           behind s3-fault-proxy holding every response for BENCH_DELAY_MS), one message in
           flight, the two brokers served alternately so both see the same machine noise.
  cpu      broker CPU-seconds per GB produced on the local store: each broker on its own data
           directory and one core; rounds alternate A/B (order flipped every round); the CPU is
           the broker process's utime+stime (/proc/PID/stat) over the round, the producer's
           own CPU is not counted. Reported as the median over rounds.

Run through tools/bench-ab.sh, which starts the S3 server and the proxy (latency needs them).
"""
import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

from confluent_kafka import Producer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_broker import free_port, pct, wait_port  # noqa: E402  (one copy of the helpers)
from confluent_kafka.admin import AdminClient, NewTopic

CLK_TCK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        # The command name may hold spaces; the fields after it are fixed.
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK  # utime, stime


def proxy(query):
    """Talks to the s3-fault-proxy of with-s3.sh: "stats" (GET), or "config?...", "reset" (POST)."""
    url = os.environ["S3_PROXY_ENDPOINT"] + "/__proxy/" + query
    method = "GET" if query == "stats" else "POST"
    return urllib.request.urlopen(urllib.request.Request(url, method=method), timeout=10).read()


def metric_sum(broker, section, name):
    """The sum over series of one family of the broker's /metrics ("counters", "gauges")."""
    doc = json.loads(urllib.request.urlopen(broker.http + "/metrics", timeout=10).read())
    fam = doc[section].get(name)
    return sum(float(s["value"]) for s in fam["series"]) if fam else 0.0


class Broker:
    def __init__(self, name, skiff, logdir, extra):
        self.name = name
        self.port, hport = free_port(), free_port()
        self.log = open(os.path.join(logdir, f"{name}.log"), "w")
        self.proc = subprocess.Popen(
            [skiff, "serve", "--kafka-addr", f"127.0.0.1:{self.port}", "--http-addr", f"127.0.0.1:{hport}",
             "--cores", "1"] + extra, stdout=self.log, stderr=subprocess.STDOUT)
        wait_port(self.port)
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.http = f"http://127.0.0.1:{hport}"

    def create_topic(self, topic, partitions=1):
        admin = AdminClient({"bootstrap.servers": self.bootstrap})  # must outlive the future
        admin.create_topics([NewTopic(topic, partitions, 1)])[topic].result(30)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
        self.log.close()


def bench_latency(args, logdir):
    endpoint = os.environ["S3_PROXY_ENDPOINT"]
    bucket = os.environ["S3_BUCKET"]
    run = str(int(time.time()))
    brokers = {}
    try:
        for name, skiff in (("A", args.a), ("B", args.b)):
            brokers[name] = Broker(f"lat-{name}", skiff, logdir,
                                   ["--s3-bucket", bucket, "--s3-endpoint", endpoint, "--s3-path-style",
                                    "--namespace", f"ab-{name}-{run}"])
        producers = {}
        for name, b in brokers.items():
            b.create_topic("bench")
            producers[name] = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 0,
                                        "enable.idempotence": False, "max.in.flight": 1, "log_level": 3})
        payload = os.urandom(args.size // 2).hex().encode()

        def one(name, into):
            done = []
            t0 = time.perf_counter()
            producers[name].produce("bench", payload, on_delivery=lambda err, msg: done.append(err))
            while not done:
                producers[name].poll(0.001)
            if done[0] is not None:
                raise RuntimeError(f"{name}: {done[0]}")
            into.append((time.perf_counter() - t0) * 1000)

        warm = []
        for _ in range(10):
            for n in producers:
                one(n, warm)
        lat = {n: [] for n in producers}
        for i in range(args.messages):
            order = ("A", "B") if i % 2 == 0 else ("B", "A")
            for n in order:
                one(n, lat[n])
        delay = os.environ.get("BENCH_DELAY_MS", "?")
        print(f"\n## produce latency: acks=all, one message in flight, {args.size} B, S3 delay {delay} ms per "
              f"request, {args.messages} messages per binary, interleaved")
        print(f"{'binary':<7} {'p50 ms':>8} {'p90 ms':>8} {'p99 ms':>8} {'mean ms':>8}")
        for n in ("A", "B"):
            xs = lat[n]
            print(f"{n:<7} {pct(xs, .5):8.1f} {pct(xs, .9):8.1f} {pct(xs, .99):8.1f} {statistics.mean(xs):8.1f}")
        print(f"B/A p50 ratio: {pct(lat['B'], .5) / pct(lat['A'], .5):.3f}")
    finally:
        for b in brokers.values():
            b.stop()


def bench_cpu(args, logdir):
    brokers = {}
    dirs = []
    try:
        for name, skiff in (("A", args.a), ("B", args.b)):
            d = tempfile.mkdtemp(prefix=f"bench-ab-{name}-")
            dirs.append(d)
            brokers[name] = Broker(f"cpu-{name}", skiff, logdir, ["--data-dir", d])
        producers = {}
        for name, b in brokers.items():
            b.create_topic("cpu")
            producers[name] = Producer({"bootstrap.servers": b.bootstrap, "acks": "all", "linger.ms": 5,
                                        "batch.size": 1 << 20, "compression.type": "none",
                                        "enable.idempotence": False, "queue.buffering.max.kbytes": 1 << 20,
                                        "log_level": 3})
        payload = os.urandom(args.record_size)
        n = max(1, (args.mb_per_round << 20) // args.record_size)
        per_gb = {"A": [], "B": []}
        errors = []

        def round_(name):
            p = producers[name]
            pid = brokers[name].proc.pid
            c0 = cpu_seconds(pid)
            for _ in range(n):
                while True:
                    try:
                        p.produce("cpu", payload, on_delivery=lambda err, msg: err and errors.append(err))
                        break
                    except BufferError:
                        p.poll(0.01)
            p.flush(120)
            c1 = cpu_seconds(pid)
            if errors:
                raise RuntimeError(f"{name}: {errors[0]}")
            per_gb[name].append((c1 - c0) / (n * args.record_size / (1 << 30)))

        round_("A")  # warm-up: not counted
        round_("B")
        per_gb = {"A": [], "B": []}
        for r in range(args.rounds):
            for name in (("A", "B") if r % 2 == 0 else ("B", "A")):
                round_(name)
        print(f"\n## broker CPU per GB produced, local store, 1 core, {args.record_size} B records, "
              f"{args.mb_per_round} MiB per round, {args.rounds} rounds alternating")
        print(f"{'binary':<7} {'median s/GB':>12} {'min':>8} {'max':>8}")
        for name in ("A", "B"):
            xs = per_gb[name]
            print(f"{name:<7} {statistics.median(xs):12.2f} {min(xs):8.2f} {max(xs):8.2f}")
        print(f"B/A median ratio: {statistics.median(per_gb['B']) / statistics.median(per_gb['A']):.3f}")
    finally:
        for b in brokers.values():
            b.stop()
        for d in dirs:
            shutil.rmtree(d, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--a", required=True, help="the 'before' skiff binary")
    ap.add_argument("--b", required=True, help="the 'after' skiff binary")
    ap.add_argument("--what", default="latency,cpu")
    ap.add_argument("--messages", type=int, default=200, help="latency: messages per binary")
    ap.add_argument("--size", type=int, default=1024, help="latency: message size")
    ap.add_argument("--rounds", type=int, default=6, help="cpu: counted rounds per binary")
    ap.add_argument("--mb-per-round", type=int, default=128)
    ap.add_argument("--record-size", type=int, default=4096)
    args = ap.parse_args()
    print(f"A = {args.a}\nB = {args.b}")
    logdir = tempfile.mkdtemp(prefix="bench-ab-logs-")
    try:
        what = args.what.split(",")
        if "latency" in what:
            bench_latency(args, logdir)
        if "cpu" in what:
            bench_cpu(args, logdir)
    finally:
        shutil.rmtree(logdir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
