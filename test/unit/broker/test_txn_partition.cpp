// The partition side of Kafka transactions (KIP-98): the end-transaction marker batch pinned
// byte for byte against Kafka's layout, reading markers back from good and bad bytes, the
// per-partition transaction tracker (open transactions, LSO, aborted list) and the
// read_committed cut of a fetch's record set.
#include "txn/control_batch.hpp"
#include "txn/partition_txns.hpp"

#include <skiff/core/crc32c.hpp>
#include <skiff/core/endian.hpp>

#include <catch2/catch.hpp>

#include <limits>
#include <string>
#include <vector>

using namespace skiff;
using namespace skiff::broker::txn;
namespace st = skiff::storage;

namespace {

constexpr std::int64_t ts = 1'700'000'000'000;
constexpr std::int64_t none_unstable = std::numeric_limits<std::int64_t>::max();

std::span<const char> span_of(const std::string& s) { return {s.data(), s.size()}; }

// Kafka's EndTransactionMarker batch for producer 4242, epoch 3, coordinator epoch 7 at
// `ts`, written out field by field from the v2 format (DefaultRecordBatch / DefaultRecord);
// the CRC was computed independently (a bitwise CRC-32C in Python), not by skiff.
std::string golden_marker(bool commit) {
    std::string b;
    b += std::string("\x00\x00\x00\x00\x00\x00\x00\x00", 8); // baseOffset 0
    b += std::string("\x00\x00\x00\x42", 4);                 // batchLength 66
    b += std::string("\xff\xff\xff\xff", 4);                 // partitionLeaderEpoch -1
    b += std::string("\x02", 1);                             // magic 2
    b += commit ? std::string("\xa1\x75\x69\x80", 4) : std::string("\x55\x4b\xbf\xc8", 4); // crc
    b += std::string("\x00\x30", 2);                         // attributes: transactional | control
    b += std::string("\x00\x00\x00\x00", 4);                 // lastOffsetDelta 0
    b += std::string("\x00\x00\x01\x8b\xcf\xe5\x68\x00", 8); // baseTimestamp
    b += std::string("\x00\x00\x01\x8b\xcf\xe5\x68\x00", 8); // maxTimestamp
    b += std::string("\x00\x00\x00\x00\x00\x00\x10\x92", 8); // producerId 4242
    b += std::string("\x00\x03", 2);                         // producerEpoch 3
    b += std::string("\xff\xff\xff\xff", 4);                 // baseSequence -1
    b += std::string("\x00\x00\x00\x01", 4);                 // 1 record
    b += std::string("\x20", 1);                             // record length 16 (zig-zag)
    b += std::string("\x00", 1);                             // record attributes
    b += std::string("\x00", 1);                             // timestampDelta 0
    b += std::string("\x00", 1);                             // offsetDelta 0
    b += std::string("\x08", 1);                             // key length 4
    b += commit ? std::string("\x00\x00\x00\x01", 4) : std::string("\x00\x00\x00\x00", 4); // key
    b += std::string("\x0c", 1);                             // value length 6
    b += std::string("\x00\x00\x00\x00\x00\x07", 6);         // value: version 0, epoch 7
    b += std::string("\x00", 1);                             // no headers
    return b;
}

st::batch_view parse(const std::string& bytes) {
    auto b = st::parse_batch(span_of(bytes));
    REQUIRE(b);
    return *b;
}

// A transactional (or, with transactional = false, idempotent) data batch of `count`
// records at `base`.
std::string data_batch(std::int64_t pid, std::int64_t base, int count, bool transactional = true) {
    std::vector<st::record> recs;
    for (int i = 0; i < count; ++i) recs.emplace_back("v" + std::to_string(i));
    st::batch_options o;
    o.attributes = transactional ? st::attr_transactional : std::int16_t{0};
    o.base_timestamp = ts;
    o.producer_id = pid;
    o.producer_epoch = 0;
    o.base_sequence = 0;
    return st::build_batch(base, recs, o);
}

std::string marker_at(std::int64_t pid, std::int64_t offset, marker_type type) {
    auto m = make_control_batch(pid, 0, type, 1, ts);
    st::set_base_offset(std::span<char>(m.data(), m.size()), offset);
    return m;
}

// A batch with the given attributes whose records section is `raw` (CRC correct).
std::string raw_batch(std::int16_t attributes, std::string raw, std::int32_t count, std::int64_t pid = 4242) {
    st::batch_options o;
    o.attributes = attributes;
    o.base_timestamp = ts;
    o.producer_id = pid;
    o.producer_epoch = 0;
    o.raw_records = std::move(raw);
    o.record_count = count;
    o.last_offset_delta = 0;
    return st::build_batch(0, {}, o);
}

// One control record with the given key and value bytes, framed as DefaultRecord does.
std::string control_record_bytes(std::optional<std::string> key, std::optional<std::string> value) {
    std::string rec;
    rec.push_back('\0');
    varint::append_varlong(rec, 0);
    varint::append_varint(rec, 0);
    for (const auto* f : {&key, &value}) {
        if (!*f) {
            varint::append_varint(rec, -1);
            continue;
        }
        varint::append_varint(rec, static_cast<std::int32_t>((*f)->size()));
        rec += **f;
    }
    varint::append_varint(rec, 0);
    std::string out;
    varint::append_varint(out, static_cast<std::int32_t>(rec.size()));
    return out + rec;
}

std::string i16s(std::int16_t a, std::int16_t b) {
    std::string s;
    be::append_i16(s, a);
    be::append_i16(s, b);
    return s;
}

std::string value_bytes(std::int16_t version, std::int32_t epoch) {
    std::string s;
    be::append_i16(s, version);
    be::append_i32(s, epoch);
    return s;
}

void feed(partition_txns& t, const std::string& bytes) { t.on_batch(parse(bytes)); }

} // namespace

