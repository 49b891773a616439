#!/usr/bin/python3
"""`skiff iceberg` against what a broker wrote, checked by readers written independently of
this project: icebird (a JavaScript Iceberg reader over hyparquet) reads the whole table over
HTTP, across snapshots; DuckDB reads every data file with read_parquet and shows the field ids
with parquet_schema. Then SIGKILL at every stage of a commit, and two sinks on one topic at
once: the table holds every produced record exactly once.

    test_iceberg.py --skiff build/src/cli/skiff [--store local|s3]
"""
import functools
import glob
import http.server
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import create_topic, produce_all  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_DIR = os.path.join(HERE, "node")
PARTITIONS = 3
PROJECT = ["--project", "amount:double:$.amount", "--project", "customer:string:$.customer"]


class Quiet(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *a):
        pass


def serve_dir(t, root):
    """A static HTTP server on 127.0.0.1 for `root`, stopped with the test: icebird reads the
    table over HTTP, as it reads any object store."""
    handler = functools.partial(Quiet, directory=root)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    th = threading.Thread(target=srv.serve_forever, daemon=True)
    th.start()
    t.cleanups.append(srv.shutdown)
    return f"http://127.0.0.1:{srv.server_address[1]}"


class Table:
    """Where a test's tables live and how to read them: the local data directory served over
    HTTP, or (S3) a mirror of the bucket's warehouse prefix made with `skiff s3` and served."""

    def __init__(self, t, b, root=None):
        self.t, self.b = t, b
        if b.store == "s3":
            self.root = os.path.join(t.workdir, "mirror")
        else:
            self.root = root or b.data_dir
        os.makedirs(self.root, exist_ok=True)
        self.base = serve_dir(t, self.root)

    def target(self):
        if self.b.store == "s3":
            return [f"s3://{os.environ['S3_BUCKET']}/{self.b.namespace}", "--s3-endpoint", self.b.s3_endpoint,
                    "--s3-path-style", "--s3-region", os.environ.get("AWS_REGION", "us-east-1")]
        return [self.b.data_dir]

    def warehouse(self):
        return f"iceberg/{self.b.namespace if self.b.store == 's3' else 'default'}"

    def sink_args(self, topic, *extra, project=PROJECT):
        return [self.t.skiff, "iceberg", *self.target(), "--topic", topic, "--location-base", self.base,
                "--log-level", "warn", *project, *extra]

    def run_once(self, topic, *extra, env=None, expect_rc=0, project=PROJECT):
        p = subprocess.run(self.sink_args(topic, "--once", *extra, project=project), capture_output=True, timeout=180,
                           env={**os.environ, **(env or {})})
        if p.returncode != expect_rc:
            raise AssertionError(f"skiff iceberg --once exited {p.returncode}, expected {expect_rc}: "
                                 f"{p.stderr.decode(errors='replace')[-3000:]}")
        return p

    def sync(self):
        """S3: copies the warehouse prefix to the served mirror (local: nothing to do)."""
        if self.b.store != "s3":
            return
        s3 = ["--s3-endpoint", self.b.s3_endpoint, "--s3-path-style"]
        bucket = os.environ["S3_BUCKET"]
        prefix = self.warehouse()
        ls = subprocess.run([self.t.skiff, "s3", "ls", f"s3://{bucket}/{prefix}/", *s3], capture_output=True,
                            timeout=60, check=True)
        shutil.rmtree(os.path.join(self.root, prefix), ignore_errors=True)
        for line in ls.stdout.decode().splitlines():
            key = line.split()[-1]
            key = key.removeprefix(f"s3://{bucket}/")
            dst = os.path.join(self.root, key)
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            subprocess.run([self.t.skiff, "s3", "get", f"s3://{bucket}/{key}", dst, *s3], capture_output=True,
                           timeout=60, check=True)

    def url(self, topic):
        return f"{self.base}/{self.warehouse()}/{topic}"

    def local(self, topic):
        return os.path.join(self.root, self.warehouse(), topic)

    def read(self, topic):
        self.sync()
        p = subprocess.run(["node", os.path.join(HERE, "verify_iceberg.mjs"), self.url(topic)], cwd=NODE_DIR,
                           capture_output=True, timeout=120)
        if p.returncode != 0:
            raise AssertionError(f"icebird could not read {self.url(topic)}: {p.stderr.decode(errors='replace')[-3000:]}")
        return json.loads(p.stdout)


