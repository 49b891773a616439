#!/usr/bin/python3
"""Produce over SASL_SSL (and SSL) vs PLAINTEXT, side by side on ONE broker in one run.

One `skiff serve --cores 1` on a local data directory with a PLAINTEXT, a SASL_SSL and
(unless --no-ssl) an SSL listener; the certificates (a CA and a server certificate for
IP:127.0.0.1) are made at run time with the openssl CLI; the SCRAM user is added through the
PLAINTEXT listener with `skiff user add`. Each variant has its own one-partition topic and one
long-lived confluent-kafka producer (acks=all, 4 KiB records, the settings of bench_ab.py's cpu
mode), connected and warmed up by one uncounted round before the counted ones, so the TLS
handshake and the SASL exchange are outside every measurement.

Per round and variant: producer throughput (wall time from the first produce() to the end of
flush()), broker CPU-seconds per GB (utime+stime of the broker process from /proc/PID/stat over
the round, all its threads) and the producer process's own CPU per GB (getrusage, librdkafka's
threads included: the client side of the encryption). Rounds alternate the variants, the order
rotated every round, so all of them see the same machine noise. Medians and min-max are printed.

--perf-seconds N adds, after the counted rounds, one `perf record -g` of the broker during an
extra PLAINTEXT round and an extra SASL_SSL round, and prints the top symbols of each.
"""
import argparse
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_broker import free_port, wait_port  # noqa: E402  (one copy of the helpers)

CLK_TCK = os.sysconf("SC_CLK_TCK")
GIB = 1 << 30
PASSWORD = "bench-secret-0123456789"


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        rest = f.read().rsplit(")", 1)[1].split()
    return (int(rest[11]) + int(rest[12])) / CLK_TCK  # utime, stime


def self_cpu():
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def run(cmd, **kw):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, **kw)


def make_certs(d):
    """A CA and a server certificate for IP:127.0.0.1 signed by it (2 days, RSA 2048)."""
    run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", "ca.key", "-out", "ca.pem",
         "-days", "2", "-subj", "/CN=bench-ca"], cwd=d)
    run(["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "server.key.pem", "-out", "server.csr",
         "-subj", "/CN=127.0.0.1"], cwd=d)
    with open(os.path.join(d, "san.ext"), "w") as f:
        f.write("subjectAltName=IP:127.0.0.1\n")
    run(["openssl", "x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
         "-out", "server.pem", "-days", "2", "-extfile", "san.ext"], cwd=d)
    return os.path.join(d, "ca.pem")