// ---- control batches ----------------------------------------------------------------------

TEST_CASE("control batch: Kafka's EndTransactionMarker bytes exactly", "[broker][txn]") {
    CHECK(make_control_batch(4242, 3, marker_type::commit, 7, ts) == golden_marker(true));
    CHECK(make_control_batch(4242, 3, marker_type::abort, 7, ts) == golden_marker(false));
}

TEST_CASE("control batch: parses back with CRC verification, every field", "[broker][txn]") {
    const auto bytes = make_control_batch(4242, 3, marker_type::commit, 7, ts);
    auto parsed = st::parse_batch(span_of(bytes), /*verify_crc=*/true);
    REQUIRE(parsed);
    const auto& b = *parsed;
    CHECK(b.size() == bytes.size());
    CHECK(b.base_offset == 0);
    CHECK(b.magic == 2);
    CHECK(b.partition_leader_epoch == -1);
    CHECK(b.attributes == 0x30);
    CHECK(b.is_control());
    CHECK(b.is_transactional());
    CHECK_FALSE(b.is_compressed());
    CHECK_FALSE(b.log_append_time());
    CHECK(b.last_offset_delta == 0);
    CHECK(b.base_timestamp == ts);
    CHECK(b.max_timestamp == ts);
    CHECK(b.producer_id == 4242);
    CHECK(b.producer_epoch == 3);
    CHECK(b.base_sequence == -1);
    CHECK(b.record_count == 1);
    CHECK(b.count_matches_offsets());
    CHECK(b.crc == crc32c(bytes.data() + st::batch_field::attributes, bytes.size() - st::batch_field::attributes));

    auto recs = st::parse_records(b);
    REQUIRE(recs);
    REQUIRE(recs->size() == 1);
    const auto& r = recs->front();
    CHECK(r.attributes == 0);
    CHECK(r.timestamp_delta == 0);
    CHECK(r.offset_delta == 0);
    REQUIRE(r.key);
    CHECK(*r.key == std::string_view("\x00\x00\x00\x01", 4));
    REQUIRE(r.value);
    CHECK(*r.value == std::string_view("\x00\x00\x00\x00\x00\x07", 6));
    CHECK(r.headers.empty());
}