def make_messages(tag, n):
    msgs = []
    for i in range(n):
        part = i % PARTITIONS
        if i % 17 == 5:
            value = b"\x00\x01not json"              # a dead letter for the projections
        elif i % 13 == 4:
            value = None                             # a tombstone
        else:
            value = json.dumps({"amount": i * 1.5, "customer": f"c{i % 7}", "n": i}).encode()
        key = None if i % 11 == 3 else f"{tag}-{i}".encode()
        headers = [("trace", f"{tag}{i}".encode()), ("empty", None)] if i % 3 == 0 else None
        msgs.append((part, key, value, headers))
    return msgs


def produce(b, topic, msgs):
    delivered = produce_all(b, topic, msgs)
    return {(p, o): m for (p, o), m in zip(delivered, msgs)}


def check_rows(doc, produced, what):
    """Every produced record exactly once, with its key, value, headers and projections."""
    seen = {}
    for r in doc["rows"]:
        k = (int(r["partition"]), int(r["offset"]))
        if k in seen:
            raise AssertionError(f"{what}: partition {k[0]} offset {k[1]} appears twice")
        seen[k] = r
    missing = sorted(set(produced) - set(seen))
    extra = sorted(set(seen) - set(produced))
    if missing or extra:
        raise AssertionError(f"{what}: {len(seen)} rows for {len(produced)} produced; missing {missing[:10]}, "
                             f"unexpected {extra[:10]}")
    for k, (part, key, value, headers) in produced.items():
        r = seen[k]
        # hyparquet (under icebird) hands binary columns over as UTF-8 text; every key, value and
        # header this test produces is UTF-8, and duckdb_check compares the exact bytes.
        text = (lambda x: None if x is None else x.decode())
        if r["key"] != text(key) or r["value"] != text(value):
            raise AssertionError(f"{what}: {k}: key/value {r['key']!r}/{r['value']!r}, produced {key!r}/{value!r}")
        want_h = [{"key": n, "value": text(v)} for n, v in (headers or [])]
        if (r["headers"] or []) != want_h:
            raise AssertionError(f"{what}: {k}: headers {r['headers']}, produced {want_h}")
        doc_v = None
        if value is not None:
            try:
                doc_v = json.loads(value)
            except (ValueError, UnicodeDecodeError):
                doc_v = None
        want_amount = doc_v["amount"] if doc_v else None
        want_customer = doc_v["customer"] if doc_v else None
        if r.get("amount") != want_amount or r.get("customer") != want_customer:
            raise AssertionError(f"{what}: {k}: projections {r.get('amount')!r}/{r.get('customer')!r}, "
                                 f"expected {want_amount!r}/{want_customer!r}")
    return seen


def duckdb_check(t, table, topic, produced):
    """DuckDB reads every data file: exactly the produced keys and values, byte for byte, and
    parquet_schema shows the field ids."""
    files = sorted(glob.glob(os.path.join(table.local(topic), "data", "**", "*.parquet"), recursive=True))
    if not files:
        raise AssertionError(f"no data files under {table.local(topic)}")
    script = r"""
const path = require('node:path');
const d = require(path.join(process.cwd(), 'node_modules/@duckdb/node-api'));
(async () => {
  const files = JSON.parse(process.argv[1]);
  const inst = await d.DuckDBInstance.create(':memory:');
  const c = await inst.connect();
  const lst = '[' + files.map(f => "'" + f.replace(/'/g, "''") + "'").join(',') + ']';
  const rows = (await c.runAndReadAll(`select "partition" as p, "offset"::VARCHAR as o, hex(key) as k, hex(value) as v from read_parquet(${lst})`)).getRowObjects();
  const schema = (await c.runAndReadAll(`select name, field_id from parquet_schema('${files[0].replace(/'/g, "''")}')`)).getRowObjects();
  console.log(JSON.stringify({rows: rows.map(r => [r.p, r.o, r.k, r.v]), schema: schema.map(r => [r.name, r.field_id === null ? null : Number(r.field_id)])}));
})().catch(e => { console.error(e); process.exit(1); });
"""
    p = subprocess.run(["node", "-e", script, json.dumps(files)], cwd=NODE_DIR, capture_output=True, timeout=120)
    if p.returncode != 0:
        raise AssertionError(f"duckdb: {p.stderr.decode(errors='replace')[-3000:]}")
    out = json.loads(p.stdout)
    got = {}
    for p_, o, k, v in out["rows"]:
        if (p_, int(o)) in got:
            raise AssertionError(f"duckdb: partition {p_} offset {o} in two data files")
        got[(p_, int(o))] = (None if k is None else bytes.fromhex(k), None if v is None else bytes.fromhex(v))
    want = {pk: (m[1], m[2]) for pk, m in produced.items()}
    if got != want:
        bad = [pk for pk in set(got) | set(want) if got.get(pk) != want.get(pk)]
        raise AssertionError(f"duckdb read {len(got)} rows from {len(files)} data files, {len(want)} produced; "
                             f"{len(bad)} differ, e.g. {sorted(bad)[:3]}: {[(got.get(x), want.get(x)) for x in sorted(bad)[:3]]}")
    want_schema = [["table", None], ["partition", 1], ["offset", 2], ["timestamp", 3], ["key", 4], ["value", 5],
                   ["headers", 6], ["list", None], ["element", 7], ["key", 8], ["value", 9], ["amount", 10],
                   ["customer", 11]]
    if out["schema"] != want_schema:
        raise AssertionError(f"parquet_schema (name, field_id): {out['schema']}, expected {want_schema}")
    return len(files)


