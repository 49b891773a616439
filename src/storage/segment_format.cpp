// .kfs segment encode/decode/walk. Layout: ../shared/design/kafscale-format.md, "Segment
// .kfs"; the offset and index rules follow KafScale's segment.go, index.go and log.go.
#include "batch_parse.hpp"

#include <skiff/core/crc32c.hpp>
#include <skiff/storage/segment_format.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>

namespace skiff::storage {

namespace {

[[noreturn]] void contract_violation(const char* what) {
    std::fprintf(stderr, "skiff: segment_builder: %s\n", what);
    std::abort();
}

void write_header(char* p, const segment_header& h) {
    std::copy(segment_magic.begin(), segment_magic.end(), p);
    be::write_u16(p + 4, segment_format_version);
    be::write_u16(p + 6, 0); // flags: no segment-level compression
    be::write_i64(p + 8, h.base_offset);
    be::write_i32(p + 16, h.message_count);
    be::write_i64(p + 20, h.created_ms);
    be::write_u32(p + 28, 0); // reserved
}

void write_footer(char* p, const segment_footer& f) {
    be::write_u32(p, f.body_crc);
    be::write_i64(p + 4, f.last_offset);
    std::copy(segment_footer_magic.begin(), segment_footer_magic.end(), p + 12);
}

// Timestamps below 0 are Kafka's NO_TIMESTAMP (-1) or garbage: they say nothing about time.
// Both fields bound both ends, so a client's inconsistent pair still gives lo <= hi.
void widen_time_range(std::int64_t& lo, std::int64_t& hi, std::int64_t base_ts, std::int64_t max_ts) {
    for (std::int64_t t : {base_ts, max_ts}) {
        if (t < 0) continue;
        lo = lo < 0 ? t : std::min(lo, t);
        hi = std::max(hi, t);
    }
}

} // namespace

// ---- header / footer --------------------------------------------------------------------

std::string encode_segment_header(const segment_header& h) {
    std::string out(segment_header_size, '\0');
    write_header(out.data(), h);
    return out;
}

std::string encode_segment_footer(const segment_footer& f) {
    std::string out(segment_footer_size, '\0');
    write_footer(out.data(), f);
    return out;
}

result<segment_header, format_error> parse_segment_header(std::span<const char> first_bytes) {
    if (first_bytes.size() < segment_header_size) {
        return failure{format_error(format_errc::truncated,
                                    fmt::format("segment header needs {} bytes, got {}", segment_header_size,
                                                first_bytes.size()))};
    }
    const char* p = first_bytes.data();
    if (std::string_view(p, 4) != segment_magic) {
        return failure{format_error(format_errc::bad_magic, "segment magic is not KAFS")};
    }
    const auto version = be::read_u16(p + 4);
    if (version != segment_format_version) {
        return failure{format_error(format_errc::unsupported_version,
                                    fmt::format("segment version {} is not supported (expected 1)", version))};
    }
    const auto flags = be::read_u16(p + 6);
    if (flags != 0) {
        // No flag is defined; a set one could mean a body this code cannot read.
        return failure{format_error(format_errc::unsupported_version,
                                    fmt::format("segment flags {:#06x} are not supported (expected 0)", flags))};
    }
    segment_header h;
    h.base_offset = be::read_i64(p + 8);
    h.message_count = be::read_i32(p + 16);
    h.created_ms = be::read_i64(p + 20);
    if (h.base_offset < 0) {
        return failure{format_error(format_errc::invalid, fmt::format("negative segment base offset {}", h.base_offset))};
    }
    if (h.message_count < 0) {
        return failure{format_error(format_errc::invalid,
                                    fmt::format("negative segment message count {}", h.message_count))};
    }
    return h;
}

result<segment_footer, format_error> parse_segment_footer(std::span<const char> tail) {
    if (tail.size() < segment_footer_size) {
        return failure{format_error(format_errc::truncated,
                                    fmt::format("segment footer needs {} bytes, got {}", segment_footer_size,
                                                tail.size()))};
    }
    const char* p = tail.data() + (tail.size() - segment_footer_size);
    if (std::string_view(p + 12, 4) != segment_footer_magic) {
        // A missing END! is how readers tell an incomplete upload (kafscale-format.md).
        return failure{format_error(format_errc::bad_magic, "segment footer magic is not END!")};
    }
    segment_footer f;
    f.body_crc = be::read_u32(p);
    f.last_offset = be::read_i64(p + 4);
    if (f.last_offset < 0) {
        return failure{format_error(format_errc::invalid, fmt::format("negative segment last offset {}", f.last_offset))};
    }
    return f;
}

bool has_segment_end_marker(std::span<const char> tail) noexcept {
    return tail.size() >= 4 && std::string_view(tail.data() + tail.size() - 4, 4) == segment_footer_magic;
}

// ---- whole-object decode ----------------------------------------------------------------

result<segment_view, format_error> decode_segment(std::span<const char> whole, bool verify_batch_crcs) {
    constexpr std::size_t frame = segment_header_size + segment_footer_size;
    if (whole.size() < frame) {
        return failure{format_error(format_errc::truncated,
                                    fmt::format("segment of {} bytes is shorter than header + footer ({})",
                                                whole.size(), frame))};
    }
    if (whole.size() > max_segment_size) {
        return failure{format_error(format_errc::too_large,
                                    fmt::format("segment of {} bytes exceeds {} (index positions are int32)",
                                                whole.size(), max_segment_size))};
    }
    auto h = parse_segment_header(whole);
    if (!h) return failure{std::move(h).error()};
    auto f = parse_segment_footer(whole);
    if (!f) return failure{std::move(f).error()};

    segment_view v;
    v.header = *h;
    v.footer = *f;
    v.body = whole.subspan(segment_header_size, whole.size() - frame);
    const auto crc = crc32c(v.body.data(), v.body.size());
    if (crc != v.footer.body_crc) {
        return failure{format_error(format_errc::crc_mismatch,
                                    fmt::format("segment body CRC mismatch (footer {:#010x}, computed {:#010x})",
                                                v.footer.body_crc, crc))};
    }

    std::int64_t count = 0;
    std::size_t pos = 0;
    while (pos < v.body.size()) {
        batch_view b;
        format_error err;
        std::size_t full = 0;
        // The body bounds every batch; no size cap, so a length past the end reads as a
        // batch cut off (truncated).
        auto step = detail::parse_batch_prefix(v.body.subspan(pos), verify_batch_crcs,
                                               std::numeric_limits<std::size_t>::max(), b, err, full);
        if (step != detail::parse_step::ok) {
            // The body has no framing of its own: a batch cut off here means the body does
            // not walk into whole batches.
            err.message = fmt::format("segment batch {} at position {}: {}", v.batches.size(),
                                      segment_header_size + pos, err.message);
            return failure{std::move(err)};
        }
        if (v.batches.empty()) {
            if (b.base_offset != v.header.base_offset) {
                return failure{format_error(format_errc::invalid,
                                            fmt::format("first batch has base offset {}, segment header says {}",
                                                        b.base_offset, v.header.base_offset))};
            }
        } else if (b.base_offset <= v.batches.back().last_offset()) {
            return failure{format_error(format_errc::invalid,
                                        fmt::format("segment batch {} at position {}: base offset {} does not "
                                                    "follow last offset {}",
                                                    v.batches.size(), segment_header_size + pos, b.base_offset,
                                                    v.batches.back().last_offset()))};
        }
        count += b.record_count;
        widen_time_range(v.min_timestamp, v.max_timestamp, b.base_timestamp, b.max_timestamp);
        v.batches.push_back(b);
        pos += b.bytes.size();
    }
    if (v.batches.empty()) {
        return failure{format_error(format_errc::invalid, "segment has no batches")};
    }
    if (count != v.header.message_count) {
        return failure{format_error(format_errc::invalid,
                                    fmt::format("segment header counts {} messages, its batches hold {}",
                                                v.header.message_count, count))};
    }
    if (v.batches.back().last_offset() != v.footer.last_offset) {
        return failure{format_error(format_errc::invalid,
                                    fmt::format("segment footer last offset {} but the last batch ends at {}",
                                                v.footer.last_offset, v.batches.back().last_offset()))};
    }
    return v;
}

time_index time_index_of(const segment_view& s) noexcept {
    return time_index{s.min_timestamp, s.max_timestamp, s.header.base_offset, s.footer.last_offset};
}

time_index time_index_of(const segment_meta& m) noexcept {
    return time_index{m.min_timestamp, m.max_timestamp, m.base_offset, m.last_offset};
}

result<std::string, format_error> rebuild_index(std::span<const char> whole, std::int32_t interval) {
    auto seg = decode_segment(whole);
    if (!seg) return failure{std::move(seg).error()};
    index_builder ib(interval);
    for (const auto& b : seg->batches) ib.add_batch(b.base_offset, seg->position_of(b), b.record_count);
    return ib.encode();
}

// ---- range walking ----------------------------------------------------------------------

result<walk_result, format_error> walk_batches(std::span<const char> body_part, std::int64_t min_offset,
                                               const walk_options& opts) {
    walk_result r;
    std::size_t first_selected = 0;
    bool have_prev = false;
    std::int64_t prev_last = 0;
    std::size_t pos = 0;
    while (pos < body_part.size()) {
        batch_view b;
        format_error err;
        std::size_t full = 0;
        auto step = detail::parse_batch_prefix(body_part.subspan(pos), opts.verify_crc, opts.max_batch_bytes, b, err,
                                               full);
        if (step == detail::parse_step::incomplete) {
            // A range GET may end mid-batch, or run into the footer: stop cleanly here.
            r.pending_batch_size = full;
            break;
        }
        if (step == detail::parse_step::bad) {
            err.message = fmt::format("batch at byte {} of the range: {}", pos, err.message);
            return failure{std::move(err)};
        }
        if (have_prev && b.base_offset <= prev_last) {
            return failure{format_error(format_errc::invalid,
                                        fmt::format("batch at byte {} of the range: base offset {} does not follow "
                                                    "last offset {}",
                                                    pos, b.base_offset, prev_last))};
        }
        have_prev = true;
        prev_last = b.last_offset();
        if (b.last_offset() >= min_offset) {
            if (r.batches.empty()) first_selected = pos;
            r.batches.push_back(b);
        }
        pos += b.bytes.size();
    }
    r.consumed = pos;
    if (r.batches.empty()) first_selected = pos;
    r.selected = body_part.subspan(first_selected, pos - first_selected);
    return r;
}

// ---- building ---------------------------------------------------------------------------

segment_builder::segment_builder(std::int64_t base_offset, std::int32_t index_interval,
                                 std::size_t expected_body_bytes)
    : _base(base_offset), _next(base_offset), _index(index_interval) {
    if (base_offset < 0) contract_violation("negative base offset");
    _buf.reserve(segment_header_size + std::min(expected_body_bytes, max_segment_size) + segment_footer_size);
    _buf.assign(segment_header_size, '\0'); // written by finish()
}

result<std::int64_t, format_error> segment_builder::append(const batch_view& batch) {
    return append(batch.bytes, batch.crc_verified ? std::optional<std::uint32_t>(batch.crc) : std::nullopt);
}

namespace {

// What append needs from one batch, read from its bytes, or why the segment cannot take it
// given `next` / `count` / `size` (the builder's state so far). Shared by append and
// can_append so the two can never disagree.
struct append_plan {
    std::int32_t lod = 0;
    std::int32_t records = 0;
};

result<append_plan, format_error> plan_append(std::span<const char> in, std::int64_t next, std::int64_t count,
                                              std::size_t size) {
    // Read what the segment needs from the bytes themselves, so header, footer and index
    // always agree with the body (decode_segment checks exactly that).
    if (in.size() < batch_header_size || in[batch_field::magic] != 2 ||
        static_cast<std::int64_t>(be::read_i32(in.data() + batch_field::batch_length)) + 12 !=
            static_cast<std::int64_t>(in.size())) {
        return failure{format_error(format_errc::invalid, "append: the bytes are not exactly one v2 record batch")};
    }
    append_plan p;
    p.lod = be::read_i32(in.data() + batch_field::last_offset_delta);
    p.records = be::read_i32(in.data() + batch_field::record_count);
    if (p.lod < 0 || p.records < 0) {
        return failure{format_error(format_errc::invalid, "append: negative last offset delta or record count")};
    }
    if (next > std::numeric_limits<std::int64_t>::max() - p.lod - 1) {
        return failure{format_error(format_errc::too_large, "append: offsets would pass INT64_MAX")};
    }
    if (count + p.records > std::numeric_limits<std::int32_t>::max()) {
        return failure{format_error(format_errc::too_large, "append: segment message count would pass INT32_MAX")};
    }
    if (size + in.size() + segment_footer_size > max_segment_size) {
        return failure{format_error(format_errc::too_large,
                                    fmt::format("append: segment would pass {} bytes", max_segment_size))};
    }
    return p;
}

} // namespace

result<void, format_error> segment_builder::can_append(std::span<const batch_view> batches) const {
    std::int64_t next = _next, count = _count;
    std::size_t size = _buf.size();
    for (const auto& b : batches) {
        auto p = plan_append(b.bytes, next, count, size);
        if (!p) return failure{std::move(p).error()};
        next += std::int64_t{p->lod} + 1;
        count += p->records;
        size += b.bytes.size();
    }
    return ok();
}

result<std::int64_t, format_error> segment_builder::append(std::span<const char> in,
                                                           std::optional<std::uint32_t> verified_crc) {
    auto plan = plan_append(in, _next, _count, _buf.size());
    if (!plan) return failure{std::move(plan).error()};
    const auto lod = plan->lod;
    const auto records = plan->records;
    const std::size_t pos = _buf.size();
    const std::int64_t base = _next;
    _index.add_batch(base, static_cast<std::int32_t>(pos), records);
    _buf.append(in.data(), in.size());
    char* dst = _buf.data() + pos;
    // The assigned offset goes into the copy, never into the caller's bytes.
    set_base_offset(std::span<char>(dst, in.size()), base);
    if (_leader_epoch) set_partition_leader_epoch(std::span<char>(dst, in.size()), *_leader_epoch);
    // The body CRC. A batch whose own CRC is known good (it covers everything from its
    // attributes on) adds only its first bytes to the running CRC and combines the rest from
    // that CRC: the produce path then reads each byte for a CRC once, not twice.
    if (verified_crc && in.size() > batch_field::attributes) {
        _crc = crc32c(dst, batch_field::attributes, _crc);
        _crc = crc32c_combine(_crc, *verified_crc, in.size() - batch_field::attributes);
    } else {
        _crc = crc32c(dst, in.size(), _crc);
    }
    _count += records;
    ++_batches;
    _last = base + lod;
    _next = _last + 1;
    widen_time_range(_min_ts, _max_ts, be::read_i64(dst + batch_field::base_timestamp),
                     be::read_i64(dst + batch_field::max_timestamp));
    return base;
}

result<void, format_error> segment_builder::skip_to(std::int64_t offset) {
    if (offset < _next) {
        return failure{format_error(format_errc::invalid,
                                    fmt::format("skip_to: offset {} is below the next offset {}", offset, _next))};
    }
    _next = offset;
    return ok();
}

built_segment segment_builder::finish(std::int64_t created_ms) && {
    if (_batches == 0) contract_violation("finish() on an empty segment");
    built_segment out;
    segment_header h;
    h.base_offset = _base;
    h.message_count = static_cast<std::int32_t>(_count);
    h.created_ms = created_ms;
    write_header(_buf.data(), h);
    segment_footer f;
    f.body_crc = _crc;
    f.last_offset = _last;
    const std::size_t at = _buf.size();
    _buf.resize(at + segment_footer_size);
    write_footer(_buf.data() + at, f);

    out.meta.base_offset = _base;
    out.meta.last_offset = _last;
    out.meta.message_count = h.message_count;
    out.meta.created_ms = created_ms;
    out.meta.min_timestamp = _min_ts;
    out.meta.max_timestamp = _max_ts;
    out.meta.body_crc = _crc;
    out.meta.batch_count = _batches;
    out.meta.size = _buf.size();
    out.index = _index.encode();
    out.kfs = std::move(_buf);
    _buf.clear();
    _batches = 0;
    return out;
}

} // namespace skiff::storage
