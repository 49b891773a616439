#!/usr/bin/python3
"""`skiff sql` and `skiff cat` over a bucket that misbehaves.

test_sql_faults_s3 (the --store s3 run): kcat produces a few thousand records through a broker
on the S3 test server; then `skiff sql` and `skiff cat` read the bucket through s3-fault-proxy
while it answers 20 % of requests with 500 / 503 SlowDown / a TCP reset. Every query answer must
equal the fault-free answer or be an ErrorResponse with a clear message (58030, XX000); every
`skiff cat` is the full correct output, or exit 1 with a message after a prefix of it. Never a
different number, never a wrong record.

test_damaged_bucket (both runs; on S3 the objects are changed with signed requests): one `.kfs`
deleted (an orphan `.index` left), stray files under a partition, one segment with a flipped byte
inside a batch, and one segment cut to 60 % of its bytes. `skiff cat` exits 1 naming the
corrupt segment, reports the orphan and the strays on stderr and prints no record of the corrupt
segment; `skiff sql`'s count over the topic fails (XX001, naming the segment) rather than
returning a smaller count; queries whose bounds exclude the corrupt segment answer correctly; the
truncated segment is an error naming it from both.

    test_sql_faults.py --skiff build/src/cli/skiff [--store local|s3]
"""
import json
import os
import re
import subprocess
import sys
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from test_sql import SqlServer  # noqa: E402

import psycopg2  # noqa: E402

PARTITIONS = 3
ROUNDS = 6          # kcat runs; each flushes at least one segment per partition
PER_ROUND = 500
USERS = 40
BROKER_ARGS = ["--auto-create-topics", "true", "--default-partitions", str(PARTITIONS),
               "--segment-bytes", "32768", "--merge-target-bytes", "0"]
SEGMENT_GET = r"^GET [^?]*\.kfs HTTP"  # a segment GET, not a LIST whose start-after names one
CLEAR_SQLSTATES = {"58030", "XX000"}  # the bucket failed / anything else (docs/sql.md, Errors)


def produce(b, topic, lines):
    data = "".join(f"{k}|{v}\n" for k, v in lines).encode()
    p = subprocess.run(["kcat", "-P", "-b", b.bootstrap, "-t", topic, "-K", "|", "-q", "-X", "acks=all",
                        "-X", "linger.ms=5"], input=data, capture_output=True, timeout=120)
    if p.returncode != 0 or p.stderr.strip():
        raise AssertionError(f"kcat -P exited {p.returncode}: {p.stderr.decode(errors='replace')}")


def make_data(t):
    """events: ROUNDS * PER_ROUND records {"i": n, "pad": ...} keyed u<n % USERS>; users: one per key.
    The broker is stopped (SIGTERM flushes) before anything reads the bucket."""
    b = t.broker(extra_args=BROKER_ARGS)
    n = 0
    for _ in range(ROUNDS):
        lines = []
        for _ in range(PER_ROUND):
            lines.append((f"u{n % USERS}", json.dumps({"i": n, "pad": "x" * (50 + n % 150)})))
            n += 1
        produce(b, "events", lines)
    produce(b, "users", [(f"u{i}", json.dumps({"name": f"user{i}"})) for i in range(USERS)])
    b.stop()
    return b


QUERIES = {
    "count": "SELECT count(*) FROM events",
    "sum_offsets": "SELECT partition, count(*), sum(\"offset\") FROM events GROUP BY partition ORDER BY partition",
    "sum_i": "SELECT sum(json_extract(value, '$.i')) FROM events",
    "join": "WITH u AS MATERIALIZED (SELECT key, json_extract(value, '$.name') AS name FROM users) "
            "SELECT u.name, count(*) FROM events e JOIN u ON u.key = e.key GROUP BY u.name ORDER BY u.name",
}


