// Kafka wire primitives: a bounds-checked reader, an appending writer, and their errors.
//
// The generated message codecs (messages.hpp, from tools/kafka_codegen.py) are built on these;
// https://kafka.apache.org/protocol.html#protocol_types describes every encoding used here.
// All integers are big-endian. Plain functions, no I/O, callable on any core.
#pragma once

#include "skiff/core/result.hpp"
#include "skiff/kafka/record_bytes.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace skiff::kafka {

// Why a decode failed: "<message.struct.field>: <reason> at offset <n>".
struct decode_error {
    std::string message;
};

// Why an encode failed (the first error recorded by a writer).
struct encode_error {
    std::string message;
};

// Kafka's UUID type: 16 raw bytes; the zero UUID is the default.
struct uuid {
    std::array<std::uint8_t, 16> bytes{};

    bool is_zero() const noexcept;
    // Kafka's text form: URL-safe base64 without padding (22 characters).
    std::string to_string() const;
    bool operator==(const uuid&) const = default;
};

// A string field may hold at most this many bytes (its int16 length, also enforced for the
// compact form, as Kafka does).
inline constexpr std::size_t max_string_size = 32767;

// Reads Kafka primitives from a byte span it does not own.
//
// Every read checks the bytes left first: truncated or garbage input yields an error, never a
// read past the end. A length (string, bytes, array count) larger than the bytes left is an
// error, as is an unsigned varint longer than 5 bytes (10 for a varlong). The first error sticks:
// later reads fail too, and error() reports the first one with its offset and, once context()
// was called, the field being read.
class reader {
public:
    reader() noexcept = default;
    explicit reader(std::span<const char> data) noexcept
        : _data(data.data()), _size(data.size()) {}

    std::size_t position() const noexcept { return _pos; }
    std::size_t remaining() const noexcept { return _size - _pos; }
    bool ok() const noexcept { return _what == nullptr; }
    // The unread bytes.
    std::span<const char> rest() const noexcept { return {_data + _pos, _size - _pos}; }

    // Fixed-size values. On failure `out` is left unchanged.
    bool read_bool(bool& out) noexcept; // any non-zero byte is true, as in Kafka
    bool read_int8(std::int8_t& out) noexcept;
    bool read_int16(std::int16_t& out) noexcept;
    bool read_uint16(std::uint16_t& out) noexcept;
    bool read_int32(std::int32_t& out) noexcept;
    bool read_uint32(std::uint32_t& out) noexcept;
    bool read_int64(std::int64_t& out) noexcept;
    bool read_float64(double& out) noexcept;
    bool read_uuid(uuid& out) noexcept;

    // Variable-length integers: unsigned (at most 5 bytes, fits 32 bits), zig-zag 32/64-bit.
    bool read_unsigned_varint(std::uint32_t& out) noexcept;
    bool read_varint(std::int32_t& out) noexcept;
    bool read_varlong(std::int64_t& out) noexcept;

    // Strings: int16 length (-1 = null), or compact: unsigned varint length+1 (0 = null).
    // A null where `nullable` is false is an error.
    bool read_string(std::string& out, bool compact);
    bool read_nullable_string(std::optional<std::string>& out, bool compact, bool nullable);
    // Bytes and records: int32 length (-1 = null), or compact as above.
    bool read_bytes(std::string& out, bool compact);
    bool read_nullable_bytes(std::optional<std::string>& out, bool compact, bool nullable);
    // A records field: borrowed from the input when borrow_records() is on, else copied.
    bool read_nullable_records(std::optional<record_bytes>& out, bool compact, bool nullable);
    // Records fields view the input instead of copying it: for a caller that keeps the input
    // alive as long as the decoded message (the broker's Produce path). Sub-readers inherit it.
    void borrow_records(bool on) noexcept { _borrow = on; }
    // An array's element count: int32 or compact; -1 means null (an error unless `nullable`).
    // A count above remaining() is an error: every element takes at least one byte.
    bool read_array_length(std::int32_t& out, bool compact, bool nullable) noexcept;

    // `n` raw bytes, viewed in place.
    bool read_raw(std::size_t n, std::span<const char>& out) noexcept;
    bool skip(std::size_t n) noexcept;
    // Skips a whole tagged-fields section (count, then tag/size/bytes per field).
    bool skip_tagged_fields() noexcept;
    // Moves the next `n` bytes into `sub` (a reader of its own) and skips them here.
    bool sub_reader(std::size_t n, reader& sub) noexcept;

