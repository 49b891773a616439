// Reading Avro binary data from untrusted bytes.
#include <skiff/avro/decoder.hpp>

#include <skiff/core/varint.hpp>

#include <fmt/format.h>

#include <bit>
#include <limits>

namespace skiff::avro {

namespace {

template <typename U>
U load_le(std::string_view s) {
    U bits = 0;
    for (std::size_t i = 0; i < sizeof(U); ++i) bits |= static_cast<U>(static_cast<std::uint8_t>(s[i])) << (8 * i);
    return bits;
}

} // namespace

result<std::string_view> decoder::take(std::size_t n) {
    if (n > remaining()) return fail(errc::truncated, fmt::format("{} bytes needed at offset {}, {} left", n, _pos, remaining()));
    auto s = _in.substr(_pos, n);
    _pos += n;
    return s;
}

result<bool> decoder::read_bool() {
    auto b = take(1);
    if (!b) return failure{std::move(b).error()};
    const auto c = static_cast<std::uint8_t>((*b)[0]);
    if (c > 1) return fail(errc::corrupt, fmt::format("boolean byte {} at offset {}", c, _pos - 1));
    return c == 1;
}

result<std::int32_t> decoder::read_int() {
    const std::size_t at = _pos;
    std::uint32_t z = 0;
    switch (varint::read_unsigned32(std::span<const char>(_in.data(), _in.size()), _pos, z)) {
    case varint::read_status::ok: return varint::zigzag_decode(z);
    case varint::read_status::truncated: _pos = at; return fail(errc::truncated, fmt::format("int truncated at offset {}", at));
    case varint::read_status::overflow: break;
    }
    _pos = at;
    return fail(errc::corrupt, fmt::format("int out of range at offset {}", at));
}

result<std::int64_t> decoder::read_long() {
    const std::size_t at = _pos;
    std::uint64_t z = 0;
    switch (varint::read_unsigned64(std::span<const char>(_in.data(), _in.size()), _pos, z)) {
    case varint::read_status::ok: return varint::zigzag_decode(z);
    case varint::read_status::truncated: _pos = at; return fail(errc::truncated, fmt::format("long truncated at offset {}", at));
    case varint::read_status::overflow: break;
    }
    _pos = at;
    return fail(errc::corrupt, fmt::format("long out of range at offset {}", at));
}

result<float> decoder::read_float() {
    auto s = take(4);
    if (!s) return failure{std::move(s).error()};
    return std::bit_cast<float>(load_le<std::uint32_t>(*s));
}

result<double> decoder::read_double() {
    auto s = take(8);
    if (!s) return failure{std::move(s).error()};
    return std::bit_cast<double>(load_le<std::uint64_t>(*s));
}

result<std::size_t> decoder::read_length() {
    const std::size_t at = _pos;
    auto n = read_long();
    if (!n) return failure{std::move(n).error()};
    if (*n < 0) return fail(errc::corrupt, fmt::format("negative length {} at offset {}", *n, at));
    if (static_cast<std::uint64_t>(*n) > remaining())
        return fail(errc::too_large, fmt::format("length {} at offset {} beyond the {} bytes left", *n, at, remaining()));
    return static_cast<std::size_t>(*n);
}

result<bytes> decoder::read_bytes() {
    auto n = read_length();
    if (!n) return failure{std::move(n).error()};
    return read_fixed(*n);
}

result<std::string> decoder::read_string() {
    auto n = read_length();
    if (!n) return failure{std::move(n).error()};
    auto s = take(*n);
    if (!s) return failure{std::move(s).error()};
    return std::string(*s);
}

result<bytes> decoder::read_fixed(std::size_t n) {
    auto s = take(n);
    if (!s) return failure{std::move(s).error()};
    return bytes(reinterpret_cast<const std::uint8_t*>(s->data()), reinterpret_cast<const std::uint8_t*>(s->data()) + s->size());
}

result<std::size_t> decoder::read_block_count(std::size_t item_min_size) {
    const std::size_t at = _pos;
    auto c = read_long();
    if (!c) return failure{std::move(c).error()};
    std::int64_t count = *c;
    if (count < 0) {
        if (count == std::numeric_limits<std::int64_t>::min()) return fail(errc::corrupt, fmt::format("block count out of range at offset {}", at));
        count = -count;
        auto size = read_length(); // the block's byte size: checked, then not needed
        if (!size) return failure{std::move(size).error()};
    }
    const auto n = static_cast<std::uint64_t>(count);
    if (item_min_size > 0 && n > remaining() / item_min_size)
        return fail(errc::too_large, fmt::format("block of {} items at offset {} beyond the {} bytes left", n, at, remaining()));
    if (n > _limits.max_values - std::min(_values, _limits.max_values))
        return fail(errc::too_large, fmt::format("block of {} items at offset {} beyond the value limit", n, at));
    return static_cast<std::size_t>(n);
}

result<void> decoder::spend(std::size_t n) {
    if (n > _limits.max_values - std::min(_values, _limits.max_values))
        return fail(errc::too_large, fmt::format("more than {} values", _limits.max_values));
    _values += n;
    return ok();
}

result<value> decoder::read(const node& s) { return read_at_depth(s, 0); }

namespace {

template <typename T>
result<value> lift(result<T>&& r) {
    if (!r) return failure{std::move(r).error()};
    return value(std::move(r).value());
}

} // namespace

result<value> decoder::read_at_depth(const node& s, std::size_t depth) {
    if (depth > _limits.max_depth) return fail(errc::too_large, "datum nested too deeply");
    if (auto r = spend(1); !r) return failure{std::move(r).error()};
    switch (s.kind) {
    case type::null: return value();
    case type::boolean: return lift(read_bool());
    case type::int_: return lift(read_int());
    case type::long_: return lift(read_long());
    case type::float_: return lift(read_float());
    case type::double_: return lift(read_double());
    case type::bytes: return lift(read_bytes());
    case type::string: return lift(read_string());
    case type::fixed: return lift(read_fixed(s.size));
    case type::enum_: {
        const std::size_t at = _pos;
        auto i = read_int();
        if (!i) return failure{std::move(i).error()};
        if (*i < 0 || static_cast<std::size_t>(*i) >= s.symbols.size())
            return fail(errc::corrupt, fmt::format("enum index {} at offset {} (enum {} has {} symbols)", *i, at, s.name, s.symbols.size()));
        return value(enum_symbol{*i, s.symbols[static_cast<std::size_t>(*i)]});
    }
    case type::union_: {
        const std::size_t at = _pos;
        auto i = read_long();
        if (!i) return failure{std::move(i).error()};
        if (*i < 0 || static_cast<std::uint64_t>(*i) >= s.branches.size())
            return fail(errc::corrupt, fmt::format("union branch {} at offset {} (union has {})", *i, at, s.branches.size()));
        return read_at_depth(*s.branches[static_cast<std::size_t>(*i)], depth + 1);
    }
    case type::record: {
        record rec;
        rec.fields.reserve(s.fields.size());
        for (const auto& f : s.fields) {
            auto v = read_at_depth(*f.schema, depth + 1);
            if (!v) {
                auto err = std::move(v).error();
                err.message = fmt::format("field \"{}\": {}", f.name, err.message);
                return failure{std::move(err)};
            }
            rec.fields.push_back(std::move(v).value());
        }
        return value(std::move(rec));
    }
    case type::array:
    case type::map: {
        const bool is_map = s.kind == type::map;
        const std::size_t item_min = s.items->min_size + (is_map ? 1 : 0);
        array items;
        map entries;
        for (;;) {
            auto n = read_block_count(item_min);
            if (!n) return failure{std::move(n).error()};
            if (*n == 0) break;
            for (std::size_t k = 0; k < *n; ++k) {
                std::string key;
                if (is_map) {
                    auto ks = read_string();
                    if (!ks) return failure{std::move(ks).error()};
                    key = std::move(ks).value();
                }
                auto v = read_at_depth(*s.items, depth + 1);
                if (!v) return v;
                if (is_map) entries.push_back(map_entry{std::move(key), std::move(v).value()});
                else items.push_back(std::move(v).value());
            }
        }
        if (is_map) return value(std::move(entries));
        return value(std::move(items));
    }
    }
    return fail(errc::unsupported, "unknown schema kind");
}

} // namespace skiff::avro
