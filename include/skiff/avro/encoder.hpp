// The Avro binary encoding (Avro 1.11 spec, "Binary Encoding"): appends to a caller's string.
// int and long are zig-zag varints, float and double little-endian IEEE 754, bytes and string
// length-prefixed, arrays and maps a series of blocks (count, items) ended by a 0 count, a
// union its branch index then the value, null nothing. Pure; any thread.
#pragma once

#include <skiff/avro/errc.hpp>
#include <skiff/avro/schema.hpp>
#include <skiff/avro/value.hpp>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace skiff::avro {

class encoder {
public:
    explicit encoder(std::string& out) noexcept : _out(&out) {}

    void write_null() noexcept {}
    void write_bool(bool b);
    void write_int(std::int32_t v);
    void write_long(std::int64_t v);
    void write_float(float v);
    void write_double(double v);
    void write_bytes(std::span<const std::uint8_t> b);
    void write_string(std::string_view s);
    // Fixed: the bytes alone; the schema says how many.
    void write_fixed(std::span<const std::uint8_t> b);
    void write_union_index(std::size_t branch) { write_long(static_cast<std::int64_t>(branch)); }
    // Arrays and maps: write_block_count(n) before n items (map items: key string then value),
    // any number of blocks, then write_end_of_blocks().
    void write_block_count(std::size_t n) { write_long(static_cast<std::int64_t>(n)); }
    void write_end_of_blocks() { write_long(0); }

    std::string& out() noexcept { return *_out; }

private:
    std::string* _out;
};

// Encodes v as a datum of schema s. Arrays and maps go in one block. A union takes the first
// branch the value fits (null for a null value). errc::type_mismatch names the first part of v
// that does not fit; out may then hold a partial datum.
result<void> encode(const node& s, const value& v, std::string& out);

} // namespace skiff::avro
