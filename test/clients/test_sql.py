#!/usr/bin/python3
"""`skiff sql` with real Postgres clients (psql, psycopg2, node-pg) over data produced by kcat
with every compression codec: counts, aggregates, a time-bounded scan, a join of two topics,
parameters (extended protocol), psql's \\dt and \\d, a cancelled long query, a statement
timeout and a scan limit, garbage on the wire (the server survives), the metrics service
(/metrics JSON with skiff_sql_* by outcome, a sql.query trace with its GETs at /traces).

    test_sql.py --skiff build/src/cli/skiff [--store local|s3]
"""
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402

import psycopg2  # noqa: E402  (Debian's python3-psycopg2)
import psycopg2.errors  # noqa: E402

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
PER_CODEC = 400
USERS = 50
PARTITIONS = 3


class SqlServer:
    """One `skiff sql` process over a broker's store; stopped with the test."""

    def __init__(self, t, b, *extra):
        self.port = broker.free_port()
        self.http_port = broker.free_port()
        if t.store == "s3":
            target = [f"s3://{os.environ['S3_BUCKET']}/{b.namespace}", "--s3-endpoint", os.environ["S3_ENDPOINT"],
                      "--s3-path-style", "--s3-region", os.environ.get("AWS_REGION", "us-east-1")]
        else:
            target = [b.data_dir, "--namespace", "default"]
        self.log_path = os.path.join(t.workdir, f"sql-{self.port}.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([t.skiff, "sql", *target, "--listen", f"127.0.0.1:{self.port}",
                                      "--http", f"127.0.0.1:{self.http_port}", *extra],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        t.cleanups.append(self.kill)
        broker.wait_until(lambda: b"listening on" in open(self.log_path, "rb").read() or self.proc.poll() is not None,
                          20, "skiff sql to listen")
        if self.proc.poll() is not None:
            raise AssertionError(f"skiff sql exited {self.proc.returncode}: {open(self.log_path).read()}")

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        rc = self.proc.wait(timeout=20)
        assert rc == 0, f"skiff sql exited {rc} on SIGTERM: {open(self.log_path).read()[-2000:]}"

    def psql(self, *args, check=True):
        p = subprocess.run(["psql", "-X", "-h", "127.0.0.1", "-p", str(self.port), "-U", "skiff", "-d", "skiff",
                            "-v", "ON_ERROR_STOP=1", *args], capture_output=True, text=True, timeout=60,
                           env=dict(os.environ, PGCONNECT_TIMEOUT="10"))
        if check and p.returncode != 0:
            raise AssertionError(f"psql {args} exited {p.returncode}: {p.stderr}")
        return p

    def connect(self):
        return psycopg2.connect(host="127.0.0.1", port=self.port, user="skiff", dbname="skiff", connect_timeout=10)


def produce(t, b, topic, lines, codec):
    data = "".join(f"{k}|{v}\n" for k, v in lines).encode()
    p = subprocess.run(["kcat", "-P", "-b", b.bootstrap, "-t", topic, "-z", codec, "-K", "|", "-H", f"codec={codec}",
                        "-q", "-X", "acks=all", "-X", "linger.ms=5"], input=data, capture_output=True, timeout=120)
    if p.returncode != 0 or p.stderr.strip():
        raise AssertionError(f"kcat -P ({codec}) exited {p.returncode}: {p.stderr.decode(errors='replace')}")


def make_data(t):
    """events: PER_CODEC records per codec, value {"i","codec","kind"}, key k<i % USERS>;
    users: one record per key. The broker is stopped (SIGTERM flushes) before SQL runs."""
    b = t.broker(extra_args=["--auto-create-topics", "true", "--default-partitions", str(PARTITIONS)])
    n = 0
    for codec in CODECS:
        lines = []
        for _ in range(PER_CODEC):
            lines.append((f"k{n % USERS}", json.dumps({"i": n, "codec": codec, "kind": "ab"[n % 2]})))
            n += 1
        produce(t, b, "events", lines, codec)
    produce(t, b, "users", [(f"k{i}", json.dumps({"name": f"user{i}"})) for i in range(USERS)], "zstd")
    b.stop()
    return b


def check_counts_and_aggregates(t, s):
    total = len(CODECS) * PER_CODEC
    assert s.psql("-At", "-c", "SELECT count(*) FROM events").stdout.strip() == str(total)
    with s.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT json_extract(value, '$.codec') AS codec, count(*), sum(json_extract(value, '$.i')) "
                    "FROM events GROUP BY codec ORDER BY codec")
        rows = cur.fetchall()
        assert [r[0] for r in rows] == sorted(CODECS), rows
        for codec, count, s_i in rows:
            first = CODECS.index(codec) * PER_CODEC
            assert count == PER_CODEC, rows
            assert s_i == sum(range(first, first + PER_CODEC)), rows
        cur.execute("SELECT partition, count(*), min(\"offset\"), max(\"offset\") FROM events GROUP BY partition")
        parts = cur.fetchall()
        assert sum(r[1] for r in parts) == total
        assert all(r[2] == 0 and r[3] == r[1] - 1 for r in parts), parts  # dense offsets per partition
        cur.execute("SELECT headers FROM events WHERE json_extract(value, '$.i') = 0")
        assert json.loads(cur.fetchone()[0]) == [{"key": "codec", "value": "none"}]
    t.log(f"counts and aggregates over {total} records, {len(CODECS)} codecs")


