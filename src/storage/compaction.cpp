#include <skiff/core/crc32c.hpp>
#include <skiff/core/endian.hpp>
#include <skiff/core/varint.hpp>
#include <skiff/storage/compaction.hpp>
#include <skiff/storage/compression.hpp>

#include <fmt/format.h>

#include <vector>

namespace skiff::storage {

result<void, format_error> key_index::add(const batch_view& batch, std::size_t max_uncompressed) {
    if (batch.producer_id >= 0) {
        auto& last = _producers[batch.producer_id];
        last = std::max(last, batch.base_offset);
    }
    if (batch.attributes & attr_control) return ok();
    auto decoded = decode_records(batch, max_uncompressed);
    if (!decoded) return failure{std::move(decoded).error()};
    for (const auto& r : decoded->records) {
        ++_records;
        if (!r.key) continue;
        const std::int64_t offset = batch.base_offset + r.offset_delta;
        if (auto it = _latest.find(*r.key); it != _latest.end()) {
            it->second = std::max(it->second, offset);
        } else {
            auto [e, _] = _latest.emplace(std::string(*r.key), offset);
            if (e->first.capacity() > std::string().capacity()) _key_heap_bytes += e->first.capacity() + 1;
        }
    }
    return ok();
}

std::optional<std::int64_t> key_index::latest(std::string_view key) const {
    auto it = _latest.find(key);
    if (it == _latest.end()) return std::nullopt;
    return it->second;
}

std::size_t key_index::memory_bytes() const noexcept {
    // A node of an unordered_map: the value, the next pointer and the cached hash; plus one
    // bucket pointer per entry at load factor 1.
    constexpr std::size_t node = sizeof(std::pair<const std::string, std::int64_t>) + 2 * sizeof(void*);
    return _latest.size() * (node + sizeof(void*)) + _key_heap_bytes + _producers.size() * 48;
}

void key_index::learn_producer(std::int64_t producer_id, std::int64_t base_offset) {
    if (producer_id < 0) return;
    auto& last = _producers[producer_id];
    last = std::max(last, base_offset);
}

bool key_index::producer_latest(std::int64_t producer_id, std::int64_t base_offset) const {
    auto it = _producers.find(producer_id);
    return it != _producers.end() && it->second == base_offset;
}

namespace {

// The batch count and CRC after its records changed (rebuild_batch copies the old count).
void set_count(std::string& batch, std::int32_t count) {
    char* p = batch.data();
    be::write_i32(p + batch_field::record_count, count);
    be::write_u32(p + batch_field::crc, crc32c(p + batch_field::attributes, batch.size() - batch_field::attributes));
}

} // namespace

result<filtered_batch, format_error> filter_batch(const batch_view& batch, const key_index& index,
                                                  const compaction_rules& rules, bool keep_empty) {
    filtered_batch out;
    out.records_in = batch.record_count;
    out.records_out = batch.record_count;
    if (batch.attributes & attr_control) return out;
    auto decoded = decode_records(batch, rules.max_uncompressed);
    if (!decoded) return failure{std::move(decoded).error()};
    const auto& section = decoded->section;
    const bool append_time = (batch.attributes & attr_log_append_time) != 0;
    // Each record's bytes in the section: a varint length, then that many bytes.
    std::vector<std::pair<std::size_t, std::size_t>> spans;
    spans.reserve(decoded->records.size());
    std::size_t pos = 0;
    for (std::size_t i = 0; i < decoded->records.size(); ++i) {
        const std::size_t start = pos;
        auto len = varint::read_varint(section, pos);
        if (!len || *len < 0 || pos + static_cast<std::size_t>(*len) > section.size()) {
            return failure{format_error(format_errc::invalid, "a record's length does not fit its batch")};
        }
        pos += static_cast<std::size_t>(*len);
        spans.emplace_back(start, pos - start);
    }
    std::string kept;
    std::int32_t n = 0;
    for (std::size_t i = 0; i < decoded->records.size(); ++i) {
        const auto& r = decoded->records[i];
        bool keep = true;
        if (r.key) {
            const std::int64_t offset = batch.base_offset + r.offset_delta;
            auto latest = index.latest(*r.key);
            keep = !latest || *latest <= offset;
            if (keep && !r.value) {
                const std::int64_t ts = append_time ? batch.max_timestamp : batch.base_timestamp + r.timestamp_delta;
                keep = ts >= rules.now_ms - rules.delete_retention_ms;
            }
        }
        if (!keep) continue;
        kept.append(section.data() + spans[i].first, spans[i].second);
        ++n;
    }
    out.records_out = n;
    if (n == batch.record_count) return out;
    if (n == 0) {
        if (!keep_empty && !(batch.producer_id >= 0 && index.producer_latest(batch.producer_id, batch.base_offset))) {
            out.fate = batch_fate::dropped;
            return out;
        }
        auto empty = rebuild_batch(batch, {}, compression_codec::none, batch.attributes, batch.max_timestamp);
        if (!empty) return failure{std::move(empty).error()};
        set_count(*empty, 0);
        out.bytes = std::move(*empty);
        out.fate = batch_fate::emptied;
        return out;
    }
    auto rebuilt = rebuild_batch(batch, kept, batch.compression(), batch.attributes, batch.max_timestamp);
    if (!rebuilt) return failure{std::move(rebuilt).error()};
    set_count(*rebuilt, n);
    out.bytes = std::move(*rebuilt);
    out.fate = batch_fate::rewritten;
    return out;
}

} // namespace skiff::storage