def referenced_files(t, table, topic):
    """Data files the current snapshot references (via avsc through verify_avro.mjs is the
    manifests test's job; here the sink's own `total-data-files` is compared with the files)."""
    doc = table.read(topic)
    return int(doc["summary"][-1]["total-data-files"]) if doc["summary"] else 0


def test_sink_reads_every_record_once(t):
    b = t.broker()
    topic = t.topic("ice")
    create_topic(b, topic, PARTITIONS)
    table = Table(t, b)
    produced = produce(b, topic, make_messages("a", 600))
    p = table.run_once(topic)
    t.log(p.stdout.decode().strip())
    doc = table.read(topic)
    check_rows(doc, produced, "after the first commit")
    if doc["snapshots"] != 1:
        raise AssertionError(f"{doc['snapshots']} snapshots after one --once run of 600 records")
    offsets = json.loads(doc["summary"][0]["skiff.next-offsets"])
    if offsets != {str(q): 200 for q in range(PARTITIONS)}:
        raise AssertionError(f"skiff.next-offsets {offsets}")
    # More records, another run: one more snapshot, still exactly once over both.
    produced.update(produce(b, topic, make_messages("b", 300)))
    table.run_once(topic)
    # Nothing new: no snapshot.
    table.run_once(topic)
    doc = table.read(topic)
    check_rows(doc, produced, "after the second commit")
    if doc["snapshots"] != 2:
        raise AssertionError(f"{doc['snapshots']} snapshots after two runs with records and one without")
    fields = {f["name"]: f["id"] for f in doc["schema"]["fields"]}
    if fields != {"partition": 1, "offset": 2, "timestamp": 3, "key": 4, "value": 5, "headers": 6,
                  "amount": 10, "customer": 11}:
        raise AssertionError(f"table schema field ids {fields}")
    n_files = duckdb_check(t, table, topic, produced)
    if n_files != referenced_files(t, table, topic):
        raise AssertionError(f"{n_files} data files on disk, {referenced_files(t, table, topic)} in the table")
    t.log(f"{len(produced)} records in {doc['snapshots']} snapshots and {n_files} data files, read back by icebird "
          f"and duckdb")