def check_time_bounded_scan(t, s):
    with s.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT timestamp FROM events")
        stamps = sorted(r[0] for r in cur.fetchall())
        mid = stamps[len(stamps) // 2]
        cur.execute(f"SELECT count(*) FROM events WHERE timestamp >= {mid}")
        assert cur.fetchone()[0] == sum(1 for x in stamps if x >= mid)
        cur.execute(f"SELECT count(*) FROM events WHERE timestamp BETWEEN {stamps[0]} AND {mid}")
        assert cur.fetchone()[0] == sum(1 for x in stamps if x <= mid)
    t.log(f"time-bounded scans around {mid}")


def check_join(t, s):
    with s.connect() as conn, conn.cursor() as cur:
        cur.execute("WITH u AS MATERIALIZED (SELECT key, json_extract(value, '$.name') AS name FROM users) "
                    "SELECT u.name, count(*) FROM events e JOIN u ON u.key = e.key GROUP BY u.name ORDER BY u.name")
        rows = cur.fetchall()
        assert len(rows) == USERS, rows
        assert sum(r[1] for r in rows) == len(CODECS) * PER_CODEC
        assert dict(rows)["user7"] == len(CODECS) * PER_CODEC // USERS
    t.log("join of events and users")


def check_psql_describe(t, s):
    out = s.psql("-c", "\\dt").stdout
    assert "events" in out and "users" in out and "table" in out, out
    out = s.psql("-c", "\\d events").stdout
    for col in ("partition", "offset", "timestamp", "key", "value", "headers"):
        assert col in out, out
    t.log("psql \\dt and \\d")


def check_node_params(t, s):
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "node", "sql.js")
    p = subprocess.run(["node", script, str(s.port)], capture_output=True, text=True, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"node sql.js exited {p.returncode}: {p.stdout}{p.stderr}")
    got = json.loads(p.stdout.strip().splitlines()[-1])
    want = s.psql("-At", "-c", "SELECT count(*) FROM events WHERE partition = 1 AND \"offset\" >= 10").stdout.strip()
    assert str(got["count"]) == want, (got, want)
    assert got["kind"] == "a" and got["i"] == 0, got
    with s.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT json_extract(value, '$.codec') FROM events WHERE json_extract(value, '$.i') = %s", (1200,))
        assert cur.fetchone()[0] == "lz4"
    t.log("parameters through node-pg (extended protocol) and psycopg2")


HEAVY = "SELECT count(*) FROM events a JOIN events b ON a.value < b.value"


def check_cancel(t, s):
    conn = s.connect()
    conn.autocommit = True
    cur = conn.cursor()
    timer = threading.Timer(1.0, conn.cancel)
    timer.start()
    t0 = time.monotonic()
    try:
        cur.execute(HEAVY)
        raise AssertionError("the heavy query was not cancelled")
    except psycopg2.errors.QueryCanceled as e:
        assert "user request" in str(e), e
    finally:
        timer.cancel()
    assert time.monotonic() - t0 < 15
    cur.execute("SELECT 1")  # the connection is usable again
    assert cur.fetchone() == (1,)
    conn.close()
    t.log(f"cancelled after {time.monotonic() - t0:.1f} s")


def check_garbage(t, s):
    for junk in (b"\x00\x00\x00\x08\x04\xd2\x16\x2f" + os.urandom(64), b"GET / HTTP/1.1\r\n\r\n", os.urandom(300),
                 b"\xff\xff\xff\xff"):
        with socket.create_connection(("127.0.0.1", s.port), timeout=10) as c:
            c.sendall(junk)
            c.settimeout(10)
            try:
                while c.recv(4096):
                    pass
            except (ConnectionResetError, socket.timeout):
                pass
    assert s.proc.poll() is None, "skiff sql died on garbage"
    assert s.psql("-At", "-c", "SELECT 7").stdout.strip() == "7"
    t.log("garbage on the wire: connections closed, server fine")


def value(kind, name, **labels):
    for series in kind[name]["series"]:
        if all(series["labels"].get(k) == v for k, v in labels.items()):
            return series["value"]
    raise AssertionError(f"no {name} {labels}")


def outcome_count(s, outcome):
    doc = json.loads(http_get(s, "/metrics"))
    return value(doc["counters"], "skiff_sql_queries_total", outcome=outcome)


