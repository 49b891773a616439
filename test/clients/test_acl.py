#!/usr/bin/python3
"""ACLs (`skiff serve --authorizer acl`, Kafka's StandardAuthorizer) with real clients. Each
broker listens on PLAINTEXT (principal User:ANONYMOUS) and SASL_PLAINTEXT (User:<sasl user>);
users admin, alice and bob (SCRAM-SHA-512) are added with `skiff user add`.

  1 setup      admin creates topics and ACLs (kafka-python); DescribeAcls returns exactly them,
               filters by principal, by resource, MATCH; acls.json in the store
  2 alice      kcat, confluent-kafka, kafka-python, kafkajs (node/acl.js): orders and team-a.x
               writable/readable (group app-*), secrets refused (TOPIC_AUTHORIZATION_FAILED),
               group other-1 refused (GROUP_AUTHORIZATION_FAILED), Metadata filtered
  3 bob        wildcard ALLOW ALL, DENY READ on orders wins over it, WRITE still allowed
  4 super      the super user does everything; ANONYMOUS (not super) sees no topic, cannot
               produce, cannot `skiff user add` (CLUSTER_AUTHORIZATION_FAILED, exit 1)
  5 delete     DeleteAcls removes exactly the matching bindings, returns them; effective at once
  6 restart    ACLs survive a restart and are enforced
  7 allow_everyone  --allow-everyone-if-no-acl-found
  8 no_authorizer   the ACL APIs answer SECURITY_DISABLED
  9 bad_input  invalid CreateAcls bindings refused one by one, nothing stored; ACL APIs need
               cluster DESCRIBE/ALTER (CLUSTER_AUTHORIZATION_FAILED)
 10 metrics    skiff_acl_denied_total{resource=topic|group|cluster}
    auto_create     Metadata auto-creation needs CREATE on the topic (prefix) or the cluster; the
                    errors Kafka gives without it; CreateTopics
    other_apis      ListGroups, DescribeGroups, OffsetFetch, OffsetCommit, ListOffsets,
                    Describe/AlterConfigs, Create/DeleteTopics, CreatePartitions, the idempotent
                    producer: Kafka's per-API checks and error codes
    principals_hosts  User:* bindings, host-bound bindings, principals compare case-sensitively
    acks0_denied    an unauthorized acks=0 Produce stores nothing and closes the connection

    test_acl.py --skiff build/src/cli/skiff [--store local|s3] [-k alice]
"""
import json
import logging
import os
import shutil
import socket
import subprocess
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402

import kafka.errors as Errors  # noqa: E402
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition  # noqa: E402
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType,  # noqa: E402
                         ACLResourcePatternType, NewTopic, ResourcePattern, ResourcePatternFilter,
                         ResourceType)
from kafka.protocol.admin import CreateAclsRequest  # noqa: E402

from confluent_kafka import Consumer, KafkaError, Producer  # noqa: E402

logging.basicConfig(level=logging.CRITICAL)

HERE = os.path.dirname(os.path.abspath(__file__))
NODE_DIR = os.path.join(HERE, "node")
MECH = "SCRAM-SHA-512"
_R = uuid.uuid4().hex[:10]
PW = {"admin": f"Admin-pw-{_R}", "alice": f"Alice-pw-{_R}", "bob": f"Bob-pw-{_R}"}

TOPIC_AUTHZ, GROUP_AUTHZ, CLUSTER_AUTHZ, INVALID_REQUEST, SECURITY_DISABLED = 29, 30, 31, 42, 54

T, G, C = ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER
LIT, PRE = ACLResourcePatternType.LITERAL, ACLResourcePatternType.PREFIXED
ALLOW, DENY = ACLPermissionType.ALLOW, ACLPermissionType.DENY
O = ACLOperation


def acl(principal, op, perm, rtype, name, pattern=LIT, host="*"):
    return ACL(principal=principal, host=host, operation=op, permission_type=perm,
               resource_pattern=ResourcePattern(rtype, name, pattern))


def key(a):
    """A binding as comparable plain values (every field DescribeAcls returns)."""
    rp = a.resource_pattern
    return (ResourceType(rp.resource_type).name, rp.resource_name, ACLResourcePatternType(rp.pattern_type).name,
            a.principal, a.host, ACLOperation(a.operation).name, ACLPermissionType(a.permission_type).name)


SETUP_ACLS = [
    acl("User:alice", O.ALL, ALLOW, T, "orders"),
    acl("User:alice", O.READ, ALLOW, G, "app-", PRE),
    acl("User:alice", O.WRITE, ALLOW, T, "team-a.", PRE),
    acl("User:bob", O.READ, DENY, T, "orders"),
    acl("User:bob", O.ALL, ALLOW, T, "*"),
]
SETUP_KEYS = {key(a) for a in SETUP_ACLS}


def afilter(principal=None, rtype=ResourceType.ANY, name=None, pattern=ACLResourcePatternType.ANY,
            op=O.ANY, perm=ACLPermissionType.ANY, host=None):
    return ACLFilter(principal=principal, host=host, operation=op, permission_type=perm,
                     resource_pattern=ResourcePatternFilter(rtype, name, pattern))


# --- the broker ---------------------------------------------------------------------------------

class AclBroker(broker.Broker):
    """PLAINTEXT on self.port (bootstrap), SASL_PLAINTEXT on self.sasl_port (sasl_bootstrap)."""

    def __init__(self, *a, **kw):
        super().__init__(*a, **kw)
        while self.http_port == self.port:      # free_port() can hand out the same port twice
            self.http_port = broker.free_port()
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

        def ok():
            try:
                with socket.create_connection(("127.0.0.1", self.sasl_port), timeout=1) as s:
                    return s.getsockname() != s.getpeername()
            except OSError:
                return False
        broker.wait_until(ok, timeout, f"SASL listener {self.sasl_port}")


def authz_args(super_users="User:admin;User:ANONYMOUS", allow_everyone=False):
    a = ["--authorizer", "acl", "--super-users", super_users]
    return a + (["--allow-everyone-if-no-acl-found"] if allow_everyone else [])


def acl_broker(t, extra_args=None, users=True):
    t._n += 1
    b = AclBroker(t.skiff, t.workdir, f"{t.name}-{t._n}", t.store,
                  extra_args=authz_args() if extra_args is None else extra_args)
    t.brokers.append(b)
    b.start()
    if users:
        for u in ("admin", "alice", "bob"):
            rc, _, err = skiff_user_add(t, b, u)
            assert rc == 0, f"skiff user add {u}: exit {rc}: {err.strip()}"
        t.log("users admin, alice, bob added (skiff user add over PLAINTEXT as User:ANONYMOUS, a super user)")
    return b


def set_args(b, args):
    """The broker's flags after --listeners etc. (for its next start)."""
    b.extra_args = list(args)