def answers(s, queries):
    """{name: rows or ('error', pgcode, message)}; one connection per query, like a fresh client."""
    out = {}
    for name, q in queries.items():
        try:
            conn = s.connect()
        except psycopg2.OperationalError as e:
            raise AssertionError(f"cannot connect to skiff sql: {e}")
        try:
            with conn.cursor() as cur:
                cur.execute(q)
                out[name] = cur.fetchall()
        except psycopg2.Error as e:
            out[name] = ("error", e.pgcode, (e.pgerror or str(e)).strip())
        finally:
            conn.close()
    return out


def proxy_config(proxy, **settings):
    q = "&".join(f"{k.replace('_', '-')}={urllib.parse.quote(str(v))}" for k, v in settings.items())
    req = urllib.request.Request(f"{proxy}/__proxy/config?{q}", method="POST", data=b"")
    with urllib.request.urlopen(req, timeout=10) as r:
        r.read()


def proxy_stats(proxy):
    with urllib.request.urlopen(f"{proxy}/__proxy/stats", timeout=10) as r:
        return json.load(r)


def s3_target(endpoint, b, topic=None):
    path = f"s3://{os.environ['S3_BUCKET']}/{b.namespace}" + (f"/{topic}" if topic else "")
    return [path, "--s3-endpoint", endpoint, "--s3-path-style", "--s3-region", os.environ.get("AWS_REGION", "us-east-1")]


class ProxiedSqlServer(SqlServer):
    """SqlServer on the S3 bucket, but through the fault proxy."""

    def __init__(self, t, b, proxy, *extra):
        self.port = broker.free_port()
        self.http_port = broker.free_port()
        self.log_path = os.path.join(t.workdir, f"sql-{self.port}.log")
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen([t.skiff, "sql", *s3_target(proxy, b), "--listen", f"127.0.0.1:{self.port}",
                              "--http", f"127.0.0.1:{self.http_port}", *extra], stdout=self.log, stderr=subprocess.STDOUT)
        t.cleanups.append(self.kill)
        broker.wait_until(lambda: b"listening on" in open(self.log_path, "rb").read() or self.proc.poll() is not None,
                          20, "skiff sql to listen")
        if self.proc.poll() is not None:
            raise AssertionError(f"skiff sql exited {self.proc.returncode}: {open(self.log_path).read()}")


LAST_ERROR = [""]


def check_answer(name, got, want, where):
    if got == want:
        return "ok"
    if isinstance(got, tuple) and got and got[0] == "error":
        _, code, msg = got
        assert code in CLEAR_SQLSTATES, f"{where}: {name} failed with SQLSTATE {code}: {msg}"
        assert len(msg) > 10 and ("segment" in msg or "s3" in msg.lower() or "store" in msg or "bucket" in msg
                                  or "HTTP" in msg or "connect" in msg or "fail" in msg), \
            f"{where}: {name}: unclear error {msg!r}"
        LAST_ERROR[0] = f"; e.g. {code} {msg}"
        return "error"
    raise AssertionError(f"{where}: {name} answered {got!r:.300}, fault-free answer {want!r:.300}")


