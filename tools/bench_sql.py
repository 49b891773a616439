#!/usr/bin/env python3
"""`SELECT count(*)` over ~1 GB of topic data with `skiff sql` (local store) against reading the
same data with a kcat consumer through `skiff serve` on the same data directory, in one run.

    tools/bench_sql.py --skiff build/src/cli/skiff [--gb 1] [--partitions 4] [--rounds 3] [--workdir /tmp]

1. A broker (`--merge-target-bytes 0`, default 4 MiB segments) gets ~--gb GiB from `kcat -P`:
   records of 1-10 KiB of base64 text (uniform sizes), keys k<i % 1000>, no compression, so the
   stored bytes are the produced bytes. The broker stops (SIGTERM flushes everything).
2. `skiff sql DIR --namespace default` and `skiff serve --data-dir DIR` start once (their start-up
   and restore are not timed), then each round times, in turn:
     sql:  psql -c 'SELECT count(*) FROM t'          (bytes/segments from skiff sql's /metrics)
     kcat: kcat -C -e -o beginning -f 'x'            (one byte per record; all partitions to EOF)
     cat:  skiff cat DIR/default/t > /dev/null       (the reader alone, no SQL, no broker)
   and the CPU seconds of the server process (/proc/PID/stat) and of the client (RUSAGE_CHILDREN).
3. Prints a table of medians (min-max) and the ratios, then deletes the data.
The data sits in the page cache (it was just written), so this compares the read paths, not disks.
"""
import argparse
import base64
import os
import random
import re
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "test", "clients"))
import broker  # noqa: E402

TOPIC = "t"
CLK = os.sysconf("SC_CLK_TCK")


def proc_cpu(pid):
    f = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) / CLK


def child_cpu():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def produce(b, gib):
    target = int(gib * (1 << 30))
    rnd = random.Random(1)
    pool = base64.b64encode(os.urandom(12 * 1024)).decode()  # slices of it: text, incompressible-ish
    kc = subprocess.Popen(["kcat", "-P", "-b", b.bootstrap, "-t", TOPIC, "-K", "|", "-z", "none", "-q",
                           "-X", "acks=all", "-X", "linger.ms=20", "-X", "batch.size=1000000",
                           "-X", "queue.buffering.max.kbytes=262144"],
                          stdin=subprocess.PIPE, stderr=subprocess.PIPE)
    sent = n = 0
    t0 = time.monotonic()
    buf = []
    while sent < target:
        size = rnd.randint(1024, 10240)
        off = rnd.randrange(0, len(pool) - size)
        line = f"k{n % 1000}|{pool[off:off + size]}\n"
        buf.append(line)
        sent += size
        n += 1
        if len(buf) >= 2000:
            kc.stdin.write("".join(buf).encode())
            buf = []
    kc.stdin.write("".join(buf).encode())
    kc.stdin.close()
    err = kc.stderr.read()
    if kc.wait() != 0 or err.strip():
        raise SystemExit(f"kcat -P exited {kc.returncode}: {err.decode(errors='replace')}")
    took = time.monotonic() - t0
    print(f"produced {n} records, {sent / (1 << 30):.3f} GiB of values in {took:.1f} s", flush=True)
    return n, sent


def metrics(port):
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as r:
        text = r.read().decode()
    return {ln.split()[0]: float(ln.split()[1]) for ln in text.splitlines() if ln and not ln.startswith("#")}


def timed(fn):
    c0 = child_cpu()
    t0 = time.monotonic()
    out = fn()
    return time.monotonic() - t0, child_cpu() - c0, out


