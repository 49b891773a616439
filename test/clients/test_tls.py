#!/usr/bin/python3
"""TLS listeners (SSL, SASL_SSL) with real clients, raw sockets and the openssl CLI. Each broker
listens on PLAINTEXT (for `skiff user`), SSL and SASL_SSL; the certificates are made here, at run
time, with `openssl` in the test's work directory (a CA, a server certificate for IP 127.0.0.1,
client certificates of that CA and of another one).

  - kcat over SSL (server authentication only): 100 messages produced and read back exactly;
    a client that does not trust the broker's CA refuses it
  - confluent-kafka over SASL_SSL (SCRAM-SHA-512, PLAIN): producer, a consumer group that
    commits, a second member resuming from the commit
  - kafkajs over SSL and SASL_SSL/scram-sha-512 (node/tls.js)
  - mTLS (--tls-client-auth required): a client certificate of the CA works and becomes the
    principal User:CN=alice,OU=eng,O=acme; none, or one of another CA, is refused and counted
  - SIGHUP reloads the certificate for new connections; old connections (a raw TLS socket, a
    confluent-kafka producer) keep theirs and keep working; a broken key file keeps the old one
  - bad input on the SSL port: plaintext Kafka (closed at once, counted as not_tls), garbage,
    silent and stalled clients (closed after the handshake timeout, others unaffected), TLS 1.2
    against --tls-min-version TLSv1.3; bad certificate/key files and settings refused at start
  - no password and no private key material in any broker log

    test_tls.py --skiff build/src/cli/skiff
"""
import glob
import json
import os
import random
import re
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_DIR = os.path.join(HERE, "node")

NOT_TLS_LOG = "the peer did not start a TLS handshake (plaintext on a TLS port?)"
ALICE_PRINCIPAL = "User:CN=alice,OU=eng,O=acme"

# Every password any test uses and a line of every private key made (test_secrets greps the
# broker logs for them). Random per run.
_R = uuid.uuid4().hex[:10]
PW = {"alice": f"Alice-tls-pw-{_R}-x", "bob": f"Bob-tls-pw-{_R}-y"}
WRONG_PW = f"Wrong-tls-pw-{_R}-z"
ALL_PASSWORDS = [PW["alice"], PW["bob"], WRONG_PW]
KEY_SNIPPETS = []


# --- certificates -------------------------------------------------------------------------------

def openssl(d, *args):
    p = subprocess.run(["openssl", *args], cwd=d, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"openssl {' '.join(args)}: exit {p.returncode}: {p.stderr.decode(errors='replace')}")
    return p.stdout.decode(errors="replace")


def _remember_key(path):
    with open(path) as f:
        lines = [ln.strip() for ln in f if ln.strip() and "-----" not in ln]
    KEY_SNIPPETS.extend(lines[1:3])


def make_ca(d, name, cn):
    openssl(d, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key.pem",
            "-out", f"{name}.pem", "-days", "2", "-subj", f"/CN={cn}")
    _remember_key(os.path.join(d, f"{name}.key.pem"))
    return os.path.join(d, f"{name}.pem")


def make_intermediate(d, name, cn, ca):
    """An intermediate CA `name`.pem (key `name`.key.pem) signed by `ca`."""
    openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key.pem", "-out", f"{name}.csr",
            "-subj", f"/CN={cn}")
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        f.write("basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\n")
    openssl(d, "x509", "-req", "-in", f"{name}.csr", "-CA", ca, "-CAkey", ca[:-len(".pem")] + ".key.pem",
            "-set_serial", str(random.randrange(1 << 40, 1 << 60)), "-out", f"{name}.pem", "-days", "2",
            "-extfile", f"{name}.ext")
    _remember_key(os.path.join(d, f"{name}.key.pem"))
    return os.path.join(d, f"{name}.pem")


def make_cert(d, name, subj, ca, server=True):
    """A certificate `name`.pem with key `name`.key.pem signed by CA `ca` (its .pem; the key is
    next to it). Server certificates name IP 127.0.0.1 and localhost."""
    ca_key = ca[:-len(".pem")] + ".key.pem"
    openssl(d, "req", "-newkey", "rsa:2048", "-nodes", "-keyout", f"{name}.key.pem", "-out", f"{name}.csr",
            "-subj", subj)
    with open(os.path.join(d, f"{name}.ext"), "w") as f:
        if server:
            f.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n")
        else:
            f.write("extendedKeyUsage=clientAuth\n")
    openssl(d, "x509", "-req", "-in", f"{name}.csr", "-CA", ca, "-CAkey", ca_key,
            "-set_serial", str(random.randrange(1 << 40, 1 << 60)), "-out", f"{name}.pem", "-days", "2",
            "-extfile", f"{name}.ext")
    _remember_key(os.path.join(d, f"{name}.key.pem"))
    return os.path.join(d, f"{name}.pem"), os.path.join(d, f"{name}.key.pem")