TEST_CASE("control batch: split_batches takes markers among data; the log's offsets keep the CRC",
          "[broker][txn]") {
    auto set = data_batch(9, 0, 3) + marker_at(9, 3, marker_type::abort) + data_batch(9, 4, 2) +
               marker_at(9, 6, marker_type::commit);
    auto batches = st::split_batches(span_of(set));
    REQUIRE(batches);
    REQUIRE(batches->size() == 4);
    CHECK_FALSE((*batches)[0].is_control());
    CHECK((*batches)[1].is_control());
    CHECK((*batches)[1].base_offset == 3);
    CHECK((*batches)[3].base_offset == 6);
    CHECK((*batches)[3].last_offset() == 6);

    auto m1 = read_control_batch((*batches)[1]);
    REQUIRE(m1);
    CHECK(m1->type == marker_type::abort);
    CHECK(m1->coordinator_epoch == 1);
    auto m3 = read_control_batch((*batches)[3]);
    REQUIRE(m3);
    CHECK(m3->type == marker_type::commit);

    // A leader stamping its epoch (outside the CRC) leaves the batch valid.
    auto m = make_control_batch(1, 0, marker_type::commit, 0, ts);
    st::set_partition_leader_epoch(std::span<char>(m.data(), m.size()), 12);
    auto stamped = st::parse_batch(span_of(m), true);
    REQUIRE(stamped);
    CHECK(stamped->partition_leader_epoch == 12);
}

TEST_CASE("read_control_batch: commit and abort, coordinator epochs", "[broker][txn]") {
    for (std::int32_t epoch : {0, 7, -1, std::numeric_limits<std::int32_t>::max()}) {
        const auto c = make_control_batch(1, 2, marker_type::commit, epoch, ts);
        auto rc = read_control_batch(parse(c));
        REQUIRE(rc);
        CHECK(rc->type == marker_type::commit);
        CHECK(rc->coordinator_epoch == epoch);
        const auto a = make_control_batch(1, 2, marker_type::abort, epoch, ts);
        auto ra = read_control_batch(parse(a));
        REQUIRE(ra);
        CHECK(ra->type == marker_type::abort);
        CHECK(ra->coordinator_epoch == epoch);
    }
}

TEST_CASE("read_control_batch: not a marker", "[broker][txn]") {
    // Data batches, even transactional ones whose record looks exactly like a marker.
    CHECK_FALSE(read_control_batch(parse(data_batch(1, 0, 1))));
    CHECK_FALSE(read_control_batch(parse(data_batch(1, 0, 1, false))));
    const auto lookalike = control_record_bytes(i16s(0, 1), value_bytes(0, 7));
    CHECK_FALSE(read_control_batch(parse(raw_batch(st::attr_transactional, lookalike, 1))));
    // Other control types (2 = leader change, 3 = snapshot header) and unknown ones.
    for (std::int16_t type : {2, 3, 4, -1, 99}) {
        const auto b = raw_batch(st::attr_control, control_record_bytes(i16s(0, type), value_bytes(0, 7)), 1, -1);
        CHECK_FALSE(read_control_batch(parse(b)));
    }
    // The same record in a control batch is a marker, with or without the transactional bit.
    auto plain_control = read_control_batch(parse(raw_batch(st::attr_control, lookalike, 1)));
    REQUIRE(plain_control);
    CHECK(plain_control->type == marker_type::commit);
}

TEST_CASE("read_control_batch: newer key/value versions read as version 0", "[broker][txn]") {
    const auto key = i16s(1, 0) + std::string("xx");
    const auto value = value_bytes(5, 42) + std::string("more fields");
    auto m = read_control_batch(parse(raw_batch(0x30, control_record_bytes(key, value), 1)));
    REQUIRE(m);
    CHECK(m->type == marker_type::abort);
    CHECK(m->coordinator_epoch == 42);
}