def test_sigkill_at_every_stage(t):
    b = t.broker()
    topic = t.topic("icekill")
    create_topic(b, topic, PARTITIONS)
    table = Table(t, b)
    produced = {}
    for k, stage in enumerate(["data", "manifest", "list", "commit"]):
        produced.update(produce(b, topic, make_messages(f"k{k}", 90)))
        p = table.run_once(topic, env={"SKIFF_ICEBERG_FAILPOINT": stage}, expect_rc=-signal.SIGKILL)
        if b"failpoint" not in p.stderr:
            raise AssertionError(f"the {stage} failpoint did not fire: {p.stderr.decode(errors='replace')[-2000:]}")
        table.run_once(topic)
        doc = table.read(topic)
        check_rows(doc, produced, f"after SIGKILL before '{stage}' and a restart")
        t.log(f"SIGKILL before {stage}: {len(doc['rows'])} rows, each once, {doc['snapshots']} snapshots")
    # The killed attempts left files no snapshot references: maintenance finds and deletes
    # them (grace 0 here), and expiry down to one snapshot keeps every row readable.
    data_files = lambda: sorted(glob.glob(os.path.join(table.local(topic), "data", "**", "*.parquet"), recursive=True))
    table.sync()
    before = len(data_files())
    refs = referenced_files(t, table, topic)
    if before <= refs:
        raise AssertionError(f"{before} data files for {refs} referenced: the killed attempts left none behind?")
    table.run_once(topic, "--orphan-grace-ms", "0", "--expire-after-ms", "0", "--keep-snapshots", "1")
    doc = table.read(topic)
    check_rows(doc, produced, "after maintenance")
    after = len(data_files())
    if after != referenced_files(t, table, topic) or doc["snapshots"] != 1:
        raise AssertionError(f"after maintenance: {after} data files for {referenced_files(t, table, topic)} referenced, "
                             f"{doc['snapshots']} snapshots (expected 1)")
    metadata_avro = glob.glob(os.path.join(table.local(topic), "metadata", "*.avro"))
    t.log(f"maintenance: {before} -> {after} data files, 1 snapshot, {len(metadata_avro)} manifest files left")


def test_two_sinks_at_once(t):
    b = t.broker()
    topic = t.topic("icetwo")
    create_topic(b, topic, PARTITIONS)
    table = Table(t, b)
    sinks = []
    http_port = broker.free_port()
    for k in range(2):
        log = open(os.path.join(t.workdir, f"sink-{k}.log"), "wb")
        extra = ["--http-addr", f"127.0.0.1:{http_port}"] if k == 0 else []
        sinks.append(subprocess.Popen(table.sink_args(topic, "--commit-interval-ms", "50", "--log-level", "info", *extra),
                                      stdout=log, stderr=subprocess.STDOUT))
    t.cleanups.append(lambda: [s.kill() for s in sinks if s.poll() is None])
    produced = {}
    for k in range(6):
        produced.update(produce(b, topic, make_messages(f"r{k}", 60)))
        time.sleep(0.2)
    time.sleep(1.0)
    # Sink 0's endpoint: its steps in the skiff_iceberg_* series of the topic.
    metrics_of = type("Endpoint", (), {"http_port": http_port})()
    done = broker.wait_until(lambda: broker.metric_counter(metrics_of, "skiff_iceberg_commits_total", topic=topic) +
                             broker.metric_counter(metrics_of, "skiff_iceberg_abandoned_total", topic=topic), 30,
                             "sink 0 to report a commit or a step yielded")
    for s in sinks:
        s.send_signal(signal.SIGTERM)
    for k, s in enumerate(sinks):
        rc = s.wait(30)
        if rc != 0:
            raise AssertionError(f"sink {k} exited {rc} after SIGTERM")
    table.run_once(topic)
    doc = table.read(topic)
    check_rows(doc, produced, "after two sinks ran at once")
    logs = "".join(open(os.path.join(t.workdir, f"sink-{k}.log"), errors="replace").read() for k in range(2))
    t.log(f"sink 0 reported {done} commits and yielded steps on /metrics; "
          f"{len(produced)} records once in {doc['snapshots']} snapshots; "
          f"{logs.count('another writer committed')} steps yielded to the other sink, "
          f"{sum(1 for line in logs.splitlines() if 'conflicts)' in line and '(0 conflicts)' not in line)} commits rebased")


def wait_rows(t, table, topic, produced, timeout=60):
    """Polls the table until icebird reads every produced record (then checks them)."""
    last = {}

    def complete():
        try:
            last["doc"] = table.read(topic)
        except AssertionError as e:  # no table yet
            last["err"] = str(e)[-300:]
            return None
        return len(last["doc"]["rows"]) >= len(produced) and last["doc"]
    doc = broker.wait_until(complete, timeout, f"the table of {topic} to hold {len(produced)} rows", interval=0.5,
                            describe=lambda: (len(last["doc"]["rows"]) if "doc" in last else last.get("err")))
    check_rows(doc, produced, "written by the broker's sink")
    return doc


