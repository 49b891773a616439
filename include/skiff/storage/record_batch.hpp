// Kafka record batches (message format v2, "magic 2"): validation, views, and a builder.
//
// Everything here is a pure function over caller-owned bytes: no I/O, no allocation beyond the
// returned vectors/strings, callable from any core or thread. Views (batch_view, record_view)
// point into the caller's buffer and live only as long as it does.
//
// Input is never trusted: every length is checked against the bytes present before it is used,
// and every failure is a format_error (never a crash, never UB). The batch layout is in
// ../shared/design/kafscale-format.md, "Kafka record batch v2 header".
#pragma once

#include <skiff/core/endian.hpp>
#include <skiff/core/result.hpp>
#include <skiff/core/varint.hpp>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::storage {

// ---- errors ------------------------------------------------------------------------------

// Why bytes were rejected. Lets the Kafka layer pick an error code:
//   truncated, invalid, crc_mismatch -> CORRUPT_MESSAGE (2) / INVALID_RECORD (87)
//   old_message_format               -> UNSUPPORTED_FOR_MESSAGE_FORMAT (43)
//   too_large                        -> MESSAGE_TOO_LARGE (10)
//   bad_magic, unsupported_version   -> (objects) the storage layer's errc::corrupt
enum class format_errc : std::uint8_t {
    truncated = 1,       // the input ends inside a structure
    bad_magic,           // magic bytes are not the expected ones
    unsupported_version, // a version this code does not read
    old_message_format,  // a Kafka message set v0/v1 (magic 0 or 1)
    crc_mismatch,        // a stored CRC-32C does not match the bytes
    invalid,             // a field is out of range or inconsistent with another
    too_large,           // a length beyond the configured limit
};
const char* to_string(format_errc c) noexcept;

// A format failure: the kind plus one sentence saying where and what (for logs and for the
// Kafka error message). Not an aggregate, like the s3 option structs, so it is safe to pass as
// a temporary inside co_await expressions under g++ 12.
struct format_error {
    format_error() = default;
    format_error(format_errc c, std::string m) : code(c), message(std::move(m)) {}
    format_errc code = format_errc::invalid;
    std::string message;
};

// ---- big-endian access and Kafka varints ------------------------------------------------
// All formats here are big-endian; records use zig-zag varints. The codecs live in core
// (shared with the Kafka protocol); the aliases keep `be::` / `varint::` short in format code.
namespace be = ::skiff::be;
namespace varint = ::skiff::varint;

// ---- record batch layout ----------------------------------------------------------------

// Byte offsets of the v2 batch header fields (kafscale-format.md, "Kafka record batch v2").
namespace batch_field {
inline constexpr std::size_t base_offset = 0;
inline constexpr std::size_t batch_length = 8;
inline constexpr std::size_t partition_leader_epoch = 12;
inline constexpr std::size_t magic = 16;          // the same position in v0/v1 message sets
inline constexpr std::size_t crc = 17;
inline constexpr std::size_t attributes = 21;     // the CRC covers bytes 21..end
inline constexpr std::size_t last_offset_delta = 23;
inline constexpr std::size_t base_timestamp = 27;
inline constexpr std::size_t max_timestamp = 35;
inline constexpr std::size_t producer_id = 43;
inline constexpr std::size_t producer_epoch = 51;
inline constexpr std::size_t base_sequence = 53;
inline constexpr std::size_t record_count = 57;
} // namespace batch_field

inline constexpr std::size_t batch_header_size = 61;
// baseOffset + batchLength: the part of a batch that batchLength does not count.
inline constexpr std::size_t batch_log_overhead = 12;
// The smallest batchLength of a v2 batch: a header with no records.
inline constexpr std::int32_t min_batch_length = static_cast<std::int32_t>(batch_header_size - batch_log_overhead);
// Default cap on one batch (12 + batchLength): Kafka's socket.request.max.bytes default, so
// no batch a Kafka broker would take is refused, and no garbage length is believed.
inline constexpr std::size_t default_max_batch_bytes = 100u * 1024 * 1024;

