#include "records_time.hpp"

#include <charconv>
#include <cstdio>

namespace skiff::cli {
namespace {

bool take_digits(std::string_view& s, std::size_t n, int& out) {
    if (s.size() < n) return false;
    int v = 0;
    for (std::size_t i = 0; i < n; ++i) {
        char c = s[i];
        if (c < '0' || c > '9') return false;
        v = v * 10 + (c - '0');
    }
    out = v;
    s.remove_prefix(n);
    return true;
}

bool take_char(std::string_view& s, char c) {
    if (s.empty() || s[0] != c) return false;
    s.remove_prefix(1);
    return true;
}

// Days from 1970-01-01 to a proleptic Gregorian date (Howard Hinnant's days_from_civil).
std::int64_t days_from_civil(std::int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    const std::int64_t era = (y >= 0 ? y : y - 399) / 400;
    const auto yoe = static_cast<unsigned>(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + static_cast<std::int64_t>(doe) - 719468;
}

bool leap(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

std::optional<std::int64_t> fail(std::string* why, const char* msg) {
    if (why) *why = msg;
    return std::nullopt;
}

} // namespace

std::optional<std::int64_t> parse_time_ms(std::string_view text, std::string* why) {
    if (text.empty()) return fail(why, "empty time");
    bool all_digits = true;
    for (char c : text) all_digits = all_digits && c >= '0' && c <= '9';
    if (all_digits) {
        std::int64_t v = 0;
        auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
        if (ec != std::errc() || p != text.data() + text.size()) return fail(why, "time out of range");
        return v;
    }
    std::string_view s = text;
    int year = 0, mon = 0, day = 0, hour = 0, min = 0, sec = 0, ms = 0;
    if (!take_digits(s, 4, year) || !take_char(s, '-') || !take_digits(s, 2, mon) || !take_char(s, '-') ||
        !take_digits(s, 2, day))
        return fail(why, "expected YYYY-MM-DD[THH:MM[:SS[.sss]]][Z|+HH:MM] or Unix milliseconds");
    if (!s.empty() && (s[0] == 'T' || s[0] == 't' || s[0] == ' ')) {
        s.remove_prefix(1);
        if (!take_digits(s, 2, hour) || !take_char(s, ':') || !take_digits(s, 2, min))
            return fail(why, "expected HH:MM after the date");
        if (take_char(s, ':')) {
            if (!take_digits(s, 2, sec)) return fail(why, "expected two digits of seconds");
            if (take_char(s, '.')) {
                // Milliseconds: 1 to 9 fraction digits, truncated to ms.
                int digits = 0;
                int frac = 0;
                while (!s.empty() && s[0] >= '0' && s[0] <= '9') {
                    if (digits < 3) frac = frac * 10 + (s[0] - '0');
                    ++digits;
                    s.remove_prefix(1);
                }
                if (digits == 0 || digits > 9) return fail(why, "expected 1 to 9 digits after the decimal point");
                for (int i = digits; i < 3; ++i) frac *= 10;
                ms = frac;
            }
        }
    }
    static constexpr int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (mon < 1 || mon > 12) return fail(why, "month out of range");
    if (day < 1 || day > mdays[mon - 1] + (mon == 2 && leap(year) ? 1 : 0)) return fail(why, "day out of range");
    if (hour > 23 || min > 59 || sec > 59) return fail(why, "time of day out of range");
    std::int64_t offset_min = 0;
    if (take_char(s, 'Z') || take_char(s, 'z')) {
    } else if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
        int sign = s[0] == '-' ? -1 : 1;
        s.remove_prefix(1);
        int oh = 0, om = 0;
        if (!take_digits(s, 2, oh)) return fail(why, "expected a zone offset +HH:MM");
        take_char(s, ':');
        if (!s.empty() && !take_digits(s, 2, om)) return fail(why, "expected a zone offset +HH:MM");
        if (oh > 23 || om > 59) return fail(why, "zone offset out of range");
        offset_min = sign * (oh * 60 + om);
    }
    if (!s.empty()) return fail(why, "unexpected characters after the time");
    std::int64_t days = days_from_civil(year, static_cast<unsigned>(mon), static_cast<unsigned>(day));
    std::int64_t secs = days * 86400 + hour * 3600 + min * 60 + sec - offset_min * 60;
    return secs * 1000 + ms;
}

std::string format_time_ms(std::int64_t ms) {
    std::int64_t secs = ms >= 0 ? ms / 1000 : (ms - 999) / 1000;
    int milli = static_cast<int>(ms - secs * 1000);
    std::int64_t days = secs >= 0 ? secs / 86400 : (secs - 86399) / 86400;
    std::int64_t rem = secs - days * 86400;
    // civil_from_days (Hinnant).
    std::int64_t z = days + 719468;
    const std::int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    const auto doe = static_cast<unsigned>(z - era * 146097);
    const unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    std::int64_t y = static_cast<std::int64_t>(yoe) + era * 400;
    const unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    const unsigned mp = (5 * doy + 2) / 153;
    const unsigned d = doy - (153 * mp + 2) / 5 + 1;
    const unsigned m = mp < 10 ? mp + 3 : mp - 9;
    y += m <= 2;
    char buf[64];
    std::snprintf(buf, sizeof buf, "%04lld-%02u-%02uT%02d:%02d:%02d.%03dZ", static_cast<long long>(y), m, d,
                  static_cast<int>(rem / 3600), static_cast<int>(rem / 60 % 60), static_cast<int>(rem % 60), milli);
    return buf;
}

std::optional<position> parse_position(std::string_view text, std::string* why) {
    if (text == "beginning" || text == "earliest" || text == "start") return position(position::kind::beginning, 0);
    if (text == "end" || text == "latest") return position(position::kind::end, 0);
    if (!text.empty() && text[0] == '@') {
        auto t = parse_time_ms(text.substr(1), why);
        if (!t) return std::nullopt;
        return position(position::kind::time, *t);
    }
    bool neg = !text.empty() && text[0] == '-';
    std::string_view digits = neg ? text.substr(1) : text;
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
    if (digits.empty() || ec != std::errc() || p != digits.data() + digits.size() || v < 0) {
        if (why) *why = "expected beginning, end, an offset, -N (N before the end) or @TIME";
        return std::nullopt;
    }
    return neg ? position(position::kind::from_end, v) : position(position::kind::offset, v);
}

} // namespace skiff::cli
