#include "control_batch.hpp"

#include <skiff/core/crc32c.hpp>
#include <skiff/core/endian.hpp>
#include <skiff/core/varint.hpp>

namespace skiff::broker::txn {

namespace {
// Kafka's ControlRecordType key and EndTransactionMarker value, both version 0: the versions
// every client since 0.11 reads.
constexpr std::int16_t key_version = 0;
constexpr std::int16_t value_version = 0;
constexpr std::size_t key_size = 4;   // version int16, type int16
constexpr std::size_t value_size = 6; // version int16, coordinator_epoch int32
} // namespace

std::string make_control_batch(std::int64_t producer_id, std::int16_t producer_epoch, marker_type type,
                               std::int32_t coordinator_epoch, std::int64_t timestamp_ms) {
    using namespace storage;

    // The one record, as DefaultRecord.writeTo lays it out: attributes, timestampDelta,
    // offsetDelta, key, value, header count. Deltas are 0: the record carries the batch's
    // timestamp and base offset (MemoryRecords.withEndTransactionMarker).
    std::string rec;
    rec.push_back('\0');
    varint::append_varlong(rec, 0);
    varint::append_varint(rec, 0);
    varint::append_varint(rec, static_cast<std::int32_t>(key_size));
    be::append_i16(rec, key_version);
    be::append_i16(rec, static_cast<std::int16_t>(type));
    varint::append_varint(rec, static_cast<std::int32_t>(value_size));
    be::append_i16(rec, value_version);
    be::append_i32(rec, coordinator_epoch);
    varint::append_varint(rec, 0);

    std::string out(batch_header_size, '\0');
    varint::append_varint(out, static_cast<std::int32_t>(rec.size()));
    out.append(rec);

    char* p = out.data();
    be::write_i64(p + batch_field::base_offset, 0);
    be::write_i32(p + batch_field::batch_length, static_cast<std::int32_t>(out.size() - batch_log_overhead));
    // Kafka's leader stamps its epoch on append; -1 (no epoch) until the log does.
    be::write_i32(p + batch_field::partition_leader_epoch, -1);
    p[batch_field::magic] = 2;
    be::write_i16(p + batch_field::attributes, static_cast<std::int16_t>(attr_transactional | attr_control));
    be::write_i32(p + batch_field::last_offset_delta, 0);
    be::write_i64(p + batch_field::base_timestamp, timestamp_ms);
    be::write_i64(p + batch_field::max_timestamp, timestamp_ms);
    be::write_i64(p + batch_field::producer_id, producer_id);
    be::write_i16(p + batch_field::producer_epoch, producer_epoch);
    // Markers carry no sequence: they are not part of the producer's idempotent stream.
    be::write_i32(p + batch_field::base_sequence, -1);
    be::write_i32(p + batch_field::record_count, 1);
    be::write_u32(p + batch_field::crc, crc32c(p + batch_field::attributes, out.size() - batch_field::attributes));
    return out;
}

std::optional<control_record> read_control_batch(const storage::batch_view& b) {
    if (!b.is_control()) return std::nullopt;
    // parse_records checks every length against the bytes present (and refuses a compressed
    // batch, which no marker is), so garbage ends here rather than in a read past the end.
    auto records = storage::parse_records(b);
    // An empty control batch is a marker whose transaction compaction removed entirely; Kafka
    // (ProducerAppendInfo.append) skips it too.
    if (!records || records->empty()) return std::nullopt;
    const auto& r = records->front();
    if (!r.key || r.key->size() < key_size || !r.value || r.value->size() < value_size) return std::nullopt;

    // Newer key/value versions only append fields (ControlRecordType.parseTypeId and
    // EndTransactionMarker read them as version 0); a negative version is corrupt.
    if (be::read_i16(r.key->data()) < 0 || be::read_i16(r.value->data()) < 0) return std::nullopt;
    const auto type = be::read_i16(r.key->data() + 2);
    // Other control types (leader change, snapshot records) are not transaction markers.
    if (type != static_cast<std::int16_t>(marker_type::abort) && type != static_cast<std::int16_t>(marker_type::commit)) {
        return std::nullopt;
    }
    control_record out;
    out.type = static_cast<marker_type>(type);
    out.coordinator_epoch = be::read_i32(r.value->data() + 2);
    return out;
}

} // namespace skiff::broker::txn
