// avro::value: one decoded Avro datum, as the generic decoder produces it and the generic
// encoder consumes it. The schema gives it meaning (a record's fields are in schema order,
// bytes and fixed are both `bytes`, logical types stay their base type). Pure; any thread.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

namespace skiff::avro {

using bytes = std::vector<std::uint8_t>;

struct value;
struct map_entry;
using array = std::vector<value>;
using map = std::vector<map_entry>; // in the order read; Avro maps have no key order

struct record {
    std::vector<value> fields; // one per schema field, in schema order
};

struct enum_symbol {
    std::int32_t index = 0;
    std::string symbol;
};

struct value {
    using storage = std::variant<std::monostate, bool, std::int32_t, std::int64_t, float, double, bytes,
                                 std::string, array, map, record, enum_symbol>;
    storage v;

    value() = default;
    template <typename T>
        requires std::is_constructible_v<storage, T&&> && (!std::is_same_v<std::decay_t<T>, value>)
    value(T&& x) : v(std::forward<T>(x)) {} // NOLINT(implicit)

    bool is_null() const noexcept { return std::holds_alternative<std::monostate>(v); }
    template <typename T>
    const T* get_if() const noexcept { return std::get_if<T>(&v); }
    template <typename T>
    T* get_if() noexcept { return std::get_if<T>(&v); }
};

struct map_entry {
    std::string key;
    value val;
};

} // namespace skiff::avro