enum class compression_codec : std::uint8_t { none = 0, gzip = 1, snappy = 2, lz4 = 3, zstd = 4 };
const char* to_string(compression_codec c) noexcept; // "none", "gzip", ... ("unknown" for 5-7)

// attributes bits (kafscale-format.md): 0-2 compression, 3 timestamp type, 4 transactional,
// 5 control.
inline constexpr std::int16_t attr_compression_mask = 0x07;
inline constexpr std::int16_t attr_log_append_time = 0x08;
inline constexpr std::int16_t attr_transactional = 0x10;
inline constexpr std::int16_t attr_control = 0x20;

// A validated batch: the header fields decoded, `bytes` the whole batch (12 + batch_length
// bytes) inside the caller's buffer.
struct batch_view {
    std::int64_t base_offset = 0;
    std::int32_t batch_length = 0;
    std::int32_t partition_leader_epoch = 0;
    std::int8_t magic = 0;
    std::uint32_t crc = 0;
    std::int16_t attributes = 0;
    std::int32_t last_offset_delta = 0;
    std::int64_t base_timestamp = 0;
    std::int64_t max_timestamp = 0;
    std::int64_t producer_id = 0;
    std::int16_t producer_epoch = 0;
    std::int32_t base_sequence = 0;
    std::int32_t record_count = 0;
    std::span<const char> bytes;
    // `crc` is known to be the CRC of the bytes it covers (parsed with verify_crc, or written
    // by whoever built the batch): a segment builder may then reuse it instead of reading the
    // batch again (segment_builder::append).
    bool crc_verified = false;

    compression_codec compression() const noexcept {
        return static_cast<compression_codec>(attributes & attr_compression_mask);
    }
    bool is_compressed() const noexcept { return (attributes & attr_compression_mask) != 0; }
    bool log_append_time() const noexcept { return (attributes & attr_log_append_time) != 0; }
    bool is_transactional() const noexcept { return (attributes & attr_transactional) != 0; }
    bool is_control() const noexcept { return (attributes & attr_control) != 0; }
    // Validation guarantees base_offset + last_offset_delta + 1 does not overflow.
    std::int64_t last_offset() const noexcept { return base_offset + last_offset_delta; }
    std::int64_t next_offset() const noexcept { return last_offset() + 1; }
    // Kafka itself (LogValidator) requires record_count == last_offset_delta + 1 on produce;
    // split_batches leaves that policy to its caller, which can test it here.
    bool count_matches_offsets() const noexcept {
        return record_count > 0 && static_cast<std::int64_t>(record_count) == std::int64_t{last_offset_delta} + 1;
    }
    std::size_t size() const noexcept { return bytes.size(); }
    // The records section (compressed as a whole when compression() != none).
    std::span<const char> records() const noexcept { return bytes.subspan(batch_header_size); }
};

// Parses and validates the batch at the start of `bytes` (which may continue past it):
// magic (0/1 -> old_message_format, others -> bad_magic), batchLength in
// [min_batch_length, max_batch_bytes - 12], the bytes present (truncated), the CRC-32C over
// bytes 21..end when verify_crc (crc_mismatch; Kafka's CORRUPT_MESSAGE), record_count >= 0,
// last_offset_delta >= 0, and base_offset + last_offset_delta + 1 representable. Compressed
// batches are not decompressed.
result<batch_view, format_error> parse_batch(std::span<const char> bytes, bool verify_crc = true,
                                             std::size_t max_batch_bytes = default_max_batch_bytes);

// Splits a produce request's record set into its batches, validating EVERY batch as
// parse_batch does (CRC included) and also rejecting unknown compression codecs (5-7). A
// trailing partial batch is an error (truncated), not silently dropped. An empty record set
// gives an empty vector. Messages name the batch index and byte position.
result<std::vector<batch_view>, format_error> split_batches(std::span<const char> record_set,
                                                            std::size_t max_batch_bytes = default_max_batch_bytes);

