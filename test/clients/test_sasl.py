#!/usr/bin/python3
"""SASL (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512) on a SASL_PLAINTEXT listener, as Kafka's
SaslServerAuthenticator serves it. Each broker listens on PLAINTEXT (for `skiff user`) and on
SASL_PLAINTEXT; users are added with `skiff user add` (AlterUserScramCredentials).

  - users: add (both mechanisms; one with SCRAM-SHA-256 only and 8192 iterations), list --json,
    users.json holds no password, rm, rm of a missing user (RESOURCE_NOT_FOUND, exit 1)
  - kcat with each mechanism; confluent-kafka producer and consumer group (commits, resume);
    kafka-python (SaslHandshake v0 and raw tokens); kafkajs (and its KIP-368 re-authentication)
  - raw wire: wrong passwords and unknown users (same message), unknown mechanism, requests
    before authentication, SaslAuthenticate before SaslHandshake, a 600 KiB frame, a garbage
    SCRAM message, SaslHandshake on PLAINTEXT, a SCRAM-SHA-512 exchange written here, session
    expiry (--max-reauth-ms), re-authentication (same user only); the metrics count them
  - no password and no stored key appears in any broker log

    test_sasl.py --skiff build/src/cli/skiff [--store local|s3]
"""
import base64
import glob
import hashlib
import hmac
import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_DIR = os.path.join(HERE, "node")

API_METADATA, API_SASL_HANDSHAKE, API_VERSIONS, API_SASL_AUTHENTICATE = 3, 17, 18, 36
ILLEGAL_SASL_STATE, UNSUPPORTED_SASL_MECHANISM, SASL_AUTHENTICATION_FAILED = 34, 33, 58
MECHS = ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"]
FAILED_AUTH_DELAY_MS = 300

# Every password any test uses (test_secrets greps the logs for them). Random per run.
_R = uuid.uuid4().hex[:10]
PW = {"alice": f"Alice-pw-{_R}-x", "bob": f"Bob-pw-{_R}-y"}
WRONG_PW = f"Wrong-pw-{_R}-z"
ALL_PASSWORDS = [PW["alice"], PW["bob"], WRONG_PW]
ALL_STORED_KEYS = []     # base64 stored_key/server_key values seen in users.json files


class SaslBroker(broker.Broker):
    """A broker with a PLAINTEXT listener (self.port, `bootstrap`) and a SASL_PLAINTEXT one
    (self.sasl_port, `sasl_bootstrap`); broker.Broker only knows --kafka-addr."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        self.sasl_port = broker.free_port()
        while self.sasl_port in (self.port, self.http_port):
            self.sasl_port = broker.free_port()

    @property
    def sasl_bootstrap(self):
        return f"127.0.0.1:{self.sasl_port}"

    def args(self):
        a = super().args()
        i = a.index("--kafka-addr")
        a[i:i + 2] = ["--listeners", f"PLAINTEXT://{self.bootstrap},SASL_PLAINTEXT://{self.sasl_bootstrap}"]
        return a

    def wait_ready(self, timeout=30):
        super().wait_ready(timeout)
        broker.wait_until(lambda: _connectable(self.sasl_port), timeout, f"SASL listener {self.sasl_port}")


def _connectable(port):
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            return s.getsockname() != s.getpeername()
    except OSError:
        return False


def sasl_broker(t, extra_args=(), users=True):
    t._n += 1
    b = SaslBroker(t.skiff, t.workdir, f"{t.name}-{t._n}", t.store,
                   extra_args=["--log-level", "debug", "--failed-auth-delay-ms", str(FAILED_AUTH_DELAY_MS),
                               *extra_args])
    t.brokers.append(b)
    b.start()
    if users:
        add_user(t, b, "alice")
        add_user(t, b, "bob", "--mechanism", "SCRAM-SHA-256", "--iterations", "8192")
    return b


# --- the CLI --------------------------------------------------------------------------------------

def skiff_user(t, b, *args, password=None, stdin=None, check=True):
    env = dict(os.environ)
    env.pop("SKIFF_USER_PASSWORD", None)
    if password is not None:
        env["SKIFF_USER_PASSWORD"] = password
    p = subprocess.run([t.skiff, "user", *args, "-b", b.bootstrap], env=env, input=(stdin or "").encode(),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    if check and p.returncode != 0:
        raise AssertionError(f"skiff user {' '.join(args)}: exit {p.returncode}: {err.strip()}")
    return p.returncode, out, err


def add_user(t, b, name, *args):
    # alice's password through the environment, bob's on standard input
    if name == "alice":
        skiff_user(t, b, "add", name, *args, password=PW[name])
    else:
        skiff_user(t, b, "add", name, *args, stdin=PW[name] + "\n")


def list_users(t, b):
    _, out, _ = skiff_user(t, b, "list", "--json")
    doc = json.loads(out)
    return {u["user"]: sorted((c["mechanism"], c["iterations"]) for c in u["credentials"]) for u in doc}


def users_json_path(b):
    return os.path.join(b.data_dir, "default", "skiff~meta", "users.json")


def read_users_json(b):
    """users.json's bytes from the broker's store (S3: a GET signed by curl), or None."""
    if b.store == "local":
        if not os.path.exists(users_json_path(b)):
            return None
        with open(users_json_path(b), "rb") as f:
            return f.read()
    url = f"{os.environ['S3_ENDPOINT'].rstrip('/')}/{os.environ['S3_BUCKET']}/{b.namespace}/skiff~meta/users.json"
    region = os.environ.get("AWS_REGION", "us-east-1")
    p = subprocess.run(["curl", "-sS", "-f", "--aws-sigv4", f"aws:amz:{region}:s3",
                        "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-K", "-", url],
                       input=f'user = "{os.environ["AWS_ACCESS_KEY_ID"]}:{os.environ["AWS_SECRET_ACCESS_KEY"]}"\n'
                       .encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    return p.stdout if p.returncode == 0 else None


def collect_keys(b):
    """Remembers users.json's stored_key/server_key values for test_secrets."""
    raw = read_users_json(b)
    if raw is None:
        return
    doc = json.loads(raw)
    for creds in doc["users"].values():
        for c in creds:
            ALL_STORED_KEYS.extend([c["stored_key"], c["server_key"]])


