#!/usr/bin/python3
"""Cluster benchmarks (docs/benchmarks.md, "Cluster"):

1. Failover time as a function of the lease TTL: three brokers and one etcd on loopback, a
   producer sending to partition 0 every 5 ms (acks=all); the owner of partition 0 is SIGKILLed;
   failover = kill to the first acknowledgement of a record produced after the kill.
2. Produce latency of a 3-broker cluster vs one broker at the same load, side by side: one
   producer per setup, one message in flight at a time, alternating between the setups so both
   see the same machine noise; latency = produce() to its delivery report.

    tools/bench_cluster.py --skiff build/src/cli/skiff [--ttls 2,4,8] [--messages 2000]

Local store (one shared directory per setup); etcd from Debian (etcd-server).
"""
import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "test", "clients"))
from confluent_kafka import Producer  # noqa: E402
from confluent_kafka.admin import AdminClient, NewTopic  # noqa: E402

import broker as harness  # noqa: E402
from etcd_server import EtcdServer  # noqa: E402


class Proc:
    def __init__(self, args, log):
        self.args, self.log = args, log
        self.p = None

    def start(self):
        self.p = subprocess.Popen(self.args, stdout=open(self.log, "ab"), stderr=subprocess.STDOUT)
        return self


def start_broker(skiff, workdir, name, data_dir, extra):
    port = harness.free_port()
    args = [skiff, "serve", "--kafka-addr", f"127.0.0.1:{port}", "--http-addr", "off", "--cores", "1",
            "--data-dir", data_dir, *extra]
    pr = Proc(args, os.path.join(workdir, f"{name}.log")).start()
    pr.port = port
    harness.wait_until(lambda: port_open(port), 30, f"broker {name}")
    return pr


def port_open(port):
    import socket
    try:
        socket.create_connection(("127.0.0.1", port), 0.3).close()
        return True
    except OSError:
        return False


def leader_of(bootstrap, topic, part):
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic=topic, timeout=10)
    return md.topics[topic].partitions[part].leader


def create(bootstrap, topic, parts):
    a = AdminClient({"bootstrap.servers": bootstrap})
    a.create_topics([NewTopic(topic, num_partitions=parts, replication_factor=1)])[topic].result(30)
    harness.wait_until(lambda: all(p.leader >= 0 for p in a.list_topics(topic=topic, timeout=10)
                                   .topics[topic].partitions.values()) and
                       len(a.list_topics(topic=topic, timeout=10).topics[topic].partitions) == parts,
                       30, "leaders")


_runs = [0]


def cluster(skiff, workdir, ttl, n=3):
    _runs[0] += 1
    tag = f"{ttl}-{_runs[0]}"   # a fresh etcd and store per run
    e = EtcdServer(workdir, name=f"etcd-{tag}").start()
    data = os.path.join(workdir, f"data-{tag}")
    bs = [start_broker(skiff, workdir, f"b{tag}-{i}", data,
                       ["--etcd", e.url, "--broker-id", str(i), "--lease-ttl-s", str(ttl)]) for i in range(1, n + 1)]
    boot = ",".join(f"127.0.0.1:{b.port}" for b in bs)
    harness.wait_until(lambda: len(AdminClient({"bootstrap.servers": boot}).list_topics(timeout=10).brokers) == n,
                       30, "membership")
    return e, bs, boot


def failover_once(skiff, workdir, ttl):
    e, bs, boot = cluster(skiff, workdir, ttl)
    try:
        topic = f"fo-{ttl}-{int(time.time()*1000)}"
        create(boot, topic, 3)
        p = Producer({"bootstrap.servers": boot, "acks": "all", "linger.ms": 0, "message.timeout.ms": 120000,
                      "retry.backoff.ms": 50, "topic.metadata.refresh.interval.ms": 500})
        acks = []
        for _ in range(50):
            p.produce(topic, b"warm", partition=0, on_delivery=lambda err, m: None)
        p.flush(30)
        victim_id = leader_of(boot, topic, 0)
        victim = bs[victim_id - 1]
        t_kill = None
        deadline = time.monotonic() + ttl * 4 + 60
        i = 0
        while time.monotonic() < deadline:
            sent = time.monotonic()

            def cb(err, m, sent=sent):
                if err is None:
                    acks.append((sent, time.monotonic()))
            p.produce(topic, f"m{i}".encode(), partition=0, on_delivery=cb)
            i += 1
            p.poll(0.005)
            if t_kill is None and i == 40:
                victim.p.send_signal(signal.SIGKILL)
                victim.p.wait()
                t_kill = time.monotonic()
            if t_kill is not None and any(s > t_kill for s, _ in acks):
                break
        p.flush(5)
        after = [a for s, a in acks if s > t_kill]
        return (min(after) - t_kill) if after else float("nan")
    finally:
        for b in bs:
            if b.p.poll() is None:
                b.p.kill()
                b.p.wait()
        e.stop()


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def latency_side_by_side(skiff, workdir, messages):
    single = start_broker(skiff, workdir, "single", os.path.join(workdir, "single-data"), [])
    e, bs, boot = cluster(skiff, workdir, 10)
    try:
        setups = {"1 broker": f"127.0.0.1:{single.port}", "3-broker cluster": boot}
        topic = f"lat-{int(time.time()*1000)}"
        prods, lat = {}, {}
        for name, b in setups.items():
            create(b, topic, 6)
            prods[name] = Producer({"bootstrap.servers": b, "acks": "all", "linger.ms": 0})
            lat[name] = []
            for _ in range(50):  # warm-up: connections to every leader
                prods[name].produce(topic, b"w")
            prods[name].flush(30)
        payload = b"x" * 200
        for i in range(messages):
            for name, pr in prods.items():
                done = []
                t0 = time.perf_counter()
                pr.produce(topic, payload, partition=i % 6, on_delivery=lambda err, m: done.append(err))
                while not done:
                    pr.poll(0.0005)
                if done[0] is None:
                    lat[name].append((time.perf_counter() - t0) * 1000)
        return lat
    finally:
        for b in [single, *bs]:
            if b.p.poll() is None:
                b.p.send_signal(signal.SIGTERM)
                b.p.wait(30)
        e.stop()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skiff", required=True)
    ap.add_argument("--ttls", default="2,4,8")
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--messages", type=int, default=2000)
    a = ap.parse_args()
    workdir = tempfile.mkdtemp(prefix="skiff-bench-cluster-")
    try:
        print("## failover (SIGKILL of the owner to the first acknowledgement after it)")
        print("| lease TTL (s) | failover (s), each run | mean |")
        print("|---|---|---|")
        for ttl in [int(x) for x in a.ttls.split(",")]:
            runs = [failover_once(a.skiff, workdir, ttl) for _ in range(a.runs)]
            print(f"| {ttl} | {', '.join(f'{r:.2f}' for r in runs)} | {sum(runs)/len(runs):.2f} |", flush=True)
        print()
        print(f"## acks=all produce latency, {a.messages} messages each, alternating (ms)")
        lat = latency_side_by_side(a.skiff, workdir, a.messages)
        base = lat["1 broker"]
        print("| setup | p50 | p99 | p50 ratio | p99 ratio |")
        print("|---|---|---|---|---|")
        for name, xs in lat.items():
            print(f"| {name} | {pct(xs, .5):.2f} | {pct(xs, .99):.2f} | {pct(xs, .5)/pct(base, .5):.2f} | "
                  f"{pct(xs, .99)/pct(base, .99):.2f} |")
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


if __name__ == "__main__":
    main()