def test_sql_faults_s3(t):
    b = make_data(t)
    proxy = broker.start_fault_proxy(t, 0)
    s = ProxiedSqlServer(t, b, proxy)

    # Fault-free answers, checked against what was produced.
    total = ROUNDS * PER_ROUND
    clean = answers(s, QUERIES)
    assert clean["count"] == [(total,)], clean["count"]
    assert clean["sum_i"] == [(sum(range(total)),)], clean["sum_i"]
    parts = clean["sum_offsets"]
    assert len(parts) == PARTITIONS and sum(r[1] for r in parts) == total, parts
    assert all(r[2] == r[1] * (r[1] - 1) // 2 for r in parts), parts  # dense offsets 0..n-1
    assert len(clean["join"]) == USERS and sum(r[1] for r in clean["join"]) == total, clean["join"]
    with s.connect() as conn, conn.cursor() as cur:
        cur.execute("SELECT timestamp FROM events")
        stamps = sorted(r[0] for r in cur.fetchall())
    mid = stamps[len(stamps) // 2]
    queries = dict(QUERIES, time_bounded=f"SELECT count(*) FROM events WHERE timestamp >= {mid}")
    clean = answers(s, queries)
    assert clean["time_bounded"] == [(sum(1 for x in stamps if x >= mid),)], clean["time_bounded"]
    cat_clean = subprocess.run([t.skiff, "cat", *s3_target(proxy, b, "events"), "--json"], capture_output=True,
                               timeout=60)
    assert cat_clean.returncode == 0, cat_clean.stderr
    assert len(cat_clean.stdout.splitlines()) == total
    t.log(f"fault-free: {total} records, time-bounded {clean['time_bounded']}, cat ok")

    # 20 % of requests fail (500, 503 SlowDown, TCP reset): right answers or clear errors.
    proxy_config(proxy, fail_rate=0.2, fail_mode="500,503-slowdown,reset", fail_match=".", seed=11)
    tally = {"ok": 0, "error": 0}
    for rnd in range(5):
        got = answers(s, queries)
        for name in queries:
            tally[check_answer(name, got[name], clean[name], f"round {rnd}")] += 1
    st = proxy_stats(proxy)
    assert st["failed_total"] > 20, st
    assert tally["ok"] > 0, tally
    t.log(f"20% faults: {tally['ok']} right answers, {tally['error']} clear errors, "
          f"{st['failed_total']} injected faults")

    # Heavier faults on segment GETs only, enough to beat the store's retries now and then: a
    # scan that fails half-way must not turn into a smaller number.
    for rate in (0.5, 0.75):
        t0 = time.monotonic()
        proxy_config(proxy, fail_rate=rate, fail_mode="500,reset", fail_match=SEGMENT_GET)
        tally = {"ok": 0, "error": 0}
        for rnd in range(2):
            got = answers(s, queries)
            for name in queries:
                tally[check_answer(name, got[name], clean[name], f"{rate:.0%} round {rnd}")] += 1
        t.log(f"{rate:.0%} faults on .kfs GETs: {tally['ok']} right answers, {tally['error']} clear errors "
              f"({time.monotonic() - t0:.1f} s){LAST_ERROR[0][:140]}")

    # Stalls: a few GETs get no answer until the proxy drops the connection 2 s later.
    proxy_config(proxy, fail_rate=0.03, fail_mode="timeout", fail_match=SEGMENT_GET, hang_s=2)
    tally = {"ok": 0, "error": 0}
    got = answers(s, queries)
    for name in queries:
        tally[check_answer(name, got[name], clean[name], "stalls")] += 1
    t.log(f"3% stalled .kfs GETs: {tally['ok']} right answers, {tally['error']} clear errors")

    # Every segment GET fails: every scanning query must be a clear error, none an answer.
    proxy_config(proxy, fail_rate=1.0, fail_mode="500", fail_match=SEGMENT_GET)
    got = answers(s, {"count": QUERIES["count"]})["count"]
    assert isinstance(got, tuple) and got[0] == "error", f"count with every segment GET failing: {got!r}"
    assert got[1] == "58030" and ".kfs" in got[2], got
    t.log(f"every .kfs GET fails: {got[1]} {got[2][:160]}")
    assert s.proc.poll() is None, "skiff sql died"

    # skiff cat through the faults: the whole output, or exit 1 with a message after a prefix of it.
    proxy_config(proxy, fail_rate=0.2, fail_mode="500,503-slowdown,reset", fail_match=".")
    full = 0
    for _ in range(6):
        p = subprocess.run([t.skiff, "cat", *s3_target(proxy, b, "events"), "--json", "--parallel", "4"],
                           capture_output=True, timeout=120)
        if p.returncode == 0:
            assert p.stdout == cat_clean.stdout, "skiff cat exited 0 with output that differs from the fault-free run"
            full += 1
        else:
            assert p.returncode == 1, (p.returncode, p.stderr[-500:])
            assert p.stderr.strip(), "skiff cat exited 1 without a message"
            assert cat_clean.stdout.startswith(p.stdout), "skiff cat printed records the fault-free run did not"
    partial = 0
    proxy_config(proxy, fail_rate=0.8, fail_mode="500,reset", fail_match=SEGMENT_GET)
    for _ in range(3):
        p = subprocess.run([t.skiff, "cat", *s3_target(proxy, b, "events"), "--json", "--parallel", "4"],
                           capture_output=True, timeout=120)
        if p.returncode == 0:
            assert p.stdout == cat_clean.stdout, "skiff cat exited 0 with output that differs from the fault-free run"
        else:
            assert p.returncode == 1 and p.stderr.strip(), (p.returncode, p.stderr[-500:])
            assert cat_clean.stdout.startswith(p.stdout), "skiff cat printed records the fault-free run did not"
            partial += 1
    t.log(f"skiff cat with 80% faults on .kfs GETs: {partial}/3 exit 1 after a correct prefix")
    proxy_config(proxy, fail_rate=1.0, fail_mode="500", fail_match=SEGMENT_GET)
    p = subprocess.run([t.skiff, "cat", *s3_target(proxy, b, "events")], capture_output=True, timeout=120)
    assert p.returncode == 1 and b".kfs" in p.stderr and not p.stdout, (p.returncode, p.stderr[-500:])
    t.log(f"skiff cat with 20% faults: {full}/6 complete (the others exit 1 after a correct prefix); "
          "every .kfs GET failing: "
          + p.stderr.decode(errors="replace").strip()[:160])
    proxy_config(proxy, fail_rate=0)
    s.stop()


def s3_request(method, key="", query=None, body=b""):
    """One SigV4-signed request to the S3 test server (standard library only: the python that
    runs the tests need not have boto3). Returns (status, body)."""
    import datetime
    import hashlib
    import hmac
    import urllib.error
    host = os.environ["S3_ENDPOINT"].split("//", 1)[1]
    region = os.environ.get("AWS_REGION", "us-east-1")
    uri = urllib.parse.quote(f"/{os.environ['S3_BUCKET']}/{key}" if key else f"/{os.environ['S3_BUCKET']}",
                             safe="/-_.~")
    qs = "&".join(f"{urllib.parse.quote(k, safe='-_.~')}={urllib.parse.quote(str(v), safe='-_.~')}"
                  for k, v in sorted((query or {}).items()))
    now = datetime.datetime.now(datetime.timezone.utc)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    payload = hashlib.sha256(body).hexdigest()
    headers = {"host": host, "x-amz-content-sha256": payload, "x-amz-date": amz_date}
    signed = ";".join(sorted(headers))
    canonical = "\n".join([method, uri, qs, "".join(f"{k}:{headers[k]}\n" for k in sorted(headers)), signed,
                           payload])
    scope = f"{day}/{region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    k = ("AWS4" + os.environ["AWS_SECRET_ACCESS_KEY"]).encode()
    for part in (day, region, "s3", "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    sig = hmac.new(k, to_sign.encode(), hashlib.sha256).hexdigest()
    auth = (f"AWS4-HMAC-SHA256 Credential={os.environ['AWS_ACCESS_KEY_ID']}/{scope}, SignedHeaders={signed}, "
            f"Signature={sig}")
    req = urllib.request.Request(f"http://{host}{uri}" + (f"?{qs}" if qs else ""), data=body if body else None,
                                 method=method, headers={"x-amz-content-sha256": payload, "x-amz-date": amz_date,
                                                         "Authorization": auth,
                                                         # not urllib's form type: moto would parse the body
                                                         "Content-Type": "application/octet-stream"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        raise AssertionError(f"S3 {method} {key or qs}: {e.code} {e.read()[:300]!r}")


class Objects:
    """The objects of one topic, on the local store (files) or on the S3 test server."""

    def __init__(self, b, topic):
        self.b = b
        if b.store == "s3":
            self.prefix = f"{b.namespace}/{topic}"
            self.target = s3_target(os.environ["S3_ENDPOINT"], b, topic)
        else:
            self.root = os.path.join(b.data_dir, "default", topic)
            self.target = [self.root]

    def names(self, part):
        if self.b.store == "s3":
            _, body = s3_request("GET", query={"list-type": "2", "prefix": f"{self.prefix}/{part}/"})
            text = body.decode()
            assert "<IsTruncated>true</IsTruncated>" not in text, "more keys than one LIST page"
            return sorted(k.rsplit("/", 1)[1] for k in re.findall(r"<Key>([^<]*)</Key>", text))
        return sorted(os.listdir(os.path.join(self.root, str(part))))

    def segments(self, part):
        return [n for n in self.names(part) if n.endswith(".kfs")]

    def get(self, part, name):
        if self.b.store == "s3":
            return s3_request("GET", f"{self.prefix}/{part}/{name}")[1]
        with open(os.path.join(self.root, str(part), name), "rb") as f:
            return f.read()

    def put(self, part, name, data):
        if self.b.store == "s3":
            s3_request("PUT", f"{self.prefix}/{part}/{name}", body=data)
        else:
            with open(os.path.join(self.root, str(part), name), "wb") as f:
                f.write(data)

    def delete(self, part, name):
        if self.b.store == "s3":
            s3_request("DELETE", f"{self.prefix}/{part}/{name}")
        else:
            os.unlink(os.path.join(self.root, str(part), name))


def base_of(name):
    return int(name.split("-")[1].split(".")[0])


def test_damaged_bucket(t):
    b = make_data(t)
    objs = Objects(b, "events")
    target = objs.target
    before = subprocess.run([t.skiff, "cat", *target, "--json"], capture_output=True, timeout=60)
    assert before.returncode == 0, before.stderr
    recs = [json.loads(ln) for ln in before.stdout.splitlines()]
    per_part = {p: [r for r in recs if r["partition"] == p] for p in range(PARTITIONS)}
    for p in range(PARTITIONS):
        assert len(objs.segments(p)) >= 3, f"partition {p}: {objs.names(p)}"

    # Partition 0: delete the second segment's .kfs (its .index stays, an orphan).
    segs0 = objs.segments(0)
    gone_lo, gone_hi = base_of(segs0[1]), base_of(segs0[2])
    objs.delete(0, segs0[1])
    orphan = segs0[1].replace(".kfs", ".index")
    assert orphan in objs.names(0)
    # Partition 1: strays next to the segments.
    objs.put(1, "notes.txt", b"not a segment\n")
    objs.put(1, "segment-junk.kfs.tmp", b"half an upload\n")
    # Partition 2: flip a byte in the middle of the second segment (inside a batch: its CRC fails).
    segs2 = objs.segments(2)
    bad_name = segs2[1]
    bad_lo, bad_hi = base_of(segs2[1]), base_of(segs2[2])
    data = bytearray(objs.get(2, bad_name))
    data[len(data) // 2] ^= 0x5a
    objs.put(2, bad_name, bytes(data))

    # skiff cat: exit 1 naming the corrupt segment, findings on stderr, nothing of the bad segment.
    p = subprocess.run([t.skiff, "cat", *target, "--json"], capture_output=True, timeout=60)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 1, f"skiff cat over a corrupt segment exited {p.returncode}: {err[-1000:]}"
    assert bad_name in err, err[-1000:]
    assert orphan in err, f"orphan index {orphan} not reported: {err[-1000:]}"
    assert "notes.txt" in err, f"stray key not reported: {err[-1000:]}"
    got = [json.loads(ln) for ln in p.stdout.splitlines()]
    for r in got:
        assert not (r["partition"] == 2 and bad_lo <= r["offset"] < bad_hi), f"record of the corrupt segment: {r}"
        assert not (r["partition"] == 0 and gone_lo <= r["offset"] < gone_hi), f"record of a deleted segment: {r}"
    want_by_key = {(r["partition"], r["offset"]): r for r in recs}
    for r in got:
        assert want_by_key.get((r["partition"], r["offset"])) == r, f"misread record {r}"
    t.log(f"skiff cat: exit 1, {len(got)} records before the corrupt segment; " + err.strip().splitlines()[-1][:160])

    # Partitions 0 and 1 alone: exit 0, everything but the deleted segment's offsets.
    p = subprocess.run([t.skiff, "cat", *target, "--json", "--partition", "0", "--partition", "1"],
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    want = [r for r in per_part[0] if not gone_lo <= r["offset"] < gone_hi] + per_part[1]
    assert [json.loads(ln) for ln in p.stdout.splitlines()] == want
    # Partition 2 from after the corrupt segment: exit 0, exact.
    p = subprocess.run([t.skiff, "cat", *target, "--json", "--partition", "2", "--from-offset", str(bad_hi)],
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert [json.loads(ln) for ln in p.stdout.splitlines()] == [r for r in per_part[2] if r["offset"] >= bad_hi]
    t.log("skiff cat with bounds that exclude the corrupt segment: exact")

    # skiff sql: the count over the topic fails naming the segment; bounded queries answer exactly.
    s = SqlServer(t, b)
    got = answers(s, {"count": "SELECT count(*) FROM events",
                      "p2": "SELECT count(*) FROM events WHERE partition = 2"})
    for name in ("count", "p2"):
        r = got[name]
        assert isinstance(r, tuple) and r[0] == "error", f"{name} over a corrupt segment answered {r!r}"
        assert r[1] == "XX001" and bad_name in r[2], r
    t.log(f"sql over the corrupt segment: {got['count'][1]} {got['count'][2][:160]}")
    n0 = sum(1 for r in per_part[0] if not gone_lo <= r["offset"] < gone_hi)
    n2_after = sum(1 for r in per_part[2] if r["offset"] >= bad_hi)
    n2_before = sum(1 for r in per_part[2] if r["offset"] < bad_lo)
    got = answers(s, {
        "p0": "SELECT count(*) FROM events WHERE partition = 0",
        "p1": "SELECT count(*), sum(\"offset\") FROM events WHERE partition = 1",
        "p2_after": f"SELECT count(*) FROM events WHERE partition = 2 AND \"offset\" >= {bad_hi}",
        "p2_before": f"SELECT count(*) FROM events WHERE partition = 2 AND \"offset\" < {bad_lo}",
    })
    assert got["p0"] == [(n0,)], got["p0"]
    assert got["p1"] == [(len(per_part[1]), sum(r["offset"] for r in per_part[1]))], got["p1"]
    assert got["p2_after"] == [(n2_after,)], got["p2_after"]
    assert got["p2_before"] == [(n2_before,)], got["p2_before"]
    t.log(f"sql with bounds that exclude the corrupt segment: p0={n0} p2>={bad_hi}: {n2_after}")

    # A truncated segment (the first 60 % of its bytes, as if an upload or a copy was cut short):
    # an error naming it, from both, never fewer records.
    users = Objects(b, "users")
    part = next(p for p in range(PARTITIONS) if users.segments(p))
    cut = users.segments(part)[0]
    whole = users.get(part, cut)
    users.put(part, cut, whole[:len(whole) * 6 // 10])
    p = subprocess.run([t.skiff, "cat", *users.target, "--json"], capture_output=True, timeout=60)
    err = p.stderr.decode(errors="replace")
    assert p.returncode == 1 and cut in err, f"skiff cat over a truncated segment: exit {p.returncode}, {err[-800:]}"
    assert all(json.loads(ln)["partition"] != part for ln in p.stdout.splitlines()), "records of a truncated segment"
    r = answers(s, {"users": "SELECT count(*) FROM users"})["users"]
    assert isinstance(r, tuple) and r[0] == "error", f"count over a truncated segment answered {r!r}"
    assert r[1] in ("XX001", "58030") and cut in r[2], r
    t.log(f"truncated segment: cat exit 1, sql {r[1]} {r[2][:140]}")
    assert s.proc.poll() is None
    s.stop()


if __name__ == "__main__":
    broker.main([(test_sql_faults_s3, 150, {"s3"}), (test_damaged_bucket, 90)])