def test_users(t):
    b = sasl_broker(t, users=False)
    add_user(t, b, "alice")
    add_user(t, b, "bob", "--mechanism", "SCRAM-SHA-256", "--iterations", "8192")
    got = list_users(t, b)
    want = {"alice": [("SCRAM-SHA-256", 4096), ("SCRAM-SHA-512", 4096)], "bob": [("SCRAM-SHA-256", 8192)]}
    t.log(f"user list --json: {got}")
    assert got == want, f"user list: {got}, expected {want}"
    raw = read_users_json(b)
    assert raw is not None, f"users.json not found in the store ({b.store})"
    for name, pw in PW.items():
        assert pw.encode() not in raw, f"users.json contains {name}'s password"
    doc = json.loads(raw)
    assert sorted(doc["users"]) == ["alice", "bob"], f"users.json users: {sorted(doc['users'])}"
    for name, creds in doc["users"].items():
        for c in creds:
            assert set(c) == {"mechanism", "iterations", "salt", "stored_key", "server_key"}, \
                f"users.json {name}: members {sorted(c)}"
            # the keys are RFC 5802's, derived from the password given to `skiff user add`
            h = hashlib.sha512 if c["mechanism"] == "SCRAM-SHA-512" else hashlib.sha256
            salted = hashlib.pbkdf2_hmac(h().name, PW[name].encode(), base64.b64decode(c["salt"]), c["iterations"])
            stored = base64.b64encode(h(hmac.new(salted, b"Client Key", h).digest()).digest()).decode()
            server = base64.b64encode(hmac.new(salted, b"Server Key", h).digest()).decode()
            assert (c["stored_key"], c["server_key"]) == (stored, server), \
                f"users.json {name} {c['mechanism']}: keys not derived from the password"
    t.log("users.json: RFC 5802 keys derived from the passwords, no password text")
    collect_keys(b)
    skiff_user(t, b, "rm", "bob")
    got = list_users(t, b)
    t.log(f"after rm bob: {got}")
    assert got == {"alice": want["alice"]}, f"user list after rm bob: {got}"
    rc, out, err = skiff_user(t, b, "rm", "bob", check=False)
    t.log(f"rm bob again: exit {rc}, stderr {err.strip()!r}")
    assert rc == 1, f"rm of a missing user: exit {rc}, expected 1"
    assert "RESOURCE_NOT_FOUND" in err, f"rm of a missing user: stderr {err!r}"
    # bob is gone for authentication too
    rc, _, kerr = kcat(b, "SCRAM-SHA-256", "bob", ["-L"], check=False, timeout=20)
    assert rc != 0, "kcat -L as the removed user bob succeeded"
    t.log("the removed user cannot authenticate")
    b.stop()


# --- kcat -----------------------------------------------------------------------------------------

def kcat(b, mech, user, args, stdin=None, check=True, timeout=60, password=None):
    cmd = ["kcat", "-b", b.sasl_bootstrap, "-X", "security.protocol=SASL_PLAINTEXT",
           "-X", f"sasl.mechanism={mech}", "-X", f"sasl.username={user}",
           "-X", f"sasl.password={password or PW[user]}", *args]
    if not check:
        cmd[1:1] = ["-m", "10"]
    p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"kcat {mech} {' '.join(args)}: exit {p.returncode}: "
                             f"{p.stderr.decode(errors='replace')[-2000:]}")
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def kcat_roundtrip(t, b, mech, user, n):
    topic = t.topic(f"kcat-{mech.lower()}")
    values = [f"{mech}-{user}-{i}-{'v' * (i % 37)}" for i in range(n)]
    kcat(b, mech, user, ["-P", "-t", topic, "-X", "acks=all"], stdin=("\n".join(values) + "\n").encode())
    _, out, _ = kcat(b, mech, user, ["-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n"])
    got = out.decode().splitlines()
    assert got == values, f"kcat {mech}: read {len(got)} values, first difference at " \
                          f"{next((i for i, (x, y) in enumerate(zip(got, values)) if x != y), min(len(got), n))}"
    t.log(f"kcat {mech} as {user}: {n} messages produced and read back exactly")
    return topic