def http_get(s, path):
    with urllib.request.urlopen(f"http://127.0.0.1:{s.http_port}{path}", timeout=10) as r:
        return r.read().decode()


def check_metrics(t, s):
    # The standard observability service (docs/observability.md), as `skiff serve` has it.
    assert s.psql("-c", "SELECT no_such_column FROM events", check=False).returncode != 0
    doc = json.loads(http_get(s, "/metrics"))
    assert doc["schema"] == "skiff.metrics.v1", doc
    counters, gauges, hists = doc["counters"], doc["gauges"], doc["histograms"]

    ok = value(counters, "skiff_sql_queries_total", outcome="ok")
    cancelled = value(counters, "skiff_sql_queries_total", outcome="cancelled")
    assert ok > 5 and cancelled >= 1, counters["skiff_sql_queries_total"]   # check_cancel ran one
    assert value(counters, "skiff_sql_queries_total", outcome="error") >= 1  # check_garbage / bad SQL
    assert value(counters, "skiff_sql_scanned_segments_total") > 0
    assert value(counters, "skiff_sql_scanned_bytes_total") > 0
    assert value(counters, "skiff_sql_gets_total") >= value(counters, "skiff_sql_scanned_segments_total")
    assert value(counters, "skiff_sql_rows_total") > 0
    assert value(counters, "skiff_sql_connections_total") > 0
    assert "skiff_sql_read_ahead_hits_total" in counters
    assert "skiff_sql_pruned_segments_total" in counters
    assert value(gauges, "skiff_sql_gets_in_flight") == 0
    assert value(gauges, "skiff_sql_queries_running") == 0
    assert value(gauges, "skiff_sql_queries_queued") == 0
    lat = hists["skiff_sql_query_duration_seconds"]["series"][0]["total"]
    assert lat["count"] >= ok, lat
    prom = http_get(s, "/metrics/prometheus?aggregate=1")
    assert 'skiff_sql_queries_total{outcome="ok"}' in prom, prom[:2000]

    # One trace per query: a sql.query root and one sql.get child per GET of its scans.
    s.psql("-At", "-c", "SELECT count(*) FROM events")
    traces = json.loads(http_get(s, "/traces?root=sql.query&limit=50"))["traces"]
    assert traces, "no sql.query trace"
    scans = [tr for tr in traces if any(sp["name"] == "sql.get" for sp in tr["spans"])]
    assert scans, [tr["spans"][0]["attributes"].get("statement") for tr in traces]
    tr = scans[-1]
    root = next(sp for sp in tr["spans"] if sp["name"] == "sql.query")
    gets = [sp for sp in tr["spans"] if sp["name"] == "sql.get"]
    attrs = root["attributes"]
    assert attrs["outcome"] == "ok" and attrs["gets"] == len(gets), (attrs, len(gets))
    assert attrs["bytes"] > 0 and attrs["segments"] > 0, attrs
    for g in gets:
        assert g["parent_id"] == root["span_id"]
        assert root["start_ns"] <= g["start_ns"] <= g["end_ns"] <= root["end_ns"], (root, g)
        assert "/events/" in g["attributes"]["key"] and g["attributes"]["bytes"] > 0, g
    assert "sql.query" in http_get(s, "/traces/view")
    t.log(f"metrics: {ok} ok queries, {value(counters, 'skiff_sql_scanned_bytes_total')} bytes; "
          f"trace of the last scan: {len(gets)} GETs")


def test_sql_clients(t):
    b = make_data(t)
    s = SqlServer(t, b)
    check_counts_and_aggregates(t, s)
    check_time_bounded_scan(t, s)
    check_join(t, s)
    check_psql_describe(t, s)
    check_node_params(t, s)
    check_cancel(t, s)
    check_garbage(t, s)
    check_metrics(t, s)
    s.stop()

    # Guardrails: a statement timeout and a scan limit, each a clear SQL error.
    g = SqlServer(t, b, "--query-timeout", "1s")
    t0 = time.monotonic()
    p = g.psql("-c", HEAVY, check=False)
    assert p.returncode != 0 and "canceling statement due to statement timeout" in p.stderr, p.stderr
    assert time.monotonic() - t0 < 10
    assert outcome_count(g, "timeout") == 1
    g.stop()
    g = SqlServer(t, b, "--max-scan-bytes", "20000")
    p = g.psql("-c", "SELECT count(*) FROM events", check=False)
    assert p.returncode != 0 and "query scanned more than 20000 bytes (--max-scan-bytes)" in p.stderr, p.stderr
    assert outcome_count(g, "limit") == 1
    assert g.psql("-At", "-c", "SELECT count(*) FROM users").stdout.strip() == str(USERS)
    g.stop()
    t.log("guardrails: timeout and scan limit")


if __name__ == "__main__":
    broker.main([(test_sql_clients, 180)])
