// The Avro binary encoding, and the generic encoder of avro::value by schema.
#include <skiff/avro/encoder.hpp>

#include <skiff/core/varint.hpp>

#include <fmt/format.h>

#include <bit>
#include <cstring>
#include <limits>

namespace skiff::avro {

namespace {

template <typename U>
void append_le(std::string& out, U bits) {
    for (std::size_t i = 0; i < sizeof(U); ++i) out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}

} // namespace

void encoder::write_bool(bool b) { _out->push_back(b ? '\x01' : '\x00'); }
// Avro int and long are the same zig-zag LEB128 as Kafka's varint and varlong.
void encoder::write_int(std::int32_t v) { varint::append_varint(*_out, v); }
void encoder::write_long(std::int64_t v) { varint::append_varlong(*_out, v); }
void encoder::write_float(float v) { append_le(*_out, std::bit_cast<std::uint32_t>(v)); }
void encoder::write_double(double v) { append_le(*_out, std::bit_cast<std::uint64_t>(v)); }

void encoder::write_bytes(std::span<const std::uint8_t> b) {
    write_long(static_cast<std::int64_t>(b.size()));
    write_fixed(b);
}

void encoder::write_string(std::string_view s) {
    write_long(static_cast<std::int64_t>(s.size()));
    _out->append(s);
}

void encoder::write_fixed(std::span<const std::uint8_t> b) {
    _out->append(reinterpret_cast<const char*>(b.data()), b.size());
}

namespace {

failure<error> mismatch(const node& s, std::string_view what) {
    return fail(errc::type_mismatch, fmt::format("{}{}{}: {}", to_string(s.kind), s.name.empty() ? "" : " ", s.name, what));
}

// Whether a union branch can take v (the encoder picks the first that can).
bool fits(const node& s, const value& v) {
    switch (s.kind) {
    case type::null: return v.is_null();
    case type::boolean: return v.get_if<bool>() != nullptr;
    case type::int_: return v.get_if<std::int32_t>() != nullptr;
    case type::long_: return v.get_if<std::int64_t>() != nullptr || v.get_if<std::int32_t>() != nullptr;
    case type::float_: return v.get_if<float>() != nullptr;
    case type::double_: return v.get_if<double>() != nullptr || v.get_if<float>() != nullptr;
    case type::bytes: return v.get_if<bytes>() != nullptr;
    case type::fixed: return v.get_if<bytes>() != nullptr && v.get_if<bytes>()->size() == s.size;
    case type::string: return v.get_if<std::string>() != nullptr;
    case type::enum_: return v.get_if<enum_symbol>() != nullptr || v.get_if<std::string>() != nullptr;
    case type::array: return v.get_if<array>() != nullptr;
    case type::map: return v.get_if<map>() != nullptr;
    case type::record: return v.get_if<record>() != nullptr && v.get_if<record>()->fields.size() == s.fields.size();
    case type::union_: return false;
    }
    return false;
}

result<void> encode_into(const node& s, const value& v, encoder& e) {
    switch (s.kind) {
    case type::null:
        if (!v.is_null()) return mismatch(s, "value is not null");
        return ok();
    case type::boolean:
        if (auto b = v.get_if<bool>()) return e.write_bool(*b), ok();
        return mismatch(s, "value is not a boolean");
    case type::int_:
        if (auto i = v.get_if<std::int32_t>()) return e.write_int(*i), ok();
        return mismatch(s, "value is not an int");
    case type::long_:
        if (auto l = v.get_if<std::int64_t>()) return e.write_long(*l), ok();
        if (auto i = v.get_if<std::int32_t>()) return e.write_long(*i), ok();
        return mismatch(s, "value is not a long");
    case type::float_:
        if (auto f = v.get_if<float>()) return e.write_float(*f), ok();
        return mismatch(s, "value is not a float");
    case type::double_:
        if (auto d = v.get_if<double>()) return e.write_double(*d), ok();
        if (auto f = v.get_if<float>()) return e.write_double(*f), ok();
        return mismatch(s, "value is not a double");
    case type::bytes:
        if (auto b = v.get_if<bytes>()) return e.write_bytes(*b), ok();
        return mismatch(s, "value is not bytes");
    case type::fixed:
        if (auto b = v.get_if<bytes>(); b && b->size() == s.size) return e.write_fixed(*b), ok();
        return mismatch(s, fmt::format("value is not {} bytes", s.size));
    case type::string:
        if (auto str = v.get_if<std::string>()) return e.write_string(*str), ok();
        return mismatch(s, "value is not a string");
    case type::enum_: {
        std::size_t index = s.symbols.size();
        if (auto sym = v.get_if<enum_symbol>()) {
            if (sym->index >= 0) index = static_cast<std::size_t>(sym->index);
        } else if (auto str = v.get_if<std::string>()) {
            for (std::size_t i = 0; i < s.symbols.size(); ++i)
                if (s.symbols[i] == *str) index = i;
        }
        if (index >= s.symbols.size()) return mismatch(s, "value is not one of the symbols");
        e.write_int(static_cast<std::int32_t>(index));
        return ok();
    }
    case type::array: {
        auto a = v.get_if<array>();
        if (!a) return mismatch(s, "value is not an array");
        if (!a->empty()) {
            e.write_block_count(a->size());
            for (const auto& item : *a)
                if (auto r = encode_into(*s.items, item, e); !r) return r;
        }
        e.write_end_of_blocks();
        return ok();
    }
    case type::map: {
        auto m = v.get_if<map>();
        if (!m) return mismatch(s, "value is not a map");
        if (!m->empty()) {
            e.write_block_count(m->size());
            for (const auto& entry : *m) {
                e.write_string(entry.key);
                if (auto r = encode_into(*s.items, entry.val, e); !r) return r;
            }
        }
        e.write_end_of_blocks();
        return ok();
    }
    case type::record: {
        auto rec = v.get_if<record>();
        if (!rec || rec->fields.size() != s.fields.size())
            return mismatch(s, fmt::format("value is not a record of {} fields", s.fields.size()));
        for (std::size_t i = 0; i < s.fields.size(); ++i) {
            if (auto r = encode_into(*s.fields[i].schema, rec->fields[i], e); !r) {
                auto err = std::move(r).error();
                err.message = fmt::format("field \"{}\": {}", s.fields[i].name, err.message);
                return failure{std::move(err)};
            }
        }
        return ok();
    }
    case type::union_:
        for (std::size_t i = 0; i < s.branches.size(); ++i) {
            if (!fits(*s.branches[i], v)) continue;
            e.write_union_index(i);
            return encode_into(*s.branches[i], v, e);
        }
        return mismatch(s, "value fits no branch");
    }
    return mismatch(s, "unknown schema kind");
}

} // namespace

result<void> encode(const node& s, const value& v, std::string& out) {
    encoder e(out);
    return encode_into(s, v, e);
}

} // namespace skiff::avro
