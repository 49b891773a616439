// Kafka's compression codecs over zlib, snappy, liblz4 (frame API) and libzstd (streaming
// API). Every decoder grows its output in steps and stops at the caller's limit, so no
// header field (snappy's declared length, a zstd content size) is trusted for an allocation.
#include <skiff/core/crc32c.hpp>
#include <skiff/storage/compression.hpp>

#include <fmt/format.h>
#include <lz4frame.h>
#include <snappy-c.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <limits>
#include <memory>

namespace skiff::storage {

namespace {

format_error invalid(compression_codec c, std::string_view why) {
    return format_error(format_errc::invalid, fmt::format("{} data: {}", to_string(c), why));
}
format_error too_large(compression_codec c, std::size_t limit) {
    return format_error(format_errc::too_large,
                        fmt::format("{} data decompresses to more than {} bytes", to_string(c), limit));
}

// The output grows with what is actually decoded (doubling, starting near a few times the
// input), so a tiny input cannot make us reserve its claimed expansion up front, and a small
// batch does not pay for a large buffer.
std::size_t first_step(std::span<const char> in) {
    return std::clamp<std::size_t>(in.size() * 4, 4096, 1u << 20);
}

// Makes room for more output: returns false when `out` is already at `limit`.
bool grow(std::string& out, std::size_t used, std::size_t limit, std::size_t first) {
    if (used >= limit) return false;
    const std::size_t add = std::max(used, first);
    out.resize(add > limit - used ? limit : used + add);
    return true;
}

// ---- gzip ---------------------------------------------------------------------------------

result<std::string, format_error> gzip_compress(std::span<const char> in) {
    z_stream zs{};
    // 15 + 16: a gzip wrapper, as Java's GZIPOutputStream writes.
    if (deflateInit2(&zs, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        return failure{invalid(compression_codec::gzip, "deflateInit2 failed")};
    }
    std::string out(deflateBound(&zs, static_cast<uLong>(in.size())), '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs.avail_in = static_cast<uInt>(in.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&zs, Z_FINISH);
    const std::size_t n = zs.total_out;
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) return failure{invalid(compression_codec::gzip, "deflate did not finish")};
    out.resize(n);
    return out;
}

result<std::string, format_error> gzip_decompress(std::span<const char> in, std::size_t limit) {
    constexpr auto c = compression_codec::gzip;
    z_stream zs{};
    // 15 + 32: gzip or zlib header, detected.
    if (inflateInit2(&zs, 15 + 32) != Z_OK) return failure{invalid(c, "inflateInit2 failed")};
    std::unique_ptr<z_stream, int (*)(z_stream*)> guard(&zs, inflateEnd);
    std::string out;
    std::size_t used = 0;
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs.avail_in = static_cast<uInt>(in.size());
    if (in.empty()) return failure{format_error(format_errc::truncated, "gzip data: empty")};
    for (;;) {
        if (used == out.size() && !grow(out, used, limit, first_step(in))) return failure{too_large(c, limit)};
        zs.next_out = reinterpret_cast<Bytef*>(out.data() + used);
        zs.avail_out = static_cast<uInt>(out.size() - used);
        const int rc = inflate(&zs, Z_NO_FLUSH);
        used = out.size() - zs.avail_out;
        if (rc == Z_STREAM_END) {
            if (zs.avail_in == 0) break;
            // Another gzip member follows (what `cat a.gz b.gz` makes): read it too.
            if (inflateReset(&zs) != Z_OK) return failure{invalid(c, "inflateReset failed")};
            continue;
        }
        if (rc == Z_BUF_ERROR) {
            if (zs.avail_in == 0) return failure{format_error(format_errc::truncated, "gzip data: cut off")};
            continue; // output full: grow
        }
        if (rc != Z_OK) return failure{invalid(c, zs.msg ? zs.msg : "inflate failed")};
        if (zs.avail_in == 0 && zs.avail_out != 0) {
            return failure{format_error(format_errc::truncated, "gzip data: cut off")};
        }
    }
    out.resize(used);
    return out;
}

// ---- snappy -------------------------------------------------------------------------------

constexpr std::array<char, 8> xerial_magic{'\x82', 'S', 'N', 'A', 'P', 'P', 'Y', '\0'};
constexpr std::size_t xerial_header = 16; // magic + version + compatible version
constexpr std::size_t xerial_block = 32u << 10; // snappy-java's default block size

// One raw snappy block appended to `out`, within `limit` in total.
bool snappy_raw_append(std::span<const char> in, std::string& out, std::size_t limit, format_error& err) {
    constexpr auto c = compression_codec::snappy;
    std::size_t n = 0;
    if (snappy_uncompressed_length(in.data(), in.size(), &n) != SNAPPY_OK) {
        err = invalid(c, "bad block header");
        return false;
    }
    if (n > limit - out.size()) {
        err = too_large(c, limit);
        return false;
    }
    // The declared length is within the limit; a block claiming more than it holds fails in
    // snappy_uncompress, which never writes past n.
    const std::size_t at = out.size();
    out.resize(at + n);
    std::size_t got = n;
    if (snappy_uncompress(in.data(), in.size(), out.data() + at, &got) != SNAPPY_OK || got != n) {
        err = invalid(c, "corrupt block");
        return false;
    }
    return true;
}

result<std::string, format_error> snappy_decompress(std::span<const char> in, std::size_t limit) {
    constexpr auto c = compression_codec::snappy;
    std::string out;
    format_error err;
    if (in.size() < xerial_magic.size() || std::memcmp(in.data(), xerial_magic.data(), xerial_magic.size()) != 0) {
        if (!snappy_raw_append(in, out, limit, err)) return failure{std::move(err)};
        return out;
    }
    if (in.size() < xerial_header) return failure{format_error(format_errc::truncated, "snappy data: header cut off")};
    std::size_t pos = xerial_header;
    while (pos < in.size()) {
        if (in.size() - pos < 4) return failure{format_error(format_errc::truncated, "snappy data: block length cut off")};
        const std::int32_t len = be::read_i32(in.data() + pos);
        pos += 4;
        if (len < 0) return failure{invalid(c, "negative block length")};
        if (static_cast<std::size_t>(len) > in.size() - pos) {
            return failure{format_error(format_errc::truncated, "snappy data: block cut off")};
        }
        if (!snappy_raw_append(in.subspan(pos, static_cast<std::size_t>(len)), out, limit, err)) {
            return failure{std::move(err)};
        }
        pos += static_cast<std::size_t>(len);
    }
    return out;
}

result<std::string, format_error> snappy_compress_xerial(std::span<const char> in) {
    std::string out(xerial_magic.data(), xerial_magic.size());
    be::append_i32(out, 1); // version
    be::append_i32(out, 1); // minimum compatible version
    std::string block;
    for (std::size_t pos = 0; pos < in.size(); pos += xerial_block) {
        const std::size_t n = std::min(xerial_block, in.size() - pos);
        std::size_t cap = snappy_max_compressed_length(n);
        block.resize(cap);
        if (snappy_compress(in.data() + pos, n, block.data(), &cap) != SNAPPY_OK) {
            return failure{invalid(compression_codec::snappy, "snappy_compress failed")};
        }
        be::append_i32(out, static_cast<std::int32_t>(cap));
        out.append(block.data(), cap);
    }
    return out;
}

// ---- lz4 ----------------------------------------------------------------------------------

result<std::string, format_error> lz4_compress(std::span<const char> in) {
    LZ4F_preferences_t prefs{};
    prefs.frameInfo.blockSizeID = LZ4F_max64KB;
    prefs.frameInfo.blockMode = LZ4F_blockIndependent; // Kafka's Java reader needs independent blocks
    std::string out(LZ4F_compressFrameBound(in.size(), &prefs), '\0');
    const std::size_t n = LZ4F_compressFrame(out.data(), out.size(), in.data(), in.size(), &prefs);
    if (LZ4F_isError(n)) return failure{invalid(compression_codec::lz4, LZ4F_getErrorName(n))};
    out.resize(n);
    return out;
}

result<std::string, format_error> lz4_decompress(std::span<const char> in, std::size_t limit) {
    constexpr auto c = compression_codec::lz4;
    LZ4F_dctx* raw = nullptr;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&raw, LZ4F_VERSION))) return failure{invalid(c, "no context")};
    std::unique_ptr<LZ4F_dctx, LZ4F_errorCode_t (*)(LZ4F_dctx*)> ctx(raw, LZ4F_freeDecompressionContext);
    std::string out;
    std::size_t used = 0, pos = 0;
    std::size_t hint = 1; // 0 once a frame is complete (the context then expects a new one)
    if (in.empty()) return failure{format_error(format_errc::truncated, "lz4 data: empty")};
    while (pos < in.size() || hint != 0) {
        if (used == out.size() && !grow(out, used, limit, first_step(in))) return failure{too_large(c, limit)};
        std::size_t dst = out.size() - used;
        std::size_t src = in.size() - pos;
        hint = LZ4F_decompress(ctx.get(), out.data() + used, &dst, in.data() + pos, &src, nullptr);
        if (LZ4F_isError(hint)) return failure{invalid(c, LZ4F_getErrorName(hint))};
        used += dst;
        pos += src;
        if (hint != 0 && pos == in.size() && dst == 0) {
            return failure{format_error(format_errc::truncated, "lz4 data: frame cut off")};
        }
    }
    out.resize(used);
    return out;
}

