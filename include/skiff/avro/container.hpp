// Avro object container files (Avro 1.11 spec, "Object Container Files"): the header (magic
// "Obj\x01", a metadata map holding avro.schema and avro.codec, a 16-byte sync marker) and
// blocks of (record count, byte size, records, sync marker). Codecs: null and deflate (raw
// RFC 1951). Pure; any thread.
#pragma once

#include <skiff/avro/decoder.hpp>
#include <skiff/avro/errc.hpp>
#include <skiff/avro/schema.hpp>
#include <skiff/avro/value.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::avro {

enum class codec : std::uint8_t { null, deflate };
const char* to_string(codec c) noexcept;

using sync_marker = std::array<std::uint8_t, 16>;
using metadata = std::vector<std::pair<std::string, std::string>>; // key, value bytes

struct writer_options {
    writer_options() {}
    avro::codec codec = avro::codec::null;
    int deflate_level = 6;
    avro::metadata metadata;          // the caller's keys; "avro.*" is reserved
    std::optional<sync_marker> sync;  // random when unset (tests fix it for golden bytes)
    std::size_t block_bytes = 64 * 1024; // a block is closed once its data reaches this size
};

class container_writer {
public:
    // errc::invalid_schema for a bad schema, errc::unsupported for a reserved metadata key.
    static result<container_writer> create(std::string_view schema_json, writer_options options = {});

    // Appends one record; errc::type_mismatch (and nothing appended) when it does not fit.
    result<void> append(const value& record);
    // Appends a record the caller encoded with this writer's schema.
    void append_encoded(std::string_view datum);
    // The whole file. The writer is empty afterwards.
    result<std::string> finish();

    const node& schema() const noexcept { return *_schema; }
    std::size_t records() const noexcept { return _records; }

private:
    container_writer() = default;
    result<void> flush_block();

    node_ptr _schema;
    writer_options _options;
    sync_marker _sync{};
    std::string _out;   // header and closed blocks
    std::string _block; // records of the open block
    std::size_t _block_count = 0;
    std::size_t _records = 0;
};

struct reader_options {
    reader_options() {}
    std::size_t max_block_bytes = std::size_t{64} << 20; // a block's data after decompression
    // All blocks' data after decompression: a small file of highly compressed blocks must not
    // decode into gigabytes.
    std::size_t max_total_bytes = std::size_t{256} << 20;
    decode_limits limits;
};

struct container {
    std::string schema_json;
    node_ptr schema;
    avro::codec codec = avro::codec::null;
    avro::metadata metadata; // every header key, avro.* included, in file order
    sync_marker sync{};
    std::vector<value> records;

    const std::string* find_metadata(std::string_view key) const noexcept;
};

// Reads a whole file. Corrupt input (bad magic, sync, codec, schema, truncation, a length
// beyond the input or the limits, a block whose records do not fill it exactly) is an error,
// never a crash or an allocation the input does not justify.
result<container> read_container(std::string_view file, const reader_options& options = {});

} // namespace skiff::avro
