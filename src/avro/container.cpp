// Avro object container files: writer and reader, codecs null and deflate.
#include <skiff/avro/container.hpp>

#include <skiff/avro/encoder.hpp>

#include <fmt/format.h>
#include <zlib.h>

#include <random>

namespace skiff::avro {

namespace {

constexpr std::string_view magic{"Obj\x01", 4};

// Raw deflate (RFC 1951, no zlib header or checksum), as the Avro spec requires: windowBits -15.
result<std::string> deflate_raw(std::string_view in, int level) {
    z_stream zs{};
    if (deflateInit2(&zs, level, Z_DEFLATED, -15, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return fail(errc::unsupported, "zlib deflateInit2 failed");
    std::string out(deflateBound(&zs, static_cast<uLong>(in.size())), '\0');
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs.avail_in = static_cast<uInt>(in.size());
    zs.next_out = reinterpret_cast<Bytef*>(out.data());
    zs.avail_out = static_cast<uInt>(out.size());
    const int rc = deflate(&zs, Z_FINISH);
    const auto produced = zs.total_out;
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) return fail(errc::unsupported, "zlib deflate did not finish");
    out.resize(produced);
    return out;
}

result<std::string> inflate_raw(std::string_view in, std::size_t max_out) {
    z_stream zs{};
    if (inflateInit2(&zs, -15) != Z_OK) return fail(errc::unsupported, "zlib inflateInit2 failed");
    zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    zs.avail_in = static_cast<uInt>(in.size());
    std::string out;
    char chunk[16384];
    int rc = Z_OK;
    while (rc != Z_STREAM_END) {
        zs.next_out = reinterpret_cast<Bytef*>(chunk);
        zs.avail_out = sizeof chunk;
        rc = inflate(&zs, Z_NO_FLUSH);
        if (rc != Z_OK && rc != Z_STREAM_END) {
            inflateEnd(&zs);
            if (rc == Z_BUF_ERROR) return fail(errc::truncated, "deflate block ends early");
            return fail(errc::corrupt, fmt::format("deflate block does not inflate ({})", zs.msg ? zs.msg : "zlib error"));
        }
        const std::size_t got = sizeof chunk - zs.avail_out;
        if (out.size() + got > max_out) {
            inflateEnd(&zs);
            return fail(errc::too_large, fmt::format("deflate block inflates beyond {} bytes", max_out));
        }
        out.append(chunk, got);
        if (rc == Z_OK && got == 0 && zs.avail_in == 0) {
            inflateEnd(&zs);
            return fail(errc::truncated, "deflate block ends early");
        }
    }
    inflateEnd(&zs);
    return out;
}

sync_marker random_sync() {
    std::random_device rd;
    sync_marker s{};
    for (std::size_t i = 0; i < s.size(); i += 4) {
        const auto r = rd();
        for (std::size_t k = 0; k < 4; ++k) s[i + k] = static_cast<std::uint8_t>(r >> (8 * k));
    }
    return s;
}

std::string_view sync_view(const sync_marker& s) { return {reinterpret_cast<const char*>(s.data()), s.size()}; }

} // namespace

const char* to_string(codec c) noexcept { return c == codec::deflate ? "deflate" : "null"; }

result<container_writer> container_writer::create(std::string_view schema_json, writer_options options) {
    auto schema = parse_schema(schema_json);
    if (!schema) return failure{std::move(schema).error()};
    for (const auto& [k, v] : options.metadata)
        if (k.starts_with("avro.")) return fail(errc::unsupported, fmt::format("metadata key \"{}\" is reserved", k));
    container_writer w;
    w._schema = std::move(schema).value();
    w._sync = options.sync ? *options.sync : random_sync();
    w._options = std::move(options);
    // Header: magic, metadata as map<bytes> in one block, sync marker.
    w._out.append(magic);
    encoder e(w._out);
    e.write_block_count(2 + w._options.metadata.size());
    e.write_string("avro.schema");
    e.write_string(schema_json);
    e.write_string("avro.codec");
    e.write_string(to_string(w._options.codec));
    for (const auto& [k, v] : w._options.metadata) {
        e.write_string(k);
        e.write_string(v);
    }
    e.write_end_of_blocks();
    w._out.append(sync_view(w._sync));
    return w;
}

result<void> container_writer::append(const value& rec) {
    const std::size_t mark = _block.size();
    if (auto r = encode(*_schema, rec, _block); !r) {
        _block.resize(mark);
        return r;
    }
    ++_block_count;
    ++_records;
    if (_block.size() >= _options.block_bytes) return flush_block();
    return ok();
}

void container_writer::append_encoded(std::string_view datum) {
    _block.append(datum);
    ++_block_count;
    ++_records;
}

result<void> container_writer::flush_block() {
    if (_block_count == 0) return ok();
    std::string data;
    if (_options.codec == codec::deflate) {
        auto z = deflate_raw(_block, _options.deflate_level);
        if (!z) return failure{std::move(z).error()};
        data = std::move(z).value();
    } else {
        data = std::move(_block);
    }
    encoder e(_out);
    e.write_long(static_cast<std::int64_t>(_block_count));
    e.write_long(static_cast<std::int64_t>(data.size()));
    _out.append(data);
    _out.append(sync_view(_sync));
    _block.clear();
    _block_count = 0;
    return ok();
}

result<std::string> container_writer::finish() {
    if (auto r = flush_block(); !r) return failure{std::move(r).error()};
    std::string out = std::move(_out);
    _out.clear();
    return out;
}

const std::string* container::find_metadata(std::string_view key) const noexcept {
    for (const auto& [k, v] : metadata)
        if (k == key) return &v;
    return nullptr;
}

namespace {

failure<error> with_context(error e, std::string_view where) {
    e.message = fmt::format("{}: {}", where, e.message);
    return failure{std::move(e)};
}

} // namespace

result<container> read_container(std::string_view file, const reader_options& options) {
    container c;
    decoder d(file, options.limits);
    auto m = d.take(magic.size());
    if (!m || *m != magic) return fail(errc::corrupt, "not an Avro object container file (bad magic)");
    // Header metadata: map<bytes>.
    for (;;) {
        auto n = d.read_block_count(2); // a key and a value take at least a length byte each
        if (!n) return with_context(std::move(n).error(), "header");
        if (*n == 0) break;
        for (std::size_t i = 0; i < *n; ++i) {
            auto k = d.read_string();
            if (!k) return with_context(std::move(k).error(), "header key");
            auto v = d.read_string();
            if (!v) return with_context(std::move(v).error(), "header value");
            c.metadata.emplace_back(std::move(k).value(), std::move(v).value());
        }
    }
    auto sync = d.take(c.sync.size());
    if (!sync) return with_context(std::move(sync).error(), "header sync marker");
    std::copy(sync->begin(), sync->end(), reinterpret_cast<char*>(c.sync.data()));

    const std::string* schema_json = c.find_metadata("avro.schema");
    if (!schema_json) return fail(errc::corrupt, "header has no avro.schema");
    c.schema_json = *schema_json;
    auto schema = parse_schema(c.schema_json);
    if (!schema) return with_context(std::move(schema).error(), "avro.schema");
    c.schema = std::move(schema).value();
    if (const std::string* cn = c.find_metadata("avro.codec"); cn && *cn != "null") {
        if (*cn != "deflate") return fail(errc::unsupported, fmt::format("codec \"{}\" is not supported", *cn));
        c.codec = codec::deflate;
    }

    std::size_t values = 0;
    std::size_t total = 0;
    while (!d.at_end()) {
        const std::size_t block_at = d.position();
        auto count = d.read_long();
        if (!count) return with_context(std::move(count).error(), "block count");
        auto size = d.read_long();
        if (!size) return with_context(std::move(size).error(), "block size");
        if (*count < 0 || *size < 0) return fail(errc::corrupt, fmt::format("negative block count or size at offset {}", block_at));
        if (static_cast<std::uint64_t>(*size) > d.remaining())
            return fail(errc::truncated, fmt::format("block at offset {} claims {} bytes, {} left", block_at, *size, d.remaining()));
        if (static_cast<std::uint64_t>(*size) > options.max_block_bytes)
            return fail(errc::too_large, fmt::format("block at offset {} of {} bytes beyond the limit", block_at, *size));
        auto raw = d.take(static_cast<std::size_t>(*size));
        if (!raw) return with_context(std::move(raw).error(), "block");
        auto marker = d.take(c.sync.size());
        if (!marker) return with_context(std::move(marker).error(), "block sync marker");
        if (*marker != sync_view(c.sync)) return fail(errc::corrupt, fmt::format("block at offset {} ends without the sync marker", block_at));

        std::string inflated;
        std::string_view data = *raw;
        if (c.codec == codec::deflate) {
            auto z = inflate_raw(*raw, options.max_block_bytes);
            if (!z) return with_context(std::move(z).error(), fmt::format("block at offset {}", block_at));
            inflated = std::move(z).value();
            data = inflated;
        }
        total += data.size();
        if (total > options.max_total_bytes)
            return fail(errc::too_large, fmt::format("blocks up to offset {} hold more than {} bytes", block_at, options.max_total_bytes));
        // The count is checked against the data before anything is reserved for it.
        const auto n = static_cast<std::uint64_t>(*count);
        const std::size_t min = c.schema->min_size;
        if ((min > 0 && n > data.size() / min) || n > options.limits.max_values - std::min(values, options.limits.max_values))
            return fail(errc::too_large, fmt::format("block at offset {} claims {} records in {} bytes", block_at, n, data.size()));
        decode_limits lim = options.limits;
        lim.max_values -= std::min(values, lim.max_values);
        decoder bd(data, lim);
        for (std::uint64_t i = 0; i < n; ++i) {
            auto v = bd.read(*c.schema);
            if (!v) return with_context(std::move(v).error(), fmt::format("record {} of block at offset {}", i, block_at));
            c.records.push_back(std::move(v).value());
        }
        if (!bd.at_end()) return fail(errc::corrupt, fmt::format("block at offset {} has {} bytes after its {} records", block_at, bd.remaining(), n));
        values += n;
    }
    return c;
}

} // namespace skiff::avro