// Overwrites bytes 0..7 (baseOffset) in place with `base`, big-endian. The batch CRC starts at
// byte 21 and stays valid. Does nothing on a span shorter than 8 bytes.
void set_base_offset(std::span<char> batch, std::int64_t base) noexcept;
// Overwrites a batch's partitionLeaderEpoch (bytes 12..15), as a Kafka leader does on append.
// Like the base offset, the field is outside the batch CRC, which stays valid.
void set_partition_leader_epoch(std::span<char> batch, std::int32_t epoch) noexcept;

// ---- records (uncompressed batches only) ------------------------------------------------

struct header_view {
    std::string_view key;
    std::optional<std::string_view> value; // nullopt: null value
};

struct record_view {
    std::int8_t attributes = 0;
    std::int64_t timestamp_delta = 0;
    std::int32_t offset_delta = 0;
    std::optional<std::string_view> key;   // nullopt: null key
    std::optional<std::string_view> value; // nullopt: null value (a tombstone)
    std::vector<header_view> headers;
};

// Decodes the records of an uncompressed batch (for tests, tools and the processor). Fails
// with `invalid` on a compressed batch, on a record whose length prefix disagrees with its
// contents, on negative lengths other than -1 (null), on a count other than record_count, or
// on bytes left over after the last record; with `truncated` when a record runs past the end.
result<std::vector<record_view>, format_error> parse_records(const batch_view& batch);

// The same over a bare, uncompressed records section holding `record_count` records (a
// decompressed batch body: see compression.hpp, decode_records). Views point into `records`.
result<std::vector<record_view>, format_error> parse_record_section(std::span<const char> records,
                                                                    std::int32_t record_count);

// ---- builder (tests and tools) -----------------------------------------------------------

struct record_header {
    record_header() = default;
    record_header(std::string k, std::optional<std::string> v) : key(std::move(k)), value(std::move(v)) {}
    std::string key;
    std::optional<std::string> value;
};

// One record to build. Not an aggregate (see format_error); construct with a value, or a key
// and a value, and set the rest as members.
struct record {
    record() = default;
    record(const char* v) : value(std::string(v)) {} // NOLINT(implicit): {"a", "b"} builds records
    record(std::string v) : value(std::move(v)) {}   // NOLINT(implicit)
    record(std::optional<std::string> k, std::optional<std::string> v, std::vector<record_header> h = {},
           std::int64_t ts_delta = 0)
        : key(std::move(k)), value(std::move(v)), headers(std::move(h)), timestamp_delta(ts_delta) {}
    std::optional<std::string> key;
    std::optional<std::string> value;
    std::vector<record_header> headers;
    std::int64_t timestamp_delta = 0; // relative to batch_options::base_timestamp
};

struct batch_options {
    batch_options() = default;
    std::int16_t attributes = 0; // compression bits only label the bytes, unless `compress` is set
    std::int32_t partition_leader_epoch = -1;
    std::int64_t base_timestamp = 0;
    std::optional<std::int64_t> max_timestamp;      // default: base + the largest timestamp_delta
    std::int64_t producer_id = -1;
    std::int16_t producer_epoch = -1;
    std::int32_t base_sequence = -1;
    std::optional<std::string> raw_records;         // written verbatim as the records section
                                                    // (e.g. a real compressed payload)
    std::optional<std::int32_t> record_count;       // default: records.size()
    std::optional<std::int32_t> last_offset_delta;  // default: max(records.size() - 1, 0)
    // Compresses the records section with this codec and sets the attributes' codec bits
    // (compression.hpp). Ignored with raw_records.
    compression_codec compress = compression_codec::none;
};

// A complete v2 batch with a correct CRC: records get offsetDelta 0, 1, 2, ... and attributes
// 0. Meant for tests and tools; used by tests across the project.
std::string build_batch(std::int64_t base_offset, const std::vector<record>& records,
                        const batch_options& opts = batch_options());

} // namespace skiff::storage