def test_kcat(t):
    b = sasl_broker(t)
    before = {m: broker.metric_counter(b, "skiff_sasl_authentications_total", mechanism=m, outcome="success")
              for m in MECHS}
    kcat_roundtrip(t, b, "SCRAM-SHA-512", "alice", 500)
    kcat_roundtrip(t, b, "SCRAM-SHA-256", "bob", 500)
    kcat_roundtrip(t, b, "PLAIN", "alice", 500)
    for m in MECHS:
        n = broker.metric_counter(b, "skiff_sasl_authentications_total", mechanism=m, outcome="success")
        assert n > before[m], f"no successful {m} authentication counted ({before[m]} -> {n})"
    # a wrong password: kcat fails
    rc, _, err = kcat(b, "SCRAM-SHA-512", "alice", ["-L"], check=False, timeout=20, password=WRONG_PW)
    assert rc != 0, "kcat -L with a wrong password succeeded"
    t.log("kcat with a wrong password fails")
    collect_keys(b)
    b.stop()


# --- confluent-kafka ------------------------------------------------------------------------------

class _Addr:
    def __init__(self, bootstrap):
        self.bootstrap = bootstrap


def test_confluent(t):
    from ckutil import produce_all
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic
    b = sasl_broker(t, extra_args=["--auto-create-topics", "false"])
    sasl = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": "alice", "sasl.password": PW["alice"]}
    topic = t.topic("ck")
    a = AdminClient({"bootstrap.servers": b.sasl_bootstrap, **sasl})
    a.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(30)
    broker.wait_until(lambda: len(a.list_topics(topic=topic, timeout=10).topics[topic].partitions) == 3
                      and a.list_topics(topic=topic, timeout=10).topics[topic].error is None, 20, "the topic")
    t.log(f"created {topic} over SASL (SCRAM-SHA-512)")
    n = 1000
    msgs = [(None, f"k{i}".encode(), f"value-{i}".encode(), None) for i in range(n)]
    produce_all(_Addr(b.sasl_bootstrap), topic, msgs, **sasl)
    t.log(f"produced {n} records with acks=all")
    group = f"ck-group-{uuid.uuid4().hex[:6]}"

    def consumer():
        c = Consumer({"bootstrap.servers": b.sasl_bootstrap, "group.id": group, "enable.auto.commit": False,
                      "auto.offset.reset": "earliest", **sasl})
        c.subscribe([topic])
        return c

    def read(c, until, timeout=60):
        got = []
        deadline = time.monotonic() + timeout
        while len(got) < until and time.monotonic() < deadline:
            for m in c.consume(min(100, until - len(got)), 0.5):
                if m.error():
                    raise AssertionError(f"consume error: {m.error()}")
                got.append(m.value().decode())
        return got

    c1 = consumer()
    first = read(c1, 600)
    assert len(first) == 600, f"first consumer read {len(first)} of 600"
    c1.commit(asynchronous=False)
    c1.close()
    t.log("first group member read 600 records, committed synchronously, closed")
    c2 = consumer()
    second = read(c2, n - 600)
    extra = c2.consume(100, 3)
    c2.close()
    assert not extra, f"second member read {len(extra)} records beyond the 1000"
    got = first + second
    assert len(got) == n and len(set(got)) == n, f"{len(got)} records read, {len(set(got))} distinct"
    assert set(got) == {f"value-{i}" for i in range(n)}, "records read differ from those produced"
    t.log(f"second member resumed from the commit: {len(second)} more, all {n} exactly once")
    b.stop()


# --- kafka-python ---------------------------------------------------------------------------------