def test_serve_sinks_its_topics(t):
    b = t.broker(start=False)
    table = Table(t, b)
    topic = t.topic("icesrv")
    # One projection for every topic, one for this topic only (TOPIC/NAME:TYPE:PATH).
    b.extra_args += ["--iceberg-topics", topic, "--iceberg-commit-interval-ms", "200",
                     "--iceberg-location-base", table.base, "--iceberg-partition-by", "partition",
                     "--iceberg-project", f"amount:double:$.amount;{topic}/customer:string:$.customer"]
    if b.store == "s3":
        b.extra_args += ["--iceberg-warehouse", table.warehouse()]
    b.start()
    create_topic(b, topic, PARTITIONS)
    produced = produce(b, topic, make_messages("s", 300))
    t0 = time.monotonic()
    doc = wait_rows(t, table, topic, produced)
    t.log(f"the broker's sink committed {len(produced)} rows in {doc['snapshots']} snapshots "
          f"{time.monotonic() - t0:.1f} s after the last acknowledgement")
    rows = broker.metric_counter(b, "skiff_iceberg_rows_total", topic=topic)
    if rows != len(produced):
        raise AssertionError(f"skiff_iceberg_rows_total {rows}, {len(produced)} committed")
    lag = broker.metric_gauge(b, "skiff_iceberg_visible_lag_ms", topic=topic)
    if lag is None or lag < 0:
        raise AssertionError(f"skiff_iceberg_visible_lag_ms {lag}")
    # Everything acknowledged is in the table: the lag in offsets (high watermarks against the
    # table's next offsets) comes down to 0 (it is -1 until known).
    broker.wait_until(lambda: broker.metric_gauge(b, "skiff_iceberg_lag_offsets", topic=topic) == 0, 20,
                      "skiff_iceberg_lag_offsets to reach 0",
                      describe=lambda: broker.metric_gauge(b, "skiff_iceberg_lag_offsets", topic=topic))
    # A trace per step: read, upload, commit, with what was committed.
    with urllib.request.urlopen(f"http://127.0.0.1:{b.http_port}/traces?root=iceberg_step&limit=50", timeout=10) as r:
        traces = json.loads(r.read())["traces"]
    committed = [tr for tr in traces for sp in tr["spans"]
                 if sp["name"] == "iceberg_step" and sp.get("attributes", {}).get("outcome") == "committed"]
    if not committed:
        raise AssertionError(f"no committed iceberg_step trace among {len(traces)}: {json.dumps(traces)[:1500]}")
    names = {sp["name"] for sp in committed[0]["spans"]}
    if not {"iceberg_step", "read", "upload", "commit"} <= names:
        raise AssertionError(f"a committed step's trace has spans {names}")
    # A restarted broker resumes from the table: more records, each once.
    b.stop()
    b.start()
    produced.update(produce(b, topic, make_messages("s2", 150)))
    wait_rows(t, table, topic, produced)
    b.stop()


def test_cluster_brokers_sink_their_partitions(t):
    """Three brokers on etcd, each sinking the partitions it owns into one table: their commits
    race and rebase on each other; a killed broker's partitions are sunk by their new owner."""
    import test_cluster
    shared_dir = os.path.join(t.workdir, "shared-data")
    topic = t.topic("iceclu")
    # The table is served before the brokers start: its location goes into their flags.
    placeholder = type("B", (), {"store": t.store, "data_dir": shared_dir, "namespace": None,
                                 "s3_endpoint": os.environ.get("S3_ENDPOINT")})()
    table = Table(t, placeholder, root=shared_dir)
    extra = ["--iceberg-topics", topic, "--iceberg-commit-interval-ms", "100", "--iceberg-location-base", table.base,
             "--iceberg-partition-by", "partition",
             "--iceberg-project", "amount:double:$.amount;customer:string:$.customer"]
    if t.store == "s3":
        extra += ["--iceberg-warehouse", "iceberg/cluster"]
    e, bs = test_cluster.start_cluster(t, extra=extra, s3_endpoint=os.environ.get("S3_ENDPOINT") if t.store == "s3" else None)
    placeholder.namespace = bs[0].namespace
    if t.store == "s3":
        table.warehouse = lambda: "iceberg/cluster"
    create_topic(bs[0], topic, 6)
    msgs = [(i % 6, *m[1:]) for i, m in enumerate(make_messages("c", 600))]
    produced = produce(bs[0], topic, msgs)
    doc = wait_rows(t, table, topic, produced, timeout=90)
    commits = {b.name: broker.metric_counter(b, "skiff_iceberg_commits_total", topic=topic) for b in bs}
    conflicts = sum(broker.metric_counter(b, "skiff_iceberg_conflicts_total", topic=topic) for b in bs)
    if sum(1 for c in commits.values() if c > 0) < 2:
        raise AssertionError(f"commits per broker {commits}: the partitions were not sunk by their owners")
    t.log(f"{len(produced)} rows once in {doc['snapshots']} snapshots; commits per broker {commits}, "
          f"{conflicts} lost races rebased")
    # SIGKILL one broker: its partitions move, and their new owners sink what follows.
    victim = bs[2]
    victim.kill()
    survivors = bs[:2]
    test_cluster.wait_settled(survivors, timeout=60)
    produced.update(produce(survivors[0], topic, [(i % 6, *m[1:]) for i, m in enumerate(make_messages("d", 300))]))
    doc = wait_rows(t, table, topic, produced, timeout=90)
    t.log(f"after {victim.name} was killed: {len(produced)} rows once in {doc['snapshots']} snapshots")
    for b in survivors:
        b.stop()