    // Error handling, for the generated code. Each returns false so that a caller can write
    // `return rd.fail("...")`. `what` and `where` must be string literals (they are kept as
    // pointers). fail() records an error at the current offset (the first one wins); context()
    // names the field that was being read (the innermost one wins); adopt() takes over the error
    // of a sub_reader.
    bool fail(const char* what) noexcept;
    bool context(const char* where) noexcept;
    bool adopt(const reader& sub, const char* where) noexcept;
    // The recorded error (a generic message if there is none).
    decode_error error() const;

private:
    bool need(std::size_t n) noexcept;
    template <typename T>
    bool read_be(T& out) noexcept;
    bool read_length(std::int64_t& out, bool compact, bool wide) noexcept;

    const char* _data = nullptr;
    std::size_t _size = 0;
    std::size_t _pos = 0;
    std::size_t _base = 0; // offset of _data in the outermost buffer, for error messages
    const char* _what = nullptr;
    const char* _where = nullptr;
    std::size_t _err_pos = 0;
    bool _borrow = false;
};

// Appends Kafka primitives to a std::string.
//
// Encoding cannot fail for the primitives themselves; what can be wrong is the value (a string
// over 32767 bytes, a null in a version where the field is not nullable, a field the version
// lacks, an unsupported version). Such an error is recorded (the first one wins) and writing
// goes on; check ok() once at the end and discard the bytes if it is false.
class writer {
public:
    writer() = default;
    // Appends to `buf` (e.g. to reuse its capacity, or after bytes already in it).
    explicit writer(std::string buf) : _buf(std::move(buf)) {}

    void write_bool(bool v) { _buf.push_back(v ? '\1' : '\0'); }
    void write_int8(std::int8_t v) { _buf.push_back(static_cast<char>(v)); }
    void write_int16(std::int16_t v) { write_be(static_cast<std::uint16_t>(v), 2); }
    void write_uint16(std::uint16_t v) { write_be(v, 2); }
    void write_int32(std::int32_t v) { write_be(static_cast<std::uint32_t>(v), 4); }
    void write_uint32(std::uint32_t v) { write_be(v, 4); }
    void write_int64(std::int64_t v) { write_be(static_cast<std::uint64_t>(v), 8); }
    void write_float64(double v);
    void write_uuid(const uuid& v);

    void write_unsigned_varint(std::uint32_t v);
    void write_varint(std::int32_t v);
    void write_varlong(std::int64_t v);

    // `where` (a literal) names the field in an error.
    void write_string(std::string_view s, bool compact, const char* where = "string");
    void write_nullable_string(const std::optional<std::string>& s, bool compact, bool nullable,
                               const char* where);
    void write_bytes(std::string_view b, bool compact, const char* where = "bytes");
    void write_nullable_bytes(const std::optional<std::string>& b, bool compact, bool nullable,
                              const char* where);
    void write_nullable_records(const std::optional<record_bytes>& b, bool compact, bool nullable,
                                const char* where);
    void write_array_length(std::size_t n, bool compact, const char* where = "array");
    // A null array (int32 -1, or 0 when compact) if `nullable`, else an error.
    void write_null_array(bool compact, bool nullable, const char* where);
    void write_raw(std::string_view bytes) { _buf.append(bytes); }

    std::size_t size() const noexcept { return _buf.size(); }
    // Inserts, at offset `mark`, the unsigned varint of the byte count written since `mark`
    // (the size prefix of a tagged field).
    void insert_length(std::size_t mark);
    // Overwrites 4 bytes at `offset` (a size prefix reserved earlier).
    void patch_int32(std::size_t offset, std::int32_t v);

    // Records an error (the first one wins). `where` and `what` must be string literals.
    void fail(const char* where, const char* what) noexcept;
    bool ok() const noexcept { return _where == nullptr; }
    encode_error error() const;

    const std::string& buffer() const& noexcept { return _buf; }
    std::string take() && noexcept { return std::move(_buf); }

private:
    void write_be(std::uint64_t v, int bytes);
    void write_null(bool compact, bool wide, bool nullable, const char* where);

    std::string _buf;
    const char* _where = nullptr;
    const char* _what = nullptr;
};

// Encodes `msg` in `version` into a new string; fails with the writer's first error.
template <typename Msg>
result<std::string, encode_error> encode_message(const Msg& msg, std::int16_t version) {
    writer w;
    msg.encode(w, version);
    if (!w.ok()) return failure{w.error()};
    return std::move(w).take();
}

// Decodes a whole `Msg` of `version` from `bytes`; bytes left over are an error.
template <typename Msg>
result<Msg, decode_error> decode_message(std::span<const char> bytes, std::int16_t version) {
    reader rd(bytes);
    Msg out;
    if (!Msg::read(out, rd, version)) return failure{rd.error()};
    if (rd.remaining() != 0) {
        return failure{decode_error{std::string(Msg::message_name) + ": " +
                                    std::to_string(rd.remaining()) + " trailing bytes"}};
    }
    return out;
}

} // namespace skiff::kafka
