// Reads Avro binary data from untrusted bytes: primitives, and whole datums of a schema into
// avro::value ("read with the writer's schema"; no schema resolution). A read never goes past
// the input, and no length or count is trusted before it is checked against the bytes left
// and the value budget. Pure; any thread.
#pragma once

#include <skiff/avro/errc.hpp>
#include <skiff/avro/schema.hpp>
#include <skiff/avro/value.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace skiff::avro {

struct decode_limits {
    decode_limits() {}
    // Values a decoder may produce in all; bounds the memory of datums that encode to nothing
    // (arrays of null, empty records).
    std::size_t max_values = std::size_t{1} << 24;
    // Nesting of arrays/maps/records/unions a datum may have.
    std::size_t max_depth = 64;
};

class decoder {
public:
    explicit decoder(std::string_view in, decode_limits limits = {}) noexcept : _in(in), _limits(limits) {}

    result<bool> read_bool();
    result<std::int32_t> read_int();
    result<std::int64_t> read_long();
    result<float> read_float();
    result<double> read_double();
    result<bytes> read_bytes();
    result<std::string> read_string();
    result<bytes> read_fixed(std::size_t n);
    // A block count of an array or map: the number of items (0 ends the series). A negative
    // count is followed by the block's byte size, which is read and dropped.
    result<std::size_t> read_block_count(std::size_t item_min_size);

    // One datum of schema s.
    result<value> read(const node& s);

    std::size_t position() const noexcept { return _pos; }
    std::size_t remaining() const noexcept { return _in.size() - _pos; }
    bool at_end() const noexcept { return _pos == _in.size(); }
    // Takes n raw bytes (e.g. a sync marker); errc::truncated when fewer are left.
    result<std::string_view> take(std::size_t n);

private:
    result<value> read_at_depth(const node& s, std::size_t depth);
    result<std::size_t> read_length();
    result<void> spend(std::size_t n_values);

    std::string_view _in;
    std::size_t _pos = 0;
    decode_limits _limits;
    std::size_t _values = 0;
};

} // namespace skiff::avro