class Certs:
    """ca.pem, server.pem/server.key.pem (O=first, CN=127.0.0.1), alice (client, same CA),
    other-ca.pem and mallory (client of the other CA)."""

    def __init__(self, t):
        self.dir = os.path.join(t.workdir, "certs")
        os.makedirs(self.dir, exist_ok=True)
        self.ca = make_ca(self.dir, "ca", "skiff-test-ca")
        self.server, self.server_key = make_cert(self.dir, "server", "/O=first/CN=127.0.0.1", self.ca)
        self.alice, self.alice_key = make_cert(self.dir, "alice", "/O=acme/OU=eng/CN=alice", self.ca, server=False)
        self.other_ca = make_ca(self.dir, "other-ca", "skiff-other-ca")
        self.mallory, self.mallory_key = make_cert(self.dir, "mallory", "/O=acme/OU=eng/CN=mallory",
                                                   self.other_ca, server=False)


# --- brokers ------------------------------------------------------------------------------------

class TlsBroker(broker.Broker):
    """A broker with PLAINTEXT (self.port), SSL (self.ssl_port) and SASL_SSL (self.sasl_ssl_port)
    listeners; broker.Broker only knows --kafka-addr."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        used = {self.port, self.http_port}
        self.ssl_port = self._another_port(used)
        self.sasl_ssl_port = self._another_port(used)

    @staticmethod
    def _another_port(used):
        while True:
            p = broker.free_port()
            if p not in used:
                used.add(p)
                return p

    @property
    def ssl_bootstrap(self):
        return f"127.0.0.1:{self.ssl_port}"

    @property
    def sasl_ssl_bootstrap(self):
        return f"127.0.0.1:{self.sasl_ssl_port}"

    def args(self):
        a = super().args()
        i = a.index("--kafka-addr")
        a[i:i + 2] = ["--listeners", f"PLAINTEXT://{self.bootstrap},SSL://{self.ssl_bootstrap},"
                                     f"SASL_SSL://{self.sasl_ssl_bootstrap}"]
        return a

    def wait_ready(self, timeout=30):
        super().wait_ready(timeout)
        # Not a probe connection to the TLS ports (it would count as a failed handshake): the
        # broker logs "serving Kafka on" once every listener is bound.
        broker.wait_until(lambda: "serving Kafka on" in self.log_since_start(), timeout,
                          f"broker {self.name}: 'serving Kafka on' in its log")

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def log_since_start(self):
        text = self.log_text()
        return text[text.rfind("===== start #"):]


def tls_broker(t, certs, extra_args=(), cert=None, key=None):
    t._n += 1
    b = TlsBroker(t.skiff, t.workdir, f"{t.name}-{t._n}", t.store,
                  extra_args=["--log-level", "debug", "--tls-cert-file", cert or certs.server,
                              "--tls-key-file", key or certs.server_key, *extra_args])
    t.brokers.append(b)
    b.start()
    return b


def tls_failures(b, reason=None):
    return broker.metric_counter(b, "skiff_tls_handshake_failures_total", **({"reason": reason} if reason else {}))


def skiff_user_add(t, b, name):
    # alice's password through the environment, bob's on standard input
    env = dict(os.environ)
    env.pop("SKIFF_USER_PASSWORD", None)
    stdin = b""
    if name == "alice":
        env["SKIFF_USER_PASSWORD"] = PW[name]
    else:
        stdin = (PW[name] + "\n").encode()
    p = subprocess.run([t.skiff, "user", "add", name, "-b", b.bootstrap], env=env, input=stdin,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    if p.returncode != 0:
        raise AssertionError(f"skiff user add {name}: exit {p.returncode}: {p.stderr.decode(errors='replace')}")


# --- kcat ---------------------------------------------------------------------------------------

def kcat(b, args, ca, conf=(), bootstrap=None, protocol="SSL", stdin=None, check=True, timeout=60):
    cmd = ["kcat", "-b", bootstrap or b.ssl_bootstrap, "-X", f"security.protocol={protocol}",
           "-X", f"ssl.ca.location={ca}", *conf, *args]
    if not check:
        cmd[1:1] = ["-m", "8"]
    p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    if check and p.returncode != 0:
        raise AssertionError(f"kcat {' '.join(args)}: exit {p.returncode}: "
                             f"{p.stderr.decode(errors='replace')[-2000:]}")
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def kcat_roundtrip(t, b, ca, n, conf=(), what="SSL", values=None):
    topic = t.topic("kcat-tls")
    if values is None:
        values = [f"tls-{i}-{'v' * (i * 7 % 300)}-{uuid.uuid4().hex}" for i in range(n)]
    n = len(values)
    kcat(b, ["-P", "-t", topic, "-X", "acks=all"], ca, conf, stdin=("\n".join(values) + "\n").encode())
    _, out, _ = kcat(b, ["-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n"], ca, conf)
    got = out.decode().splitlines()
    assert got == values, f"kcat over {what}: read {len(got)} values of {n}, first difference at " \
                          f"{next((i for i, (x, y) in enumerate(zip(got, values)) if x != y), min(len(got), n))}"
    t.log(f"kcat over {what}: {n} messages produced and read back exactly")
    return topic


# --- raw TLS / openssl --------------------------------------------------------------------------

def s_client(port, *extra, timeout=20):
    p = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-showcerts", *extra],
                       stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    return p.returncode, p.stdout.decode(errors="replace")


def served_subject(port):
    rc, out = s_client(port)
    m = re.search(r"^subject=(.*)$", out, re.M)
    assert m, f"openssl s_client to port {port} (exit {rc}) shows no server certificate:\n{out[-1500:]}"
    return m.group(1).strip()


def api_versions_request(corr=7):
    client_id = b"skiff-tls-test"
    msg = struct.pack(">hhi", 18, 0, corr) + struct.pack(">h", len(client_id)) + client_id
    return struct.pack(">i", len(msg)) + msg


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        chunk = s.recv(n - len(buf))
        if not chunk:
            raise AssertionError(f"connection closed after {len(buf)} of {n} bytes")
        buf += chunk
    return buf


def api_versions_over(s, corr):
    """Sends ApiVersions v0 on socket s (TLS or not) and checks the answer's correlation id and
    error code."""
    s.sendall(api_versions_request(corr))
    (n,) = struct.unpack(">i", recv_exact(s, 4))
    body = recv_exact(s, n)
    got_corr, err = struct.unpack_from(">ih", body, 0)
    assert got_corr == corr and err == 0, f"ApiVersions answer: correlation {got_corr}, error {err}"


def tls_socket(port, ca, timeout=10):
    ctx = ssl.create_default_context(cafile=ca)
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def wait_closed(s, timeout, what):
    """Waits until the peer closes s; returns the seconds it took. Fails after timeout."""
    t0 = time.monotonic()
    s.settimeout(0.2)
    while time.monotonic() - t0 < timeout:
        try:
            chunk = s.recv(65536)
        except socket.timeout:
            continue
        except (ConnectionResetError, BrokenPipeError):
            return time.monotonic() - t0
        if not chunk:
            return time.monotonic() - t0
    raise AssertionError(f"{what}: connection still open after {timeout} s")


def run_check(t, *args):
    p = subprocess.run([t.skiff, "serve", "--check", *args], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       cwd=t.workdir, timeout=60)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


# --- tests --------------------------------------------------------------------------------------

def test_kcat_ssl(t):
    certs = Certs(t)
    b = tls_broker(t, certs)
    kcat_roundtrip(t, b, certs.ca, 100)
    # records larger than a TLS record (16 KiB): requests and responses span many records
    rnd = random.Random(3)
    big = ["".join(rnd.choice("abcdefghijklmnopqrstuvwxyz0123456789") for _ in range(size))
           for size in (16383, 16385, 100000, 700000, 5)]
    kcat_roundtrip(t, b, certs.ca, 0, what="SSL (records of 5 B to 700 KB)", values=big)
    log = b.log_since_start()
    assert re.search(r"connection 127\.0\.0\.1:\d+: TLSv1\.[23] \S+ as User:ANONYMOUS", log), \
        "no TLS connection of kcat in the broker's debug log"
    # server authentication is real: a client trusting another CA refuses the broker
    rc, _, err = kcat(b, ["-L"], certs.other_ca, check=False, timeout=30)
    assert rc != 0, "kcat trusting another CA accepted the broker's certificate"
    t.log("kcat trusting another CA refuses the broker's certificate")
    # and the PLAINTEXT listener still speaks plaintext
    p = subprocess.run(["kcat", "-b", b.bootstrap, "-L"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
    assert p.returncode == 0, f"kcat -L on the PLAINTEXT listener: {p.stderr.decode(errors='replace')}"
    b.stop()


class _Addr:
    def __init__(self, bootstrap):
        self.bootstrap = bootstrap


def test_confluent_sasl_ssl(t):
    from ckutil import produce_all
    from confluent_kafka import Consumer
    from confluent_kafka.admin import AdminClient, NewTopic
    certs = Certs(t)
    b = tls_broker(t, certs, extra_args=["--auto-create-topics", "false"])
    skiff_user_add(t, b, "alice")
    for mech in ("SCRAM-SHA-512", "PLAIN"):
        before = broker.metric_counter(b, "skiff_sasl_authentications_total", mechanism=mech, outcome="success")
        conf = {"security.protocol": "SASL_SSL", "ssl.ca.location": certs.ca, "sasl.mechanism": mech,
                "sasl.username": "alice", "sasl.password": PW["alice"]}
        topic = t.topic(f"ck-{mech.lower()}")
        a = AdminClient({"bootstrap.servers": b.sasl_ssl_bootstrap, **conf})
        a.create_topics([NewTopic(topic, num_partitions=3, replication_factor=1)])[topic].result(30)

        def topic_ready():
            tm = a.list_topics(topic=topic, timeout=10).topics[topic]
            return tm.error is None and len(tm.partitions) == 3 and all(p.leader >= 0 for p in tm.partitions.values())
        broker.wait_until(topic_ready, 20, f"topic {topic} with 3 partitions")
        n = 500
        produce_all(_Addr(b.sasl_ssl_bootstrap), topic,
                    [(None, f"k{i}".encode(), f"{mech}-value-{i}".encode(), None) for i in range(n)], **conf)
        t.log(f"{mech}: created {topic}, produced {n} records (acks=all) over SASL_SSL")
        group = f"ck-tls-{uuid.uuid4().hex[:6]}"

        def consumer():
            c = Consumer({"bootstrap.servers": b.sasl_ssl_bootstrap, "group.id": group,
                          "enable.auto.commit": False, "auto.offset.reset": "earliest", **conf})
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
        first = read(c1, 300)
        assert len(first) == 300, f"{mech}: first member read {len(first)} of 300"
        c1.commit(asynchronous=False)
        c1.close()
        c2 = consumer()
        second = read(c2, n - 300)
        extra = c2.consume(100, 3)
        c2.close()
        assert not extra, f"{mech}: second member read {len(extra)} records beyond the {n}"
        got = first + second
        assert len(got) == n and set(got) == {f"{mech}-value-{i}" for i in range(n)}, \
            f"{mech}: {len(got)} records read ({len(set(got))} distinct), expected exactly the {n} produced"
        after = broker.metric_counter(b, "skiff_sasl_authentications_total", mechanism=mech, outcome="success")
        assert after > before, f"{mech}: no successful authentication counted ({before} -> {after})"
        t.log(f"{mech}: member 1 read 300 and committed; member 2 resumed from the commit with "
              f"{len(second)}; all {n} exactly once")
    b.stop()


def run_node(t, b, bootstrap, ca, mech=None, timeout=150):
    node = shutil.which("node")
    assert node, "node not found: run tools/install-deps.sh --all"
    assert os.path.isfile(os.path.join(NODE_DIR, "node_modules", "kafkajs", "package.json")), \
        "kafkajs not installed: run tools/install-deps.sh --all"
    e = dict(os.environ, SKIFF_BOOTSTRAP=bootstrap, TLS_CA=ca, KAFKAJS_NO_PARTITIONER_WARNING="1")
    e.pop("SASL_MECHANISM", None)
    if mech:
        e.update(SASL_MECHANISM=mech, SASL_USER="alice", SASL_PASSWORD=PW["alice"])
    p = subprocess.run([node, os.path.join(NODE_DIR, "tls.js")], cwd=NODE_DIR, env=e,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    out = p.stdout.decode(errors="replace")
    print(out.rstrip(), flush=True)
    assert p.returncode == 0, f"tls.js {mech or 'SSL'}: exit {p.returncode}"


def test_kafkajs(t):
    certs = Certs(t)
    b = tls_broker(t, certs, extra_args=["--auto-create-topics", "false"])
    skiff_user_add(t, b, "alice")
    run_node(t, b, b.ssl_bootstrap, certs.ca)
    before = broker.metric_counter(b, "skiff_sasl_authentications_total", mechanism="SCRAM-SHA-512", outcome="success")
    run_node(t, b, b.sasl_ssl_bootstrap, certs.ca, "scram-sha-512")
    after = broker.metric_counter(b, "skiff_sasl_authentications_total", mechanism="SCRAM-SHA-512", outcome="success")
    assert after > before, f"kafkajs SASL_SSL: no SCRAM-SHA-512 authentication counted ({before} -> {after})"
    assert tls_failures(b) == 0, f"kafkajs: {tls_failures(b)} TLS handshake failures counted"
    b.stop()


def test_mtls(t):
    certs = Certs(t)
    b = tls_broker(t, certs, extra_args=["--tls-ca-file", certs.ca, "--tls-client-auth", "required"])
    alice = ["-X", f"ssl.certificate.location={certs.alice}", "-X", f"ssl.key.location={certs.alice_key}"]
    kcat_roundtrip(t, b, certs.ca, 50, alice, what="mTLS as alice")
    assert ALICE_PRINCIPAL in b.log_since_start(), \
        f"the principal {ALICE_PRINCIPAL} is not in the broker's debug log"
    t.log(f"the broker's debug log names the principal {ALICE_PRINCIPAL}")
    assert tls_failures(b) == 0, f"{tls_failures(b)} TLS handshake failures counted before the refused clients"

    # no client certificate
    before = tls_failures(b, "handshake_failed")
    rc, _, err = kcat(b, ["-L"], certs.ca, check=False, timeout=30)
    assert rc != 0, "kcat without a client certificate was served by a --tls-client-auth required broker"
    broker.wait_until(lambda: tls_failures(b, "handshake_failed") > before, 10,
                      "a handshake failure counted for the client without a certificate")
    t.log(f"kcat without a client certificate refused; handshake failures {before} -> "
          f"{tls_failures(b, 'handshake_failed')}")

    # a certificate of another CA
    before = tls_failures(b, "handshake_failed")
    mallory = ["-X", f"ssl.certificate.location={certs.mallory}", "-X", f"ssl.key.location={certs.mallory_key}"]
    rc, _, err = kcat(b, ["-L"], certs.ca, mallory, check=False, timeout=30)
    assert rc != 0, "kcat with a client certificate of another CA was served"
    broker.wait_until(lambda: tls_failures(b, "handshake_failed") > before, 10,
                      "a handshake failure counted for the client certificate of another CA")
    assert "User:CN=mallory" not in b.log_since_start(), \
        "a client of another CA became a principal"
    t.log("kcat with a client certificate of another CA refused and counted")

    # the same with a raw TLS socket: no certificate, the broker closes without serving
    s = tls_socket(b.ssl_port, certs.ca)
    try:
        try:
            api_versions_over(s, 11)
            raise AssertionError("a TLS socket without a client certificate got an ApiVersions answer")
        except (ssl.SSLError, ConnectionResetError, BrokenPipeError, AssertionError) as e:
            if "got an ApiVersions answer" in str(e):
                raise
    finally:
        s.close()

    # alice still works after the refusals
    kcat_roundtrip(t, b, certs.ca, 10, alice, what="mTLS as alice, after the refused clients")
    b.stop()


def test_sighup_reload(t):
    from confluent_kafka import Producer
    certs = Certs(t)
    d = certs.dir
    live_cert, live_key = os.path.join(t.workdir, "live.pem"), os.path.join(t.workdir, "live.key.pem")
    shutil.copy(certs.server, live_cert)
    shutil.copy(certs.server_key, live_key)
    b_cert, b_key = make_cert(d, "server-b", "/O=second/CN=127.0.0.1", certs.ca)
    b = tls_broker(t, certs, cert=live_cert, key=live_key)
    subj = served_subject(b.ssl_port)
    assert "O = first" in subj and "CN = 127.0.0.1" in subj, f"served certificate before the reload: {subj}"
    t.log(f"before SIGHUP the broker serves {subj}")

    # long-lived connections: a raw TLS socket and a confluent-kafka producer
    old = tls_socket(b.ssl_port, certs.ca)
    old_subject = dict(x[0] for x in old.getpeercert()["subject"])
    assert old_subject.get("organizationName") == "first", f"old connection's certificate: {old_subject}"
    api_versions_over(old, 1)
    topic = t.topic("reload")
    errors, delivered = [], []
    p = Producer({"bootstrap.servers": b.ssl_bootstrap, "security.protocol": "SSL", "ssl.ca.location": certs.ca,
                  "acks": "all", "linger.ms": 5, "message.timeout.ms": 30000, "retries": 0})

    def cb(err, m):
        (errors if err is not None else delivered).append(err or m.offset())

    def produce(n, tag):
        for i in range(n):
            p.produce(topic, value=f"{tag}-{i}".encode(), on_delivery=cb)
        left = p.flush(30)
        assert left == 0 and not errors, f"producer ({tag}): {left} undelivered, errors {errors[:3]}"

    produce(50, "before")
    conns = lambda: len(re.findall(r"connection 127\.0\.0\.1:\d+: TLSv", b.log_since_start()))  # noqa: E731

    # replace the files with certificate B and reload
    shutil.copy(b_cert, live_cert)
    shutil.copy(b_key, live_key)
    b.proc.send_signal(signal.SIGHUP)
    broker.wait_until(lambda: re.search(r"TLS certificate reloaded \(CN=127\.0\.0\.1,O=second", b.log_since_start()),
                      10, "the log line of the reload")
    subj = served_subject(b.ssl_port)
    assert "O = second" in subj, f"a new connection after SIGHUP got {subj}, expected O = second"
    subj_sasl = served_subject(b.sasl_ssl_port)
    assert "O = second" in subj_sasl, f"a new SASL_SSL connection after SIGHUP got {subj_sasl}"
    t.log(f"after SIGHUP new connections get {subj}")

    n_conns = conns()
    assert n_conns >= 3, f"only {n_conns} TLS connections in the debug log (the count below would prove nothing)"
    produce(50, "after")
    api_versions_over(old, 2)
    assert conns() == n_conns, \
        f"the old producer opened {conns() - n_conns} new TLS connection(s) after the reload"
    t.log("the old producer kept its connection and produced 50 more; the old raw TLS socket still answers")

    # a broken key file: the reload is refused, the broker keeps B
    with open(live_key, "w") as f:
        f.write("-----BEGIN PRIVATE KEY-----\nbm90IGEga2V5\n-----END PRIVATE KEY-----\n")
    b.proc.send_signal(signal.SIGHUP)
    err_line = broker.wait_until(
        lambda: re.search(r"^.*ERROR.*TLS certificate not reloaded.*$", b.log_since_start(), re.M), 10,
        "the ERROR line of the refused reload").group(0)
    assert "live.key.pem" in err_line, f"the refused reload's error does not name the key file: {err_line}"
    t.log(f"broken key: {err_line.split('] ', 1)[-1]}")
    assert b.running(), "the broker exited after a SIGHUP with a broken key file"
    subj = served_subject(b.ssl_port)
    assert "O = second" in subj, f"after the refused reload a new connection got {subj}, expected O = second"
    produce(20, "after-broken")
    kcat_roundtrip(t, b, certs.ca, 20, what="SSL after the refused reload")
    p.flush(5)
    old.close()
    # everything the producer sent is there
    _, out, _ = kcat(b, ["-C", "-t", topic, "-o", "beginning", "-e", "-q", "-f", "%s\n"], certs.ca)
    got = out.decode().splitlines()
    want = [f"before-{i}" for i in range(50)] + [f"after-{i}" for i in range(50)] + \
           [f"after-broken-{i}" for i in range(20)]
    assert got == want, f"topic {topic}: read {len(got)} records, expected the {len(want)} produced in order"
    b.stop()


def test_bad_input(t):
    certs = Certs(t)
    b = tls_broker(t, certs, extra_args=["--tls-min-version", "TLSv1.3"])
    kcat_roundtrip(t, b, certs.ca, 10, what="SSL (TLSv1.3 minimum)")

    # TLS 1.2 only is refused, TLS 1.3 served
    rc, out = s_client(b.ssl_port, "-tls1_3")
    assert rc == 0 and "TLSv1.3" in out, f"openssl s_client -tls1_3: exit {rc}\n{out[-800:]}"
    before = tls_failures(b)
    rc, out = s_client(b.ssl_port, "-tls1_2")
    assert rc != 0 and not re.search(r"^subject=", out, re.M), \
        f"openssl s_client -tls1_2 against --tls-min-version TLSv1.3: exit {rc}\n{out[-800:]}"
    broker.wait_until(lambda: tls_failures(b) > before, 10, "the TLS 1.2 handshake counted as a failure")
    t.log("TLS 1.2 only is refused by a TLSv1.3-minimum broker (counted); TLS 1.3 served")

    # plaintext Kafka bytes on the SSL port
    before = tls_failures(b, "not_tls")
    s = socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10)
    t0 = time.monotonic()
    s.sendall(api_versions_request())
    took = wait_closed(s, 5, "plaintext ApiVersions on the SSL port")
    s.close()
    assert took < 2, f"plaintext on the SSL port: closed after {took:.1f} s, expected under 2 s"
    broker.wait_until(lambda: tls_failures(b, "not_tls") == before + 1, 10,
                      f"not_tls failures {before} -> {before + 1} (now {tls_failures(b, 'not_tls')})")
    broker.wait_until(lambda: NOT_TLS_LOG in b.log_since_start(), 5, f"'{NOT_TLS_LOG}' in the log")
    t.log(f"plaintext ApiVersions on the SSL port: closed after {time.monotonic() - t0:.2f} s, counted as not_tls, logged")

    # the same on the SASL_SSL port
    before = tls_failures(b, "not_tls")
    s = socket.create_connection(("127.0.0.1", b.sasl_ssl_port), timeout=10)
    s.sendall(api_versions_request())
    took = wait_closed(s, 5, "plaintext ApiVersions on the SASL_SSL port")
    s.close()
    assert took < 2, f"plaintext on the SASL_SSL port: closed after {took:.1f} s"
    broker.wait_until(lambda: tls_failures(b, "not_tls") == before + 1, 10, "not_tls counted on SASL_SSL")

    # garbage: random bytes, and a TLS record header followed by garbage
    rnd = random.Random(7)
    for name, data in (("random bytes", bytes([0x42]) + bytes(rnd.randrange(256) for _ in range(3000))),
                       ("a handshake record of garbage",
                        b"\x16\x03\x01\x01\x00" + bytes(rnd.randrange(256) for _ in range(256)))):
        before = tls_failures(b)
        s = socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10)
        try:
            s.sendall(data)
        except (ConnectionResetError, BrokenPipeError):
            pass
        took = wait_closed(s, 5, name)
        s.close()
        broker.wait_until(lambda: tls_failures(b) == before + 1, 10, f"{name}: one handshake failure counted")
        t.log(f"{name}: closed after {took:.2f} s, counted")

    # a client that sends nothing, and one that stalls in the middle of a ClientHello: closed
    # after the handshake timeout; others are served meanwhile
    before = tls_failures(b)
    silent = socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10)
    stalled = socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10)
    t0 = time.monotonic()
    stalled.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    results = {}

    def watch(name, s):
        try:
            results[name] = wait_closed(s, 15, name)
        except AssertionError as e:
            results[name] = e
    ths = [threading.Thread(target=watch, args=(n, s), daemon=True)
           for n, s in (("silent client", silent), ("stalled ClientHello", stalled))]
    for th in ths:
        th.start()
    kcat_roundtrip(t, b, certs.ca, 100, what="SSL while silent clients wait")
    served_by = time.monotonic() - t0
    for th in ths:
        th.join(20)
    silent.close()
    stalled.close()
    for name, r in results.items():
        if isinstance(r, AssertionError):
            raise r
        assert 8 <= r <= 15, f"{name}: closed after {r:.1f} s, expected after the 10 s handshake timeout"
    assert len(results) == 2, f"watchers did not finish: {results}"
    broker.wait_until(lambda: tls_failures(b) == before + 2, 10,
                      f"two handshake failures counted for the timed-out clients ({before} -> {tls_failures(b)})")
    t.log(f"silent client closed after {results['silent client']:.1f} s, stalled ClientHello after "
          f"{results['stalled ClientHello']:.1f} s; kcat was served meanwhile (in {served_by:.1f} s)")

    # refused settings and files (--check and a real start)
    missing = os.path.join(t.workdir, "missing.pem")
    other_key = os.path.join(t.workdir, "other.key.pem")
    openssl(t.workdir, "genrsa", "-out", other_key, "2048")
    _remember_key(other_key)
    listeners = ["--listeners", f"PLAINTEXT://127.0.0.1:{broker.free_port()},SSL://127.0.0.1:{broker.free_port()}",
                 "--data-dir", os.path.join(t.workdir, "check-data"), "--http-addr", "off"]
    cases = [
        ("a missing certificate file", ["--tls-cert-file", missing, "--tls-key-file", certs.server_key],
         [missing]),
        ("a key that does not match the certificate", ["--tls-cert-file", certs.server, "--tls-key-file", other_key],
         [other_key]),
        ("an SSL listener without --tls-cert-file", ["--tls-key-file", certs.server_key], ["--tls-cert-file"]),
    ]
    for what, args, names in cases:
        rc, out, err = run_check(t, *listeners, *args)
        assert rc != 0, f"skiff serve --check with {what}: exit 0\n{out}{err}"
        lines = [ln for ln in (out + err).splitlines() if all(n in ln for n in names)]
        assert len(lines) == 1, f"skiff serve --check with {what}: expected one line naming {names}, got:\n{out}{err}"
        t.log(f"--check with {what}: exit {rc}: {lines[0].strip()}")
    # a real start is refused the same way
    p = subprocess.run([t.skiff, "serve", *listeners, "--tls-cert-file", missing, "--tls-key-file", certs.server_key],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=30, cwd=t.workdir)
    out = p.stdout.decode(errors="replace")
    assert p.returncode != 0 and missing in out, f"skiff serve with a missing certificate file: exit {p.returncode}\n{out}"
    rc, out, err = run_check(t, *listeners, "--tls-cert-file", certs.server, "--tls-key-file", certs.server_key)
    assert rc == 0 and re.search(r"tls\s+certificate CN=127\.0\.0\.1,O=first", out), \
        f"skiff serve --check with a good certificate: exit {rc}\n{out}{err}"
    t.log("--check with a good certificate: " + next(ln for ln in out.splitlines() if "certificate" in ln).strip())

    # after all that the broker still serves
    assert b.running(), "the broker exited"
    kcat_roundtrip(t, b, certs.ca, 100, what="SSL after the bad input")
    b.stop()


def test_chain_and_key_files(t):
    """A certificate file holding the server certificate then its intermediate: clients trusting
    only the root verify it. An encrypted key, or a key file holding a certificate, is refused."""
    certs = Certs(t)
    d = certs.dir
    inter = make_intermediate(d, "intermediate", "skiff-test-intermediate", certs.ca)
    leaf, leaf_key = make_cert(d, "leaf", "/O=chained/CN=127.0.0.1", inter)
    chain = os.path.join(d, "fullchain.pem")
    with open(chain, "w") as f:
        f.write(open(leaf).read() + open(inter).read())
    b = tls_broker(t, certs, cert=chain, key=leaf_key)
    rc, out = s_client(b.ssl_port, "-CAfile", certs.ca, "-verify_return_error")
    assert rc == 0 and re.search(r"^ 1 s:CN = skiff-test-intermediate", out, re.M) \
        and "Verify return code: 0 (ok)" in out, f"s_client against the chained certificate: exit {rc}\n{out[-1500:]}"
    kcat_roundtrip(t, b, certs.ca, 20, what="SSL with a certificate chain (client trusts only the root)")
    b.stop()

    listeners = ["--listeners", f"PLAINTEXT://127.0.0.1:{broker.free_port()},SSL://127.0.0.1:{broker.free_port()}",
                 "--data-dir", os.path.join(t.workdir, "check-data"), "--http-addr", "off"]
    enc_key = os.path.join(d, "encrypted.key.pem")
    openssl(d, "pkey", "-in", leaf_key, "-aes256", "-passout", "pass:not-a-secret", "-out", enc_key)
    for what, key in (("an encrypted key", enc_key), ("a key file holding a certificate", certs.alice)):
        rc, out, err = run_check(t, *listeners, "--tls-cert-file", chain, "--tls-key-file", key)
        lines = [ln for ln in (out + err).splitlines() if key in ln]
        assert rc != 0 and len(lines) == 1, f"skiff serve --check with {what}: exit {rc}\n{out}{err}"
        t.log(f"--check with {what}: exit {rc}: {lines[0].strip()}")


def test_https_endpoint(t):
    """--http-tls: the metrics/health endpoint speaks HTTPS with the listeners' certificate;
    plain HTTP to it gets no answer and is counted nowhere else; the Kafka listeners are not
    affected."""
    certs = Certs(t)
    b = tls_broker(t, certs, extra_args=["--http-tls"])
    url = f"https://127.0.0.1:{b.http_port}"
    ctx = ssl.create_default_context(cafile=certs.ca)
    body = urllib.request.urlopen(url + "/health", context=ctx, timeout=10).read()
    assert b'"status":"up"' in body, body
    doc = json.loads(urllib.request.urlopen(url + "/metrics", context=ctx, timeout=10).read())
    assert "skiff_tls_handshake_failures_total" in doc["counters"], "metrics over HTTPS lack the TLS counters"
    t.log(f"HTTPS /health and /metrics answered with the listeners' certificate on {url}")
    # Plain HTTP: no HTTP answer comes back.
    with socket.create_connection(("127.0.0.1", b.http_port), timeout=10) as raw:
        raw.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        took = wait_closed(raw, 15, "plain HTTP to the HTTPS endpoint")
    t.log(f"plain HTTP to the HTTPS endpoint closed after {took:.2f} s without an answer")
    assert "metrics on https://" in b.log_since_start(), "the start line does not say https"
    # An untrusted client refuses the endpoint.
    other = ssl.create_default_context(cafile=certs.other_ca)
    try:
        urllib.request.urlopen(url + "/health", context=other, timeout=10).read()
        raise AssertionError("a client trusting another CA accepted the endpoint")
    except urllib.error.URLError:
        pass
    kcat_roundtrip(t, b, certs.ca, 10)


def test_close_notify_on_shutdown(t):
    """A broker that drains ends its TLS connections with close_notify (Kafka's
    SslTransportLayer.close), so clients see an orderly end, not "unexpected eof" (found by
    this suite: librdkafka logged an SSL error at every broker SIGTERM)."""
    certs = Certs(t)
    b = tls_broker(t, certs)
    ctx = ssl.create_default_context(cafile=certs.ca)
    ctx.options &= ~getattr(ssl, "OP_IGNORE_UNEXPECTED_EOF", 0)
    raw = socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10)
    s = ctx.wrap_socket(raw, server_hostname="127.0.0.1", suppress_ragged_eofs=False)
    api_versions_over(s, 11)
    b.stop()
    try:
        data = s.recv(16)
    except ssl.SSLError as e:
        raise AssertionError(f"the broker's shutdown ended TLS without close_notify: {e}")
    assert data == b"", f"unexpected bytes after shutdown: {data!r}"
    t.log("broker SIGTERM: the open TLS connection ended with close_notify")


def test_secrets(t):
    certs = Certs(t)
    b = tls_broker(t, certs, extra_args=["--tls-ca-file", certs.ca, "--tls-client-auth", "requested"])
    skiff_user_add(t, b, "alice")
    skiff_user_add(t, b, "bob")
    for mech, user in (("PLAIN", "alice"), ("SCRAM-SHA-512", "bob"), ("SCRAM-SHA-256", "alice")):
        conf = ["-X", f"sasl.mechanism={mech}", "-X", f"sasl.username={user}", "-X", f"sasl.password={PW[user]}"]
        kcat(b, ["-L"], certs.ca, conf, bootstrap=b.sasl_ssl_bootstrap, protocol="SASL_SSL")
    for mech in ("PLAIN", "SCRAM-SHA-512"):
        conf = ["-X", f"sasl.mechanism={mech}", "-X", "sasl.username=alice", "-X", f"sasl.password={WRONG_PW}"]
        rc, _, _ = kcat(b, ["-L"], certs.ca, conf, bootstrap=b.sasl_ssl_bootstrap, protocol="SASL_SSL",
                        check=False, timeout=30)
        assert rc != 0, f"kcat {mech} with a wrong password succeeded"
    # requested: a client certificate is optional, and becomes the principal on SSL
    alice = ["-X", f"ssl.certificate.location={certs.alice}", "-X", f"ssl.key.location={certs.alice_key}"]
    kcat(b, ["-L"], certs.ca, alice)
    kcat(b, ["-L"], certs.ca)
    assert ALICE_PRINCIPAL in b.log_since_start(), f"{ALICE_PRINCIPAL} not logged with --tls-client-auth requested"
    # a refused reload with a key file holding a real (other) key and a garbage cert
    live_cert, live_key = os.path.join(t.workdir, "live.pem"), os.path.join(t.workdir, "live.key.pem")
    b.stop()
    shutil.copy(certs.server, live_cert)
    shutil.copy(certs.server_key, live_key)
    b.extra_args[b.extra_args.index("--tls-cert-file") + 1] = live_cert
    b.extra_args[b.extra_args.index("--tls-key-file") + 1] = live_key
    b.start()
    shutil.copy(certs.alice_key, live_key)        # a key that does not match the certificate
    b.proc.send_signal(signal.SIGHUP)
    broker.wait_until(lambda: "TLS certificate not reloaded" in b.log_since_start(), 10, "the refused reload")
    kcat(b, ["-L"], certs.ca)
    b.stop()

    # every broker log of this run (the other tests' too, when they ran before this one)
    root = os.path.dirname(t.workdir)
    logs = sorted(glob.glob(os.path.join(root, "*", "*.log")))
    assert logs, "no broker logs found"
    secrets = [("a SASL password", pw) for pw in ALL_PASSWORDS] + \
              [("private key material", s) for s in KEY_SNIPPETS if len(s) >= 32] + \
              [("a PEM private key", "PRIVATE KEY")]
    for path in logs:
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", "replace")
        for what, s in secrets:
            assert s not in text, f"{os.path.relpath(path, root)} contains {what}: ...{s[:12]}..."
    t.log(f"{len(logs)} broker logs hold none of {len(ALL_PASSWORDS)} passwords, "
          f"{len(KEY_SNIPPETS)} private key lines, 'PRIVATE KEY'")


if __name__ == "__main__":
    broker.main([(test_kcat_ssl, 120), (test_confluent_sasl_ssl, 240), (test_kafkajs, 360), (test_mtls, 180),
                 (test_sighup_reload, 180), (test_bad_input, 240), (test_chain_and_key_files, 120),
                 (test_close_notify_on_shutdown, 60), (test_https_endpoint, 60),
                 (test_secrets, 180)])
