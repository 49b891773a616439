#include "sample.hpp"

#include <skiff/parquet/shred.hpp>

#include <cstdio>
#include <cstdlib>
#include <span>

using namespace skiff::parquet;

namespace sample {

row make_row(std::int64_t i) {
    row r;
    r.partition = static_cast<std::int32_t>(i % 3);
    r.offset = 1000 + i;
    r.timestamp = 1'700'000'000'000'000 + i * 1'000'001;
    if (i % 3 != 0) r.key = std::string("key-") + std::to_string(i % 4);
    if (i % 11 != 5) {
        // Unique values with bytes that sort differently signed and unsigned.
        std::string v = "v" + std::to_string(i);
        v.push_back(static_cast<char>(i % 256));
        v.push_back('\xff');
        r.value = std::move(v);
    }
    if (i % 5 != 1) {
        std::vector<header> h;
        if (i % 7 != 3) {
            for (std::int64_t k = 0; k <= i % 3; ++k) {
                header x;
                x.key = "h" + std::to_string(k);
                if ((i + k) % 4 != 2) x.value = std::string("val\0-", 5) + std::to_string(i * k);
                h.push_back(std::move(x));
            }
        }
        r.headers = std::move(h);
    }
    static const char* const words[] = {"alpha", "beta", "gamma", "d\xc3\xa9j\xc3\xa0 vu", "\xe2\x82\xac uro"};
    if (i % 6 != 4) r.s = words[i % 5];
    if (i % 9 != 8) r.l = i * 1000 - 500'000;
    if (i % 4 != 0) r.d = static_cast<double>(i) * 0.25 - 100.5;
    if (i % 10 != 9) r.b = i % 3 == 1;
    if (i % 8 != 7) r.t = -86'400'000'000 + i * 3'600'000'000;
    if (i % 2 == 0) r.day = static_cast<std::int32_t>(19000 + i % 40 - 20);
    if (i % 13 != 12) {
        std::string f(4, '\0');
        for (int k = 0; k < 4; ++k) f[k] = static_cast<char>((i * 7 + k * 31) % 256);
        r.fixed = std::move(f);
    }
    return r;
}

schema make_schema() {
    std::vector<node> f;
    f.push_back(primitive("partition", physical_type::int32, repetition::required, 1));
    f.push_back(primitive("offset", physical_type::int64, repetition::required, 2));
    f.push_back(primitive("timestamp", physical_type::int64, repetition::required, 3, logical_type::timestamp_micros_utc));
    f.push_back(primitive("key", physical_type::byte_array, repetition::optional, 4));
    f.push_back(primitive("value", physical_type::byte_array, repetition::optional, 5));
    std::vector<node> kv;
    kv.push_back(primitive("key", physical_type::byte_array, repetition::required, 8, logical_type::string));
    kv.push_back(primitive("value", physical_type::byte_array, repetition::optional, 9));
    f.push_back(list("headers", repetition::optional, 6, group("element", repetition::required, 7, std::move(kv))));
    f.push_back(primitive("s", physical_type::byte_array, repetition::optional, 10, logical_type::string));
    f.push_back(primitive("l", physical_type::int64, repetition::optional, 11));
    f.push_back(primitive("d", physical_type::double_, repetition::optional, 12));
    f.push_back(primitive("b", physical_type::boolean, repetition::optional, 13));
    f.push_back(primitive("t", physical_type::int64, repetition::optional, 14, logical_type::timestamp_micros_utc));
    f.push_back(primitive("day", physical_type::int32, repetition::optional, 15, logical_type::date));
    node fixed = primitive("fixed", physical_type::fixed_len_byte_array, repetition::optional, 16);
    fixed.type_length = 4;
    f.push_back(std::move(fixed));
    auto s = schema::make(std::move(f), "kafka_record");
    if (!s) {
        std::fprintf(stderr, "sample schema: %s\n", s.error().message.c_str());
        std::abort();
    }
    return std::move(*s);
}

std::vector<column_data> shred(const schema& s, std::int64_t first, std::int64_t n) {
    std::vector<column_data> c;
    for (const auto& l : s.leaves()) c.emplace_back(l);
    auto sh = kv_list_shredder::make(s.leaves()[5], s.leaves()[6]);
    if (!sh) std::abort();
    std::vector<kv_entry> entries;
    for (std::int64_t i = first; i < first + n; ++i) {
        const row r = make_row(i);
        c[0].push_i32(r.partition);
        c[1].push_i64(r.offset);
        c[2].push_i64(r.timestamp);
        r.key ? c[3].push_bytes(*r.key) : c[3].push_null(0);
        r.value ? c[4].push_bytes(*r.value) : c[4].push_null(0);
        if (!r.headers) {
            if (!sh->null_list(c[5], c[6])) std::abort();
        } else {
            entries.clear();
            for (const auto& h : *r.headers)
                entries.push_back(kv_entry{h.key, h.value ? std::optional<std::string_view>(*h.value) : std::nullopt});
            if (!sh->add(entries, c[5], c[6])) std::abort();
        }
        r.s ? c[7].push_bytes(*r.s) : c[7].push_null(0);
        r.l ? c[8].push_i64(*r.l) : c[8].push_null(0);
        r.d ? c[9].push_double(*r.d) : c[9].push_null(0);
        r.b ? c[10].push_bool(*r.b) : c[10].push_null(0);
        r.t ? c[11].push_i64(*r.t) : c[11].push_null(0);
        r.day ? c[12].push_i32(*r.day) : c[12].push_null(0);
        r.fixed ? c[13].push_bytes(*r.fixed) : c[13].push_null(0);
    }
    return c;
}

file_result write(const writer_options& o) {
    file_writer w(make_schema(), o);
    std::int64_t first = 0;
    const auto s = make_schema();
    for (auto n : group_sizes()) {
        auto cols = shred(s, first, n);
        auto r = w.write_row_group(cols);
        if (!r) {
            std::fprintf(stderr, "sample: %s\n", r.error().message.c_str());
            std::abort();
        }
        first += n;
    }
    auto f = w.finish();
    if (!f) std::abort();
    return std::move(*f);
}

namespace {

std::string hex(const std::string& s) {
    static const char* d = "0123456789abcdef";
    std::string h;
    for (unsigned char c : s) {
        h.push_back(d[c >> 4]);
        h.push_back(d[c & 15]);
    }
    return h;
}
std::string quote(const std::string& s) {
    std::string q = "\"";
    for (unsigned char c : s) {
        if (c == '"' || c == '\\') {
            q.push_back('\\');
            q.push_back(static_cast<char>(c));
        } else if (c < 0x20) {
            char b[8];
            std::snprintf(b, sizeof b, "\\u%04x", c);
            q += b;
        } else {
            q.push_back(static_cast<char>(c));
        }
    }
    return q + "\"";
}
template <typename T, typename F>
std::string opt(const std::optional<T>& v, F f) {
    return v ? f(*v) : std::string("null");
}

} // namespace

std::string rows_json(std::int64_t n) {
    std::string j = "[";
    for (std::int64_t i = 0; i < n; ++i) {
        const row r = make_row(i);
        auto str64 = [](std::int64_t v) { return "\"" + std::to_string(v) + "\""; };
        j += i ? ",\n" : "\n";
        j += "{\"partition\":" + std::to_string(r.partition) + ",\"offset\":" + str64(r.offset) +
             ",\"timestamp\":" + str64(r.timestamp) + ",\"key\":" + opt(r.key, [](auto& v) { return quote(hex(v)); }) +
             ",\"value\":" + opt(r.value, [](auto& v) { return quote(hex(v)); }) + ",\"headers\":";
        if (!r.headers) {
            j += "null";
        } else {
            j += "[";
            for (std::size_t k = 0; k < r.headers->size(); ++k) {
                const auto& h = (*r.headers)[k];
                j += (k ? "," : "") + std::string("{\"key\":") + quote(h.key) +
                     ",\"value\":" + opt(h.value, [](auto& v) { return quote(hex(v)); }) + "}";
            }
            j += "]";
        }
        j += ",\"s\":" + opt(r.s, [](auto& v) { return quote(v); });
        j += ",\"l\":" + opt(r.l, str64);
        j += ",\"d\":" + opt(r.d, [](double v) {
            char b[40];
            std::snprintf(b, sizeof b, "%.17g", v);
            return std::string(b);
        });
        j += ",\"b\":" + opt(r.b, [](bool v) { return std::string(v ? "true" : "false"); });
        j += ",\"t\":" + opt(r.t, str64);
        j += ",\"day\":" + opt(r.day, [](std::int32_t v) { return std::to_string(v); });
        j += ",\"fixed\":" + opt(r.fixed, [](auto& v) { return quote(hex(v)); });
        j += "}";
    }
    return j + "\n]\n";
}

} // namespace sample
