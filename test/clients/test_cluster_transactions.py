#!/usr/bin/python3
"""Transactions in cluster mode (docs/transactions.md, docs/cluster.md): three brokers over one
store and a real etcd on loopback, driven by confluent-kafka and raw requests.

  - FindCoordinator key type 1 names the same broker (the owner of the id's group slot) on
    every broker; ids spread over the brokers
  - a transactional producer commits and aborts transactions over partitions led by several
    brokers (markers through WriteTxnMarkers): read_committed sees each committed record once
    and nothing aborted, read_uncommitted sees everything, one marker per transaction
  - SIGKILL of the coordinator with a transaction open: the next slot owner aborts it with the
    epoch bumped, the old producer cannot commit, a new instance can
  - SIGKILL of a partition owner (not the coordinator) between produce and commit: the commit
    succeeds (or fails abortably) and read_committed agrees with the outcome
  - DescribeTransactions / ListTransactions: the coordinator answers, the others NOT_COORDINATOR

    test_cluster_transactions.py --skiff build/src/cli/skiff [--store local|s3] [-k NAME]
"""
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import broker  # noqa: E402
from ckutil import KafkaException, admin, create_topic  # noqa: E402
from test_cluster import bootstrap, find_coordinator, leaders, start_cluster  # noqa: E402
from test_transactions import (FENCING_CODES, describe_transactions, exchange,  # noqa: E402
                               high_watermarks, list_transactions, produce_txn_records, read_all,
                               s_, txn_producer, values)

FIND_COORDINATOR, NOT_COORDINATOR, TXN_KEY = 10, 16, 1


def find_txn_coordinator(b, tid):
    """FindCoordinator v1 (key type 1) asked of b: (error, node id, host, port)."""
    r = exchange(b, FIND_COORDINATOR, 1, s_(tid, False) + struct.pack(">b", TXN_KEY), False)
    r.take(">i")
    err = r.take(">h")
    r.string()
    node = r.take(">i")
    host = r.string()
    port = r.take(">i")
    return err, node, host, port


def coordinator_of(bs, tid, ask, not_node=None, timeout=20):
    """Waits until every broker in `ask` names the same coordinator for tid (other than
    not_node) without error; checks its address is that broker's; returns the Broker."""
    last = {}

    def agreed():
        for b in ask:
            last[b.name] = find_txn_coordinator(b, tid)
        answers = set(last.values())
        if len(answers) != 1:
            return None
        err, node, _, _ = next(iter(answers))
        return err == 0 and node != not_node and node
    node = broker.wait_until(agreed, timeout, f"every broker to name one coordinator for {tid}",
                             interval=0.2, describe=lambda: dict(last))
    _, _, host, port = next(iter(last.values()))
    if not 1 <= node <= len(bs) or (host, port) != ("127.0.0.1", bs[node - 1].port):
        raise AssertionError(f"FindCoordinator({tid}): node {node} at {host}:{port}, but the brokers "
                             f"are {[(i + 1, x.port) for i, x in enumerate(bs)]}")
    return bs[node - 1]


def cluster_producer(bs, tid, **conf):
    return txn_producer(bs[0], tid, **{"bootstrap.servers": bootstrap(bs), **conf})


def wait_rejoined(bs, b):
    b.start()
    broker.wait_until(lambda: len(admin(bs[0] if bs[0] is not b else bs[1]).list_topics(timeout=10).brokers)
                      == len(bs), 30, f"broker {b.name} to rejoin")


def check_once(rc, want, what):
    """rc: the values read; want: the values expected, each exactly once."""
    got = sorted(rc)
    if got != sorted(want):
        extra = sorted(set(got) - set(want))
        missing = sorted(set(want) - set(got))
        dups = sorted({v for v in got if got.count(v) > 1})
        raise AssertionError(f"{what}: read {len(got)} records, expected {len(want)}; "
                             f"unexpected {len(extra)} (e.g. {extra[:4]}), missing {len(missing)} "
                             f"(e.g. {missing[:4]}), duplicated {dups[:4]}")


# ---- tests ----