def negotiated(port, ca):
    """TLS version and cipher an OpenSSL client (the same library librdkafka uses) negotiates."""
    out = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-CAfile", ca,
                          "-verify_return_error", "-brief"], input="", capture_output=True, text=True,
                         timeout=20)
    lines = [ln.strip() for ln in (out.stdout + out.stderr).splitlines()
             if ln.strip().startswith(("Protocol version", "Ciphersuite", "Verification", "Peer Temp Key"))]
    return "; ".join(lines) or (out.stdout + out.stderr).strip()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--skiff", default="build/src/cli/skiff")
    ap.add_argument("--rounds", type=int, default=6, help="counted rounds per variant (6: every order of 3 variants once)")
    ap.add_argument("--mb-per-round", type=int, default=128)
    ap.add_argument("--record-size", type=int, default=4096)
    ap.add_argument("--batch-size", type=int, default=1 << 20, help="librdkafka batch.size (1 MiB: ~1 MB Produce requests)")
    ap.add_argument("--mechanism", default="SCRAM-SHA-512")
    ap.add_argument("--no-ssl", action="store_true", help="leave out the SSL (no SASL) variant")
    ap.add_argument("--perf-seconds", type=float, default=0, help="profile the broker (needs perf)")
    ap.add_argument("--perf-dir", help="keep the perf-*.data files here (default: deleted)")
    args = ap.parse_args()

    work = tempfile.mkdtemp(prefix="bench-security-")
    broker = None
    clients = []  # dropped before the broker stops, so librdkafka does not log the disconnect
    try:
        ca = make_certs(work)
        data = os.path.join(work, "data")
        os.mkdir(data)
        ports = {"PLAINTEXT": free_port(), "SASL_SSL": free_port()}
        if not args.no_ssl:
            ports["SSL"] = free_port()
        hport = free_port()
        listeners = ",".join(f"{proto}://127.0.0.1:{p}" for proto, p in ports.items())
        log = open(os.path.join(work, "broker.log"), "w")
        broker = subprocess.Popen(
            [args.skiff, "serve", "--listeners", listeners, "--tls-cert-file", os.path.join(work, "server.pem"),
             "--tls-key-file", os.path.join(work, "server.key.pem"), "--data-dir", data,
             "--http-addr", f"127.0.0.1:{hport}", "--cores", "1"], stdout=log, stderr=subprocess.STDOUT)
        for p in ports.values():
            wait_port(p)
        plain = f"127.0.0.1:{ports['PLAINTEXT']}"
        run([args.skiff, "user", "add", "alice", "-b", plain, "--mechanism", args.mechanism], input=PASSWORD + "\n")
        tls_info = negotiated(ports["SASL_SSL"], ca)

        base = {"acks": "all", "linger.ms": 5, "batch.size": args.batch_size, "compression.type": "none",
                "enable.idempotence": False, "queue.buffering.max.kbytes": 1 << 20, "log_level": 3}
        security = {
            "PLAINTEXT": {"security.protocol": "PLAINTEXT"},
            "SSL": {"security.protocol": "SSL", "ssl.ca.location": ca},
            "SASL_SSL": {"security.protocol": "SASL_SSL", "ssl.ca.location": ca, "sasl.mechanisms": args.mechanism,
                         "sasl.username": "alice", "sasl.password": PASSWORD},
        }
        variants = list(ports)  # PLAINTEXT, SASL_SSL[, SSL]
        admin = AdminClient({"bootstrap.servers": plain})  # must outlive the futures
        clients.append(admin)
        topics = {v: f"sec-{v.lower()}" for v in variants}
        for t, fut in admin.create_topics([NewTopic(t, 1, 1) for t in topics.values()]).items():
            fut.result(30)
        producers = {v: Producer({**base, **security[v], "bootstrap.servers": f"127.0.0.1:{ports[v]}"})
                     for v in variants}
        clients.append(producers)

        payload = os.urandom(args.record_size)
        n = max(1, (args.mb_per_round << 20) // args.record_size)
        nbytes = n * args.record_size
        errors = []
        res = {v: {"mbps": [], "broker": [], "client": []} for v in variants}

        def round_(v):
            p, topic = producers[v], topics[v]
            b0, s0 = cpu_seconds(broker.pid), self_cpu()
            t0 = time.perf_counter()
            for _ in range(n):
                while True:
                    try:
                        p.produce(topic, payload, on_delivery=lambda err, msg: err and errors.append(err))
                        break
                    except BufferError:
                        p.poll(0.01)
            left = p.flush(120)
            t1 = time.perf_counter()
            b1, s1 = cpu_seconds(broker.pid), self_cpu()
            if errors or left:
                raise RuntimeError(f"{v}: {errors[0] if errors else f'{left} messages not delivered'}")
            res[v]["mbps"].append(nbytes / (t1 - t0) / 1e6)
            res[v]["broker"].append((b1 - b0) / (nbytes / GIB))
            res[v]["client"].append((s1 - s0) / (nbytes / GIB))
            print(f"  {v:<9} {res[v]['mbps'][-1]:7.1f} MB/s  broker {res[v]['broker'][-1]:5.2f} s/GB  "
                  f"client {res[v]['client'][-1]:5.2f} s/GB", file=sys.stderr, flush=True)

        print("warm-up (not counted)", file=sys.stderr)
        for v in variants:
            round_(v)
        res = {v: {"mbps": [], "broker": [], "client": []} for v in variants}
        for r in range(args.rounds):
            k = r % len(variants)
            order = variants[k:] + variants[:k]
            if r % 2:
                order.reverse()
            print(f"round {r + 1}: {' '.join(order)}", file=sys.stderr)
            for v in order:
                round_(v)

        print(f"\n## produce over SASL_SSL ({args.mechanism}) vs PLAINTEXT, one broker, 1 core, local store, "
              f"acks=all, {args.record_size} B records, batch.size {args.batch_size}, {args.mb_per_round} MiB per round, "
              f"{args.rounds} rounds per variant alternating")
        print(f"TLS negotiated (openssl s_client to the SASL_SSL listener): {tls_info}")
        print("\n| listener | producer MB/s median (min-max) | broker CPU s/GB median (min-max) "
              "| producer CPU s/GB median (min-max) |")
        print("|---|---:|---:|---:|")

        def cell(xs, fmt):
            return f"{fmt.format(statistics.median(xs))} ({fmt.format(min(xs))}-{fmt.format(max(xs))})"

        for v in variants:
            x = res[v]
            print(f"| {v} | {cell(x['mbps'], '{:.0f}')} | {cell(x['broker'], '{:.2f}')} | {cell(x['client'], '{:.2f}')} |")
        m = {v: {k: statistics.median(xs) for k, xs in res[v].items()} for v in variants}
        for v in variants:
            if v == "PLAINTEXT":
                continue
            print(f"{v}/PLAINTEXT median ratios: throughput {m[v]['mbps'] / m['PLAINTEXT']['mbps']:.3f}, "
                  f"broker CPU/GB {m[v]['broker'] / m['PLAINTEXT']['broker']:.3f} "
                  f"(+{m[v]['broker'] - m['PLAINTEXT']['broker']:.2f} s/GB), "
                  f"producer CPU/GB {m[v]['client'] / m['PLAINTEXT']['client']:.3f}")

        if args.perf_seconds > 0 and shutil.which("perf"):
            for v in ("PLAINTEXT", "SASL_SSL"):
                out = os.path.join(args.perf_dir or work, f"perf-{v}.data")
                rec = subprocess.Popen(["perf", "record", "-g", "-F", "999", "-o", out, "-p", str(broker.pid),
                                        "--", "sleep", str(args.perf_seconds)],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                while rec.poll() is None:
                    round_(v)  # whole rounds until perf stops; not counted in the table above
                print(f"\n## perf, broker, {v}: self time by library, then symbols >= 1%")
                for sort, limit in (("dso", "0.5"), ("dso,symbol", "1")):
                    rep = subprocess.run(["perf", "report", "-i", out, "--no-children", "--sort", sort, "--stdio",
                                          "-g", "none", "--percent-limit", limit], capture_output=True, text=True)
                    for ln in rep.stdout.splitlines():
                        f = ln.split()
                        if f and not ln.startswith("#"):
                            print("  " + " ".join(x for x in f if x != "-"))
    finally:
        clients.clear()
        admin = producers = None  # noqa: F841
        if broker is not None:
            broker.send_signal(signal.SIGTERM)
            try:
                broker.wait(60)
            except subprocess.TimeoutExpired:
                broker.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