// ---- zstd ---------------------------------------------------------------------------------

result<std::string, format_error> zstd_compress(std::span<const char> in) {
    std::string out(ZSTD_compressBound(in.size()), '\0');
    const std::size_t n = ZSTD_compress(out.data(), out.size(), in.data(), in.size(), 3);
    if (ZSTD_isError(n)) return failure{invalid(compression_codec::zstd, ZSTD_getErrorName(n))};
    out.resize(n);
    return out;
}

result<std::string, format_error> zstd_decompress(std::span<const char> in, std::size_t limit) {
    constexpr auto c = compression_codec::zstd;
    std::unique_ptr<ZSTD_DStream, std::size_t (*)(ZSTD_DStream*)> ds(ZSTD_createDStream(), ZSTD_freeDStream);
    if (!ds) return failure{invalid(c, "no context")};
    // The decoder allocates the window a frame header declares. Kafka's writers use at most
    // 2^23 bytes at their usual levels; beyond that, no window larger than the limit is taken
    // (zstd's own cap is 2^27).
    const int log = std::clamp(static_cast<int>(std::bit_width(limit)), 23, 27);
    ZSTD_DCtx_setParameter(ds.get(), ZSTD_d_windowLogMax, log);
    if (in.empty()) return failure{format_error(format_errc::truncated, "zstd data: empty")};
    std::string out;
    std::size_t used = 0;
    ZSTD_inBuffer ib{in.data(), in.size(), 0};
    std::size_t hint = 1;
    while (ib.pos < ib.size || hint != 0) {
        if (used == out.size() && !grow(out, used, limit, first_step(in))) return failure{too_large(c, limit)};
        ZSTD_outBuffer ob{out.data(), out.size(), used};
        const std::size_t before_in = ib.pos;
        hint = ZSTD_decompressStream(ds.get(), &ob, &ib);
        if (ZSTD_isError(hint)) return failure{invalid(c, ZSTD_getErrorName(hint))};
        const bool progressed = ob.pos != used || ib.pos != before_in;
        used = ob.pos;
        if (hint != 0 && ib.pos == ib.size && ob.pos < ob.size) {
            return failure{format_error(format_errc::truncated, "zstd data: frame cut off")};
        }
        if (!progressed && ob.pos < ob.size) return failure{invalid(c, "no progress")};
    }
    out.resize(used);
    return out;
}

} // namespace

