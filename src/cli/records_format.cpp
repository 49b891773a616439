#include "records_format.hpp"

#include <skiff/core/base64.hpp>

#include <nlohmann/json.hpp>

namespace skiff::cli {

bool valid_utf8(std::string_view s) noexcept {
    const auto* p = reinterpret_cast<const unsigned char*>(s.data());
    std::size_t i = 0, n = s.size();
    while (i < n) {
        unsigned c = p[i];
        if (c < 0x80) {
            ++i;
            continue;
        }
        std::size_t len = 0;
        std::uint32_t cp = 0;
        if ((c & 0xe0) == 0xc0) {
            len = 2;
            cp = c & 0x1f;
        } else if ((c & 0xf0) == 0xe0) {
            len = 3;
            cp = c & 0x0f;
        } else if ((c & 0xf8) == 0xf0) {
            len = 4;
            cp = c & 0x07;
        } else {
            return false;
        }
        if (i + len > n) return false;
        for (std::size_t k = 1; k < len; ++k) {
            unsigned cc = p[i + k];
            if ((cc & 0xc0) != 0x80) return false;
            cp = (cp << 6) | (cc & 0x3f);
        }
        if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000)) return false;
        if (cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
        i += len;
    }
    return true;
}

namespace {
void put_bytes(nlohmann::ordered_json& j, const char* name, const std::optional<std::string>& v) {
    if (!v) {
        j[name] = nullptr;
    } else if (valid_utf8(*v)) {
        j[name] = *v;
    } else {
        j[std::string(name) + "_base64"] = base64_encode(*v);
    }
}
} // namespace

std::string to_json_line(const consumed_record& r) {
    nlohmann::ordered_json j;
    j["topic"] = r.topic;
    j["partition"] = r.partition;
    j["offset"] = r.offset;
    j["timestamp"] = r.timestamp;
    j["timestamp_type"] = r.log_append_time ? "LogAppendTime" : "CreateTime";
    put_bytes(j, "key", r.key);
    put_bytes(j, "value", r.value);
    auto hs = nlohmann::ordered_json::array();
    for (const auto& [k, v] : r.headers) {
        nlohmann::ordered_json h;
        // Header names are Java strings in Kafka; replace anything that is not UTF-8.
        h["key"] = valid_utf8(k) ? k : base64_encode(k);
        put_bytes(h, "value", v);
        hs.push_back(std::move(h));
    }
    j["headers"] = std::move(hs);
    return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

std::string to_text(const consumed_record& r, std::optional<std::string_view> key_separator) {
    std::string out;
    if (key_separator) {
        if (r.key) out += *r.key;
        out += *key_separator;
    }
    if (r.value) out += *r.value;
    return out;
}

} // namespace skiff::cli