TEST_CASE("read_control_batch: malformed records give nullopt", "[broker][txn]") {
    const auto good = control_record_bytes(i16s(0, 1), value_bytes(0, 7));
    REQUIRE(read_control_batch(parse(raw_batch(0x30, good, 1))));

    std::vector<std::pair<const char*, std::string>> bad = {
        {"key too short", control_record_bytes(std::string("\x00\x00\x01", 3), value_bytes(0, 7))},
        {"value too short", control_record_bytes(i16s(0, 1), std::string("\x00\x00\x00\x00\x07", 5))},
        {"null key", control_record_bytes(std::nullopt, value_bytes(0, 7))},
        {"null value", control_record_bytes(i16s(0, 1), std::nullopt)},
        {"negative key version", control_record_bytes(i16s(-1, 1), value_bytes(0, 7))},
        {"negative value version", control_record_bytes(i16s(0, 1), value_bytes(-3, 7))},
        {"record length past the end", std::string("\x40", 1) + good.substr(1)},
        {"varint overflow", std::string("\xff\xff\xff\xff\xff\xff\xff", 7)},
        {"garbage", std::string("\x07garbage!garbage!")},
        {"bytes after the record", good + std::string("\x00", 1)},
    };
    for (const auto& c : bad) {
        INFO(c.first);
        CHECK_FALSE(read_control_batch(parse(raw_batch(0x30, c.second, 1))));
    }
    // Every strict prefix of the good record.
    for (std::size_t n = 0; n < good.size(); ++n) {
        INFO("prefix " << n);
        CHECK_FALSE(read_control_batch(parse(raw_batch(0x30, good.substr(0, n), 1))));
    }
    // An empty control batch (compaction removed its transaction) and a count the bytes lack.
    CHECK_FALSE(read_control_batch(parse(raw_batch(0x30, "", 0))));
    CHECK_FALSE(read_control_batch(parse(raw_batch(0x30, good, 2))));
    // Labelled compressed: never decoded.
    CHECK_FALSE(read_control_batch(parse(raw_batch(0x30 | 0x01, good, 1))));
    // Views that never came from parse_batch.
    st::batch_view empty;
    empty.attributes = 0x30;
    empty.record_count = 1;
    CHECK_FALSE(read_control_batch(empty));
    const auto whole = make_control_batch(1, 0, marker_type::commit, 0, ts);
    st::batch_view short_view = parse(whole);
    short_view.bytes = short_view.bytes.first(st::batch_header_size - 1);
    CHECK_FALSE(read_control_batch(short_view));
}

TEST_CASE("read_control_batch: any single corrupted record byte is handled", "[broker][txn]") {
    const auto good = make_control_batch(4242, 3, marker_type::commit, 7, ts);
    std::size_t markers = 0;
    for (std::size_t i = st::batch_header_size; i < good.size(); ++i) {
        for (unsigned char v : {0x00, 0x01, 0x7f, 0x80, 0xff}) {
            auto bytes = good;
            bytes[i] = static_cast<char>(v);
            auto b = st::parse_batch(span_of(bytes), /*verify_crc=*/false);
            REQUIRE(b);
            auto m = read_control_batch(*b);
            if (m) {
                ++markers;
                CHECK((m->type == marker_type::commit || m->type == marker_type::abort));
            }
        }
    }
    // Corrupting the type byte to 0 still reads (as an abort); most corruptions do not.
    CHECK(markers > 0);
    CHECK(markers < 5 * (good.size() - st::batch_header_size));
}

// ---- partition_txns -------------------------------------------------------------------------

