// JSON projections of record values (projector.hpp).
#include "projector.hpp"

#include <nlohmann/json.hpp>

#include <charconv>
#include <cmath>

namespace skiff::iceberg {

namespace {

using json = nlohmann::json;

// Days from civil (Howard Hinnant's algorithm), for parse_iso_micros.
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) noexcept {
    y -= m <= 2;
    const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = static_cast<unsigned>(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool digits(std::string_view s, std::size_t pos, std::size_t n, int& out) {
    if (pos + n > s.size()) return false;
    out = 0;
    for (std::size_t i = pos; i < pos + n; ++i) {
        if (s[i] < '0' || s[i] > '9') return false;
        out = out * 10 + (s[i] - '0');
    }
    return true;
}

} // namespace

std::int32_t day_of(std::int64_t ms) noexcept {
    constexpr std::int64_t per_day = 86'400'000;
    std::int64_t d = ms / per_day;
    if (ms % per_day < 0) --d;
    return static_cast<std::int32_t>(d);
}

std::optional<std::int64_t> parse_iso_micros(std::string_view s) noexcept {
    int y = 0, mo = 0, d = 0, h = 0, mi = 0, sec = 0;
    if (!digits(s, 0, 4, y) || s.size() < 20 || s[4] != '-' || !digits(s, 5, 2, mo) || s[7] != '-' || !digits(s, 8, 2, d) ||
        (s[10] != 'T' && s[10] != 't' && s[10] != ' ') || !digits(s, 11, 2, h) || s[13] != ':' || !digits(s, 14, 2, mi) ||
        s[16] != ':' || !digits(s, 17, 2, sec)) {
        return std::nullopt;
    }
    if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 60) return std::nullopt;
    std::size_t pos = 19;
    std::int64_t micros = 0;
    if (pos < s.size() && s[pos] == '.') {
        ++pos;
        int n = 0;
        while (pos < s.size() && s[pos] >= '0' && s[pos] <= '9') {
            if (n < 6) micros = micros * 10 + (s[pos] - '0');
            ++n;
            ++pos;
        }
        if (n == 0) return std::nullopt;
        for (int k = n; k < 6; ++k) micros *= 10;
    }
    std::int64_t offset_s = 0;
    if (pos < s.size() && (s[pos] == 'Z' || s[pos] == 'z')) {
        ++pos;
    } else if (pos < s.size() && (s[pos] == '+' || s[pos] == '-')) {
        int oh = 0, om = 0;
        if (!digits(s, pos + 1, 2, oh) || pos + 3 >= s.size() || s[pos + 3] != ':' || !digits(s, pos + 4, 2, om)) return std::nullopt;
        offset_s = (oh * 3600 + om * 60) * (s[pos] == '-' ? -1 : 1);
        pos += 6;
    } else {
        return std::nullopt; // a time without a zone is not an instant
    }
    if (pos != s.size()) return std::nullopt;
    const std::int64_t secs = days_from_civil(y, static_cast<unsigned>(mo), static_cast<unsigned>(d)) * 86400 + h * 3600 +
                              mi * 60 + sec - offset_s;
    return secs * 1'000'000 + micros;
}

projector::projector(std::span<const projection> ps) {
    for (const auto& p : ps) {
        auto path = parse_json_path(p.path);
        _cols.push_back(column{path ? std::move(*path) : std::vector<std::string>{}, p.type});
    }
}

// Epoch milliseconds whose microseconds fit an int64 (about 292,000 years either way).
constexpr std::int64_t max_ms = 9'223'372'036'854'775LL;

bool projector::project(std::optional<std::string_view> value, std::vector<projected_value>& out) const {
    out.assign(_cols.size(), std::monostate{});
    if (_cols.empty()) return true;
    if (!value) return true; // a tombstone or a null value: nothing to project, nothing wrong
    json doc = json::parse(value->begin(), value->end(), nullptr, false);
    if (doc.is_discarded()) return false;
    bool clean = true;
    for (std::size_t i = 0; i < _cols.size(); ++i) {
        const json* at = &doc;
        for (const auto& member : _cols[i].path) {
            if (!at->is_object()) {
                at = nullptr;
                break;
            }
            auto it = at->find(member);
            if (it == at->end()) {
                at = nullptr;
                break;
            }
            at = &*it;
        }
        if (!at || at->is_null()) continue;
        const auto& type = _cols[i].type;
        if (type == "string" && at->is_string()) {
            out[i] = at->get<std::string>();
        } else if (type == "long" && at->is_number_integer()) {
            out[i] = at->get<std::int64_t>();
        } else if (type == "long" && at->is_number_float() && std::trunc(at->get<double>()) == at->get<double>() &&
                   std::fabs(at->get<double>()) < 9.0e18) {
            out[i] = static_cast<std::int64_t>(at->get<double>());
        } else if (type == "double" && at->is_number()) {
            out[i] = at->get<double>();
        } else if (type == "boolean" && at->is_boolean()) {
            out[i] = at->get<bool>();
        } else if (type == "timestamptz" && at->is_number_integer() && at->get<std::int64_t>() > -max_ms &&
                   at->get<std::int64_t>() < max_ms) {
            out[i] = at->get<std::int64_t>() * 1000; // epoch milliseconds, Kafka's unit
        } else if (type == "timestamptz" && at->is_string()) {
            auto us = parse_iso_micros(at->get_ref<const std::string&>());
            if (us) out[i] = *us;
            else clean = false;
        } else {
            clean = false;
        }
    }
    return clean;
}

} // namespace skiff::iceberg
