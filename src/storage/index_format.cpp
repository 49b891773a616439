// .index and .kfst encode/decode. Layouts: ../shared/design/kafscale-format.md, "Index
// .index" and "Time-index sidecar .kfst"; the entry rule follows KafScale's index.go.
#include <skiff/storage/index_format.hpp>
#include <skiff/storage/segment_format.hpp> // segment_header_size, segment_footer_size

#include <fmt/format.h>

#include <algorithm>

namespace skiff::storage {

// ---- .index -----------------------------------------------------------------------------

index_builder::index_builder(std::int32_t interval) noexcept : _interval(interval <= 0 ? 1 : interval) {}

void index_builder::add_batch(std::int64_t base_offset, std::int32_t position, std::int32_t record_count) {
    if (_entries.empty() || _since_last >= _interval) {
        _entries.push_back(index_entry{base_offset, position});
        _since_last = 0;
    }
    _since_last += std::max<std::int32_t>(record_count, 0);
}

std::string index_builder::encode() const { return encode_index(_entries, _interval); }

std::string encode_index(std::span<const index_entry> entries, std::int32_t interval) {
    std::string out;
    out.reserve(index_header_size + entries.size() * index_entry_size);
    out.append(index_magic);
    be::append_u16(out, index_format_version);
    be::append_i32(out, static_cast<std::int32_t>(entries.size()));
    be::append_i32(out, interval);
    be::append_u16(out, 0); // reserved
    for (const auto& e : entries) {
        be::append_i64(out, e.offset);
        be::append_i32(out, e.position);
    }
    return out;
}

result<index_view, format_error> decode_index(std::span<const char> bytes) {
    if (bytes.size() < index_header_size) {
        return failure{format_error(format_errc::truncated,
                                    fmt::format("index of {} bytes is shorter than its {}-byte header", bytes.size(),
                                                index_header_size))};
    }
    const char* p = bytes.data();
    if (std::string_view(p, 4) != index_magic) {
        return failure{format_error(format_errc::bad_magic, "index magic is not IDX\\0")};
    }
    const auto version = be::read_u16(p + 4);
    if (version != index_format_version) {
        return failure{format_error(format_errc::unsupported_version,
                                    fmt::format("index version {} is not supported (expected 1)", version))};
    }
    const auto count = be::read_i32(p + 6);
    if (count < 0) {
        return failure{format_error(format_errc::invalid, fmt::format("negative index entry count {}", count))};
    }
    // size_t arithmetic cannot overflow: count < 2^31, so 12 * count < 2^35.
    const std::size_t expected = index_header_size + static_cast<std::size_t>(count) * index_entry_size;
    if (bytes.size() != expected) {
        return failure{format_error(bytes.size() < expected ? format_errc::truncated : format_errc::invalid,
                                    fmt::format("index claims {} entries ({} bytes) but has {} bytes", count,
                                                expected, bytes.size()))};
    }
    index_view v;
    v.interval = be::read_i32(p + 10);
    v.entries.reserve(static_cast<std::size_t>(count));
    for (std::int32_t i = 0; i < count; ++i) {
        const char* e = p + index_header_size + static_cast<std::size_t>(i) * index_entry_size;
        index_entry entry{be::read_i64(e), be::read_i32(e + 8)};
        if (entry.offset < 0) {
            return failure{format_error(format_errc::invalid,
                                        fmt::format("index entry {}: negative offset {}", i, entry.offset))};
        }
        if (entry.position < static_cast<std::int32_t>(segment_header_size)) {
            return failure{format_error(format_errc::invalid,
                                        fmt::format("index entry {}: position {} is inside the segment header", i,
                                                    entry.position))};
        }
        if (!v.entries.empty()) {
            const auto& prev = v.entries.back();
            // Entries point at distinct batch starts, in log order (binary search needs it).
            if (entry.offset <= prev.offset || entry.position <= prev.position) {
                return failure{format_error(format_errc::invalid,
                                            fmt::format("index entry {} ({} @ {}) does not follow entry {} ({} @ {})",
                                                        i, entry.offset, entry.position, i - 1, prev.offset,
                                                        prev.position))};
            }
        }
        v.entries.push_back(entry);
    }
    return v;
}

std::optional<index_entry> lookup_entry(const index_view& index, std::int64_t offset) noexcept {
    const auto& es = index.entries;
    if (es.empty()) return std::nullopt;
    // First entry with entry.offset > offset; the one before it is the answer.
    auto it = std::upper_bound(es.begin(), es.end(), offset,
                               [](std::int64_t o, const index_entry& e) { return o < e.offset; });
    if (it == es.begin()) return es.front();
    return *std::prev(it);
}

std::int32_t lookup(const index_view& index, std::int64_t offset) noexcept {
    auto e = lookup_entry(index, offset);
    return e ? e->position : static_cast<std::int32_t>(segment_header_size);
}

result<void, format_error> check_index_fits(const index_view& index, std::int64_t segment_base_offset,
                                            std::uint64_t segment_size) {
    if (index.entries.empty()) return ok();
    const auto& first = index.entries.front();
    if (first.offset != segment_base_offset || first.position != static_cast<std::int32_t>(segment_header_size)) {
        return failure{format_error(format_errc::invalid,
                                    fmt::format("index starts at offset {} position {}, segment base is {} at 32",
                                                first.offset, first.position, segment_base_offset))};
    }
    // The last indexed batch needs at least a batch header before the footer.
    const auto last = static_cast<std::uint64_t>(index.entries.back().position);
    if (last + batch_header_size + segment_footer_size > segment_size) {
        return failure{format_error(format_errc::invalid,
                                    fmt::format("index position {} leaves no room for a batch in a {}-byte segment",
                                                last, segment_size))};
    }
    return ok();
}

// ---- .kfst ------------------------------------------------------------------------------

std::string encode_time_index(const time_index& t) {
    std::string out;
    out.reserve(time_index_size);
    out.append(time_index_magic);
    be::append_u32(out, time_index_format_version);
    be::append_i64(out, t.min_timestamp);
    be::append_i64(out, t.max_timestamp);
    be::append_i64(out, t.min_offset);
    be::append_i64(out, t.max_offset);
    return out;
}

result<time_index, format_error> decode_time_index(std::span<const char> bytes) {
    if (bytes.size() < time_index_size) {
        return failure{format_error(format_errc::truncated,
                                    fmt::format("time index of {} bytes is shorter than {}", bytes.size(),
                                                time_index_size))};
    }
    const char* p = bytes.data() + (bytes.size() - time_index_size);
    if (std::string_view(p, 4) != time_index_magic) {
        return failure{format_error(format_errc::bad_magic, "time index magic is not KFTF")};
    }
    const auto version = be::read_u32(p + 4);
    if (version != time_index_format_version) {
        return failure{format_error(format_errc::unsupported_version,
                                    fmt::format("time index version {} is not supported (expected 1)", version))};
    }
    time_index t;
    t.min_timestamp = be::read_i64(p + 8);
    t.max_timestamp = be::read_i64(p + 16);
    t.min_offset = be::read_i64(p + 24);
    t.max_offset = be::read_i64(p + 32);
    if (t.min_offset < 0 || t.min_offset > t.max_offset) {
        return failure{format_error(format_errc::invalid,
                                    fmt::format("time index offsets {}..{} are not a range", t.min_offset,
                                                t.max_offset))};
    }
    return t;
}

} // namespace skiff::storage