def test_find_coordinator_same_everywhere(t):
    e, bs = start_cluster(t)
    coords = {}
    for i in range(12):
        tid = f"{t.topic('fc')}-{i}"
        coords[tid] = bs.index(coordinator_of(bs, tid, bs)) + 1
        # The id's coordinator owns the group slot the same string hashes to.
        gnode, gerr = find_coordinator(bs[i % 3], tid)
        if (gnode, gerr) != (coords[tid], 0):
            raise AssertionError(f"{tid}: transaction coordinator {coords[tid]}, but FindCoordinator for "
                                 f"the group of that name answers node {gnode}, error {gerr}")
    by = sorted(set(coords.values()))
    t.log(f"12 transactional ids coordinated by brokers {by}: "
          f"{ {n: sum(1 for v in coords.values() if v == n) for n in by} } (each its group slot's owner)")
    if len(by) < 2:
        raise AssertionError(f"every transactional id has the same coordinator: {coords}")


def test_commit_abort_across_brokers(t):
    e, bs = start_cluster(t)
    topic, tid = t.topic("spread"), t.topic("spread-tx")
    create_topic(bs[0], topic, 6)
    owners = leaders(bs[0], topic)
    if len(set(owners.values())) < 2:
        raise AssertionError(f"all 6 partitions led by one broker: {owners}")
    coord = coordinator_of(bs, tid, bs)
    t.log(f"leaders {owners}; {tid} coordinated by {coord.name}")
    p = cluster_producer(bs, tid)
    p.init_transactions(30)
    n_txn, per_txn = 20, 30
    committed, aborted = [], []
    t0 = time.monotonic()
    for k in range(n_txn):
        vals = [f"tx{k:02d}-{i:02d}" for i in range(per_txn)]
        p.begin_transaction()
        for i, v in enumerate(vals):
            p.produce(topic, key=v.encode(), value=v.encode(), partition=i % 6)
        if p.flush(30):
            raise AssertionError(f"transaction {k}: records not delivered within 30 s")
        if k % 4 == 3:
            p.abort_transaction(30)
            aborted += vals
        else:
            p.commit_transaction(30)
            committed += vals
    t.log(f"{n_txn} transactions ({len(committed)} records committed, {len(aborted)} aborted) "
          f"in {time.monotonic() - t0:.1f} s")
    ends = high_watermarks(bs[0], topic, 6)
    # Each partition: 5 records of each transaction and exactly one control record (marker)
    # per transaction, committed or aborted.
    want_end = n_txn * per_txn // 6 + n_txn
    if any(ends[q] != want_end for q in range(6)):
        raise AssertionError(f"high watermarks {ends} (leaders {owners}); expected {want_end} in every "
                             f"partition: {n_txn * per_txn // 6} records and one marker per transaction")
    rc = read_all(bs[1], topic, 6, "read_committed", 60, ends=ends)
    check_once(values(rc), committed, "read_committed after 20 transactions over 6 partitions")
    ru = read_all(bs[2], topic, 6, "read_uncommitted", 60, ends=ends)
    check_once(values(ru), committed + aborted, "read_uncommitted (everything written)")
    for q in range(6):
        ks = [v.decode().split("-")[0] for (_, _, v) in ru[q]]
        if ks != sorted(ks):
            raise AssertionError(f"read_uncommitted p{q}: transactions out of order: {ks}")
    t.log(f"read_committed {sum(len(v) for v in rc.values())}, read_uncommitted "
          f"{sum(len(v) for v in ru.values())} records")


