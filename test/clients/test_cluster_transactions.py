#!/usr/bin/python3
"""Transactions in cluster mode (docs/transactions.md, docs/cluster.md): three brokers over one
store and a real etcd on loopback, driven by confluent-kafka and raw requests.

  - FindCoordinator key type 1 names the same broker (the owner of the id's group slot) on
    every broker; ids spread over the brokers
  - a transactional producer commits and aborts transactions over partitions led by several
    brokers (markers through WriteTxnMarkers): read_committed sees each committed record once
    and nothing aborted, read_uncommitted sees everything, one marker per transaction
  - SIGKILL of the coordinator (also a leader of the transaction's partitions) with a
    transaction open: the next slot owner keeps it (as Kafka does), the producer aborts it and
    commits the next one without being fenced; restarted, the broker gets the slot and its
    partitions back (clean hand-overs) with the id's state and the aborted ranges intact (an
    aborted transaction whose first record is below a takeover gap and whose marker is above)
  - SIGKILL of a partition owner (not the coordinator) between produce and commit: the commit
    succeeds (or fails abortably) and read_committed agrees with the outcome, also after the
    owner's restart
  - consume-transform-produce with the group and the id coordinated by different brokers: the
    offsets pass from the group's broker to the id's and are applied at the group's on commit
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


def topic_where(t, bs, base, ok, what):
    """A new 6-partition topic whose leaders satisfy ok(leaders) (placement is a hash of the
    name: a few tries); returns (topic, leaders)."""
    for _ in range(5):
        topic = t.topic(base)
        create_topic(bs[0], topic, 6)
        owners = leaders(bs[0], topic)
        if ok(owners):
            return topic, owners
    raise AssertionError(f"five topics of 6 partitions, none with {what}: last leaders {owners}")


def spread(p, topic, word, n=30):
    """n transactional records word-0.. over the 6 partitions (i % 6), flushed and acknowledged."""
    failed = []
    for i in range(n):
        p.produce(topic, key=f"{word}-{i}".encode(), value=f"{word}-{i}".encode(), partition=i % 6,
                  on_delivery=lambda err, m: failed.append(err) if err is not None else None)
        p.poll(0)
    if p.flush(30) or failed:
        raise AssertionError(f"{word}-* records not all delivered within 30 s: {failed[:3]}")


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


def stop_all(t, bs):
    """SIGTERM every broker and check each exits 0: a clean leave (slots and their coordinators
    handed over, peer connections closed), and under the sanitizers no report (a report aborts)."""
    for b in bs:
        b.stop(timeout=60)
    t.log("every broker left cleanly")


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
    tid = t.topic("spread-tx")
    topic, owners = topic_where(t, bs, "spread", lambda o: len(set(o.values())) >= 2, "two leaders")
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
    stop_all(t, bs)


def test_coordinator_sigkill_failover(t):
    e, bs = start_cluster(t)
    tid = t.topic("cfail-tx")
    coord = coordinator_of(bs, tid, bs)
    cid = bs.index(coord) + 1
    # The coordinator leads partitions of the transaction too: they move with the kill.
    topic, owners = topic_where(t, bs, "cfail", lambda o: cid in o.values(), f"a partition led by {cid}")
    p1 = cluster_producer(bs, tid)
    p1.init_transactions(30)
    p1.begin_transaction()
    spread(p1, topic, "before")
    p1.commit_transaction(30)
    p1.begin_transaction()
    spread(p1, topic, "open")   # acknowledged, not committed
    d = describe_transactions(coord, [tid])[tid]
    if d["error"] != 0 or d["state"] != "Ongoing":
        raise AssertionError(f"DescribeTransactions before the kill: {d}")
    survivors = [b for b in bs if b is not coord]
    t.log(f"{tid} coordinated by {coord.name} (producer {d['pid']} epoch {d['epoch']}), leader of "
          f"partitions {sorted(q for q, n in owners.items() if n == cid)}; SIGKILL it")
    t0 = time.monotonic()
    coord.kill()
    new = coordinator_of(bs, tid, survivors, not_node=bs.index(coord) + 1, timeout=30)
    t_moved = time.monotonic() - t0
    last = {}

    def taken_over():
        last["d"] = describe_transactions(new, [tid]).get(tid)
        return last["d"] and last["d"]["error"] == 0 and last["d"]
    after = broker.wait_until(taken_over, 30, f"{new.name} to load the id", interval=0.2,
                              describe=lambda: last.get("d"))
    t.log(f"coordinator moved to {new.name} after {t_moved:.1f} s: {after['state']} producer {after['pid']} "
          f"epoch {after['epoch']}")
    # Kept, as Kafka keeps it when the coordinator moves: same producer, same epoch, still open.
    if (after["state"], after["pid"], after["epoch"]) != ("Ongoing", d["pid"], d["epoch"]):
        raise AssertionError(f"after the takeover: {after}; expected the open transaction kept: {d}")

    # The producer goes on: it aborts its open transaction itself (the markers land on the new
    # owners of the killed broker's partitions, above their takeover gap), then commits another.
    t1 = time.monotonic()
    p1.abort_transaction(60)
    t.log(f"the old producer aborted its open transaction {time.monotonic() - t1:.1f} s after the takeover")
    p1.begin_transaction()
    spread(p1, topic, "after")
    p1.commit_transaction(60)
    rc = values(read_all(survivors[0], topic, 6, "read_committed", 30))
    check_once(rc, [f"before-{i}" for i in range(30)] + [f"after-{i}" for i in range(30)],
               "read_committed after the coordinator's failover")
    ru = values(read_all(survivors[1], topic, 6, "read_uncommitted", 30))
    if sum(v.startswith("open-") for v in ru) != 30:
        raise AssertionError(f"read_uncommitted shows {sum(v.startswith('open-') for v in ru)} of the 30 "
                             "acknowledged records of the aborted transaction")
    p2 = p1

    # The restarted broker is again the slot's preferred (rendezvous) owner: the slot moves back
    # (a clean hand-over) with the id's state, and the new instance goes on committing.
    d2 = describe_transactions(new, [tid])[tid]
    wait_rejoined(bs, coord)
    t1 = time.monotonic()
    home = (0, bs.index(coord) + 1)
    broker.wait_until(lambda: {find_txn_coordinator(b, tid)[:2] for b in bs} == {home}, 30,
                      f"the coordination of {tid} to return to the restarted {coord.name}", interval=0.2,
                      describe=lambda: {b.name: find_txn_coordinator(b, tid)[:2] for b in bs})
    # COORDINATOR_LOAD_IN_PROGRESS (14) until the slot's states are loaded.
    seen = {}

    def loaded():
        seen["d"] = describe_transactions(coord, [tid])[tid]
        return seen["d"]["error"] != 14 and seen["d"]
    d3 = broker.wait_until(loaded, 30, f"{coord.name} to load the id", interval=0.1, describe=lambda: seen.get("d"))
    t.log(f"{tid} back on {coord.name} {time.monotonic() - t1:.1f} s after its restart: {d3['state']} "
          f"producer {d3['pid']} epoch {d3['epoch']}")
    if (d3["error"], d3["state"], d3["pid"], d3["epoch"]) != (0, "CompleteCommit", d2["pid"], d2["epoch"]):
        raise AssertionError(f"DescribeTransactions after the slot moved back: {d3}; before: {d2}")
    p2.begin_transaction()
    spread(p2, topic, "again")
    p2.commit_transaction(30)
    ends = high_watermarks(coord, topic, 6)
    rcp = read_all(coord, topic, 6, "read_committed", 30, ends=ends)
    # The killed broker's partitions came back to it too (after an unclean takeover, whose new
    # owner continued their offsets after a gap): their aborted ranges must survive the restore.
    leaked = {q: [(o, v.decode()) for (o, _, v) in rcp[q] if v.startswith(b"open-")] for q in range(6)}
    if any(leaked.values()):
        raise AssertionError(f"read_committed after the killed broker's partitions moved back to it shows "
                             f"records of the aborted transaction: { {q: v for q, v in leaked.items() if v} }; "
                             f"leaders {leaders(coord, topic)}, high watermarks {ends}")
    check_once(values(rcp), [f"{w}-{i}" for w in ("before", "after", "again") for i in range(30)],
               "read_committed after the slot and the partitions moved back")


def test_partition_owner_sigkill_before_commit(t):
    e, bs = start_cluster(t)
    tid = t.topic("pfail-tx")
    coord = coordinator_of(bs, tid, bs)
    cid = bs.index(coord) + 1
    topic, owners = topic_where(t, bs, "pfail", lambda o: set(o.values()) - {cid},
                                f"a partition led by a broker other than the coordinator {cid}")
    others = [n for n in set(owners.values()) if n != cid]
    victim_id = max(others, key=lambda n: sum(1 for v in owners.values() if v == n))
    victim = bs[victim_id - 1]
    p = cluster_producer(bs, tid)
    p.init_transactions(30)
    p.begin_transaction()
    spread(p, topic, "before")
    p.commit_transaction(30)
    p.begin_transaction()
    spread(p, topic, "mid")
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
    spread(p, topic, "after")
    p.commit_transaction(60)
    want = [f"{w}-{i}" for w in ("before", "after") + (("mid",) if committed else ()) for i in range(30)]
    check_once(values(read_all(coord, topic, 6, "read_committed", 40)), want,
               f"read_committed after the {'commit' if committed else 'abort'} across the owner's SIGKILL")
    ru = values(read_all(coord, topic, 6, "read_uncommitted", 40))
    if sum(v.startswith("mid-") for v in ru) != 30:
        raise AssertionError(f"read_uncommitted shows {sum(v.startswith('mid-') for v in ru)} of the 30 "
                             "acknowledged records of the transaction open at the kill")
    # Restarted, the victim gets its partitions back (clean hand-overs); transactions go on.
    wait_rejoined(bs, victim)
    broker.wait_until(lambda: leaders(coord, topic) == owners, 30, "the partitions to return to their owners",
                      interval=0.2, describe=lambda: leaders(coord, topic))
    p.begin_transaction()
    spread(p, topic, "final")
    p.commit_transaction(30)
    check_once(values(read_all(coord, topic, 6, "read_committed", 40)), want + [f"final-{i}" for i in range(30)],
               "read_committed after the partitions moved back")


def test_offsets_across_coordinators(t):
    """send_offsets_to_transaction when the group's coordinator and the id's are different
    brokers: TxnOffsetCommit reaches the group's broker, which passes it to the id's; the commit
    applies the offsets at the group's broker; an aborted transaction's offsets are not applied."""
    from ckutil import Consumer, TopicPartition  # noqa: E402
    from test_cluster import find_coordinator  # noqa: E402
    from test_transactions import group_consumer  # noqa: E402
    e, bs = start_cluster(t)
    src, dst = t.topic("ctp-in"), t.topic("ctp-out")
    create_topic(bs[0], src, 3)
    create_topic(bs[0], dst, 3)
    for k in range(40):   # names hash to slots: find a pair coordinated by different brokers
        tid, group = t.topic(f"ctp-tx{k}"), t.topic(f"ctp-g{k}")
        txn_node = coordinator_of(bs, tid, bs[:1])
        g_node, err = find_coordinator(bs[0], group)
        if err == 0 and g_node != bs.index(txn_node) + 1:
            break
    else:
        raise AssertionError("40 (id, group) pairs, all coordinated by one broker")
    t.log(f"{tid} coordinated by {txn_node.name}, group {group} by broker {g_node}")
    from confluent_kafka import Producer  # noqa: E402
    plain = Producer({"bootstrap.servers": bootstrap(bs)})
    for i in range(300):
        plain.produce(src, value=b"in-%d" % i, partition=i % 3)
    if plain.flush(30):
        raise AssertionError("input not delivered")
    p = cluster_producer(bs, tid)
    p.init_transactions(30)
    c = group_consumer(bs[0], group, **{"bootstrap.servers": bootstrap(bs)})
    c.subscribe([src])
    moved, rounds, aborted = 0, 0, 0
    deadline = time.monotonic() + 60
    while moved < 300 and time.monotonic() < deadline:
        msgs = [m for m in c.consume(60, 1.0) if not m.error()]
        if not msgs:
            continue
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, value=m.value(), partition=m.partition())
        p.send_offsets_to_transaction(c.position(c.assignment()), c.consumer_group_metadata(), 30)
        rounds += 1
        if rounds == 2:
            # Aborted: neither its records nor its offsets count; the consumer re-reads them.
            p.abort_transaction(30)
            aborted += len(msgs)
            for tp in c.committed(c.assignment(), timeout=10):
                c.seek(TopicPartition(src, tp.partition, tp.offset if tp.offset >= 0 else 0))
            continue
        p.commit_transaction(30)
        moved += len(msgs)
    c.close()
    if moved != 300:
        raise AssertionError(f"moved {moved} of 300 records in 60 s")
    check = Consumer({"bootstrap.servers": bootstrap(bs), "group.id": group})
    committed = {tp.partition: tp.offset for tp in check.committed([TopicPartition(src, q) for q in range(3)],
                                                                   timeout=10)}
    check.close()
    if committed != {0: 100, 1: 100, 2: 100}:
        raise AssertionError(f"the group's committed offsets: {committed}, expected 100 on each partition")
    rc = values(read_all(bs[1], dst, 3, "read_committed", 30))
    check_once(rc, [f"in-{i}" for i in range(300)], "read_committed of the output")
    t.log(f"{rounds} transactions ({aborted} records in the aborted one); offsets {committed}")
    stop_all(t, bs)


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
                 (test_offsets_across_coordinators, 120),
                 (test_describe_on_coordinator_only, 60)])