def test_every_codec_and_a_new_column(t):
    """Batches in every codec reach the table; a projection added later becomes a new column
    (the next field id) that older files read as null."""
    b = t.broker()
    topic = t.topic("icecodec")
    create_topic(b, topic, PARTITIONS)
    table = Table(t, b)
    produced = {}
    for codec in ["none", "gzip", "snappy", "lz4", "zstd"]:
        produced.update(produce_all_codec(b, topic, make_messages(codec, 60), codec))
    first = table.run_once(topic, "--partition-by", "none", project=["--project", "amount:double:$.amount"])
    t.log(first.stdout.decode().strip())
    doc = table.read(topic)
    if [f["name"] for f in doc["schema"]["fields"]][6:] != ["amount"]:
        raise AssertionError(f"schema after the first run: {doc['schema']}")
    before = set(produced)
    produced.update(produce(b, topic, make_messages("late", 60)))
    # PROJECT (amount, customer) adds customer: field id 11, null in the first run's rows.
    table.run_once(topic, "--partition-by", "none")
    doc = table.read(topic)
    fields = {f["name"]: f["id"] for f in doc["schema"]["fields"]}
    if fields.get("customer") != 11 or fields.get("amount") != 10:
        raise AssertionError(f"schema after adding a projection: {fields}")
    rows = {(int(r["partition"]), int(r["offset"])): r for r in doc["rows"]}
    if set(rows) != set(produced):
        raise AssertionError(f"{len(rows)} rows for {len(produced)} produced")
    for k in before:
        if rows[k].get("customer") is not None:
            raise AssertionError(f"{k} was written before the customer column and reads {rows[k].get('customer')!r}")
    late = [k for k in produced if k not in before]
    check_rows({"rows": [rows[k] for k in late]}, {k: produced[k] for k in late}, "rows after the new column")
    t.log(f"{len(produced)} records from 5 codecs; the added column is null in {len(before)} older rows")


def produce_all_codec(b, topic, msgs, codec):
    delivered = produce_all(b, topic, msgs, **{"compression.type": codec, "linger.ms": 20})
    return {(p, o): m for (p, o), m in zip(delivered, msgs)}