def test_coordinator_sigkill_failover(t):
    e, bs = start_cluster(t)
    topic, tid = t.topic("cfail"), t.topic("cfail-tx")
    create_topic(bs[0], topic, 6)
    coord = coordinator_of(bs, tid, bs)
    p1 = cluster_producer(bs, tid)
    p1.init_transactions(30)
    p1.begin_transaction()
    produce_txn_records(p1, topic, [f"before-{i}" for i in range(30)])
    p1.commit_transaction(30)
    p1.begin_transaction()
    produce_txn_records(p1, topic, [f"open-{i}" for i in range(30)])   # acknowledged, not committed
    d = describe_transactions(coord, [tid])[tid]
    if d["error"] != 0 or d["state"] != "Ongoing":
        raise AssertionError(f"DescribeTransactions before the kill: {d}")
    survivors = [b for b in bs if b is not coord]
    t.log(f"{tid} coordinated by {coord.name} (producer {d['pid']} epoch {d['epoch']}); SIGKILL it")
    t0 = time.monotonic()
    coord.kill()
    new = coordinator_of(bs, tid, survivors, not_node=bs.index(coord) + 1, timeout=30)
    t_moved = time.monotonic() - t0
    last = {}

    def aborted():
        last["d"] = describe_transactions(new, [tid]).get(tid)
        return last["d"] and last["d"]["error"] == 0 and last["d"]["state"] == "CompleteAbort"
    broker.wait_until(aborted, 30, f"{new.name} to abort the open transaction", interval=0.2,
                      describe=lambda: last.get("d"))
    after = last["d"]
    t.log(f"coordinator moved to {new.name} after {t_moved:.1f} s; open transaction aborted after "
          f"{time.monotonic() - t0:.1f} s: producer {after['pid']} epoch {after['epoch']}")
    if after["pid"] != d["pid"] or after["epoch"] <= d["epoch"]:
        raise AssertionError(f"after the takeover: {after}; expected producer {d['pid']} with an epoch "
                             f"above {d['epoch']}")

    deadline = time.monotonic() + 40
    while True:
        try:
            p1.commit_transaction(20)
        except KafkaException as ex:
            err = ex.args[0]
            if err.retriable() and not err.fatal() and not err.txn_requires_abort() \
                    and time.monotonic() < deadline:
                continue
            if not (err.fatal() or err.txn_requires_abort()):
                raise AssertionError(f"the old producer's commit failed with {err.name()}, neither "
                                     "fatal (fenced) nor abortable")
            t.log(f"old producer's commit: {err.name()} (fatal={err.fatal()}, "
                  f"abortable={err.txn_requires_abort()}, fencing code={err.code() in FENCING_CODES})")
            break
        raise AssertionError("the old producer committed the transaction the new coordinator aborted")

    p2 = cluster_producer(bs, tid)
    p2.init_transactions(30)
    p2.begin_transaction()
    produce_txn_records(p2, topic, [f"after-{i}" for i in range(30)])
    p2.commit_transaction(30)
    rc = values(read_all(survivors[0], topic, 6, "read_committed", 30))
    check_once(rc, [f"before-{i}" for i in range(30)] + [f"after-{i}" for i in range(30)],
               "read_committed after the coordinator's failover")
    ru = values(read_all(survivors[1], topic, 6, "read_uncommitted", 30))
    if sum(v.startswith("open-") for v in ru) != 30:
        raise AssertionError(f"read_uncommitted shows {sum(v.startswith('open-') for v in ru)} of the 30 "
                             "acknowledged records of the aborted transaction")
    wait_rejoined(bs, coord)