TEST_CASE("partition_txns: interleaved transactions of several producers", "[broker][txn]") {
    partition_txns t;
    CHECK(t.first_unstable_offset() == none_unstable);

    feed(t, data_batch(1, 0, 3));                        // pid 1 opens at 0
    feed(t, data_batch(2, 3, 2));                        // pid 2 opens at 3
    feed(t, data_batch(1, 5, 1));                        // pid 1 continues
    feed(t, data_batch(3, 6, 1, /*transactional=*/false)); // pid 3, idempotent
    CHECK(t.open_count() == 2);
    CHECK(t.is_open(1));
    CHECK(t.is_open(2));
    CHECK_FALSE(t.is_open(3));
    CHECK(t.open() == std::map<std::int64_t, std::int64_t>{{1, 0}, {2, 3}});
    CHECK(t.first_unstable_offset() == 0);

    feed(t, marker_at(2, 7, marker_type::commit));
    CHECK_FALSE(t.is_open(2));
    CHECK(t.aborted_count() == 0);
    CHECK(t.first_unstable_offset() == 0);

    feed(t, data_batch(4, 8, 2));                        // pid 4 opens at 8
    feed(t, marker_at(1, 10, marker_type::abort));
    CHECK_FALSE(t.is_open(1));
    CHECK(t.first_unstable_offset() == 8);
    REQUIRE(t.aborted_count() == 1);
    CHECK(t.aborted()[0] == aborted_txn{1, 0, 10});

    // pid 2 starts a new transaction after its commit: it opens at the new batch.
    feed(t, data_batch(2, 11, 1));
    CHECK(t.open() == std::map<std::int64_t, std::int64_t>{{2, 11}, {4, 8}});
    feed(t, marker_at(4, 12, marker_type::abort));
    CHECK(t.first_unstable_offset() == 11);
    feed(t, marker_at(2, 13, marker_type::abort));
    CHECK(t.first_unstable_offset() == none_unstable);
    CHECK(t.open_count() == 0);
    CHECK(t.aborted() == std::vector<aborted_txn>{{1, 0, 10}, {4, 8, 12}, {2, 11, 13}});
    CHECK(t.unreadable_markers() == 0);
}

TEST_CASE("partition_txns: last stable offset", "[broker][txn]") {
    partition_txns t;
    feed(t, data_batch(1, 0, 5, false));
    CHECK(t.last_stable_offset(5) == 5); // nothing open: the high watermark
    feed(t, data_batch(7, 5, 3));
    CHECK(t.last_stable_offset(8) == 5); // the open transaction's first offset
    CHECK(t.last_stable_offset(100) == 5);
    CHECK(t.last_stable_offset(3) == 3); // never above the high watermark
    feed(t, data_batch(8, 8, 1));
    CHECK(t.last_stable_offset(9) == 5);
    feed(t, marker_at(7, 9, marker_type::commit));
    CHECK(t.last_stable_offset(10) == 8);
    feed(t, marker_at(8, 10, marker_type::abort));
    CHECK(t.last_stable_offset(11) == 11);
}

TEST_CASE("partition_txns: control and non-transactional batches never open a transaction",
          "[broker][txn]") {
    partition_txns t;
    // Markers for producers with nothing open: no state, nothing recorded.
    feed(t, marker_at(1, 0, marker_type::commit));
    feed(t, marker_at(2, 1, marker_type::abort));
    CHECK(t.open_count() == 0);
    CHECK(t.aborted_count() == 0);
    // Idempotent and plain batches.
    feed(t, data_batch(3, 2, 2, false));
    feed(t, data_batch(-1, 4, 2, false));
    // A transactional bit without a producer id is not a transaction either.
    feed(t, data_batch(-1, 6, 1, true));
    CHECK(t.open_count() == 0);
    CHECK(t.first_unstable_offset() == none_unstable);

    // An idempotent batch of a producer with an open transaction neither closes nor moves it.
    feed(t, data_batch(3, 7, 1));
    feed(t, data_batch(3, 8, 1, false));
    CHECK(t.open() == std::map<std::int64_t, std::int64_t>{{3, 7}});
    // A second marker for an already closed transaction records nothing more.
    feed(t, marker_at(3, 9, marker_type::abort));
    feed(t, marker_at(3, 10, marker_type::abort));
    CHECK(t.aborted() == std::vector<aborted_txn>{{3, 7, 9}});
}

TEST_CASE("partition_txns: an unreadable marker leaves the transaction open", "[broker][txn]") {
    partition_txns t;
    feed(t, data_batch(5, 0, 2));
    feed(t, raw_batch(0x30, "garbage", 1, 5));
    CHECK(t.is_open(5));
    CHECK(t.unreadable_markers() == 1);
    CHECK(t.first_unstable_offset() == 0);
    // A leader-change control batch (no producer id) is not the tracker's business at all.
    feed(t, raw_batch(st::attr_control, control_record_bytes(i16s(0, 2), value_bytes(0, 0)), 1, -1));
    CHECK(t.unreadable_markers() == 1);
}