result<std::string, format_error> compress(compression_codec codec, std::span<const char> in) {
    switch (codec) {
    case compression_codec::none: return std::string(in.data(), in.size());
    case compression_codec::gzip: return gzip_compress(in);
    case compression_codec::snappy: return snappy_compress_xerial(in);
    case compression_codec::lz4: return lz4_compress(in);
    case compression_codec::zstd: return zstd_compress(in);
    }
    return failure{format_error(format_errc::invalid, fmt::format("unknown compression codec {}", int(codec)))};
}

result<std::string, format_error> decompress(compression_codec codec, std::span<const char> in,
                                             std::size_t max_output) {
    switch (codec) {
    case compression_codec::none:
        if (in.size() > max_output) return failure{too_large(codec, max_output)};
        return std::string(in.data(), in.size());
    case compression_codec::gzip: return gzip_decompress(in, max_output);
    case compression_codec::snappy: return snappy_decompress(in, max_output);
    case compression_codec::lz4: return lz4_decompress(in, max_output);
    case compression_codec::zstd: return zstd_decompress(in, max_output);
    }
    return failure{format_error(format_errc::invalid, fmt::format("unknown compression codec {}", int(codec)))};
}

result<decoded_records, format_error> decode_records(const batch_view& batch, std::size_t max_uncompressed) {
    if (batch.bytes.size() < batch_header_size) {
        return failure{format_error(format_errc::invalid, "not a validated batch")};
    }
    decoded_records out;
    if (batch.is_compressed()) {
        auto plain = decompress(batch.compression(), batch.records(), max_uncompressed);
        if (!plain) return failure{std::move(plain.error())};
        out.data.assign(plain->begin(), plain->end());
        out.section = std::span<const char>(out.data.data(), out.data.size());
    } else {
        out.section = batch.records();
    }
    auto recs = parse_record_section(out.section, batch.record_count);
    if (!recs) return failure{std::move(recs.error())};
    out.records = std::move(*recs);
    return out;
}

result<std::string, format_error> rebuild_batch(const batch_view& header, std::span<const char> records,
                                                compression_codec codec, std::int16_t attributes,
                                                std::int64_t max_timestamp) {
    if (header.bytes.size() < batch_header_size) {
        return failure{format_error(format_errc::invalid, "not a validated batch")};
    }
    auto body = compress(codec, records);
    if (!body) return failure{std::move(body.error())};
    if (body->size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()) - batch_header_size) {
        return failure{format_error(format_errc::too_large, "the rebuilt batch is over 2 GiB")};
    }
    std::string out(header.bytes.data(), batch_header_size);
    out.append(*body);
    char* p = out.data();
    be::write_i32(p + batch_field::batch_length, static_cast<std::int32_t>(out.size() - batch_log_overhead));
    be::write_i16(p + batch_field::attributes,
                  static_cast<std::int16_t>((attributes & ~attr_compression_mask) | static_cast<std::int16_t>(codec)));
    be::write_i64(p + batch_field::max_timestamp, max_timestamp);
    be::write_u32(p + batch_field::crc, crc32c(p + batch_field::attributes, out.size() - batch_field::attributes));
    return out;
}

} // namespace skiff::storage
