// Kafka wire primitives (https://kafka.apache.org/protocol.html#protocol_types).
#include "skiff/kafka/protocol.hpp"

#include <skiff/core/endian.hpp>
#include <skiff/core/varint.hpp>

#include <bit>
#include <cstring>
#include <limits>

namespace skiff::kafka {

// ---- uuid

bool uuid::is_zero() const noexcept {
    for (auto b : bytes) {
        if (b != 0) return false;
    }
    return true;
}

std::string uuid::to_string() const {
    // org.apache.kafka.common.Uuid#toString: URL-safe base64, no padding.
    static constexpr char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    std::string out;
    out.reserve(22);
    std::uint32_t acc = 0;
    int bits = 0;
    for (auto b : bytes) {
        acc = (acc << 8) | b;
        bits += 8;
        while (bits >= 6) {
            bits -= 6;
            out.push_back(alphabet[(acc >> bits) & 63]);
        }
    }
    if (bits > 0) out.push_back(alphabet[(acc << (6 - bits)) & 63]);
    return out;
}

// ---- reader

bool reader::fail(const char* what) noexcept {
    if (_what == nullptr) {
        _what = what;
        _err_pos = _base + _pos;
    }
    return false;
}

bool reader::context(const char* where) noexcept {
    if (_what == nullptr) fail("invalid input");
    if (_where == nullptr) _where = where;
    return false;
}

bool reader::adopt(const reader& sub, const char* where) noexcept {
    if (_what == nullptr) {
        _what = sub._what != nullptr ? sub._what : "invalid input";
        _err_pos = sub._what != nullptr ? sub._err_pos : sub._base + sub._pos;
        _where = sub._where;
    }
    if (_where == nullptr) _where = where;
    return false;
}

decode_error reader::error() const {
    std::string msg;
    if (_where != nullptr) {
        msg += _where;
        msg += ": ";
    }
    msg += _what != nullptr ? _what : "invalid input";
    msg += " at offset ";
    msg += std::to_string(_what != nullptr ? _err_pos : _base + _pos);
    return decode_error{std::move(msg)};
}

bool reader::need(std::size_t n) noexcept {
    if (_what != nullptr) return false;
    if (n > _size - _pos) return fail("truncated input");
    return true;
}

template <typename T>
bool reader::read_be(T& out) noexcept {
    if (!need(sizeof(T))) return false;
    out = be::read<T>(_data + _pos);
    _pos += sizeof(T);
    return true;
}

bool reader::read_bool(bool& out) noexcept {
    std::uint8_t v = 0;
    if (!read_be(v)) return false;
    out = v != 0;
    return true;
}
bool reader::read_int8(std::int8_t& out) noexcept {
    std::uint8_t v = 0;
    if (!read_be(v)) return false;
    out = static_cast<std::int8_t>(v);
    return true;
}
bool reader::read_int16(std::int16_t& out) noexcept {
    std::uint16_t v = 0;
    if (!read_be(v)) return false;
    out = static_cast<std::int16_t>(v);
    return true;
}
bool reader::read_uint16(std::uint16_t& out) noexcept { return read_be(out); }
bool reader::read_int32(std::int32_t& out) noexcept {
    std::uint32_t v = 0;
    if (!read_be(v)) return false;
    out = static_cast<std::int32_t>(v);
    return true;
}
bool reader::read_uint32(std::uint32_t& out) noexcept { return read_be(out); }
bool reader::read_int64(std::int64_t& out) noexcept {
    std::uint64_t v = 0;
    if (!read_be(v)) return false;
    out = static_cast<std::int64_t>(v);
    return true;
}
bool reader::read_float64(double& out) noexcept {
    std::uint64_t v = 0;
    if (!read_be(v)) return false;
    out = std::bit_cast<double>(v);
    return true;
}
bool reader::read_uuid(uuid& out) noexcept {
    if (!need(16)) return false;
    std::memcpy(out.bytes.data(), _data + _pos, 16);
    _pos += 16;
    return true;
}

bool reader::read_unsigned_varint(std::uint32_t& out) noexcept {
    if (_what != nullptr) return false;
    switch (varint::read_unsigned32({_data, _size}, _pos, out)) {
    case varint::read_status::ok: return true;
    case varint::read_status::truncated: return fail("truncated varint");
    case varint::read_status::overflow: break;
    }
    return fail("varint overflows 32 bits");
}

bool reader::read_varint(std::int32_t& out) noexcept {
    std::uint32_t v = 0;
    if (!read_unsigned_varint(v)) return false;
    out = varint::zigzag_decode(v);
    return true;
}

bool reader::read_varlong(std::int64_t& out) noexcept {
    if (_what != nullptr) return false;
    std::uint64_t v = 0;
    switch (varint::read_unsigned64({_data, _size}, _pos, v)) {
    case varint::read_status::ok: out = varint::zigzag_decode(v); return true;
    case varint::read_status::truncated: return fail("truncated varlong");
    case varint::read_status::overflow: break;
    }
    return fail("varlong overflows 64 bits");
}

// A length prefix: -1 for null, else a length that fits in the bytes left.
// wide: int32 (bytes, arrays) rather than int16 (strings) when not compact.
bool reader::read_length(std::int64_t& out, bool compact, bool wide) noexcept {
    std::int64_t n = 0;
    if (compact) {
        std::uint32_t v = 0;
        if (!read_unsigned_varint(v)) return false;
        n = static_cast<std::int64_t>(v) - 1;
    } else if (wide) {
        std::int32_t v = 0;
        if (!read_int32(v)) return false;
        n = v;
    } else {
        std::int16_t v = 0;
        if (!read_int16(v)) return false;
        n = v;
    }
    if (n < -1) return fail("negative length");
    if (n > static_cast<std::int64_t>(remaining())) return fail("length exceeds the input");
    out = n;
    return true;
}

bool reader::read_string(std::string& out, bool compact) {
    std::optional<std::string> s;
    if (!read_nullable_string(s, compact, false)) return false;
    out = std::move(*s);
    return true;
}

bool reader::read_nullable_string(std::optional<std::string>& out, bool compact, bool nullable) {
    std::int64_t n = 0;
    if (!read_length(n, compact, false)) return false;
    if (n < 0) {
        if (!nullable) return fail("null for a non-nullable string");
        out.reset();
        return true;
    }
    if (static_cast<std::size_t>(n) > max_string_size) return fail("string longer than 32767 bytes");
    out.emplace(_data + _pos, static_cast<std::size_t>(n));
    _pos += static_cast<std::size_t>(n);
    return true;
}

bool reader::read_bytes(std::string& out, bool compact) {
    std::optional<std::string> b;
    if (!read_nullable_bytes(b, compact, false)) return false;
    out = std::move(*b);
    return true;
}

bool reader::read_nullable_bytes(std::optional<std::string>& out, bool compact, bool nullable) {
    std::int64_t n = 0;
    if (!read_length(n, compact, true)) return false;
    if (n < 0) {
        if (!nullable) return fail("null for non-nullable bytes");
        out.reset();
        return true;
    }
    out.emplace(_data + _pos, static_cast<std::size_t>(n));
    _pos += static_cast<std::size_t>(n);
    return true;
}

bool reader::read_nullable_records(std::optional<record_bytes>& out, bool compact, bool nullable) {
    std::int64_t n = 0;
    if (!read_length(n, compact, true)) return false;
    if (n < 0) {
        if (!nullable) return fail("null for non-nullable bytes");
        out.reset();
        return true;
    }
    const std::span<const char> bytes(_data + _pos, static_cast<std::size_t>(n));
    if (_borrow) out.emplace(record_bytes::borrow(bytes));
    else out.emplace(std::string(bytes.data(), bytes.size()));
    _pos += static_cast<std::size_t>(n);
    return true;
}

bool reader::read_array_length(std::int32_t& out, bool compact, bool nullable) noexcept {
    std::int64_t n = 0;
    if (!read_length(n, compact, true)) return false;
    if (n < 0 && !nullable) return fail("null for a non-nullable array");
    out = static_cast<std::int32_t>(n);
    return true;
}

bool reader::read_raw(std::size_t n, std::span<const char>& out) noexcept {
    if (!need(n)) return false;
    out = {_data + _pos, n};
    _pos += n;
    return true;
}

bool reader::skip(std::size_t n) noexcept {
    if (!need(n)) return false;
    _pos += n;
    return true;
}

bool reader::skip_tagged_fields() noexcept {
    std::uint32_t count = 0;
    if (!read_unsigned_varint(count)) return false;
    for (std::uint32_t i = 0; i < count; ++i) {
        std::uint32_t tag = 0;
        std::uint32_t size = 0;
        if (!read_unsigned_varint(tag) || !read_unsigned_varint(size) || !skip(size)) return false;
    }
    return true;
}

bool reader::sub_reader(std::size_t n, reader& sub) noexcept {
    if (!need(n)) return false;
    sub = reader(std::span<const char>(_data + _pos, n));
    sub._base = _base + _pos;
    sub._borrow = _borrow;
    _pos += n;
    return true;
}

// ---- writer

void writer::fail(const char* where, const char* what) noexcept {
    if (_where == nullptr) {
        _where = where;
        _what = what;
    }
}

encode_error writer::error() const {
    if (_where == nullptr) return encode_error{"no error"};
    return encode_error{std::string(_where) + ": " + _what};
}

void writer::write_be(std::uint64_t v, int bytes) {
    char b[8];
    be::write_u64(b, v);
    _buf.append(b + 8 - bytes, static_cast<std::size_t>(bytes));
}

void writer::write_float64(double v) { write_be(std::bit_cast<std::uint64_t>(v), 8); }

void writer::write_uuid(const uuid& v) {
    _buf.append(reinterpret_cast<const char*>(v.bytes.data()), v.bytes.size());
}

void writer::write_unsigned_varint(std::uint32_t v) { varint::append_unsigned(_buf, v); }
void writer::write_varint(std::int32_t v) { varint::append_varint(_buf, v); }
void writer::write_varlong(std::int64_t v) { varint::append_varlong(_buf, v); }

void writer::write_string(std::string_view s, bool compact, const char* where) {
    if (s.size() > max_string_size) {
        fail(where, "string longer than 32767 bytes");
        s = {};
    }
    if (compact) {
        write_unsigned_varint(static_cast<std::uint32_t>(s.size() + 1));
    } else {
        write_int16(static_cast<std::int16_t>(s.size()));
    }
    _buf.append(s);
}

void writer::write_nullable_string(const std::optional<std::string>& s, bool compact, bool nullable,
                                   const char* where) {
    if (!s) {
        write_null(compact, false, nullable, where);
        return;
    }
    write_string(*s, compact, where);
}

void writer::write_bytes(std::string_view b, bool compact, const char* where) {
    constexpr auto max = static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max() - 1);
    if (b.size() > max) {
        fail(where, "bytes longer than 2^31-2");
        b = {};
    }
    if (compact) {
        write_unsigned_varint(static_cast<std::uint32_t>(b.size() + 1));
    } else {
        write_int32(static_cast<std::int32_t>(b.size()));
    }
    _buf.append(b);
}