def test_store_faults(t):
    """S3 answers lost after they were applied, resets and 500s on a share of requests: runs of
    the sink fail and are retried, and the table ends up with every record once."""
    if t.store != "s3":
        return
    b = t.broker()
    topic = t.topic("icefault")
    create_topic(b, topic, PARTITIONS)
    proxy = broker.start_fault_proxy(t, 0)
    table = Table(t, b)
    table.b = type("ViaProxy", (), {"store": "s3", "namespace": b.namespace, "s3_endpoint": proxy,
                                    "data_dir": b.data_dir})()
    produced = produce(b, topic, make_messages("f", 300))
    cfg = urllib.request.Request(proxy + "/__proxy/config?fail-rate=0.5&fail-mode=500,reset&fail-when=after"
                                 "&fail-match=" + urllib.parse.quote("^(PUT|DELETE|POST|GET) "), method="POST")
    urllib.request.urlopen(cfg, timeout=10).read()
    failures = 0
    for round_ in range(2):
        for attempt in range(60):
            p = subprocess.run(table.sink_args(topic, "--once"), capture_output=True, timeout=180)
            if p.returncode == 0:
                break
            failures += 1
            t.log(f"run {failures} failed: {p.stderr.decode(errors='replace').strip().splitlines()[-1][-300:]}")
        else:
            raise AssertionError(f"the sink never got through the faults in 60 runs: {p.stderr.decode(errors='replace')[-2000:]}")
        if round_ == 0:
            produced.update(produce(b, topic, make_messages("f2", 90)))
    urllib.request.urlopen(urllib.request.Request(proxy + "/__proxy/config?fail-rate=0", method="POST"), timeout=10).read()
    table.run_once(topic)
    with urllib.request.urlopen(proxy + "/__proxy/stats", timeout=10) as r:
        stats = json.loads(r.read())
    doc = table.read(topic)
    check_rows(doc, produced, "after S3 faults")
    injected = sum(v for k, v in (stats.get("failed") or {}).items())
    if injected < 5:
        raise AssertionError(f"only {injected} faults injected ({stats}): the test exercised nothing")
    t.log(f"{failures} runs failed on injected faults ({stats.get('failed')}); then {len(produced)} records once "
          f"in {doc['snapshots']} snapshots")


def test_small_files_rewritten(t):
    """Six small commits, then maintenance rewrites the partition's small files into one
    (a replace snapshot): icebird still reads every record once; after expiry the small files
    are gone, and DuckDB reads the remaining files byte for byte."""
    b = t.broker()
    topic = t.topic("icesmall")
    create_topic(b, topic, PARTITIONS)
    table = Table(t, b)
    produced = {}
    for k in range(6):
        produced.update(produce(b, topic, make_messages(f"s{k}", 40)))
        table.run_once(topic, "--rewrite-min-files", "0")
    table.sync()
    data_files = lambda: sorted(glob.glob(os.path.join(table.local(topic), "data", "**", "*.parquet"), recursive=True))
    before = len(data_files())
    table.run_once(topic, "--rewrite-min-files", "4")
    doc = table.read(topic)
    check_rows(doc, produced, "after the rewrite")
    last = doc["summary"][-1]
    if last.get("operation") != "replace" or last.get("total-data-files") != "1":
        raise AssertionError(f"the last snapshot after the rewrite: {last}")
    table.run_once(topic, "--rewrite-min-files", "0", "--expire-after-ms", "0", "--keep-snapshots", "1",
                   "--orphan-grace-ms", "0")
    doc = table.read(topic)
    check_rows(doc, produced, "after the rewrite and expiry")
    after = len(data_files())
    if after != 1:
        raise AssertionError(f"{after} data files after the rewrite and expiry (were {before})")
    duckdb_check(t, table, topic, produced)
    t.log(f"{before} small data files rewritten into {after}; {len(produced)} records read once by icebird and duckdb")


def test_usage_errors(t):
    for args, words in [([], "usage"), (["/tmp/x"], "--topic"),
                        (["/tmp/x", "--topic", "a", "--partition-by", "hour"], "partition-by"),
                        (["/tmp/x", "--topic", "a", "--project", "Bad:long:$.a"], "names are"),
                        (["/tmp/x", "--topic", "a", "--project", "a:decimal:$.a"], "not one of"),
                        (["/tmp/x", "--topic", "a", "--project", "a-long"], "NAME:TYPE:PATH"),
                        (["/tmp/x", "--topic", "a", "--project", "b/x:long:$.x"], "not a --topic"),
                        (["/tmp/x", "--topic", "a", "--project", "x:long:$.x", "--project", "a/x:string:$.y"],
                         "named twice")]:
        p = subprocess.run([t.skiff, "iceberg", *args], capture_output=True, timeout=30)
        if p.returncode != 2 or words.encode() not in p.stderr:
            raise AssertionError(f"skiff iceberg {args}: exit {p.returncode}, stderr {p.stderr[-500:]!r}; "
                                 f"expected 2 and '{words}'")


if __name__ == "__main__":
    broker.main([
        (test_sink_reads_every_record_once, 300),
        (test_sigkill_at_every_stage, 300),
        (test_two_sinks_at_once, 300),
        (test_serve_sinks_its_topics, 300),
        (test_cluster_brokers_sink_their_partitions, 300),
        (test_every_codec_and_a_new_column, 300),
        (test_store_faults, 400),
        (test_small_files_rewritten, 300),
        test_usage_errors,
    ])
