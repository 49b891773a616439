#include <skiff/core/crc32c.hpp>
#include <skiff/core/endian.hpp>
#include <skiff/core/varint.hpp>
#include <skiff/storage/manifest_format.hpp>

#include <fmt/format.h>

#include <charconv>
#include <limits>

namespace skiff::storage {

namespace {

constexpr std::size_t fixed_header = 4 + 2 + 2 + 4 + 8 + 8 + 8 + 8 + 4 + 2; // up to the topic
constexpr std::size_t trailer_size = 4 + 4;
constexpr std::string_view trailer_magic{"END!", 4};
constexpr std::string_view meta_dir = "skiff~meta";
constexpr std::string_view name_prefix = "manifest-";

format_error bad(format_errc c, std::string what) { return format_error(c, "manifest: " + std::move(what)); }

// Entries are deltas from the previous one, so a long run of similar segments costs a few
// bytes each: the base relative to the previous end (0 without a gap), the span, sizes as
// they are, times relative to the previous segment's.
struct entry_cursor {
    std::int64_t prev_end = 0;
    std::int64_t prev_max_ts = -1;
    std::int64_t prev_created = 0;
};

} // namespace

std::string encode_manifest(const manifest& m) {
    std::string out;
    out.reserve(fixed_header + m.partition.topic.size() + 4 + m.segments.size() * 14 + trailer_size);
    out.append(manifest_magic);
    be::append<std::uint16_t>(out, manifest_format_version);
    be::append<std::uint16_t>(out, 0);
    be::append<std::uint32_t>(out, static_cast<std::uint32_t>(m.epoch));
    be::append<std::uint64_t>(out, static_cast<std::uint64_t>(m.seq));
    be::append<std::uint64_t>(out, static_cast<std::uint64_t>(m.log_start));
    be::append<std::uint64_t>(out, static_cast<std::uint64_t>(m.covered_end));
    be::append<std::uint64_t>(out, static_cast<std::uint64_t>(m.written_ms));
    be::append<std::uint32_t>(out, static_cast<std::uint32_t>(m.segments.size()));
    be::append<std::uint16_t>(out, static_cast<std::uint16_t>(m.partition.topic.size()));
    out.append(m.partition.topic);
    be::append<std::uint32_t>(out, static_cast<std::uint32_t>(m.partition.partition));
    entry_cursor c;
    for (const auto& s : m.segments) {
        varint::append_varlong(out, s.base - c.prev_end);
        varint::append_unsigned(out, static_cast<std::uint64_t>(s.last - s.base));
        varint::append_unsigned(out, s.kfs_size);
        varint::append_unsigned(out, s.index_size);
        varint::append_varlong(out, s.max_timestamp - c.prev_max_ts);
        varint::append_varlong(out, s.created_ms - c.prev_created);
        c.prev_end = s.last + 1;
        c.prev_max_ts = s.max_timestamp;
        c.prev_created = s.created_ms;
    }
    be::append<std::uint32_t>(out, crc32c(out.data(), out.size()));
    out.append(trailer_magic);
    return out;
}

result<manifest, format_error> decode_manifest(std::span<const char> in) {
    if (in.size() < fixed_header + 4 + trailer_size) return failure{bad(format_errc::truncated, "shorter than its header")};
    if (std::string_view(in.data(), 4) != manifest_magic) return failure{bad(format_errc::bad_magic, "no SKMF magic")};
    if (std::string_view(in.data() + in.size() - 4, 4) != trailer_magic) {
        return failure{bad(format_errc::truncated, "no END! trailer (cut short?)")};
    }
    const std::size_t crc_at = in.size() - trailer_size;
    const auto stored_crc = be::read_u32(in.data() + crc_at);
    if (crc32c(in.data(), crc_at) != stored_crc) return failure{bad(format_errc::crc_mismatch, "CRC-32C mismatch")};
    const char* p = in.data() + 4;
    const auto version = be::read_u16(p);
    if (version != manifest_format_version) {
        return failure{bad(format_errc::unsupported_version, fmt::format("version {} is not 1", version))};
    }
    if (be::read_u16(p + 2) != 0) return failure{bad(format_errc::invalid, "unknown flags")};
    manifest m;
    m.epoch = be::read_i32(p + 4);
    m.seq = be::read_i64(p + 8);
    m.log_start = be::read_i64(p + 16);
    m.covered_end = be::read_i64(p + 24);
    m.written_ms = be::read_i64(p + 32);
    const auto count = be::read_u32(p + 40);
    const auto topic_len = be::read_u16(p + 44);
    std::size_t pos = fixed_header;
    if (pos + topic_len + 4 > crc_at) return failure{bad(format_errc::truncated, "topic name cut short")};
    m.partition.topic.assign(in.data() + pos, topic_len);
    pos += topic_len;
    m.partition.partition = be::read_i32(in.data() + pos);
    pos += 4;
    if (m.log_start < 0 || m.covered_end < m.log_start || m.seq < 0 || m.partition.partition < 0) {
        return failure{bad(format_errc::invalid,
                           fmt::format("log start {} / covered end {} out of range", m.log_start, m.covered_end))};
    }
    const auto body = in.first(crc_at);
    // Each entry takes at least six bytes: a count beyond that is a lie, not a reason to
    // reserve gigabytes.
    if (count > (crc_at - pos) / 6) return failure{bad(format_errc::truncated, "fewer entries than its count")};
    m.segments.reserve(count);
    entry_cursor c;
    constexpr auto max_i64 = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    for (std::uint32_t i = 0; i < count; ++i) {
        manifest_segment s;
        auto gap = varint::read_varlong(body, pos);
        std::uint64_t span = 0, kfs = 0;
        std::uint32_t index = 0;
        if (!gap || varint::read_unsigned64(body, pos, span) != varint::read_status::ok ||
            varint::read_unsigned64(body, pos, kfs) != varint::read_status::ok ||
            varint::read_unsigned32(body, pos, index) != varint::read_status::ok) {
            return failure{bad(format_errc::truncated, fmt::format("entry {} cut short", i))};
        }
        auto dts = varint::read_varlong(body, pos);
        auto dcreated = varint::read_varlong(body, pos);
        if (!dts || !dcreated) return failure{bad(format_errc::truncated, fmt::format("entry {} cut short", i))};
        // Overflow-checked arithmetic: hostile deltas must not wrap into plausible offsets.
        if (*gap < 0 || span > max_i64 || __builtin_add_overflow(c.prev_end, *gap, &s.base) ||
            __builtin_add_overflow(s.base, static_cast<std::int64_t>(span), &s.last) ||
            __builtin_add_overflow(c.prev_max_ts, *dts, &s.max_timestamp) ||
            __builtin_add_overflow(c.prev_created, *dcreated, &s.created_ms) || s.last >= m.covered_end ||
            s.max_timestamp < -1) {
            return failure{bad(format_errc::invalid, fmt::format("entry {} out of order or past covered end", i))};
        }
        s.kfs_size = kfs;
        s.index_size = index;
        c.prev_end = s.last + 1;
        c.prev_max_ts = s.max_timestamp;
        c.prev_created = s.created_ms;
        m.segments.push_back(s);
    }
    if (pos != crc_at) return failure{bad(format_errc::invalid, "bytes after the last entry")};
    return m;
}

std::string manifest_prefix(const std::string& ns, const partition_id& p) {
    return fmt::format("{}/{}/{}/{}/", ns, meta_dir, p.topic, p.partition);
}

std::string manifest_topic_prefix(const std::string& ns, std::string_view topic) {
    return fmt::format("{}/{}/{}/", ns, meta_dir, topic);
}

std::string manifest_key(const std::string& ns, const partition_id& p, std::int32_t epoch, std::int64_t seq) {
    return fmt::format("{}{}{:010}-{:020}", manifest_prefix(ns, p), name_prefix, epoch, seq);
}

std::optional<manifest_name> parse_manifest_name(std::string_view name) {
    constexpr std::size_t len = 9 + 10 + 1 + 20;
    if (name.size() != len || name.substr(0, name_prefix.size()) != name_prefix || name[19] != '-') return std::nullopt;
    manifest_name out;
    const auto e = name.substr(9, 10);
    const auto s = name.substr(20, 20);
    auto [pe, ece] = std::from_chars(e.data(), e.data() + e.size(), out.epoch);
    auto [ps, ecs] = std::from_chars(s.data(), s.data() + s.size(), out.seq);
    if (ece != std::errc{} || pe != e.data() + e.size() || ecs != std::errc{} || ps != s.data() + s.size() ||
        out.epoch < 0 || out.seq < 0) {
        return std::nullopt;
    }
    return out;
}

} // namespace skiff::storage