void writer::write_nullable_bytes(const std::optional<std::string>& b, bool compact, bool nullable,
                                  const char* where) {
    if (!b) {
        write_null(compact, true, nullable, where);
        return;
    }
    write_bytes(*b, compact, where);
}

void writer::write_nullable_records(const std::optional<record_bytes>& b, bool compact, bool nullable,
                                    const char* where) {
    if (!b) {
        write_null(compact, true, nullable, where);
        return;
    }
    write_bytes(b->view(), compact, where);
}

void writer::write_array_length(std::size_t n, bool compact, const char* where) {
    constexpr auto max = static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max() - 1);
    if (n > max) {
        fail(where, "array of more than 2^31-2 elements");
        n = 0;
    }
    if (compact) {
        write_unsigned_varint(static_cast<std::uint32_t>(n + 1));
    } else {
        write_int32(static_cast<std::int32_t>(n));
    }
}

void writer::write_null(bool compact, bool wide, bool nullable, const char* where) {
    if (!nullable) fail(where, "null value in a version where the field is not nullable");
    if (compact) {
        write_unsigned_varint(0);
    } else if (wide) {
        write_int32(-1);
    } else {
        write_int16(-1);
    }
}

void writer::write_null_array(bool compact, bool nullable, const char* where) {
    write_null(compact, true, nullable, where);
}

void writer::insert_length(std::size_t mark) {
    const auto n = static_cast<std::uint32_t>(_buf.size() - mark);
    char tmp[varint::max_bytes64];
    _buf.insert(mark, tmp, varint::encode_unsigned(tmp, n));
}

void writer::patch_int32(std::size_t offset, std::int32_t v) {
    be::write_i32(_buf.data() + offset, v);
}

} // namespace skiff::kafka