def skiff_user_add(t, b, name):
    env = dict(os.environ)
    env.pop("SKIFF_USER_PASSWORD", None)
    p = subprocess.run([t.skiff, "user", "add", name, "--mechanism", MECH, "-b", b.bootstrap], env=env,
                       input=(PW[name] + "\n").encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def acls_json(b):
    """The bindings in <store>/skiff~meta/acls.json as key() tuples (None: no file)."""
    if b.store == "local":
        path = os.path.join(b.data_dir, "default", "skiff~meta", "acls.json")
        if not os.path.exists(path):
            return None
        with open(path, "rb") as f:
            raw = f.read()
    else:
        url = f"{os.environ['S3_ENDPOINT'].rstrip('/')}/{os.environ['S3_BUCKET']}/{b.namespace}/skiff~meta/acls.json"
        region = os.environ.get("AWS_REGION", "us-east-1")
        p = subprocess.run(["curl", "-sS", "-f", "--aws-sigv4", f"aws:amz:{region}:s3",
                            "-H", "x-amz-content-sha256: UNSIGNED-PAYLOAD", "-K", "-", url],
                           input=f'user = "{os.environ["AWS_ACCESS_KEY_ID"]}:{os.environ["AWS_SECRET_ACCESS_KEY"]}"\n'
                           .encode(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=30)
        if p.returncode != 0:
            return None
        raw = p.stdout
    doc = json.loads(raw)
    norm = {"Topic": "TOPIC", "Group": "GROUP", "Cluster": "CLUSTER", "Literal": "LITERAL",
            "Prefixed": "PREFIXED", "Allow": "ALLOW", "Deny": "DENY", "All": "ALL", "Read": "READ",
            "Write": "WRITE", "Describe": "DESCRIBE", "Create": "CREATE", "Alter": "ALTER"}
    return sorted((norm.get(a["resourceType"], a["resourceType"]), a["resourceName"],
                   norm.get(a["patternType"], a["patternType"]), a["principal"], a["host"],
                   norm.get(a["operation"], a["operation"]), norm.get(a["permissionType"], a["permissionType"]))
                  for a in doc["acls"])


# --- kafka-python -------------------------------------------------------------------------------

def kp_conf(b, user):
    if user is None:
        return dict(bootstrap_servers=b.bootstrap)
    return dict(bootstrap_servers=b.sasl_bootstrap, security_protocol="SASL_PLAINTEXT", sasl_mechanism=MECH,
                sasl_plain_username=user, sasl_plain_password=PW[user])


def kp_admin(b, user="admin"):
    return KafkaAdminClient(client_id=f"kp-admin-{user}", request_timeout_ms=20000, **kp_conf(b, user))


def kp_producer(b, user, **kw):
    c = dict(client_id=f"kp-prod-{user}", acks="all", retries=2, request_timeout_ms=15000, max_block_ms=10000,
             **kp_conf(b, user))
    c.update(kw)
    return KafkaProducer(**c)


def kp_consumer(b, user, *topics, **kw):
    c = dict(client_id=f"kp-cons-{user}", auto_offset_reset="earliest", enable_auto_commit=False,
             consumer_timeout_ms=10000, request_timeout_ms=20000, **kp_conf(b, user))
    c.update(kw)
    return KafkaConsumer(*topics, **c)


def kp_topics(b, user):
    """The topic names an all-topics Metadata request returns to user."""
    c = kp_consumer(b, user)
    try:
        return set(c.topics())
    finally:
        c.close()


def kp_expect(err, fn, what):
    try:
        r = fn()
    except err as e:
        return e
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"{what}: raised {type(e).__name__}: {e}, expected {err.__name__} ({err.errno})")
    raise AssertionError(f"{what}: succeeded ({r!r}), expected {err.__name__} ({err.errno})")


def kp_produce(b, user, topic, values, warm=None):
    """Sends values to topic, each acknowledged. warm: a topic the producer writes to first —
    kafka-python 2.0.2 notes a topic's TOPIC_AUTHORIZATION_FAILED only when the Metadata answer
    has more than one topic (Cluster.update_metadata fails a one-topic answer's future without
    recording it, and the producer then waits for the metadata until max_block_ms)."""
    p = kp_producer(b, user)
    try:
        if warm is not None:
            p.send(warm, b"warm").get(timeout=20)
        for v in values:
            p.send(topic, v.encode()).get(timeout=20)
    finally:
        p.close()


def kp_raw(b, user, req):
    """The answer to one request sent with kafka-python's client (its producer and consumer never
    send Produce or Fetch for a topic Metadata refused)."""
    from kafka.client_async import KafkaClient
    cl = KafkaClient(client_id="kp-raw", request_timeout_ms=20000, **kp_conf(b, user))
    try:
        broker.wait_until(lambda: cl.poll(timeout_ms=100) is not None and cl.cluster.brokers(), 20,
                          "the raw client's metadata")
        node = next(iter(cl.cluster.brokers())).nodeId

        def connected():
            if cl.ready(node):
                return True
            cl.poll(timeout_ms=100)
            return False
        broker.wait_until(connected, 20, "the raw client's connection")
        f = cl.send(node, req)
        cl.poll(future=f, timeout_ms=20000)
        assert f.succeeded(), f"{type(req).__name__}: {f.exception}"
        return f.value
    finally:
        cl.close()


def kp_raw_produce(b, user, topic):
    """The error code of partition 0 in the answer to one Produce v3 (one record, acks=all)."""
    from kafka.protocol.produce import ProduceRequest
    from kafka.record import MemoryRecordsBuilder
    mb = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    mb.append(timestamp=None, key=None, value=b"raw", headers=[])
    mb.close()
    r = kp_raw(b, user, ProduceRequest[3](transactional_id=None, required_acks=-1, timeout=10000,
                                          topics=[(topic, [(0, mb.buffer())])]))
    ((tn, parts),) = r.topics
    return parts[0][1]


def kp_raw_fetch(b, user, topic):
    """The error code of partition 0 in the answer to a Fetch v4 from offset 0."""
    from kafka.protocol.fetch import FetchRequest
    r = kp_raw(b, user, FetchRequest[4](-1, 100, 1, 1 << 20, 0, [(topic, [(0, 0, 1 << 20)])]))
    ((tn, parts),) = r.topics
    return parts[0][1]


def kp_read_group(b, user, topic, group, want, timeout=30):
    """Values a group member reads until it has every value of `want`; commits. topic: a name
    or a tuple of names."""
    c = kp_consumer(b, user, *(topic if isinstance(topic, tuple) else (topic,)), group_id=group)
    got = set()
    try:
        deadline = time.monotonic() + timeout
        while not want <= got:
            if time.monotonic() > deadline:
                raise AssertionError(f"kafka-python as {user}, group {group}: read {len(got & want)} of {len(want)}")
            for recs in c.poll(timeout_ms=500).values():
                got.update(r.value.decode() for r in recs)
        c.commit()
    finally:
        c.close()
    return got


def create_topics(b, names):
    a = kp_admin(b, "admin")
    try:
        r = a.create_topics([NewTopic(n, 1, 1) for n in names], timeout_ms=15000)
        errs = sorted((tn, code) for tn, code, *_ in r.topic_errors)
        assert errs == sorted((n, 0) for n in names), f"CreateTopics as admin: {errs}"
    finally:
        a.close()
    broker.wait_until(lambda: set(names) <= kp_topics(b, "admin"), 20, f"topics {names} in Metadata")


def create_acls(b, acls, user="admin"):
    a = kp_admin(b, user)
    try:
        r = a.create_acls(acls)
    finally:
        a.close()
    assert not r["failed"], f"CreateAcls as {user}: failed {r['failed']}"
    assert len(r["succeeded"]) == len(acls), f"CreateAcls: {r}"


def describe(b, flt=None, user="admin"):
    a = kp_admin(b, user)
    try:
        acls, err = a.describe_acls(flt or afilter())
    finally:
        a.close()
    assert err is Errors.NoError, f"DescribeAcls: {err}"
    return sorted(key(x) for x in acls)


def setup(t, extra_args=None):
    """A broker with the users, topics orders, secrets, team-a.x and SETUP_ACLS."""
    b = acl_broker(t, extra_args)
    create_topics(b, ["orders", "secrets", "team-a.x"])
    create_acls(b, SETUP_ACLS)
    t.log("admin created topics orders, secrets, team-a.x and the 5 setup ACLs")
    return b


# --- kcat ---------------------------------------------------------------------------------------

def kcat(b, user, args, stdin=None, timeout=40):
    cmd = ["kcat", "-b", b.sasl_bootstrap, "-X", "security.protocol=SASL_PLAINTEXT",
           "-X", f"sasl.mechanisms={MECH}", "-X", f"sasl.username={user}", "-X", f"sasl.password={PW[user]}",
           "-m", "15", *args]
    try:
        p = subprocess.run(cmd, input=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return None, (e.stdout or b""), (e.stderr or b"").decode(errors="replace")
    return p.returncode, p.stdout, p.stderr.decode(errors="replace")


def kcat_topics(b, user):
    rc, out, err = kcat(b, user, ["-L", "-J"])
    assert rc == 0, f"kcat -L as {user}: exit {rc}: {err[-1000:]}"
    return {tp["topic"] for tp in json.loads(out)["topics"]}


# --- confluent-kafka ----------------------------------------------------------------------------

def ck_conf(b, user, **kw):
    if user is None:
        c = {"bootstrap.servers": b.bootstrap, "log.connection.close": False}
    else:
        c = {"bootstrap.servers": b.sasl_bootstrap, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": MECH,
             "sasl.username": user, "sasl.password": PW[user], "log.connection.close": False}
    c["log_level"] = 4     # no NOTICE lines (librdkafka reports a refused topic's partitions as 0)
    c.update(kw)
    return c


def ck_produce(b, user, topic, values, timeout=30):
    """[error or None] per value."""
    p = Producer(ck_conf(b, user, **{"acks": "all", "message.timeout.ms": 15000}))
    res = [None] * len(values)
    done = [False] * len(values)

    def cb_for(i):
        def cb(err, m):
            res[i] = err
            done[i] = True
        return cb
    for i, v in enumerate(values):
        p.produce(topic, value=v.encode(), on_delivery=cb_for(i))
    p.flush(timeout)
    assert all(done), f"confluent producer as {user} to {topic}: not every delivery reported"
    return res


def ck_consume_errors(b, user, topic, group, want=None, timeout=30):
    """Subscribes; returns (values read, [KafkaError]) once `want` is read or after an error
    (or the timeout)."""
    c = Consumer(ck_conf(b, user, **{"group.id": group, "auto.offset.reset": "earliest",
                                     "enable.auto.commit": False}))
    got, errs = set(), []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is None:
                continue
            if m.error():
                if m.error().code() == KafkaError._PARTITION_EOF:
                    continue
                errs.append(m.error())
                break
            got.add(m.value().decode())
            if want is not None and want <= got:
                c.commit(asynchronous=False)
                break
    except Exception as e:  # noqa: BLE001 - a KafkaException from subscribe/commit counts as an error
        errs.append(e.args[0] if e.args else e)
    finally:
        c.close()
    return got, errs


def ck_topics(b, user):
    p = Producer(ck_conf(b, user))
    return set(p.list_topics(timeout=15).topics)


def code_of(e):
    return e.code() if hasattr(e, "code") else None


# --- kafkajs ------------------------------------------------------------------------------------

def run_node(t, b, user, mode, timeout=150, **env_extra):
    node = shutil.which("node")
    if node is None:
        raise AssertionError("node not found: run tools/install-deps.sh --all")
    env = dict(os.environ, SKIFF_BOOTSTRAP=b.sasl_bootstrap, SASL_USER=user, SASL_PASSWORD=PW[user],
               ACL_MODE=mode, KAFKAJS_NO_PARTITIONER_WARNING="1", **env_extra)
    p = subprocess.run([node, os.path.join(NODE_DIR, "acl.js")], cwd=NODE_DIR, env=env,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=timeout)
    out = p.stdout.decode(errors="replace")
    print(out.rstrip(), flush=True)
    if p.returncode != 0:
        raise AssertionError(f"node/acl.js {mode} as {user} exited with status {p.returncode}")
    return out


# --- the tests ----------------------------------------------------------------------------------

def test_setup(t):
    b = setup(t)
    got = describe(b)
    t.log(f"DescribeAcls (ANY filter) as admin: {len(got)} bindings")
    for k in got:
        t.log(f"  {k}")
    assert got == sorted(SETUP_KEYS), f"DescribeAcls returned {got}, expected {sorted(SETUP_KEYS)}"
    alice = describe(b, afilter(principal="User:alice"))
    assert alice == sorted(k for k in SETUP_KEYS if k[3] == "User:alice"), f"filter principal=User:alice: {alice}"
    bob = describe(b, afilter(principal="User:bob"))
    assert bob == sorted(k for k in SETUP_KEYS if k[3] == "User:bob"), f"filter principal=User:bob: {bob}"
    t.log("a filter by principal returns that principal's bindings only (alice 3, bob 2)")
    orders = describe(b, afilter(rtype=T, name="orders", pattern=LIT))
    assert orders == sorted(k for k in SETUP_KEYS if k[:3] == ("TOPIC", "orders", "LITERAL")), \
        f"filter topic orders LITERAL: {orders}"
    match = describe(b, afilter(rtype=T, name="team-a.x", pattern=ACLResourcePatternType.MATCH))
    want = sorted(k for k in SETUP_KEYS if k[1] in ("team-a.", "*"))
    assert match == want, f"filter topic team-a.x MATCH: {match}, expected {want}"
    t.log("filters by resource: topic orders LITERAL (2), topic team-a.x MATCH (prefix team-a. and *)")
    out = run_node(t, b, "admin", "describe", timeout=60)
    line = next(x for x in out.splitlines() if x.startswith("ACLS="))
    kjs = sorted((ResourceType(r[0]).name, r[1], ACLResourcePatternType(r[2]).name, r[3], r[4],
                  ACLOperation(r[5]).name, ACLPermissionType(r[6]).name) for r in json.loads(line[5:]))
    assert kjs == sorted(SETUP_KEYS), f"kafkajs describeAcls: {kjs}"
    t.log("kafkajs describeAcls as admin returns the same 5 bindings")
    pre = describe(b, afilter(rtype=T, pattern=PRE))
    assert pre == sorted(k for k in SETUP_KEYS if k[0] == "TOPIC" and k[2] == "PREFIXED"), f"topic PREFIXED: {pre}"
    star = describe(b, afilter(rtype=T, name="*", pattern=LIT))
    assert star == sorted(k for k in SETUP_KEYS if k[1] == "*"), f"topic '*' LITERAL: {star}"
    deny = describe(b, afilter(perm=DENY))
    assert deny == sorted(k for k in SETUP_KEYS if k[6] == "DENY"), f"permission DENY: {deny}"
    grp = describe(b, afilter(rtype=G, op=O.READ))
    assert grp == sorted(k for k in SETUP_KEYS if k[0] == "GROUP"), f"group READ: {grp}"
    t.log("filters: topic PREFIXED (1), topic '*' LITERAL (1), permission DENY (1), group READ (1)")
    lit = describe(b, afilter(principal="User:bob", rtype=T, name="orders", pattern=LIT))
    assert lit == [("TOPIC", "orders", "LITERAL", "User:bob", "*", "READ", "DENY")], f"bob orders LITERAL: {lit}"
    none = describe(b, afilter(principal="User:carol"))
    assert none == [], f"filter principal=User:carol: {none}"
    # adding an existing binding again changes nothing
    create_acls(b, [SETUP_ACLS[0]])
    assert describe(b) == sorted(SETUP_KEYS), "CreateAcls of an existing binding added a second one"
    stored = broker.wait_until(lambda: acls_json(b), 10, "acls.json in the store")
    assert stored == sorted(SETUP_KEYS), f"acls.json holds {stored}"
    t.log(f"acls.json in the {b.store} store holds exactly the 5 bindings")
    b.stop()


def test_alice(t):
    b = setup(t)
    create_acls(b, [acl("User:alice", O.READ, ALLOW, G, "app-", PRE)])  # (already there: no-op)
    # --- kcat
    vals = [f"kcat-{i}" for i in range(20)]
    rc, _, err = kcat(b, "alice", ["-P", "-t", "orders", "-X", "acks=all"], stdin=("\n".join(vals) + "\n").encode())
    assert rc == 0 and "rror" not in err, f"kcat -P orders as alice: exit {rc}: {err[-1000:]}"
    rc, out, err = kcat(b, "alice", ["-C", "-G", "app-1-kcat", "-X", "auto.offset.reset=earliest", "-e", "-q",
                                     "-f", "%s\n", "orders"])
    got = set(out.decode().splitlines())
    assert set(vals) <= got, f"kcat -G app-1-kcat orders as alice: exit {rc}, read {sorted(got)[:5]}..., {err[-800:]}"
    t.log("kcat: produce to orders and read back with group app-1-kcat: ok")
    rc, _, err = kcat(b, "alice", ["-P", "-t", "secrets"], stdin=b"x\n")
    assert "authorization failed" in err.lower() or "TOPIC_AUTHORIZATION_FAILED" in err, \
        f"kcat -P secrets as alice: exit {rc}, stderr {err[-800:]!r}"
    t.log(f"kcat: produce to secrets refused: exit {rc}, {err.strip().splitlines()[-1][:120]!r}")
    rc, out, err = kcat(b, "alice", ["-C", "-t", "secrets", "-o", "beginning", "-e", "-q"], timeout=30)
    assert rc != 0 and ("authorization failed" in err.lower() or "TOPIC_AUTHORIZATION" in err), \
        f"kcat -C secrets as alice: exit {rc}, out {out[:200]!r}, stderr {err[-800:]!r}"
    t.log(f"kcat: consume secrets refused: exit {rc}")
    rc, out, err = kcat(b, "alice", ["-C", "-G", "other-1", "-e", "-q", "orders"], timeout=30)
    assert "group authorization failed" in err.lower() or "GROUP_AUTHORIZATION_FAILED" in err, \
        f"kcat -G other-1 as alice: exit {rc}, stderr {err[-800:]!r}"
    assert not out.strip(), f"kcat -G other-1 as alice read data: {out[:200]!r}"
    t.log(f"kcat: group other-1 refused (Group authorization failed), exit {rc}")
    topics = kcat_topics(b, "alice")
    assert {"orders", "team-a.x"} <= topics and "secrets" not in topics, f"kcat -L as alice: {topics}"
    t.log(f"kcat -L as alice: {sorted(topics)}")
    rc, _, err = kcat(b, "alice", ["-P", "-t", "team-a.x", "-X", "acks=all"], stdin=b"kcat-team\n")
    assert rc == 0 and "rror" not in err, f"kcat -P team-a.x as alice: exit {rc}: {err[-800:]}"
    t.log("kcat: produce to team-a.x: ok")

    # --- confluent-kafka
    vals = [f"ck-{i}" for i in range(20)]
    res = ck_produce(b, "alice", "orders", vals)
    assert res == [None] * len(vals), f"confluent producer to orders as alice: {res}"
    got, errs = ck_consume_errors(b, "alice", "orders", "app-1", want=set(vals))
    assert not errs and set(vals) <= got, f"confluent consumer group app-1 on orders: errors {errs}, read {len(got)}"
    t.log("confluent-kafka: produce to orders and read back with group app-1: ok")
    res = ck_produce(b, "alice", "secrets", ["nope"])
    assert code_of(res[0]) == TOPIC_AUTHZ, f"confluent producer to secrets as alice: {res}"
    t.log(f"confluent-kafka: produce to secrets: {res[0].name()}")
    got, errs = ck_consume_errors(b, "alice", "secrets", "app-2")
    assert not got and errs and code_of(errs[0]) == TOPIC_AUTHZ, f"confluent consumer of secrets: {errs}, {got}"
    t.log(f"confluent-kafka: consume secrets (group app-2): {errs[0].name()}")
    got, errs = ck_consume_errors(b, "alice", "orders", "other-1")
    assert not got and errs and code_of(errs[0]) == GROUP_AUTHZ, f"confluent consumer group other-1: {errs}, {len(got)}"
    t.log(f"confluent-kafka: group other-1: {errs[0].name()}")
    topics = ck_topics(b, "alice")
    assert {"orders", "team-a.x"} <= topics and "secrets" not in topics, f"confluent list_topics as alice: {topics}"
    res = ck_produce(b, "alice", "team-a.x", ["ck-team"])
    assert res == [None], f"confluent producer to team-a.x: {res}"
    t.log(f"confluent-kafka: list_topics {sorted(topics)}; produce to team-a.x ok")

    # --- kafka-python
    vals = [f"kp-{i}" for i in range(20)]
    kp_produce(b, "alice", "orders", vals)
    kp_read_group(b, "alice", "orders", "app-1-kp", set(vals))
    t.log("kafka-python: produce to orders and read back with group app-1-kp: ok")
    e = kp_expect(Errors.TopicAuthorizationFailedError, lambda: kp_produce(b, "alice", "secrets", ["x"], warm="orders"),
                  "kafka-python produce to secrets")
    t.log(f"kafka-python: produce to secrets: {type(e).__name__}")
    # kafka-python 2.0.2's consumer raises TopicAuthorizationFailedError from a metadata listener
    # whose exception the client swallows: it reads nothing and keeps the refusal in
    # cluster.unauthorized_topics. The Fetch itself is sent raw.
    c = kp_consumer(b, "alice", "orders", "secrets", group_id="app-2-kp")
    try:
        got = []
        end = time.monotonic() + 5
        while time.monotonic() < end:
            for recs in c.poll(timeout_ms=500).values():
                got.extend(r for r in recs if r.topic == "secrets")
        unauth = set(c._client.cluster.unauthorized_topics)
    finally:
        c.close()
    assert not got and unauth == {"secrets"}, f"kafka-python consumer of secrets: read {len(got)}, " \
                                              f"unauthorized {unauth}"
    code = kp_raw_fetch(b, "alice", "secrets")
    assert code == TOPIC_AUTHZ, f"Fetch v4 of secrets as alice: error {code}, expected 29"
    t.log("kafka-python: consumer of secrets reads nothing (Metadata: TOPIC_AUTHORIZATION_FAILED); "
          "a Fetch of secrets: TOPIC_AUTHORIZATION_FAILED")
    e = kp_expect(Errors.GroupAuthorizationFailedError,
                  lambda: kp_read_group(b, "alice", "orders", "other-1", {"never"}, timeout=15),
                  "kafka-python group other-1")
    t.log(f"kafka-python: group other-1: {type(e).__name__}")
    topics = kp_topics(b, "alice")
    assert {"orders", "team-a.x"} <= topics and "secrets" not in topics, f"kafka-python topics() as alice: {topics}"
    kp_produce(b, "alice", "team-a.x", ["kp-team"])
    t.log(f"kafka-python: topics() {sorted(topics)}; produce to team-a.x ok")

    # --- kafkajs
    run_node(t, b, "alice", "alice")
    b.stop()


def test_bob(t):
    b = setup(t)
    kp_produce(b, "admin", "secrets", [f"s-{i}" for i in range(5)])
    kp_produce(b, "admin", "orders", [f"o-{i}" for i in range(5)])
    # read without a group (bob has no group ACL): kcat's simple consumer
    rc, out, err = kcat(b, "bob", ["-C", "-t", "secrets", "-o", "beginning", "-e", "-q", "-f", "%s\n"])
    got = out.decode().splitlines()
    assert rc == 0 and got == [f"s-{i}" for i in range(5)], f"kcat -C secrets as bob: exit {rc}, {got}, {err[-500:]}"
    t.log("bob reads secrets (ALLOW ALL on topic '*'): ok")
    rc, out, err = kcat(b, "bob", ["-C", "-t", "orders", "-o", "beginning", "-e", "-q", "-f", "%s\n"])
    assert rc != 0 and not out.strip() and "authorization failed" in err.lower(), \
        f"kcat -C orders as bob: exit {rc}, out {out[:200]!r}, {err[-500:]!r}"
    c = kp_consumer(b, "bob")
    try:
        c.assign([TopicPartition("orders", 0)])
        c.seek_to_beginning()
        kp_expect(Errors.TopicAuthorizationFailedError, lambda: c.poll(timeout_ms=5000) or c.poll(timeout_ms=5000),
                  "kafka-python fetch of orders as bob")
    finally:
        c.close()
    t.log("bob cannot read orders (DENY READ beats ALLOW ALL on '*'): kcat and kafka-python refused")
    topics = kp_topics(b, "bob")
    assert {"orders", "secrets", "team-a.x"} <= topics, f"Metadata as bob: {topics}"
    t.log(f"bob sees {sorted(topics)} (a DENY of READ does not deny DESCRIBE)")
    res = ck_produce(b, "bob", "orders", ["bob-1"])
    assert res == [None], f"confluent producer to orders as bob: {res}"
    kp_produce(b, "bob", "orders", ["bob-2"])
    t.log("bob produces to orders (WRITE via ALLOW ALL on '*', only READ denied): ok")
    got, errs = ck_consume_errors(b, "bob", "secrets", "bob-group")
    assert not got and errs and code_of(errs[0]) == GROUP_AUTHZ, f"bob with group bob-group: {errs}"
    t.log("bob's consumer group (no group ACL) refused: GROUP_AUTHORIZATION_FAILED")
    create_acls(b, [acl("User:bob", O.WRITE, DENY, T, "team-", PRE)])
    res = ck_produce(b, "bob", "team-a.x", ["bob-team"])
    assert code_of(res[0]) == TOPIC_AUTHZ, f"bob's produce to team-a.x after DENY WRITE on prefix team-: {res}"
    res = ck_produce(b, "bob", "orders", ["bob-3"])
    assert res == [None], f"bob's produce to orders after DENY WRITE on prefix team-: {res}"
    got = md_errors(b, "bob", ["team-a.x", "orders"], False)
    assert got == {"team-a.x": 0, "orders": 0}, f"Metadata as bob after the DENY WRITE: {got}"
    t.log("DENY WRITE on prefix team- beats ALLOW ALL on '*' for team-a.x only (Metadata still shows it)")
    b.stop()


def test_super(t):
    b = setup(t)
    kp_produce(b, "admin", "orders", ["before"])
    set_args(b, authz_args(super_users="User:admin"))
    b.restart()
    t.log("restarted with --super-users User:admin (ANONYMOUS no longer super)")
    create_topics(b, ["admin-only"])
    kp_produce(b, "admin", "admin-only", ["a1"])
    kp_produce(b, "admin", "secrets", ["a2"])
    kp_read_group(b, "admin", "secrets", "any-group-admin", {"a2"})
    topics = kp_topics(b, "admin")
    assert {"orders", "secrets", "team-a.x", "admin-only"} <= topics, f"Metadata as admin: {topics}"
    assert describe(b) == sorted(SETUP_KEYS)
    create_acls(b, [acl("User:carol", O.READ, ALLOW, T, "admin-only"), acl("User:admin", O.ALL, DENY, T, "orders")])
    kp_produce(b, "admin", "orders", ["despite-deny"])
    kp_read_group(b, "admin", "orders", "any-group-admin-2", {"despite-deny"})
    t.log("admin reads and writes orders despite DENY ALL for User:admin on it (super users skip ACLs)")
    t.log("admin (super user, no ACL of its own): create topic, produce, group any-group-admin, Metadata, "
          "Describe/CreateAcls: ok")
    anon = kp_topics(b, None)
    assert anon == set(), f"Metadata as ANONYMOUS over PLAINTEXT: {anon}"
    anon = set(Producer(ck_conf(b, None)).list_topics(timeout=15).topics)
    assert anon == set(), f"confluent list_topics as ANONYMOUS: {anon}"
    t.log("ANONYMOUS sees no topic in Metadata (kafka-python and confluent-kafka)")
    code = kp_raw_produce(b, None, "orders")
    assert code == TOPIC_AUTHZ, f"Produce v3 to orders as ANONYMOUS (kafka-python's client): error {code}"
    res = ck_produce(b, None, "orders", ["anon"])
    assert code_of(res[0]) == TOPIC_AUTHZ, f"confluent produce to orders as ANONYMOUS: {res}"
    t.log("ANONYMOUS cannot produce to orders: TOPIC_AUTHORIZATION_FAILED")
    rc, out, err = skiff_user_add(t, b, "alice")
    t.log(f"skiff user add over PLAINTEXT as ANONYMOUS: exit {rc}, {err.strip()[:160]!r}")
    assert rc == 1 and "CLUSTER_AUTHORIZATION_FAILED" in err, f"skiff user add as ANONYMOUS: exit {rc}, {err!r}"
    create_acls(b, [acl("User:ANONYMOUS", O.WRITE, ALLOW, T, "orders"),
                    acl("User:ANONYMOUS", O.ALTER, ALLOW, C, "kafka-cluster")])
    code = kp_raw_produce(b, None, "orders")
    assert code == 0, f"Produce to orders as ANONYMOUS with ALLOW WRITE for User:ANONYMOUS: error {code}"
    anon = kp_topics(b, None)
    assert anon == {"orders"}, f"Metadata as ANONYMOUS with WRITE on orders: {anon}"
    rc, out, err = skiff_user_add(t, b, "alice")
    assert rc == 0, f"skiff user add as ANONYMOUS with ALTER on the cluster: exit {rc}, {err!r}"
    t.log("with bindings for User:ANONYMOUS (WRITE orders, ALTER cluster): PLAINTEXT produces to orders, "
          "sees only orders, and skiff user add works")
    b.stop()


def test_delete(t):
    b = setup(t)
    kp_produce(b, "admin", "orders", ["o-0"])
    a = kp_admin(b, "admin")
    p = kp_producer(b, "alice", retries=0)
    try:
        p.send("orders", b"alice-before").get(timeout=15)
        t.log("alice's producer (kept open) writes to orders")
        res = a.delete_acls([afilter(principal="User:alice", rtype=T, name="orders", pattern=LIT)])
        t_del = time.monotonic()
        (_, matched, err), = res
        assert err is Errors.NoError, f"DeleteAcls: filter error {err}"
        assert [(key(x), e) for x, e in matched] == [(key(SETUP_ACLS[0]), Errors.NoError)], \
            f"DeleteAcls returned {[(key(x), e) for x, e in matched]}"
        t.log(f"DeleteAcls principal=User:alice topic orders LITERAL returned exactly {key(matched[0][0])}")
        left = describe(b)
        assert left == sorted(SETUP_KEYS - {key(SETUP_ACLS[0])}), f"after DeleteAcls: {left}"
        # effective on the open connection
        first = None
        while time.monotonic() - t_del < 3:
            try:
                p.send("orders", b"alice-after").get(timeout=10)
            except Errors.TopicAuthorizationFailedError:
                first = time.monotonic() - t_del
                break
            time.sleep(0.05)
        assert first is not None and first <= 1.0, f"alice could still write to orders {first} s after DeleteAcls"
        t.log(f"alice's open producer refused (TOPIC_AUTHORIZATION_FAILED) {first:.2f} s after DeleteAcls")
        topics = kp_topics(b, "alice")
        assert "orders" not in topics and "team-a.x" in topics, f"Metadata as alice after the delete: {topics}"
        codes = [kp_raw_produce(b, "alice", "orders") for _ in range(6)]
        assert codes == [TOPIC_AUTHZ] * 6, f"6 new connections' Produce to orders as alice after the delete: {codes}"
        t.log("6 new connections (every core) refused too; Metadata no longer lists orders for alice")
        create_acls(b, [SETUP_ACLS[0]])
        t_add = time.monotonic()
        codes = [kp_raw_produce(b, "alice", "orders") for _ in range(6)]
        assert codes == [0] * 6, f"6 new connections' Produce to orders after re-creating the ACL: {codes}"
        t.log(f"re-created: 6 new connections write to orders at once ({time.monotonic() - t_add:.2f} s)")
        (_, matched, err), = a.delete_acls([afilter(principal="User:alice", rtype=T, name="orders", pattern=LIT)])
        assert err is Errors.NoError and len(matched) == 1, f"second DeleteAcls of alice's orders binding: {matched}"
        # a filter that matches nothing; then one that matches several (with a MATCH pattern)
        (_, matched, err), = a.delete_acls([afilter(principal="User:carol")])
        assert err is Errors.NoError and matched == [], f"DeleteAcls of nothing: {err} {matched}"
        (_, matched, err), = a.delete_acls([afilter(principal="User:bob", rtype=T, name="orders",
                                                    pattern=ACLResourcePatternType.MATCH)])
        got = sorted(key(x) for x, _ in matched)
        want = sorted(k for k in SETUP_KEYS if k[3] == "User:bob")
        assert err is Errors.NoError and got == want, f"DeleteAcls bob MATCH orders: {err} {got}, expected {want}"
        left = describe(b)
        assert left == sorted(k for k in SETUP_KEYS if k[3] == "User:alice" and k[1] != "orders"), f"left: {left}"
        t.log("DeleteAcls of nothing returns nothing; bob + MATCH orders removed bob's literal and '*' bindings")
        stored = broker.wait_until(lambda: (s := acls_json(b)) is not None and s == left and s, 10,
                                   "acls.json to hold the 2 remaining bindings")
        t.log(f"acls.json holds the {len(stored)} remaining bindings")
    finally:
        p.close()
        a.close()
    b.stop()


def test_restart(t):
    b = setup(t)
    b.restart()
    got = describe(b)
    assert got == sorted(SETUP_KEYS), f"DescribeAcls after a restart: {got}"
    t.log("after a restart DescribeAcls returns the 5 bindings")
    kp_produce(b, "alice", "orders", ["after-restart"])
    kp_expect(Errors.TopicAuthorizationFailedError, lambda: kp_produce(b, "alice", "secrets", ["x"], warm="orders"),
              "kafka-python produce to secrets as alice after a restart")
    rc, out, err = kcat(b, "bob", ["-C", "-t", "orders", "-o", "beginning", "-e", "-q"])
    assert rc != 0 and not out.strip(), f"kcat -C orders as bob after a restart: exit {rc} {out[:100]!r}"
    topics = kp_topics(b, "alice")
    assert "secrets" not in topics and "orders" in topics, f"Metadata as alice after a restart: {topics}"
    t.log("enforced: alice writes orders, not secrets; bob cannot read orders; Metadata filtered")
    b.stop()


def test_allow_everyone(t):
    b = acl_broker(t, authz_args(allow_everyone=True))
    create_topics(b, ["open-t", "guarded", "mine"])
    create_acls(b, [acl("User:bob", O.READ, ALLOW, T, "guarded"), acl("User:alice", O.WRITE, ALLOW, T, "mine")])
    t.log("--allow-everyone-if-no-acl-found: open-t without ACLs, guarded (bob READ), mine (alice WRITE)")
    kp_produce(b, "alice", "open-t", ["o1", "o2"])
    kp_read_group(b, "alice", "open-t", "any-group", {"o1", "o2"})
    t.log("alice produces to and reads (group any-group, no ACL) open-t: ok")
    kp_expect(Errors.TopicAuthorizationFailedError, lambda: kp_produce(b, "alice", "guarded", ["x"], warm="mine"),
              "kafka-python produce to guarded as alice")
    kp_produce(b, "alice", "mine", ["m1"])
    topics = kp_topics(b, "alice")
    assert {"open-t", "mine"} <= topics and "guarded" not in topics, f"Metadata as alice: {topics}"
    t.log(f"alice cannot produce to guarded (an ACL exists, none for her), can to mine; Metadata {sorted(topics)}")
    res = ck_produce(b, "bob", "open-t", ["bob"])
    assert res == [None], f"bob's produce to open-t: {res}"
    res = ck_produce(b, "bob", "mine", ["bob"])
    assert code_of(res[0]) == TOPIC_AUTHZ, f"bob's produce to mine: {res}"
    t.log("bob (confluent-kafka) produces to open-t, not to mine (its only ACL is alice's)")
    b.stop()


def test_no_authorizer(t):
    t._n += 1
    b = AclBroker(t.skiff, t.workdir, f"{t.name}-{t._n}", t.store, extra_args=[])
    t.brokers.append(b)
    b.start()
    a = KafkaAdminClient(bootstrap_servers=b.bootstrap, request_timeout_ms=20000)
    try:
        r = a.create_acls([acl("User:alice", O.READ, ALLOW, T, "x")])
        assert not r["succeeded"] and [e for _, e in r["failed"]] == [Errors.SecurityDisabledError], \
            f"CreateAcls without an authorizer: {r}"
        t.log("CreateAcls without --authorizer: SECURITY_DISABLED")
        kp_expect(Errors.SecurityDisabledError, lambda: a.describe_acls(afilter()), "DescribeAcls without --authorizer")
        t.log("DescribeAcls without --authorizer: SECURITY_DISABLED")
        (_, matched, err), = a.delete_acls([afilter()])
        assert err is Errors.SecurityDisabledError and not matched, f"DeleteAcls without --authorizer: {err} {matched}"
        t.log("DeleteAcls without --authorizer: SECURITY_DISABLED")
    finally:
        a.close()
    b.stop()


def raw_create(b, creations, user="admin"):
    a = kp_admin(b, user)
    try:
        req = CreateAclsRequest[1](creations=creations)
        f = a._send_request_to_node(a._client.least_loaded_node(), req)
        a._wait_for_futures([f])
        return [(code, msg) for code, msg in f.value.creation_responses]
    finally:
        a.close()


def test_bad_input(t):
    b = setup(t)
    A = int(ALLOW)
    bad = [
        ("principal 'alice' without a type", (int(T), "orders", int(LIT), "alice", "*", int(O.READ), A)),
        ("resource type ANY", (int(ResourceType.ANY), "orders", int(LIT), "User:alice", "*", int(O.READ), A)),
        ("pattern type MATCH", (int(T), "orders", int(ACLResourcePatternType.MATCH), "User:alice", "*", int(O.READ), A)),
        ("pattern type ANY", (int(T), "orders", int(ACLResourcePatternType.ANY), "User:alice", "*", int(O.READ), A)),
        ("CLUSTER named other", (int(C), "other", int(LIT), "User:alice", "*", int(O.ALTER), A)),
        ("operation ANY", (int(T), "orders", int(LIT), "User:alice", "*", int(O.ANY), A)),
        ("permission ANY", (int(T), "orders", int(LIT), "User:alice", "*", int(O.READ), 1)),
        ("empty name", (int(T), "", int(LIT), "User:alice", "*", int(O.READ), A)),
    ]
    for what, c in bad:
        r = raw_create(b, [c])
        t.log(f"CreateAcls {what}: {r}")
        assert len(r) == 1 and r[0][0] == INVALID_REQUEST, f"CreateAcls {what}: {r}, expected INVALID_REQUEST (42)"
    ok = (int(T), "carol-topic", int(LIT), "User:carol", "*", int(O.READ), A)
    r = raw_create(b, [bad[0][1], ok, bad[4][1]])
    t.log(f"CreateAcls [bad principal, valid, bad cluster name] in one request: {r}")
    assert [x[0] for x in r] == [INVALID_REQUEST, 0, INVALID_REQUEST], f"mixed CreateAcls: {r}"
    got = describe(b)
    want = sorted(SETUP_KEYS | {("TOPIC", "carol-topic", "LITERAL", "User:carol", "*", "READ", "ALLOW")})
    assert got == want, f"after the refused creations DescribeAcls returns {got}"
    t.log("nothing of the refused bindings stored; the valid one in the mixed request was")
    # the ACL APIs need DESCRIBE / ALTER on the cluster
    a = kp_admin(b, "alice")
    try:
        kp_expect(Errors.ClusterAuthorizationFailedError, lambda: a.describe_acls(afilter()),
                  "DescribeAcls as alice (no DESCRIBE on the cluster)")
        t.log("DescribeAcls as alice: CLUSTER_AUTHORIZATION_FAILED")
        r = a.create_acls([acl("User:alice", O.READ, ALLOW, T, "secrets")])
        assert [e for _, e in r["failed"]] == [Errors.ClusterAuthorizationFailedError], f"CreateAcls as alice: {r}"
        t.log("CreateAcls as alice: CLUSTER_AUTHORIZATION_FAILED")
        (_, matched, err), = a.delete_acls([afilter(principal="User:bob")])
        assert err is Errors.ClusterAuthorizationFailedError and not matched, f"DeleteAcls as alice: {err} {matched}"
        t.log("DeleteAcls as alice: CLUSTER_AUTHORIZATION_FAILED")
    finally:
        a.close()
    assert describe(b) == want, "alice's refused Create/DeleteAcls changed the bindings"
    # with DESCRIBE on the cluster alice may describe
    create_acls(b, [acl("User:alice", O.DESCRIBE, ALLOW, C, "kafka-cluster")])
    got = describe(b, user="alice")
    assert len(got) == len(want) + 1, f"DescribeAcls as alice with cluster DESCRIBE: {got}"
    t.log("with ALLOW DESCRIBE on kafka-cluster alice's DescribeAcls succeeds")
    b.stop()


def test_metrics(t):
    b = setup(t)
    before = {r: broker.metric_counter(b, "skiff_acl_denied_total", resource=r) for r in ("topic", "group", "cluster")}
    t.log(f"skiff_acl_denied_total before: {before}")
    kp_expect(Errors.TopicAuthorizationFailedError, lambda: kp_produce(b, "alice", "secrets", ["x"], warm="orders"),
              "produce to secrets as alice")
    got, errs = ck_consume_errors(b, "alice", "orders", "other-1")
    assert errs and code_of(errs[0]) == GROUP_AUTHZ, f"group other-1: {errs}"
    a = kp_admin(b, "alice")
    try:
        kp_expect(Errors.ClusterAuthorizationFailedError, lambda: a.describe_acls(afilter()), "DescribeAcls as alice")
    finally:
        a.close()
    after = {r: broker.metric_counter(b, "skiff_acl_denied_total", resource=r) for r in ("topic", "group", "cluster")}
    t.log(f"skiff_acl_denied_total after a denied produce, group and DescribeAcls: {after}")
    for r in ("topic", "group", "cluster"):
        assert after[r] > before[r], f"skiff_acl_denied_total{{resource={r}}} did not increase: {before[r]} -> {after[r]}"
    b.stop()


def test_principals_hosts(t):
    """User:* bindings, host bindings (clients connect from 127.0.0.1), principal case."""
    b = setup(t, authz_args(super_users="User:admin;User:ANONYMOUS"))
    create_topics(b, ["pub", "hosts"])
    create_acls(b, [acl("User:*", O.READ, ALLOW, T, "pub"), acl("User:*", O.READ, ALLOW, G, "pub-", PRE),
                    acl("User:alice", O.WRITE, ALLOW, T, "hosts", host="127.0.0.1"),
                    acl("User:bob", O.WRITE, ALLOW, T, "hosts", host="10.9.8.7"),
                    acl("User:Alice", O.WRITE, ALLOW, T, "pub")])
    kp_produce(b, "admin", "pub", ["p1"])
    for u in ("alice", "bob"):
        kp_read_group(b, u, "pub", f"pub-{u}", {"p1"})
    t.log("User:* READ on pub (and groups pub-*): alice and bob read pub")
    code = kp_raw_produce(b, "alice", "pub")
    assert code == TOPIC_AUTHZ, f"alice's Produce to pub (only User:Alice may write): {code}"
    t.log("a binding for User:Alice does not apply to alice: Produce to pub TOPIC_AUTHORIZATION_FAILED")
    kp_produce(b, "alice", "hosts", ["h1"])
    t.log("alice's WRITE on hosts with host 127.0.0.1 applies to her connection from 127.0.0.1")
    code = kp_raw_produce(b, "bob", "hosts")
    # bob has ALLOW ALL on '*' (any host): his host-bound ALLOW changes nothing
    assert code == 0, f"bob's Produce to hosts: {code}"
    create_acls(b, [acl("User:bob", O.WRITE, DENY, T, "hosts", host="127.0.0.1"),
                    acl("User:alice", O.WRITE, DENY, T, "hosts", host="10.9.8.7")])
    code = kp_raw_produce(b, "bob", "hosts")
    assert code == TOPIC_AUTHZ, f"bob's Produce to hosts after DENY WRITE from 127.0.0.1: {code}"
    code = kp_raw_produce(b, "alice", "hosts")
    assert code == 0, f"alice's Produce to hosts after a DENY for host 10.9.8.7: {code}"
    t.log("DENY WRITE host 127.0.0.1 refuses bob; a DENY for host 10.9.8.7 leaves alice alone")
    b.stop()


def plaintext_produce_acks0_closed(b, topic):
    """Sends one Produce v3 with acks=0 to `topic` over PLAINTEXT on a raw socket; True when the
    broker then closes the connection (Kafka does after an acks=0 produce with any error)."""
    import struct
    from kafka.protocol.produce import ProduceRequest
    from kafka.record import MemoryRecordsBuilder
    mb = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    mb.append(timestamp=None, key=None, value=b"acks0", headers=[])
    mb.close()
    body = ProduceRequest[3](transactional_id=None, required_acks=0, timeout=10000,
                             topics=[(topic, [(0, mb.buffer())])])._encode_self()
    cid = b"acl-raw"
    hdr = struct.pack(">hhih", 0, 3, 7, len(cid)) + cid
    with socket.create_connection(("127.0.0.1", b.port), timeout=5) as sk:
        sk.sendall(struct.pack(">i", len(hdr) + len(body)) + hdr + body)
        try:
            return sk.recv(1) == b""
        except ConnectionResetError:
            return True
        except socket.timeout:
            return False


def test_acks0_denied(t):
    """An acks=0 Produce to a topic the principal may not WRITE: nothing stored, and (Kafka's
    KafkaApis.handleProduceRequest: an acks=0 produce with any error closes the connection, the
    only way the client learns of it) the connection closed."""
    b = setup(t)
    set_args(b, authz_args(super_users="User:admin"))
    b.restart()
    kp_produce(b, "admin", "secrets", ["s"])
    c = kp_consumer(b, "admin")
    try:
        tp = TopicPartition("secrets", 0)
        before = c.end_offsets([tp])[tp]
        closed = plaintext_produce_acks0_closed(b, "secrets")
        after = c.end_offsets([tp])[tp]
    finally:
        c.close()
    t.log(f"acks=0 Produce to secrets as ANONYMOUS (PLAINTEXT): connection closed: {closed}; "
          f"end offset {before} -> {after}")
    assert before == after, f"an unauthorized acks=0 produce was stored: end offset {before} -> {after}"
    assert closed, "the connection stayed open after an unauthorized acks=0 Produce (Kafka closes it)"
    b.stop()


def md_errors(b, user, topics, auto_create):
    """{topic: error code} of a Metadata v4 request for `topics`."""
    from kafka.protocol.metadata import MetadataRequest
    r = kp_raw(b, user, MetadataRequest[4](topics, auto_create))
    return {tp[1]: tp[0] for tp in r.topics}


def test_auto_create(t):
    b = setup(t)
    t.log("alice has WRITE (so DESCRIBE) on prefix team-a., no CREATE anywhere")
    failures = []   # checked to the end, reported together
    got = md_errors(b, "alice", ["team-a.new", "zz-new", "secrets", "orders"], True)
    t.log(f"Metadata v4 (auto-create) as alice: {got}")
    # Kafka (KafkaApis.handleTopicMetadataRequest): a missing topic the principal may DESCRIBE but
    # not CREATE, with auto-creation asked for and enabled: TOPIC_AUTHORIZATION_FAILED
    want = {"team-a.new": TOPIC_AUTHZ, "zz-new": TOPIC_AUTHZ, "secrets": TOPIC_AUTHZ, "orders": 0}
    if got != want:
        failures.append(f"Metadata v4 (auto-create) as alice: {got}, expected {want}")
        t.log(f"MISMATCH: expected {want}")
    got = md_errors(b, "alice", ["team-a.new", "zz-new"], False)
    t.log(f"Metadata v4 (no auto-create) as alice: {got}")
    assert got == {"team-a.new": 3, "zz-new": TOPIC_AUTHZ}, \
        f"Metadata v4 without auto-create: {got}, expected team-a.new UNKNOWN_TOPIC_OR_PARTITION (3), zz-new 29"
    topics = kp_topics(b, "admin")
    assert "team-a.new" not in topics and "zz-new" not in topics, f"topics created without CREATE: {topics}"
    t.log("no CREATE: nothing created (a topic she may DESCRIBE: TOPIC_AUTHORIZATION_FAILED; without "
          "auto-creation UNKNOWN_TOPIC_OR_PARTITION)")
    create_acls(b, [acl("User:alice", O.CREATE, ALLOW, T, "team-a.", PRE)])
    got = md_errors(b, "alice", ["team-a.new"], True)
    assert got.get("team-a.new") in (0, 5), f"Metadata with CREATE on prefix team-a.: {got}"
    broker.wait_until(lambda: "team-a.new" in kp_topics(b, "alice"), 15, "team-a.new auto-created")
    kp_produce(b, "alice", "team-a.new", ["x"])
    t.log(f"with CREATE on prefix team-a. Metadata auto-creates team-a.new ({got}); alice writes to it")
    got = md_errors(b, "bob", ["bob-new"], True)   # bob: ALL on topic '*' includes CREATE
    assert got.get("bob-new") in (0, 5), f"Metadata as bob (ALL on topic *): {got}"
    broker.wait_until(lambda: "bob-new" in kp_topics(b, "admin"), 15, "bob-new auto-created")
    t.log("bob (ALL on topic '*') auto-creates bob-new")
    create_acls(b, [acl("User:alice", O.CREATE, ALLOW, C, "kafka-cluster")])
    got = md_errors(b, "alice", ["zz-new"], True)
    assert got.get("zz-new") in (0, 5), f"Metadata as alice with CREATE on the cluster: {got}"
    broker.wait_until(lambda: "zz-new" in kp_topics(b, "admin"), 15, "zz-new auto-created")
    t.log("with CREATE on the cluster alice auto-creates zz-new")
    # CreateTopics needs the same
    a = kp_admin(b, "bob")
    try:
        r = a.create_topics([NewTopic("bob-created", 1, 1)], timeout_ms=10000)
        assert [(n, c) for n, c, *_ in r.topic_errors] == [("bob-created", 0)], f"CreateTopics as bob: {r}"
    finally:
        a.close()
    t.log("CreateTopics as bob (ALL on topic '*'): ok")
    b.stop()
    assert not failures, "; ".join(failures)


def test_other_apis(t):
    """Kafka's checks of the other APIs (KafkaApis), as alice."""
    from kafka.admin import ConfigResource, ConfigResourceType, NewPartitions
    from kafka.protocol.commit import OffsetCommitRequest
    from kafka.protocol.offset import OffsetRequest
    b = setup(t)
    kp_produce(b, "admin", "secrets", ["s"])
    kp_read_group(b, "admin", "secrets", "other-9", {"s"})        # a group alice may not describe
    kp_produce(b, "alice", "orders", ["o"])
    kp_read_group(b, "alice", "orders", "app-5", {"o"})
    a = kp_admin(b, "alice")
    try:
        groups = {g for g, _ in a.list_consumer_groups()}
        t.log(f"ListGroups as alice: {sorted(groups)}")
        assert "app-5" in groups and "other-9" not in groups, f"ListGroups as alice: {groups}"
        kp_expect(Errors.GroupAuthorizationFailedError, lambda: a.describe_consumer_groups(["other-9"]),
                  "DescribeGroups other-9 as alice")
        kp_expect(Errors.GroupAuthorizationFailedError, lambda: a.list_consumer_group_offsets("other-9"),
                  "OffsetFetch other-9 as alice")
        t.log("DescribeGroups / OffsetFetch of group other-9: GROUP_AUTHORIZATION_FAILED")
        (dc,) = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "secrets")])
        codes = [res[0] for res in dc.resources]
        assert codes == [TOPIC_AUTHZ], f"DescribeConfigs secrets as alice: {dc}"
        (dc,) = a.describe_configs([ConfigResource(ConfigResourceType.TOPIC, "orders")])
        assert [res[0] for res in dc.resources] == [0], f"DescribeConfigs orders as alice: {dc}"
        t.log("DescribeConfigs: secrets TOPIC_AUTHORIZATION_FAILED, orders ok (ALL)")
        kp_expect(Errors.TopicAuthorizationFailedError, lambda: a.create_topics([NewTopic("zz-x", 1, 1)]),
                  "CreateTopics zz-x as alice")
        kp_expect(Errors.TopicAuthorizationFailedError, lambda: a.delete_topics(["secrets"]),
                  "DeleteTopics secrets as alice")
        kp_expect(Errors.TopicAuthorizationFailedError,
                  lambda: a.create_partitions({"secrets": NewPartitions(2)}), "CreatePartitions secrets as alice")
        t.log("CreateTopics zz-x, DeleteTopics secrets, CreatePartitions secrets: TOPIC_AUTHORIZATION_FAILED")
    finally:
        a.close()
    assert "secrets" in kp_topics(b, "admin"), "secrets deleted by alice"
    r = kp_raw(b, "alice", OffsetRequest[1](-1, [("secrets", [(0, -1)]), ("orders", [(0, -1)])]))
    codes = {tn: parts[0][1] for tn, parts in r.topics}
    assert codes == {"secrets": TOPIC_AUTHZ, "orders": 0}, f"ListOffsets as alice: {codes}"
    t.log(f"ListOffsets as alice: {codes}")
    r = kp_raw(b, "alice", OffsetCommitRequest[2]("app-6", -1, "", -1, [("secrets", [(0, 0, "")]),
                                                                     ("orders", [(0, 0, "")])]))
    codes = {tn: parts[0][1] for tn, parts in r.topics}
    assert codes == {"secrets": TOPIC_AUTHZ, "orders": 0}, f"OffsetCommit app-6 as alice: {codes}"
    r = kp_raw(b, "alice", OffsetCommitRequest[2]("other-6", -1, "", -1, [("orders", [(0, 0, "")])]))
    codes = {tn: parts[0][1] for tn, parts in r.topics}
    assert codes == {"orders": GROUP_AUTHZ}, f"OffsetCommit other-6 as alice: {codes}"
    t.log("OffsetCommit: group app-6 secrets 29 / orders 0; group other-6 GROUP_AUTHORIZATION_FAILED")
    # OffsetFetch: all topics leaves out those alice may not DESCRIBE; asked for, they are refused
    r = kp_raw(b, "admin", OffsetCommitRequest[2]("app-7", -1, "", -1, [("secrets", [(0, 1, "")]),
                                                                     ("orders", [(0, 1, "")])]))
    assert {tn: parts[0][1] for tn, parts in r.topics} == {"secrets": 0, "orders": 0}, f"admin's commit: {r}"
    a = kp_admin(b, "alice")
    try:
        offs = a.list_consumer_group_offsets("app-7")
        assert sorted(tp.topic for tp in offs) == ["orders"], f"OffsetFetch app-7 (all topics) as alice: {offs}"
        kp_expect(Errors.TopicAuthorizationFailedError,
                  lambda: a.list_consumer_group_offsets("app-7", partitions=[TopicPartition("secrets", 0)]),
                  "OffsetFetch app-7 secrets-0 as alice")
        t.log("OffsetFetch app-7 as alice: all topics -> orders only; secrets-0 asked for -> TOPIC_AUTHORIZATION_FAILED")
        # AlterConfigs: ALTER_CONFIGS on the topic (ALL includes it), the cluster for broker configs
        from kafka.admin import ConfigResource, ConfigResourceType
        r = a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "secrets", {"retention.ms": "86400000"})])
        assert [x[0] for x in r.resources] == [TOPIC_AUTHZ], f"AlterConfigs secrets as alice: {r}"
        r = a.alter_configs([ConfigResource(ConfigResourceType.TOPIC, "orders", {"retention.ms": "86400000"})])
        assert [x[0] for x in r.resources] == [0], f"AlterConfigs orders as alice: {r}"
        r = a.alter_configs([ConfigResource(ConfigResourceType.BROKER, "0", {"log.retention.ms": "86400000"})])
        assert [x[0] for x in r.resources] == [CLUSTER_AUTHZ], f"AlterConfigs broker 0 as alice: {r}"
        t.log("AlterConfigs as alice: secrets 29, orders 0, broker 0 CLUSTER_AUTHORIZATION_FAILED")
    finally:
        a.close()
    create_acls(b, [acl("User:alice", O.DESCRIBE, ALLOW, C, "kafka-cluster")])
    a = kp_admin(b, "alice")
    try:
        groups = {g for g, _ in a.list_consumer_groups()}
    finally:
        a.close()
    assert {"app-5", "other-9"} <= groups, f"ListGroups as alice with DESCRIBE on the cluster: {groups}"
    t.log(f"with DESCRIBE on the cluster ListGroups shows every group: {sorted(groups)}")
    # the idempotent producer (InitProducerId: IDEMPOTENT_WRITE on the cluster, or WRITE on a topic)
    p = Producer(ck_conf(b, "alice", **{"enable.idempotence": True, "acks": "all", "message.timeout.ms": 15000}))
    errs = []
    p.produce("orders", value=b"idem", on_delivery=lambda e, m: errs.append(e))
    p.flush(20)
    assert errs == [None], f"idempotent confluent producer as alice: {errs}"
    t.log("idempotent producer as alice (WRITE on a topic, no IDEMPOTENT_WRITE): ok")
    b.stop()