TEST_CASE("partition_txns: transactions opened at the same offset close independently", "[broker][txn]") {
    // Not a log a leader writes, but _open_by_first must remove the right producer.
    partition_txns t;
    feed(t, data_batch(1, 5, 1));
    feed(t, data_batch(2, 5, 1));
    feed(t, data_batch(3, 6, 1));
    feed(t, marker_at(2, 7, marker_type::commit));
    CHECK(t.first_unstable_offset() == 5);
    CHECK(t.open() == std::map<std::int64_t, std::int64_t>{{1, 5}, {3, 6}});
    feed(t, marker_at(1, 8, marker_type::commit));
    CHECK(t.first_unstable_offset() == 6);
    feed(t, marker_at(3, 9, marker_type::commit));
    CHECK(t.first_unstable_offset() == none_unstable);
}

TEST_CASE("partition_txns: aborted_between edges and order", "[broker][txn]") {
    partition_txns t;
    feed(t, data_batch(1, 10, 5)); // 10..14
    feed(t, marker_at(1, 20, marker_type::abort));
    const std::vector<aborted_txn> one = {{1, 10, 20}};

    CHECK(t.aborted_between(0, 100) == one);
    CHECK(t.aborted_between(20, 100) == one);   // from == marker offset: included
    CHECK(t.aborted_between(21, 100).empty());  // from past the marker
    CHECK(t.aborted_between(0, 10).empty());    // to == first offset: excluded
    CHECK(t.aborted_between(0, 11) == one);
    CHECK(t.aborted_between(12, 13) == one);    // inside the transaction

    // Markers in one order, first offsets in the other: the answer is by first offset.
    feed(t, data_batch(2, 21, 1));
    feed(t, data_batch(3, 22, 1));
    feed(t, marker_at(3, 23, marker_type::abort));
    feed(t, marker_at(2, 24, marker_type::abort));
    CHECK(t.aborted() == std::vector<aborted_txn>{{1, 10, 20}, {3, 22, 23}, {2, 21, 24}});
    CHECK(t.aborted_between(0, 100) == std::vector<aborted_txn>{{1, 10, 20}, {2, 21, 24}, {3, 22, 23}});
    CHECK(t.aborted_between(21, 22) == std::vector<aborted_txn>{{2, 21, 24}});
    CHECK(t.aborted_between(24, 25) == std::vector<aborted_txn>{{2, 21, 24}});
}

TEST_CASE("partition_txns: a long transaction behind a nearer marker is still listed", "[broker][txn]") {
    // Producer 1's transaction spans producer 2's: reading [0, 50) must learn about both,
    // although producer 2's marker (100) already lies past 50.
    partition_txns t;
    feed(t, data_batch(1, 5, 1));
    feed(t, data_batch(2, 10, 1));
    feed(t, marker_at(2, 100, marker_type::abort));
    feed(t, marker_at(1, 200, marker_type::abort));
    CHECK(t.aborted_between(0, 50) == std::vector<aborted_txn>{{1, 5, 200}, {2, 10, 100}});
    CHECK(t.aborted_between(101, 150) == std::vector<aborted_txn>{{1, 5, 200}});

    // Many short aborted transactions after `to` are all excluded.
    for (std::int64_t o = 300; o < 400; o += 2) {
        feed(t, data_batch(9, o, 1));
        feed(t, marker_at(9, o + 1, marker_type::abort));
    }
    CHECK(t.aborted_count() == 52);
    CHECK(t.aborted_between(0, 50).size() == 2);
    CHECK(t.aborted_between(0, 301).size() == 3);
    CHECK(t.aborted_between(350, 352) == std::vector<aborted_txn>{{9, 350, 351}});
    CHECK(t.aborted_between(350, 353) == std::vector<aborted_txn>{{9, 350, 351}, {9, 352, 353}});
}

