// Thrift compact protocol writer and reader (thrift-compact-protocol.md).
#include <skiff/parquet/thrift_compact.hpp>

#include <skiff/core/varint.hpp>

#include <cstdlib>
#include <cstring>
#include <string>

namespace skiff::parquet::thrift {

void append_varint(std::string& out, std::uint64_t v) {
    char buf[varint::max_bytes64];
    out.append(buf, varint::encode_unsigned(buf, v));
}

void append_list_header(std::string& out, ctype elem, std::size_t n) {
    const auto t = static_cast<std::uint8_t>(elem);
    // Sizes 0..14 share the byte with the element type; 15 in the size nibble means "varint follows".
    if (n < 15) {
        out.push_back(static_cast<char>((n << 4) | t));
    } else {
        out.push_back(static_cast<char>(0xf0 | t));
        append_varint(out, n);
    }
}

void compact_writer::field_header(std::int16_t id, ctype t) {
    const int delta = static_cast<int>(id) - static_cast<int>(_last);
    if (delta > 0 && delta <= 15) {
        _out.push_back(static_cast<char>((delta << 4) | static_cast<int>(t)));
    } else {
        // Long form: the type alone, then the id as a zig-zag i16.
        _out.push_back(static_cast<char>(t));
        append_varint(_out, varint::zigzag_encode(static_cast<std::int32_t>(id)));
    }
    _last = id;
}

void compact_writer::field_bool(std::int16_t id, bool v) {
    // A bool field's value lives in its header's type nibble.
    field_header(id, v ? ctype::bool_true : ctype::bool_false);
}
void compact_writer::field_i8(std::int16_t id, std::int8_t v) {
    field_header(id, ctype::i8);
    _out.push_back(static_cast<char>(v));
}
void compact_writer::field_i16(std::int16_t id, std::int16_t v) {
    field_header(id, ctype::i16);
    append_varint(_out, varint::zigzag_encode(static_cast<std::int32_t>(v)));
}
void compact_writer::field_i32(std::int16_t id, std::int32_t v) {
    field_header(id, ctype::i32);
    append_varint(_out, varint::zigzag_encode(v));
}
void compact_writer::field_i64(std::int16_t id, std::int64_t v) {
    field_header(id, ctype::i64);
    append_varint(_out, varint::zigzag_encode(v));
}
void compact_writer::field_double(std::int16_t id, double v) {
    field_header(id, ctype::double_);
    std::uint64_t bits = 0;
    std::memcpy(&bits, &v, 8);
    // Compact protocol doubles are little-endian, unlike the binary protocol's.
    for (int i = 0; i < 8; ++i) _out.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
}
void compact_writer::field_binary(std::int16_t id, std::string_view v) {
    field_header(id, ctype::binary);
    elem_binary(v);
}

void compact_writer::push() {
    if (_depth == max_depth) std::abort(); // a programming error: the footer is never this deep
    _stack[_depth++] = _last;
    _last = 0;
}

void compact_writer::begin_struct(std::int16_t id) {
    field_header(id, ctype::struct_);
    push();
}

void compact_writer::begin_list(std::int16_t id, ctype elem, std::size_t n) {
    field_header(id, ctype::list);
    append_list_header(_out, elem, n);
}

void compact_writer::elem_i32(std::int32_t v) { append_varint(_out, varint::zigzag_encode(v)); }
void compact_writer::elem_i64(std::int64_t v) { append_varint(_out, varint::zigzag_encode(v)); }
void compact_writer::elem_binary(std::string_view v) {
    append_varint(_out, v.size());
    _out.append(v);
}
void compact_writer::elem_bool(bool v) {
    // What the reference implementations write (1 true, 2 false); readers take 1 as true.
    _out.push_back(static_cast<char>(v ? 1 : 2));
}
void compact_writer::begin_element() { push(); }

void compact_writer::end_struct() {
    _out.push_back(0);
    if (_depth > 0) {
        _last = _stack[--_depth];
    } else {
        _last = 0;
    }
}

// ---- reading --------------------------------------------------------------------------------

const value* value::field(std::int16_t id) const noexcept {
    for (std::size_t k = 0; k < ids.size(); ++k)
        if (ids[k] == id) return &fields[k];
    return nullptr;
}

namespace {

constexpr int max_read_depth = 64;

parquet_error corrupt(const char* what) { return {errc::corrupt, std::string("thrift: ") + what}; }

class reader {
public:
    reader(std::span<const char> in, std::size_t pos) : _in(in), _pos(pos) {}

    std::size_t pos() const noexcept { return _pos; }