def skiff_acl(t, b, *args):
    p = subprocess.run([t.skiff, "acl", *args, "-b", b.bootstrap], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=60)
    return p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")


def test_skiff_acl_cli(t):
    """`skiff acl add|list|rm` (CreateAcls, DescribeAcls, DeleteAcls through the project's own
    client) manages the ACLs the broker enforces: alice gets a topic, loses it again."""
    b = acl_broker(t)
    create_topics(b, ["cli-orders"])
    assert "cli-orders" not in kp_topics(b, "alice"), "alice sees cli-orders before any ACL"
    rc, out, err = skiff_acl(t, b, "add", "--allow", "User:alice", "--operation", "read", "--operation", "Describe",
                             "--topic", "cli-orders")
    assert rc == 0 and out.count("added:") == 2, f"skiff acl add: exit {rc}: {out}{err}"
    rc, out, err = skiff_acl(t, b, "add", "--deny", "User:bob", "--operation", "all", "--topic", "cli-", "--prefixed")
    assert rc == 0, f"skiff acl add --prefixed: exit {rc}: {err}"
    rc, out, err = skiff_acl(t, b, "list", "--json")
    got = sorted((a["principal"], a["permission"], a["operation"], a["resource_type"], a["resource_name"],
                  a["pattern_type"], a["host"]) for a in json.loads(out))
    want = sorted([("User:alice", "Allow", "Read", "Topic", "cli-orders", "Literal", "*"),
                   ("User:alice", "Allow", "Describe", "Topic", "cli-orders", "Literal", "*"),
                   ("User:bob", "Deny", "All", "Topic", "cli-", "Prefixed", "*")])
    assert got == want, f"skiff acl list --json: {got}, want {want}"
    rc, out, _ = skiff_acl(t, b, "list", "--principal", "User:bob", "--json")
    assert [a["principal"] for a in json.loads(out)] == ["User:bob"], out
    assert "cli-orders" in kp_topics(b, "alice"), "alice does not see cli-orders after skiff acl add"
    t.log("skiff acl add/list: 3 ACLs, exactly as asked; alice now sees cli-orders")
    # Bad input: a principal without its type, an unknown operation, no resource.
    rc, _, err = skiff_acl(t, b, "add", "--allow", "alice", "--operation", "read", "--topic", "x")
    assert rc == 1 and "INVALID_REQUEST" in err, f"principal without type: exit {rc}: {err}"
    rc, _, err = skiff_acl(t, b, "add", "--allow", "User:alice", "--operation", "reed", "--topic", "x")
    assert rc == 2 and "unknown operation 'reed'" in err, f"unknown operation: exit {rc}: {err}"
    rc, _, err = skiff_acl(t, b, "add", "--allow", "User:alice", "--operation", "read")
    assert rc == 2 and "name the resource" in err, f"no resource: exit {rc}: {err}"
    rc, out, err = skiff_acl(t, b, "rm", "--allow", "User:alice", "--operation", "read", "--operation", "describe",
                             "--topic", "cli-orders")
    assert rc == 0 and "removed 2 ACLs" in out, f"skiff acl rm: exit {rc}: {out}{err}"
    rc, _, err = skiff_acl(t, b, "rm", "--allow", "User:alice", "--operation", "read", "--topic", "cli-orders")
    assert rc == 1 and "no ACL matched" in err, f"second rm: exit {rc}: {err}"
    assert "cli-orders" not in kp_topics(b, "alice"), "alice still sees cli-orders after skiff acl rm"
    t.log("skiff acl rm removed exactly the two ACLs; alice lost the topic; bad input refused with exit 1/2")


if __name__ == "__main__":
    broker.main([(test_setup, 120), (test_alice, 400), (test_bob, 150), (test_super, 150), (test_delete, 120),
                 (test_restart, 120), (test_allow_everyone, 120), (test_no_authorizer, 60),
                 (test_bad_input, 120), (test_metrics, 120), (test_auto_create, 120), (test_other_apis, 120),
                 (test_principals_hosts, 120), (test_acks0_denied, 60), (test_skiff_acl_cli, 120)])