def test_partition_owner_sigkill_before_commit(t):
    e, bs = start_cluster(t)
    tid = t.topic("pfail-tx")
    coord = coordinator_of(bs, tid, bs)
    cid = bs.index(coord) + 1
    for _ in range(4):   # a topic with partitions led by a broker other than the coordinator
        topic = t.topic("pfail")
        create_topic(bs[0], topic, 6)
        owners = leaders(bs[0], topic)
        others = [n for n in set(owners.values()) if n != cid]
        if others:
            break
    else:
        raise AssertionError(f"four topics of 6 partitions all led by the coordinator {cid}")
    victim_id = max(others, key=lambda n: sum(1 for v in owners.values() if v == n))
    victim = bs[victim_id - 1]
    p = cluster_producer(bs, tid)
    p.init_transactions(30)
    p.begin_transaction()
    produce_txn_records(p, topic, [f"before-{i}" for i in range(30)])
    p.commit_transaction(30)
    p.begin_transaction()
    produce_txn_records(p, topic, [f"mid-{i}" for i in range(30)])
    t.log(f"coordinator {coord.name}; SIGKILL {victim.name}, leader of partitions "
          f"{sorted(q for q, n in owners.items() if n == victim_id)}, before the commit")
    victim.kill()
    t0 = time.monotonic()
    deadline = t0 + 60
    committed = None
    while committed is None:
        try:
            p.commit_transaction(30)
            committed = True
        except KafkaException as ex:
            err = ex.args[0]
            if err.fatal():
                raise AssertionError(f"commit after a partition owner's SIGKILL: fatal {err.name()} ({err})")
            if err.txn_requires_abort():
                t.log(f"commit failed abortably: {err.name()}; aborting")
                p.abort_transaction(60)
                committed = False
            elif time.monotonic() > deadline:
                raise AssertionError(f"commit still failing 60 s after the kill: {err.name()} ({err})")
            else:
                t.log(f"commit: retriable {err.name()}; retrying")
    t.log(f"transaction {'committed' if committed else 'aborted'} {time.monotonic() - t0:.1f} s after the kill")
    p.begin_transaction()
    produce_txn_records(p, topic, [f"after-{i}" for i in range(30)])
    p.commit_transaction(60)
    want = [f"{w}-{i}" for w in ("before", "after") + (("mid",) if committed else ()) for i in range(30)]
    check_once(values(read_all(coord, topic, 6, "read_committed", 40)), want,
               f"read_committed after the {'commit' if committed else 'abort'} across the owner's SIGKILL")
    ru = values(read_all(coord, topic, 6, "read_uncommitted", 40))
    if sum(v.startswith("mid-") for v in ru) != 30:
        raise AssertionError(f"read_uncommitted shows {sum(v.startswith('mid-') for v in ru)} of the 30 "
                             "acknowledged records of the transaction open at the kill")
    wait_rejoined(bs, victim)


def test_describe_on_coordinator_only(t):
    e, bs = start_cluster(t)
    topic, tid = t.topic("desc"), t.topic("desc-tx")
    create_topic(bs[0], topic, 3)
    coord = coordinator_of(bs, tid, bs)
    others = [b for b in bs if b is not coord]
    p = cluster_producer(bs, tid, **{"transaction.timeout.ms": 45000})
    p.init_transactions(30)
    p.begin_transaction()
    produce_txn_records(p, topic, ["a"], partition=0)
    produce_txn_records(p, topic, ["b"], partition=2)
    d = describe_transactions(coord, [tid])[tid]
    if d["error"] != 0 or d["state"] != "Ongoing" or d["partitions"] != {topic: [0, 2]} \
            or d["timeout_ms"] != 45000 or d["pid"] < 0:
        raise AssertionError(f"DescribeTransactions on the coordinator {coord.name}: {d}; expected Ongoing, "
                             f"timeout 45000, partitions {{{topic}: [0, 2]}}")
    mine = [x for x in list_transactions(coord) if x[0] == tid]
    if mine != [(tid, d["pid"], "Ongoing")]:
        raise AssertionError(f"ListTransactions on the coordinator: {mine}")
    for o in others:
        od = describe_transactions(o, [tid]).get(tid)
        if od is None or od["error"] != NOT_COORDINATOR:
            raise AssertionError(f"DescribeTransactions({tid}) on {o.name} (not its coordinator): {od}; "
                                 f"expected NOT_COORDINATOR ({NOT_COORDINATOR})")
        # Kafka's admin client asks every broker and concatenates: only the coordinator lists it.
        if any(x[0] == tid for x in list_transactions(o)):
            raise AssertionError(f"ListTransactions on {o.name}, not the coordinator, lists {tid}")
    p.commit_transaction(30)
    d = describe_transactions(coord, [tid])[tid]
    if d["state"] != "CompleteCommit" or d["partitions"]:
        raise AssertionError(f"DescribeTransactions after the commit: {d}")
    codes = {o.name: describe_transactions(o, [tid]).get(tid, {}).get("error") for o in others}
    if set(codes.values()) != {NOT_COORDINATOR}:
        raise AssertionError(f"DescribeTransactions on the other brokers after the commit: {codes}")
    t.log(f"{tid}: coordinator {coord.name} describes it; {sorted(codes)} answer NOT_COORDINATOR")


if __name__ == "__main__":
    broker.main([(test_find_coordinator_same_everywhere, 60), (test_commit_abort_across_brokers, 120),
                 (test_coordinator_sigkill_failover, 150), (test_partition_owner_sigkill_before_commit, 150),
                 (test_describe_on_coordinator_only, 60)])