    result<value, parquet_error> read_struct_body(int depth) {
        if (depth > max_read_depth) return failure{corrupt("nesting too deep")};
        value s;
        s.type = ctype::struct_;
        std::int16_t last = 0;
        for (;;) {
            if (_pos >= _in.size()) return failure{corrupt("truncated struct")};
            const auto h = static_cast<std::uint8_t>(_in[_pos++]);
            if (h == 0) return s;
            const auto t = static_cast<ctype>(h & 0x0f);
            std::int16_t id = 0;
            if ((h >> 4) != 0) {
                id = static_cast<std::int16_t>(last + (h >> 4));
            } else {
                std::uint64_t z = 0;
                if (!read_uvarint(z) || z > 0xffff) return failure{corrupt("bad field id")};
                id = static_cast<std::int16_t>(varint::zigzag_decode(static_cast<std::uint32_t>(z)));
            }
            last = id;
            value v;
            if (t == ctype::bool_true || t == ctype::bool_false) {
                v.type = t;
                v.b = t == ctype::bool_true;
            } else {
                auto r = read_value(t, depth);
                if (!r) return failure{std::move(r).error()};
                v = std::move(*r);
            }
            s.ids.push_back(id);
            s.fields.push_back(std::move(v));
        }
    }

private:
    bool read_uvarint(std::uint64_t& out) {
        return varint::read_unsigned64(_in, _pos, out) == varint::read_status::ok;
    }

    result<value, parquet_error> read_value(ctype t, int depth) {
        value v;
        v.type = t;
        switch (t) {
        case ctype::bool_true:
        case ctype::bool_false: {
            // Inside a list: one byte, 1 = true (0 and 2 are both seen for false).
            if (_pos >= _in.size()) return failure{corrupt("truncated bool")};
            v.b = _in[_pos++] == 1;
            return v;
        }
        case ctype::i8:
            if (_pos >= _in.size()) return failure{corrupt("truncated i8")};
            v.i = static_cast<std::int8_t>(_in[_pos++]);
            return v;
        case ctype::i16:
        case ctype::i32:
        case ctype::i64: {
            std::uint64_t z = 0;
            if (!read_uvarint(z)) return failure{corrupt("bad varint")};
            v.i = varint::zigzag_decode(z);
            return v;
        }
        case ctype::double_: {
            if (_in.size() - _pos < 8) return failure{corrupt("truncated double")};
            std::uint64_t bits = 0;
            for (int i = 0; i < 8; ++i) bits |= std::uint64_t{static_cast<std::uint8_t>(_in[_pos + i])} << (8 * i);
            _pos += 8;
            std::memcpy(&v.d, &bits, 8);
            return v;
        }
        case ctype::binary: {
            std::uint64_t n = 0;
            if (!read_uvarint(n) || n > _in.size() - _pos) return failure{corrupt("bad binary length")};
            v.bin.assign(_in.data() + _pos, n);
            _pos += n;
            return v;
        }
        case ctype::list:
        case ctype::set: {
            if (_pos >= _in.size()) return failure{corrupt("truncated list header")};
            const auto h = static_cast<std::uint8_t>(_in[_pos++]);
            std::uint64_t n = h >> 4;
            if (n == 15 && !read_uvarint(n)) return failure{corrupt("bad list size")};
            // Every element takes at least one byte: a size beyond the input is a lie.
            if (n > _in.size() - _pos) return failure{corrupt("list size beyond input")};
            v.elem_type = static_cast<ctype>(h & 0x0f);
            v.elems.reserve(n);
            for (std::uint64_t k = 0; k < n; ++k) {
                auto e = read_element(v.elem_type, depth);
                if (!e) return failure{std::move(e).error()};
                v.elems.push_back(std::move(*e));
            }
            return v;
        }
        case ctype::map: {
            std::uint64_t n = 0;
            if (!read_uvarint(n)) return failure{corrupt("bad map size")};
            if (n == 0) return v;
            if (n > _in.size() - _pos) return failure{corrupt("map size beyond input")};
            if (_pos >= _in.size()) return failure{corrupt("truncated map header")};
            const auto kv = static_cast<std::uint8_t>(_in[_pos++]);
            const auto kt = static_cast<ctype>(kv >> 4);
            const auto vt = static_cast<ctype>(kv & 0x0f);
            for (std::uint64_t k = 0; k < n; ++k) {
                auto key = read_element(kt, depth);
                if (!key) return failure{std::move(key).error()};
                v.elems.push_back(std::move(*key));
                auto val = read_element(vt, depth);
                if (!val) return failure{std::move(val).error()};
                v.elems.push_back(std::move(*val));
            }
            return v;
        }
        case ctype::struct_: return read_struct_body(depth + 1);
        case ctype::stop: break;
        }
        return failure{corrupt("unknown type code")};
    }

    result<value, parquet_error> read_element(ctype t, int depth) {
        if (t == ctype::stop || static_cast<std::uint8_t>(t) > 12) return failure{corrupt("bad element type")};
        return read_value(t, depth + 1);
    }

    std::span<const char> _in;
    std::size_t _pos;
};

} // namespace

result<value, parquet_error> read_struct(std::span<const char> in, std::size_t& pos) {
    if (pos > in.size()) return failure{corrupt("position beyond input")};
    reader r(in, pos);
    auto v = r.read_struct_body(0);
    if (v) pos = r.pos();
    return v;
}

} // namespace skiff::parquet::thrift