TEST_CASE("partition_txns: forget_before", "[broker][txn]") {
    partition_txns t;
    feed(t, data_batch(1, 0, 1));
    feed(t, marker_at(1, 100, marker_type::abort)); // long: 0..100
    feed(t, data_batch(2, 101, 1));
    feed(t, marker_at(2, 102, marker_type::abort));
    feed(t, data_batch(3, 103, 1));
    feed(t, marker_at(3, 104, marker_type::abort));
    feed(t, data_batch(4, 105, 1));                 // stays open

    t.forget_before(102);                           // marker 100 goes, marker 102 stays
    CHECK(t.aborted() == std::vector<aborted_txn>{{2, 101, 102}, {3, 103, 104}});
    CHECK(t.aborted_between(0, 1000) == std::vector<aborted_txn>{{2, 101, 102}, {3, 103, 104}});
    CHECK(t.aborted_between(0, 102) == std::vector<aborted_txn>{{2, 101, 102}});
    CHECK(t.first_unstable_offset() == 105);

    t.forget_before(50);                            // a lower log start changes nothing
    CHECK(t.aborted_count() == 2);

    t.forget_before(105);
    CHECK(t.aborted_count() == 0);
    CHECK(t.aborted_between(0, 1000).empty());
    CHECK(t.is_open(4));
    CHECK(t.first_unstable_offset() == 105);
    // The log start passes the open transaction's first offset: the LSO follows the log start.
    t.forget_before(106);
    CHECK(t.is_open(4));
    CHECK(t.first_unstable_offset() == 106);
    CHECK(t.last_stable_offset(110) == 106);
    feed(t, marker_at(4, 107, marker_type::abort));
    CHECK(t.aborted() == std::vector<aborted_txn>{{4, 105, 107}});
    CHECK(t.first_unstable_offset() == none_unstable);
}

// ---- cut_records_before ---------------------------------------------------------------------

TEST_CASE("cut_records_before: whole batches before the end", "[broker][txn]") {
    const std::vector<std::string> parts = {data_batch(1, 0, 3), marker_at(1, 3, marker_type::commit),
                                            data_batch(2, 4, 5), data_batch(3, 9, 1, false)};
    std::string all;
    std::vector<std::size_t> ends; // byte size after each batch
    for (const auto& p : parts) {
        all += p;
        ends.push_back(all.size());
    }
    auto cut = [&](std::int64_t end) {
        auto r = all;
        const auto n = cut_records_before(r, end);
        CHECK(r.size() == n);
        CHECK(r == all.substr(0, n));
        return n;
    };
    CHECK(cut(0) == 0);
    CHECK(cut(2) == 0);           // inside the first batch
    CHECK(cut(3) == ends[0]);     // at a boundary
    CHECK(cut(4) == ends[1]);
    CHECK(cut(5) == ends[1]);     // inside 4..8: that batch goes whole
    CHECK(cut(8) == ends[1]);
    CHECK(cut(9) == ends[2]);
    CHECK(cut(10) == ends[3]);
    CHECK(cut(1000) == ends[3]);  // beyond all
    CHECK(cut(std::numeric_limits<std::int64_t>::max()) == ends[3]);
    CHECK(cut(-1) == 0);

    // What is left is still a valid record set.
    auto r = all;
    cut_records_before(r, 9);
    auto batches = st::split_batches(span_of(r));
    REQUIRE(batches);
    CHECK(batches->size() == 3);

    std::string empty;
    CHECK(cut_records_before(empty, 100) == 0);
    CHECK(empty.empty());
}

TEST_CASE("cut_records_before: a batch that does not parse ends the cut", "[broker][txn]") {
    const auto a = data_batch(1, 0, 2);
    const auto b = data_batch(1, 2, 2);
    const auto whole = a + b;

    for (const auto& tail : {std::string("garbage tail, not a batch"), b.substr(0, 30), b.substr(0, b.size() - 1),
                             std::string(1, '\0')}) {
        auto r = whole + tail;
        CHECK(cut_records_before(r, 100) == whole.size());
        CHECK(r == whole);
        r = whole + tail;
        CHECK(cut_records_before(r, 2) == a.size());
    }
    // Garbage at the very start.
    std::string g = "\x01\x02\x03" + whole;
    CHECK(cut_records_before(g, 100) == 0);
    CHECK(g.empty());
    // A bad magic in the middle: the cut stops there.
    auto bad = b;
    bad[st::batch_field::magic] = 7;
    auto r = a + bad + a;
    CHECK(cut_records_before(r, 100) == a.size());
}
