// Kafka record batch v2 validation, record decoding and the test/tool builder.
// Layout: ../shared/design/kafscale-format.md, "Kafka record batch v2 header".
#include "batch_parse.hpp"

#include <skiff/core/crc32c.hpp>
#include <skiff/storage/compression.hpp>
#include <skiff/storage/record_batch.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

namespace skiff::storage {

const char* to_string(format_errc c) noexcept {
    switch (c) {
    case format_errc::truncated: return "truncated";
    case format_errc::bad_magic: return "bad magic";
    case format_errc::unsupported_version: return "unsupported version";
    case format_errc::old_message_format: return "old message format";
    case format_errc::crc_mismatch: return "crc mismatch";
    case format_errc::invalid: return "invalid";
    case format_errc::too_large: return "too large";
    }
    return "unknown";
}

const char* to_string(compression_codec c) noexcept {
    switch (c) {
    case compression_codec::none: return "none";
    case compression_codec::gzip: return "gzip";
    case compression_codec::snappy: return "snappy";
    case compression_codec::lz4: return "lz4";
    case compression_codec::zstd: return "zstd";
    }
    return "unknown";
}

// ---- batch validation -------------------------------------------------------------------

namespace detail {

parse_step parse_batch_prefix(std::span<const char> in, bool verify_crc, std::size_t max_batch_bytes,
                              batch_view& out, format_error& err, std::size_t& full_size) {
    full_size = 0;
    if (in.size() <= batch_field::magic) {
        // Without the magic byte these bytes may be anything (the 16-byte segment footer,
        // say), so no size is promised even when a length field is readable.
        err = format_error(format_errc::truncated,
                           fmt::format("{} bytes left, a batch needs at least {}", in.size(), batch_header_size));
        return parse_step::incomplete;
    }
    const char* p = in.data();
    // The magic byte sits at offset 16 in every message format version, so old clients get a
    // clear answer before their (differently laid out) bytes are judged as v2.
    const std::int8_t magic = be::read_i8(p + batch_field::magic);
    if (magic == 0 || magic == 1) {
        err = format_error(format_errc::old_message_format,
                           fmt::format("message format v0/v1 (magic {}) is not supported; upgrade the client", int{magic}));
        return parse_step::bad;
    }
    if (magic != 2) {
        err = format_error(format_errc::bad_magic, fmt::format("unknown record batch magic {} (expected 2)", int{magic}));
        return parse_step::bad;
    }
    const std::int32_t length = be::read_i32(p + batch_field::batch_length);
    if (length < min_batch_length) {
        err = format_error(format_errc::invalid,
                           fmt::format("batch length {} is below the minimum {}", length, min_batch_length));
        return parse_step::bad;
    }
    const std::size_t full = batch_log_overhead + static_cast<std::size_t>(length);
    if (full > max_batch_bytes) {
        err = format_error(format_errc::too_large,
                           fmt::format("batch of {} bytes exceeds the limit of {} bytes", full, max_batch_bytes));
        return parse_step::bad;
    }
    // Known now, so a range reader may fetch the rest of a cut-off batch.
    full_size = full;
    if (in.size() < full) {
        err = format_error(format_errc::truncated,
                           fmt::format("batch of {} bytes is cut off after {} bytes", full, in.size()));
        return parse_step::incomplete;
    }
    const std::uint32_t stored_crc = be::read_u32(p + batch_field::crc);
    if (verify_crc) {
        // CRC-32C of everything after the crc field; baseOffset, batchLength, epoch and magic
        // are outside it (so the broker may patch baseOffset).
        const std::uint32_t actual = crc32c(p + batch_field::attributes, full - batch_field::attributes);
        if (actual != stored_crc) {
            err = format_error(format_errc::crc_mismatch,
                               fmt::format("record batch CRC mismatch (stored {:#010x}, computed {:#010x})",
                                           stored_crc, actual));
            return parse_step::bad;
        }
    }
    batch_view v;
    v.base_offset = be::read_i64(p + batch_field::base_offset);
    v.batch_length = length;
    v.partition_leader_epoch = be::read_i32(p + batch_field::partition_leader_epoch);
    v.magic = magic;
    v.crc = stored_crc;
    v.attributes = be::read_i16(p + batch_field::attributes);
    v.last_offset_delta = be::read_i32(p + batch_field::last_offset_delta);
    v.base_timestamp = be::read_i64(p + batch_field::base_timestamp);
    v.max_timestamp = be::read_i64(p + batch_field::max_timestamp);
    v.producer_id = be::read_i64(p + batch_field::producer_id);
    v.producer_epoch = be::read_i16(p + batch_field::producer_epoch);
    v.base_sequence = be::read_i32(p + batch_field::base_sequence);
    v.record_count = be::read_i32(p + batch_field::record_count);
    v.bytes = in.first(full);
    v.crc_verified = verify_crc;
    if (v.record_count < 0) {
        err = format_error(format_errc::invalid, fmt::format("negative record count {}", v.record_count));
        return parse_step::bad;
    }
    if (v.last_offset_delta < 0) {
        err = format_error(format_errc::invalid, fmt::format("negative last offset delta {}", v.last_offset_delta));
        return parse_step::bad;
    }
    // last_offset()/next_offset() must be computable without signed overflow.
    if (v.base_offset > std::numeric_limits<std::int64_t>::max() - v.last_offset_delta - 1) {
        err = format_error(format_errc::invalid,
                           fmt::format("base offset {} + last offset delta {} overflows", v.base_offset,
                                       v.last_offset_delta));
        return parse_step::bad;
    }
    out = v;
    return parse_step::ok;
}

} // namespace detail

result<batch_view, format_error> parse_batch(std::span<const char> bytes, bool verify_crc, std::size_t max_batch_bytes) {
    batch_view v;
    format_error err;
    std::size_t full = 0;
    if (detail::parse_batch_prefix(bytes, verify_crc, max_batch_bytes, v, err, full) != detail::parse_step::ok) {
        return failure{std::move(err)};
    }
    return v;
}

result<std::vector<batch_view>, format_error> split_batches(std::span<const char> record_set,
                                                            std::size_t max_batch_bytes) {
    std::vector<batch_view> out;
    std::size_t pos = 0;
    while (pos < record_set.size()) {
        batch_view v;
        format_error err;
        std::size_t full = 0;
        auto step = detail::parse_batch_prefix(record_set.subspan(pos), true, max_batch_bytes, v, err, full);
        if (step != detail::parse_step::ok) {
            // A produce request's record set must hold whole batches: a partial tail means the
            // client (or something between) cut it, and accepting the rest would ack less than
            // was sent.
            err.message = fmt::format("batch {} at byte {}: {}", out.size(), pos, err.message);
            return failure{std::move(err)};
        }
        const auto codec = static_cast<unsigned>(v.attributes & attr_compression_mask);
        if (codec > static_cast<unsigned>(compression_codec::zstd)) {
            return failure{format_error(format_errc::invalid,
                                        fmt::format("batch {} at byte {}: unknown compression codec {}", out.size(),
                                                    pos, codec))};
        }
        out.push_back(v);
        pos += v.bytes.size();
    }
    return out;
}

void set_base_offset(std::span<char> batch, std::int64_t base) noexcept {
    if (batch.size() < 8) return;
    be::write_i64(batch.data() + batch_field::base_offset, base);
}

void set_partition_leader_epoch(std::span<char> batch, std::int32_t epoch) noexcept {
    if (batch.size() < batch_field::partition_leader_epoch + 4) return;
    be::write_i32(batch.data() + batch_field::partition_leader_epoch, epoch);
}

// ---- records ----------------------------------------------------------------------------

namespace {

// A nullable byte string: varint length (-1 = null) then the bytes.
bool read_nullable(std::span<const char> in, std::size_t& pos, std::optional<std::string_view>& out,
                   format_error& err, const char* what, std::size_t index) {
    auto len = varint::read_varint(in, pos);
    if (!len) {
        err = format_error(format_errc::truncated, fmt::format("record {}: {} length cut off or malformed", index, what));
        return false;
    }
    if (*len == -1) {
        out.reset();
        return true;
    }
    if (*len < 0) {
        err = format_error(format_errc::invalid, fmt::format("record {}: negative {} length {}", index, what, *len));
        return false;
    }
    auto n = static_cast<std::size_t>(*len);
    if (n > in.size() - pos) {
        err = format_error(format_errc::truncated,
                           fmt::format("record {}: {} of {} bytes runs past the record", index, what, n));
        return false;
    }
    out = std::string_view(in.data() + pos, n);
    pos += n;
    return true;
}

} // namespace

result<std::vector<record_view>, format_error> parse_records(const batch_view& batch) {
    if (batch.is_compressed()) {
        return failure{format_error(format_errc::invalid,
                                    fmt::format("batch is {}-compressed; records are not decoded",
                                                to_string(batch.compression())))};
    }
    if (batch.bytes.size() < batch_header_size || batch.record_count < 0) {
        return failure{format_error(format_errc::invalid, "not a validated batch")};
    }
    return parse_record_section(batch.records(), batch.record_count);
}

result<std::vector<record_view>, format_error> parse_record_section(std::span<const char> in,
                                                                    std::int32_t record_count) {
    if (record_count < 0) {
        return failure{format_error(format_errc::invalid, fmt::format("negative record count {}", record_count))};
    }
    std::vector<record_view> out;
    // The count is untrusted: every record takes at least 7 bytes, so never reserve more
    // than the bytes could hold.
    out.reserve(std::min<std::size_t>(static_cast<std::size_t>(record_count), in.size() / 7));
    std::size_t pos = 0;
    format_error err;
    for (std::int32_t i = 0; i < record_count; ++i) {
        const auto idx = static_cast<std::size_t>(i);
        auto len = varint::read_varint(in, pos);
        if (!len) {
            return failure{format_error(format_errc::truncated,
                                        fmt::format("record {}: length cut off or malformed", idx))};
        }
        if (*len < 0) {
            return failure{format_error(format_errc::invalid, fmt::format("record {}: negative length {}", idx, *len))};
        }
        if (static_cast<std::size_t>(*len) > in.size() - pos) {
            return failure{format_error(format_errc::truncated,
                                        fmt::format("record {}: {} bytes run past the batch", idx, *len))};
        }
        // Parse inside exactly the record's own bytes, so its length prefix is checked too.
        const auto rec = in.subspan(pos, static_cast<std::size_t>(*len));
        pos += rec.size();
        std::size_t rp = 0;
        record_view r;
        if (rp >= rec.size()) {
            return failure{format_error(format_errc::truncated, fmt::format("record {}: empty", idx))};
        }
        r.attributes = be::read_i8(rec.data());
        rp = 1;
        auto ts = varint::read_varlong(rec, rp);
        auto od = ts ? varint::read_varint(rec, rp) : std::nullopt;
        if (!ts || !od) {
            return failure{format_error(format_errc::truncated,
                                        fmt::format("record {}: timestamp/offset delta cut off or malformed", idx))};
        }
        r.timestamp_delta = *ts;
        r.offset_delta = *od;
        if (!read_nullable(rec, rp, r.key, err, "key", idx)) return failure{std::move(err)};
        if (!read_nullable(rec, rp, r.value, err, "value", idx)) return failure{std::move(err)};
        auto hcount = varint::read_varint(rec, rp);
        if (!hcount) {
            return failure{format_error(format_errc::truncated, fmt::format("record {}: header count cut off", idx))};
        }
        if (*hcount < 0) {
            return failure{format_error(format_errc::invalid,
                                        fmt::format("record {}: negative header count {}", idx, *hcount))};
        }
        // A header takes at least 2 bytes: bound the reservation by the bytes left.
        r.headers.reserve(std::min<std::size_t>(static_cast<std::size_t>(*hcount), (rec.size() - rp) / 2));
        for (std::int32_t h = 0; h < *hcount; ++h) {
            std::optional<std::string_view> key, value;
            if (!read_nullable(rec, rp, key, err, "header key", idx)) return failure{std::move(err)};
            if (!key) {
                return failure{format_error(format_errc::invalid, fmt::format("record {}: null header key", idx))};
            }
            if (!read_nullable(rec, rp, value, err, "header value", idx)) return failure{std::move(err)};
            r.headers.push_back(header_view{*key, value});
        }
        if (rp != rec.size()) {
            return failure{format_error(format_errc::invalid,
                                        fmt::format("record {}: {} bytes left over inside the record", idx,
                                                    rec.size() - rp))};
        }
        out.push_back(std::move(r));
    }
    if (pos != in.size()) {
        return failure{format_error(format_errc::invalid,
                                    fmt::format("{} bytes left over after {} records", in.size() - pos,
                                                record_count))};
    }
    return out;
}

// ---- builder ----------------------------------------------------------------------------

namespace {
void append_nullable(std::string& out, const std::optional<std::string>& s) {
    if (!s) {
        varint::append_varint(out, -1);
        return;
    }
    varint::append_varint(out, static_cast<std::int32_t>(s->size()));
    out.append(*s);
}
} // namespace

std::string build_batch(std::int64_t base_offset, const std::vector<record>& records, const batch_options& opts) {
    std::string body;
    std::int64_t max_delta = records.empty() ? 0 : records.front().timestamp_delta;
    for (const auto& r : records) max_delta = std::max(max_delta, r.timestamp_delta);
    if (opts.raw_records) {
        body = *opts.raw_records;
    } else {
        std::string rec;
        for (std::size_t i = 0; i < records.size(); ++i) {
            const auto& r = records[i];
            rec.clear();
            rec.push_back('\0'); // record attributes: unused in v2
            varint::append_varlong(rec, r.timestamp_delta);
            varint::append_varint(rec, static_cast<std::int32_t>(i));
            append_nullable(rec, r.key);
            append_nullable(rec, r.value);
            varint::append_varint(rec, static_cast<std::int32_t>(r.headers.size()));
            for (const auto& h : r.headers) {
                varint::append_varint(rec, static_cast<std::int32_t>(h.key.size()));
                rec.append(h.key);
                append_nullable(rec, h.value);
            }
            varint::append_varint(body, static_cast<std::int32_t>(rec.size()));
            body.append(rec);
        }
    }
    std::int16_t attributes = opts.attributes;
    if (!opts.raw_records && opts.compress != compression_codec::none) {
        auto packed = compress(opts.compress, body);
        // Only a library failure (out of memory) gets here; this builder serves tests and tools.
        if (!packed) throw std::runtime_error("build_batch: " + packed.error().message);
        body = std::move(*packed);
        attributes = static_cast<std::int16_t>((attributes & ~attr_compression_mask) |
                                               static_cast<std::int16_t>(opts.compress));
    }
    const auto count = opts.record_count.value_or(static_cast<std::int32_t>(records.size()));
    const auto lod = opts.last_offset_delta.value_or(
        records.empty() ? 0 : static_cast<std::int32_t>(records.size() - 1));

    std::string out(batch_header_size, '\0');
    out.append(body);
    char* p = out.data();
    be::write_i64(p + batch_field::base_offset, base_offset);
    be::write_i32(p + batch_field::batch_length, static_cast<std::int32_t>(out.size() - batch_log_overhead));
    be::write_i32(p + batch_field::partition_leader_epoch, opts.partition_leader_epoch);
    p[batch_field::magic] = 2;
    be::write_i16(p + batch_field::attributes, attributes);
    be::write_i32(p + batch_field::last_offset_delta, lod);
    be::write_i64(p + batch_field::base_timestamp, opts.base_timestamp);
    be::write_i64(p + batch_field::max_timestamp, opts.max_timestamp.value_or(static_cast<std::int64_t>(
                                                         static_cast<std::uint64_t>(opts.base_timestamp) +
                                                         static_cast<std::uint64_t>(max_delta))));
    be::write_i64(p + batch_field::producer_id, opts.producer_id);
    be::write_i16(p + batch_field::producer_epoch, opts.producer_epoch);
    be::write_i32(p + batch_field::base_sequence, opts.base_sequence);
    be::write_i32(p + batch_field::record_count, count);
    be::write_u32(p + batch_field::crc, crc32c(p + batch_field::attributes, out.size() - batch_field::attributes));
    return out;
}

} // namespace skiff::storage