def test_kafka_python(t):
    from kafka import KafkaConsumer, KafkaProducer, TopicPartition
    b = sasl_broker(t)
    for mech, user in (("SCRAM-SHA-256", "bob"), ("PLAIN", "alice"), ("SCRAM-SHA-512", "alice")):
        before = broker.metric_counter(b, "skiff_sasl_authentications_total", mechanism=mech, outcome="success")
        conf = dict(bootstrap_servers=b.sasl_bootstrap, security_protocol="SASL_PLAINTEXT",
                    sasl_mechanism=mech, sasl_plain_username=user, sasl_plain_password=PW[user],
                    request_timeout_ms=20000)
        topic = t.topic(f"kp-{mech.lower()}")
        p = KafkaProducer(acks="all", **conf)
        values = [f"kp-{mech}-{i}".encode() for i in range(200)]
        futs = [p.send(topic, v) for v in values]
        for f in futs:
            f.get(timeout=30)
        p.close()
        c = KafkaConsumer(consumer_timeout_ms=5000, auto_offset_reset="earliest", enable_auto_commit=False, **conf)
        tp = TopicPartition(topic, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got = []
        deadline = time.monotonic() + 30
        while len(got) < len(values) and time.monotonic() < deadline:
            for recs in c.poll(timeout_ms=1000).values():
                got.extend(r.value for r in recs)
        c.close()
        assert got == values, f"kafka-python {mech}: read {len(got)} values, expected {len(values)} in order"
        after = broker.metric_counter(b, "skiff_sasl_authentications_total", mechanism=mech, outcome="success")
        assert after > before, f"kafka-python {mech}: no successful authentication counted"
        t.log(f"kafka-python {mech} as {user}: 200 produced and read back ({after - before} authentications)")
    with open(b.log_path, errors="replace") as f:
        log = f.read()
    t.log(f"broker log: {log.count('authenticated as')} authentications logged (kafka-python 2.0.2 sends "
          "SaslHandshake v0, then raw size-prefixed tokens)")
    b.stop()


# --- kafkajs --------------------------------------------------------------------------------------

def run_node(t, b, mech, user, mode="basic", timeout=120, env=None):
    node = shutil.which("node")
    assert node, "node not found: run tools/install-deps.sh --all"
    assert os.path.isfile(os.path.join(NODE_DIR, "node_modules", "kafkajs", "package.json")), \
        "kafkajs not installed: run tools/install-deps.sh --all"
    e = dict(os.environ, SKIFF_BOOTSTRAP=b.sasl_bootstrap, SASL_MECHANISM=mech, SASL_USER=user,
             SASL_PASSWORD=PW[user], SASL_MODE=mode, KAFKAJS_NO_PARTITIONER_WARNING="1", **(env or {}))
    p = subprocess.run([node, os.path.join(NODE_DIR, "sasl.js")], cwd=NODE_DIR, env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    out = p.stdout.decode(errors="replace")
    print(out.rstrip(), flush=True)
    assert p.returncode == 0, f"sasl.js {mech} {mode}: exit {p.returncode}"
    return out


def test_kafkajs(t):
    b = sasl_broker(t, extra_args=["--auto-create-topics", "false"])
    run_node(t, b, "scram-sha-512", "alice")
    run_node(t, b, "plain", "alice")
    run_node(t, b, "scram-sha-256", "bob")
    collect_keys(b)
    b.stop()


def test_kafkajs_reauth(t):
    b = sasl_broker(t, extra_args=["--max-reauth-ms", "3000"])
    succ0 = broker.metric_counter(b, "skiff_sasl_authentications_total", outcome="success")
    conns0 = broker.metric_counter(b, "skiff_kafka_accepted_connections_total")
    out = run_node(t, b, "scram-sha-512", "alice", mode="reauth", env={"REAUTH_SECONDS": "10"})
    sent = int(re.search(r"REAUTH_SENT=(\d+)", out).group(1))
    assert sent >= 30, f"only {sent} sends in 10 s"
    succ = broker.metric_counter(b, "skiff_sasl_authentications_total", outcome="success") - succ0
    conns = broker.metric_counter(b, "skiff_kafka_accepted_connections_total") - conns0
    expired = broker.metric_counter(b, "skiff_sasl_closed_connections_total", reason="session_expired")
    with open(b.log_path, errors="replace") as f:
        reauths = f.read().count("(re-authentication)")
    t.log(f"{sent} sends acknowledged; {succ} successful authentications on {conns} connections, "
          f"{reauths} re-authentications logged, {expired} sessions expired")
    assert succ > conns, f"{succ} authentications on {conns} connections: kafkajs never re-authenticated"
    assert reauths >= 2, f"{reauths} re-authentications in the broker log"
    assert expired == 0, f"{expired} connections closed for an expired session"
    b.stop()


# --- the raw wire ---------------------------------------------------------------------------------

def request(api_key, version, corr, body=b"", client_id=b"skiff-sasl-test", flexible=False):
    hdr = struct.pack(">hhi", api_key, version, corr) + struct.pack(">h", len(client_id)) + client_id
    if flexible:
        hdr += b"\x00"
    msg = hdr + body
    return struct.pack(">i", len(msg)) + msg


def kstr(s):
    s = s.encode() if isinstance(s, str) else s
    return struct.pack(">h", len(s)) + s


def kbytes(b):
    return struct.pack(">i", len(b)) + b


def recv_exact(s, n, timeout):
    s.settimeout(timeout)
    buf = b""
    while len(buf) < n:
        try:
            chunk = s.recv(n - len(buf))
        except ConnectionResetError:
            return None
        if not chunk:
            return None
        buf += chunk
    return buf


def recv_frame(s, timeout=10):
    head = recv_exact(s, 4, timeout)
    if head is None:
        return None
    (n,) = struct.unpack(">i", head)
    assert 0 <= n < 64 << 20, f"response frame size {n}"
    body = recv_exact(s, n, timeout)
    assert body is not None, "connection closed in the middle of a response"
    return body


def wait_closed(s, what, timeout=10):
    """Asserts the broker closes the connection within timeout without sending anything."""
    s.settimeout(0.5)
    got = b""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            break
        if not chunk:
            break
        got += chunk
    else:
        raise AssertionError(f"{what}: connection still open after {timeout} s")
    assert got == b"", f"{what}: the broker sent {len(got)} bytes before closing, expected none"


class Reader:
    def __init__(self, data):
        self.d, self.p = data, 0

    def take(self, fmt):
        v = struct.unpack_from(fmt, self.d, self.p)
        self.p += struct.calcsize(fmt)
        return v[0] if len(v) == 1 else v

    def string(self):
        n = self.take(">h")
        if n < 0:
            return None
        v = self.d[self.p:self.p + n]
        self.p += n
        return v.decode()

    def bytes_(self):
        n = self.take(">i")
        if n < 0:
            return None
        v = self.d[self.p:self.p + n]
        self.p += n
        return v


class Conn:
    def __init__(self, port):
        self.s = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.corr = 0

    def close(self):
        self.s.close()

    def call(self, api_key, version, body=b""):
        """Sends a request; returns the response body after the correlation id, or None if the
        connection closed."""
        self.corr += 1
        self.s.sendall(request(api_key, version, self.corr, body))
        resp = recv_frame(self.s)
        if resp is None:
            return None
        r = Reader(resp)
        corr = r.take(">i")
        assert corr == self.corr, f"correlation id {corr}, expected {self.corr}"
        return r

    def handshake(self, mech, version=1):
        r = self.call(API_SASL_HANDSHAKE, version, kstr(mech))
        assert r is not None, f"SaslHandshake {mech}: connection closed"
        err = r.take(">h")
        mechs = [r.string() for _ in range(r.take(">i"))]
        return err, mechs

    def authenticate(self, token, version=1):
        """(error_code, error_message, auth_bytes, session_lifetime_ms or None) or None if closed."""
        r = self.call(API_SASL_AUTHENTICATE, version, kbytes(token))
        if r is None:
            return None
        err, msg, data = r.take(">h"), r.string(), r.bytes_()
        life = r.take(">q") if version >= 1 else None
        return err, msg, data, life

    def api_versions(self):
        r = self.call(API_VERSIONS, 0)
        assert r is not None, "ApiVersions: connection closed"
        assert r.take(">h") == 0, "ApiVersions error"
        return r

    def metadata(self):
        """True if Metadata v1 (all topics) is answered, False if the connection was closed."""
        try:
            r = self.call(API_METADATA, 1, struct.pack(">i", -1))
        except (ConnectionResetError, BrokenPipeError):
            return False
        return r is not None


def scram_exchange(c, mech, user, password, version=1):
    """A full SCRAM exchange over SaslAuthenticate (after the handshake). Returns the last
    (error, message, bytes, lifetime) answer; checks the server signature on success."""
    h = hashlib.sha512 if mech == "SCRAM-SHA-512" else hashlib.sha256
    cnonce = base64.b64encode(os.urandom(18)).decode()
    bare = f"n={user},r={cnonce}"
    a = c.authenticate(("n,," + bare).encode(), version)
    assert a is not None, f"{mech} client-first: connection closed"
    if a[0] != 0:
        return a
    server_first = a[2].decode()
    f = dict(kv.split("=", 1) for kv in server_first.split(","))
    assert f["r"].startswith(cnonce) and len(f["r"]) > len(cnonce), f"server nonce {f['r']!r}"
    salted = hashlib.pbkdf2_hmac(h().name, password.encode(), base64.b64decode(f["s"]), int(f["i"]))
    client_key = hmac.new(salted, b"Client Key", h).digest()
    stored_key = h(client_key).digest()
    without_proof = f"c=biws,r={f['r']}"
    auth_msg = f"{bare},{server_first},{without_proof}".encode()
    sig = hmac.new(stored_key, auth_msg, h).digest()
    proof = bytes(x ^ y for x, y in zip(client_key, sig))
    final = f"{without_proof},p={base64.b64encode(proof).decode()}"
    a = c.authenticate(final.encode(), version)
    assert a is not None, f"{mech} client-final: connection closed"
    if a[0] == 0:
        server_key = hmac.new(salted, b"Server Key", h).digest()
        want = "v=" + base64.b64encode(hmac.new(server_key, auth_msg, h).digest()).decode()
        assert a[2].decode() == want, f"{mech} server-final {a[2]!r}, expected {want!r}"
    return a


def sasl_login(b, mech, user, password, version=1):
    c = Conn(b.sasl_port)
    err, mechs = c.handshake(mech)
    assert err == 0, f"SaslHandshake {mech}: error {err}"
    if mech == "PLAIN":
        a = c.authenticate(f"\0{user}\0{password}".encode(), version)
        assert a is not None, "PLAIN: connection closed unanswered"
    else:
        a = scram_exchange(c, mech, user, password, version)
    return c, a


def expect_auth_failure(t, b, mech, user, password):
    t0 = time.monotonic()
    c, a = sasl_login(b, mech, user, password)
    dt = time.monotonic() - t0
    try:
        assert a[0] == SASL_AUTHENTICATION_FAILED, f"{mech} {user}: error {a[0]}, expected 58"
        assert a[1] and "Invalid username or password" in a[1], f"{mech} {user}: message {a[1]!r}"
        assert dt >= FAILED_AUTH_DELAY_MS / 1000 * 0.9, f"{mech} {user}: answered after {dt:.3f} s, " \
                                                        f"before the failed-auth delay"
        wait_closed(c.s, f"{mech} {user} after the failure")
    finally:
        c.close()
    return a[1]


def counters(b):
    out = {}
    for m in MECHS:
        for o in ("success", "failure"):
            out[(m, o)] = broker.metric_counter(b, "skiff_sasl_authentications_total", mechanism=m, outcome=o)
    for r in ("unauthenticated_request", "session_expired", "illegal_state"):
        out[r] = broker.metric_counter(b, "skiff_sasl_closed_connections_total", reason=r)
    return out


def test_bad_input(t):
    b = sasl_broker(t)
    c0 = counters(b)
    fails = {m: 0 for m in MECHS}
    succ = {m: 0 for m in MECHS}

    # wrong passwords and unknown users, each mechanism: the same message, then closed
    for mech, user in (("SCRAM-SHA-512", "alice"), ("SCRAM-SHA-256", "bob"), ("PLAIN", "alice")):
        m_wrong = expect_auth_failure(t, b, mech, user, WRONG_PW)
        m_unknown = expect_auth_failure(t, b, mech, "mallory", WRONG_PW)
        fails[mech] += 2
        assert m_wrong == m_unknown, f"{mech}: wrong password says {m_wrong!r}, unknown user {m_unknown!r}"
        t.log(f"{mech}: wrong password and unknown user -> 58 {m_wrong!r}, after the delay, closed")
    # bob has no SCRAM-SHA-512 credential: same failure
    m = expect_auth_failure(t, b, "SCRAM-SHA-512", "bob", PW["bob"])
    fails["SCRAM-SHA-512"] += 1
    t.log(f"SCRAM-SHA-512 for bob (SCRAM-SHA-256 only) -> 58 {m!r}")

    # unknown mechanism
    c = Conn(b.sasl_port)
    err, mechs = c.handshake("GSSAPI")
    t.log(f"SaslHandshake GSSAPI -> error {err}, mechanisms {mechs}")
    assert err == UNSUPPORTED_SASL_MECHANISM, f"GSSAPI: error {err}, expected 33"
    assert sorted(mechs) == sorted(MECHS), f"GSSAPI: enabled mechanisms {mechs}"
    wait_closed(c.s, "after UNSUPPORTED_SASL_MECHANISM")
    c.close()

    # Metadata before authentication: closed unanswered (also after a handshake)
    c = Conn(b.sasl_port)
    c.api_versions()
    assert not c.metadata(), "Metadata before authentication was answered"
    c.close()
    t.log("Metadata before authentication -> closed without an answer (ApiVersions answered)")

    # SaslAuthenticate before SaslHandshake: 34, closed
    c = Conn(b.sasl_port)
    a = c.authenticate(b"n,,n=alice,r=abc")
    assert a is not None and a[0] == ILLEGAL_SASL_STATE, f"SaslAuthenticate first: {a}"
    wait_closed(c.s, "after ILLEGAL_SASL_STATE")
    c.close()
    t.log(f"SaslAuthenticate before SaslHandshake -> 34 {a[1]!r}, closed")

    # a 600 KiB frame before authentication: closed (without reading it all)
    c = Conn(b.sasl_port)
    c.s.sendall(struct.pack(">i", 600 << 10) + request(API_SASL_HANDSHAKE, 1, 1, kstr("PLAIN"))[4:])
    wait_closed(c.s, "a 600 KiB frame before authentication")
    c.close()
    # the same after a handshake, as a SaslAuthenticate
    c = Conn(b.sasl_port)
    assert c.handshake("PLAIN")[0] == 0
    c.s.sendall(struct.pack(">i", 600 << 10) + struct.pack(">hhi", API_SASL_AUTHENTICATE, 1, 9) + b"\0" * 4096)
    wait_closed(c.s, "a 600 KiB SaslAuthenticate frame")
    c.close()
    t.log("600 KiB frames before authentication -> closed")

    # garbage SCRAM client-first: 58, closed
    c = Conn(b.sasl_port)
    assert c.handshake("SCRAM-SHA-512")[0] == 0
    a = c.authenticate(b"\xff\x00garbage,,=,r")
    assert a is not None and a[0] == SASL_AUTHENTICATION_FAILED, f"garbage client-first: {a}"
    wait_closed(c.s, "after a garbage client-first")
    c.close()
    fails["SCRAM-SHA-512"] += 1
    t.log(f"garbage SCRAM client-first -> 58 {a[1]!r}, closed")

    # SaslHandshake on the PLAINTEXT listener: 34, the connection stays
    c = Conn(b.port)
    err, mechs = c.handshake("SCRAM-SHA-512")
    assert err == ILLEGAL_SASL_STATE, f"SaslHandshake on PLAINTEXT: error {err}"
    c.api_versions()
    assert c.metadata(), "PLAINTEXT connection closed after the refused SaslHandshake"
    c.close()
    t.log("SaslHandshake on PLAINTEXT -> 34; the connection still answers ApiVersions and Metadata")

    # a full SCRAM-SHA-512 exchange written here, then Metadata is answered; the same for
    # SCRAM-SHA-256 (v2 is flexible: not used here; v0 carries no session lifetime) and PLAIN
    for mech, user, version in (("SCRAM-SHA-512", "alice", 1), ("SCRAM-SHA-256", "bob", 0), ("PLAIN", "alice", 1)):
        c, a = sasl_login(b, mech, user, PW[user], version)
        assert a[0] == 0, f"{mech} exchange: error {a[0]} {a[1]!r}"
        if version >= 1:
            assert a[3] == 0, f"{mech}: session_lifetime_ms {a[3]} without --max-reauth-ms"
        assert c.metadata(), f"Metadata after {mech} authentication not answered"
        assert c.metadata(), f"second Metadata after {mech} authentication not answered"
        c.close()
        succ[mech] += 1
        t.log(f"{mech} exchange (SaslAuthenticate v{version}) as {user} -> authenticated; Metadata answered")

    # SaslHandshake v0 + raw tokens (PLAIN), then Metadata
    c = Conn(b.sasl_port)
    assert c.handshake("PLAIN", version=0)[0] == 0
    tok = f"\0alice\0{PW['alice']}".encode()
    c.s.sendall(struct.pack(">i", len(tok)) + tok)
    resp = recv_frame(c.s)
    assert resp == b"", f"raw PLAIN token answer {resp!r}, expected an empty token"
    assert c.metadata(), "Metadata after a SaslHandshake v0 PLAIN authentication not answered"
    c.close()
    succ["PLAIN"] += 1
    t.log("SaslHandshake v0 + raw PLAIN token -> empty token; Metadata answered")

    # the broker still serves real clients
    kcat_roundtrip(t, b, "SCRAM-SHA-512", "alice", 50)
    c1 = counters(b)
    d = {k: c1[k] - c0[k] for k in c1}
    t.log(f"metrics deltas: {d}")
    for m in MECHS:
        assert d[(m, "success")] >= succ[m], f"{m} successes counted {d[(m, 'success')]}, expected >= {succ[m]}"
    assert d["unauthenticated_request"] == 1, f"unauthenticated_request {d['unauthenticated_request']}, expected 1"
    assert d["illegal_state"] == 1, f"illegal_state {d['illegal_state']}, expected 1"
    assert d["session_expired"] == 0, f"session_expired {d['session_expired']}, expected 0"
    collect_keys(b)
    b.stop()
    # Last, so that everything above is checked first: failures by the mechanism tried. The
    # GSSAPI handshake (not enabled) is no PLAIN authentication and must not count as one.
    for m in sorted(MECHS, key=lambda m: m == "PLAIN"):
        assert d[(m, "failure")] == fails[m], f"{m} failures counted {d[(m, 'failure')]}, expected {fails[m]}" + \
            (" (the refused GSSAPI handshake is counted as a PLAIN failure)" if m == "PLAIN" and
             d[(m, "failure")] == fails[m] + 1 else "")


def test_session_expiry(t):
    b = sasl_broker(t, extra_args=["--max-reauth-ms", "1500"])
    c0 = counters(b)
    # authenticate; session_lifetime_ms; expiry closes the connection
    c, a = sasl_login(b, "SCRAM-SHA-512", "alice", PW["alice"])
    assert a[0] == 0, f"login: {a}"
    assert a[3] == 1500, f"session_lifetime_ms {a[3]}, expected 1500"
    assert c.metadata(), "Metadata within the session not answered"
    t.log("SCRAM-SHA-512 login: session_lifetime_ms=1500; Metadata answered")
    time.sleep(2)
    assert not c.metadata(), "Metadata after the session expired was answered"
    c.close()
    t.log("after 2 s without re-authentication: Metadata -> connection closed")

    # re-authentication before expiry keeps the connection going past the first expiry
    for mech in ("SCRAM-SHA-512", "PLAIN"):
        c, a = sasl_login(b, mech, "alice", PW["alice"])
        assert a[0] == 0 and a[3] == 1500, f"{mech} login: {a}"
        t_login = time.monotonic()
        time.sleep(1.0)
        assert c.metadata(), "Metadata at 1 s not answered"
        err, _ = c.handshake(mech)
        assert err == 0, f"re-authentication SaslHandshake: error {err}"
        if mech == "PLAIN":
            a = c.authenticate(f"\0alice\0{PW['alice']}".encode())
        else:
            a = scram_exchange(c, mech, "alice", PW["alice"])
        assert a[0] == 0, f"re-authentication: {a}"
        assert a[3] == 1500, f"re-authentication session_lifetime_ms {a[3]}"
        time.sleep(max(0.0, 2.0 - (time.monotonic() - t_login)))
        assert c.metadata(), "Metadata after re-authentication, past the first session's end, not answered"
        c.close()
        t.log(f"{mech}: re-authenticated at 1 s on the same connection; Metadata answered at 2 s")

    # re-authentication as another user fails
    c, a = sasl_login(b, "SCRAM-SHA-256", "alice", PW["alice"])
    assert a[0] == 0, f"login: {a}"
    assert c.handshake("SCRAM-SHA-256")[0] == 0
    a = scram_exchange(c, "SCRAM-SHA-256", "bob", PW["bob"])
    t.log(f"re-authentication as bob on alice's connection -> {a[0]} {a[1]!r}")
    assert a[0] == SASL_AUTHENTICATION_FAILED, f"re-authentication as another user: error {a[0]}"
    wait_closed(c.s, "after a re-authentication as another user")
    c.close()

    kcat_roundtrip(t, b, "SCRAM-SHA-256", "bob", 50)
    c1 = counters(b)
    d = {k: c1[k] - c0[k] for k in c1}
    t.log(f"metrics deltas: {d}")
    assert d["session_expired"] == 1, f"session_expired {d['session_expired']}, expected 1"
    assert d[("SCRAM-SHA-256", "failure")] == 1, f"SCRAM-SHA-256 failures {d[('SCRAM-SHA-256', 'failure')]}"
    assert d[("SCRAM-SHA-512", "success")] == 3, f"SCRAM-SHA-512 successes {d[('SCRAM-SHA-512', 'success')]}"
    assert d[("PLAIN", "success")] == 2, f"PLAIN successes {d[('PLAIN', 'success')]}"
    collect_keys(b)
    b.stop()


def test_reauth_mechanism(t):
    """Kafka (SaslServerAuthenticator.ReauthInfo.saslMechanismUnchanged) refuses a
    re-authentication with another mechanism than the session's: the SaslHandshake is answered,
    the exchange that follows fails and the connection closes. Same user, right password."""
    b = sasl_broker(t, extra_args=["--max-reauth-ms", "60000"])
    for first, second in (("SCRAM-SHA-512", "PLAIN"), ("PLAIN", "SCRAM-SHA-256")):
        c, a = sasl_login(b, first, "alice", PW["alice"])
        assert a[0] == 0, f"{first} login: {a}"
        assert c.metadata(), f"Metadata after the {first} login not answered"
        err, _ = c.handshake(second)
        t.log(f"re-authentication SaslHandshake {first} -> {second}: error {err}")
        if err == 0:
            if second == "PLAIN":
                a = c.authenticate(f"\0alice\0{PW['alice']}".encode())
            else:
                a = scram_exchange(c, second, "alice", PW["alice"])
            t.log(f"re-authentication with {second} on a {first} session -> {a and a[:2]}")
            assert a is None or a[0] == SASL_AUTHENTICATION_FAILED, \
                f"re-authentication changed the mechanism from {first} to {second}: answered {a[:2]}, " \
                "expected SASL_AUTHENTICATION_FAILED or a close (Kafka: 'SASL mechanism ... is not supported " \
                "for re-authentication of mechanism ...')"
        else:
            assert err == ILLEGAL_SASL_STATE, f"re-authentication handshake: error {err}"
        wait_closed(c.s, f"after a re-authentication from {first} to {second}")
        c.close()
    b.stop()


# --- secrets --------------------------------------------------------------------------------------

def test_secrets(t):
    root = os.path.dirname(t.workdir)
    logs = sorted(glob.glob(os.path.join(root, "*", "*.log")))
    # every users.json left by the earlier tests (local store)
    for p in glob.glob(os.path.join(root, "*", "*-data", "default", "skiff~meta", "users.json")):
        with open(p) as f:
            for creds in json.load(f)["users"].values():
                for c in creds:
                    ALL_STORED_KEYS.extend([c["stored_key"], c["server_key"]])
    # this test's own broker, so there is always something to check
    b = sasl_broker(t)
    kcat_roundtrip(t, b, "PLAIN", "alice", 10)
    collect_keys(b)
    b.stop()
    logs.append(b.log_path)
    assert ALL_STORED_KEYS, "no stored keys found in any users.json"
    secrets = sorted(set(ALL_PASSWORDS + ALL_STORED_KEYS))
    assert logs, "no broker logs to check"
    total = 0
    for p in logs:
        with open(p, "rb") as f:
            data = f.read()
        total += len(data)
        for s in secrets:
            for form in {s.encode(), s.encode().hex().encode()}:
                assert form not in data, f"{os.path.basename(p)} contains a secret ({s[:4]}...)"
    t.log(f"{len(logs)} broker logs ({total} bytes) contain none of {len(ALL_PASSWORDS)} passwords "
          f"and {len(set(ALL_STORED_KEYS))} stored/server keys")


if __name__ == "__main__":
    broker.main([(test_users, 120), (test_kcat, 180), (test_confluent, 240), (test_kafka_python, 240),
                 (test_kafkajs, 300), (test_kafkajs_reauth, 120), (test_bad_input, 180),
                 (test_session_expiry, 120), (test_reauth_mechanism, 60), (test_secrets, 120)])
