// The Thrift compact protocol, as Parquet uses it for page headers and the file footer
// (thrift/doc/specs/thrift-compact-protocol.md). The writer appends to a caller's string and
// never allocates otherwise; the reader parses untrusted bytes into a small tree of values
// (good for tests and for reading footers back), bounded in depth and never past the input.
// Pure; any core or thread.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/parquet/errc.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace skiff::parquet::thrift {

// The 4-bit type codes of the compact protocol.
enum class ctype : std::uint8_t {
    stop = 0,
    bool_true = 1,
    bool_false = 2,
    i8 = 3,
    i16 = 4,
    i32 = 5,
    i64 = 6,
    double_ = 7,
    binary = 8,
    list = 9,
    set = 10,
    map = 11,
    struct_ = 12,
};

// Appends one struct (or several, one after the other) to `out`. Field ids must grow within a
// struct when the short (delta) header is to be used; any order is still encoded correctly.
// Nesting deeper than max_depth is a programming error (aborts).
class compact_writer {
public:
    static constexpr std::size_t max_depth = 32;

    explicit compact_writer(std::string& out) noexcept : _out(out) {}

    void field_bool(std::int16_t id, bool v);
    void field_i8(std::int16_t id, std::int8_t v);
    void field_i16(std::int16_t id, std::int16_t v);
    void field_i32(std::int16_t id, std::int32_t v);
    void field_i64(std::int16_t id, std::int64_t v);
    void field_double(std::int16_t id, double v);
    void field_binary(std::int16_t id, std::string_view v);

    // A struct-valued field (also a union): fields follow, then end_struct().
    void begin_struct(std::int16_t id);
    // A list-valued field of n elements of type elem; the elements follow (elem_* or, for
    // structs, begin_element() ... end_struct()).
    void begin_list(std::int16_t id, ctype elem, std::size_t n);
    void elem_i32(std::int32_t v);
    void elem_i64(std::int64_t v);
    void elem_binary(std::string_view v);
    void elem_bool(bool v);
    void begin_element(); // a struct element of a list
    // Writes the stop field of the innermost open struct; at depth 0, ends the top-level one.
    void end_struct();

private:
    void field_header(std::int16_t id, ctype t);
    void push();

    std::string& _out;
    std::int16_t _last = 0;
    std::size_t _depth = 0;
    std::array<std::int16_t, max_depth> _stack{};
};

// Low-level pieces, public for golden-byte tests.
void append_varint(std::string& out, std::uint64_t v);
void append_list_header(std::string& out, ctype elem, std::size_t n);

// ---- reading --------------------------------------------------------------------------------

// One decoded value. Integers of every width land in `i`; binary in `bin`; a list's elements in
// `elems` (elem_type says their type); a struct's fields in `fields` in wire order, their ids
// in `ids` (parallel arrays: a vector of pairs of an incomplete type does not compile on clang).
struct value {
    ctype type = ctype::stop;
    std::int64_t i = 0;
    double d = 0;
    bool b = false;
    std::string bin;
    ctype elem_type = ctype::stop;
    std::vector<value> elems;
    std::vector<value> fields;
    std::vector<std::int16_t> ids;

    // The field with this id of a struct value, or nullptr.
    const value* field(std::int16_t id) const noexcept;
};

// Reads one struct starting at in[pos] and moves pos past its stop byte. Maps and sets are
// decoded too (a map as a list of alternating keys and values), so any valid struct parses.
// Errors: errc::corrupt (truncated, bad type code, too deep, sizes beyond the input).
result<value, parquet_error> read_struct(std::span<const char> in, std::size_t& pos);

} // namespace skiff::parquet::thrift