def med(xs):
    return f"{statistics.median(xs):.2f} ({min(xs):.2f}-{max(xs):.2f})"


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--skiff", required=True)
    p.add_argument("--gb", type=float, default=1.0, help="GiB of record values to produce")
    p.add_argument("--partitions", type=int, default=4)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--workdir", default="/tmp")
    p.add_argument("--keep", action="store_true")
    a = p.parse_args()
    skiff = os.path.abspath(a.skiff)
    work = tempfile.mkdtemp(prefix="skiff-bench-sql-", dir=a.workdir)
    procs = []
    try:
        b = broker.Broker(skiff, work, "bench", "local",
                          extra_args=["--auto-create-topics", "true", "--default-partitions", str(a.partitions),
                                      "--merge-target-bytes", "0"])
        b.start()
        n, value_bytes = produce(b, a.gb)
        b.stop()
        tdir = os.path.join(b.data_dir, "default", TOPIC)
        kfs = [os.path.join(dp, f) for dp, _, fs in os.walk(tdir) for f in fs if f.endswith(".kfs")]
        stored = sum(os.path.getsize(f) for f in kfs)
        print(f"stored: {len(kfs)} segments, {stored / (1 << 30):.3f} GiB of .kfs over {a.partitions} partitions",
              flush=True)

        # The two servers, started once: start-up and restore are not part of the timings.
        sql_port, sql_http = broker.free_port(), broker.free_port()
        sql_log = open(os.path.join(work, "sql.log"), "wb")
        sql = subprocess.Popen([skiff, "sql", b.data_dir, "--namespace", "default", "--listen",
                                f"127.0.0.1:{sql_port}", "--http", f"127.0.0.1:{sql_http}"],
                               stdout=sql_log, stderr=subprocess.STDOUT)
        procs.append(sql)
        broker.wait_until(lambda: b"listening on" in open(sql_log.name, "rb").read(), 20, "skiff sql")
        b.start()
        b.wait_restored()

        def run_sql():
            m0 = metrics(sql_http)
            r = subprocess.run(["psql", "-X", "-At", "-h", "127.0.0.1", "-p", str(sql_port), "-U", "skiff", "-d",
                                "skiff", "-c", f"SELECT count(*) FROM {TOPIC}"], capture_output=True, text=True,
                               timeout=600)
            if r.returncode != 0:
                raise SystemExit(f"psql failed: {r.stderr}")
            m1 = metrics(sql_http)
            return int(r.stdout.strip()), {k: m1.get(k, 0) - m0.get(k, 0) for k in
                                           ("skiff_sql_scanned_bytes_total", "skiff_sql_scanned_segments_total",
                                            "skiff_sql_gets_total", "skiff_sql_read_ahead_hits_total")}

        def run_kcat():
            r = subprocess.run(["kcat", "-C", "-b", b.bootstrap, "-t", TOPIC, "-e", "-o", "beginning", "-q",
                                "-f", "x", "-X", "fetch.max.bytes=52428800"], capture_output=True, timeout=600)
            if r.returncode != 0:
                raise SystemExit(f"kcat -C failed: {r.stderr.decode(errors='replace')}")
            return len(r.stdout), None

        def run_cat():
            with open(os.devnull, "wb") as null:
                r = subprocess.run([skiff, "cat", tdir, "--stats"], stdout=null, stderr=subprocess.PIPE, timeout=600)
            if r.returncode != 0:
                raise SystemExit(f"skiff cat failed: {r.stderr.decode(errors='replace')}")
            m = re.search(rb"records=(\d+)", r.stderr)
            return (int(m.group(1)) if m else -1), r.stderr.decode(errors="replace").strip()

        ways = [("sql", run_sql, sql.pid), ("kcat", run_kcat, b.proc.pid), ("cat", run_cat, None)]
        res = {w[0]: {"wall": [], "server": [], "client": []} for w in ways}
        for rnd in range(a.rounds):
            order = ways if rnd % 2 == 0 else ways[::-1]
            for name, fn, pid in order:
                s0 = proc_cpu(pid) if pid else 0
                wall, ccpu, (count, extra) = timed(fn)
                scpu = proc_cpu(pid) - s0 if pid else 0
                if count != n:
                    raise SystemExit(f"{name}: {count} records, produced {n}")
                res[name]["wall"].append(wall)
                res[name]["server"].append(scpu)
                res[name]["client"].append(ccpu)
                print(f"round {rnd} {name}: {wall:.2f} s wall, server CPU {scpu:.2f} s, client CPU {ccpu:.2f} s"
                      + (f"  {extra}" if extra else ""), flush=True)

        gib = stored / (1 << 30)
        print(f"\n{n} records, {gib:.3f} GiB stored, {len(kfs)} segments, {a.partitions} partitions, "
              f"{a.rounds} rounds (medians, min-max)\n")
        print("| way | wall s | GiB/s | server CPU s | client CPU s |")
        print("|---|---:|---:|---:|---:|")
        for name, label in (("sql", "`skiff sql` + psql `SELECT count(*)`"),
                            ("kcat", "`skiff serve` + `kcat -C -e`"), ("cat", "`skiff cat > /dev/null`")):
            r = res[name]
            print(f"| {label} | {med(r['wall'])} | {gib / statistics.median(r['wall']):.2f} | "
                  f"{med(r['server']) if name != 'cat' else '-'} | {med(r['client'])} |")
        ms = {k: statistics.median(v["wall"]) for k, v in res.items()}
        print(f"\nwall ratio sql/kcat = {ms['sql'] / ms['kcat']:.2f}, cat/kcat = {ms['cat'] / ms['kcat']:.2f}, "
              f"sql/cat = {ms['sql'] / ms['cat']:.2f}")
    finally:
        for pr in procs:
            if pr.poll() is None:
                pr.send_signal(signal.SIGTERM)
                try:
                    pr.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    pr.kill()
                    pr.wait()
        try:
            b.cleanup()
        except Exception:  # noqa: BLE001
            pass
        if not a.keep:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
