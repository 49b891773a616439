#include <skiff/core/percent.hpp>

namespace skiff {

result<std::string, std::size_t> percent_decode(std::string_view s, plus_sign plus, bad_escape bad) {
    std::string out;
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size(); ++i) {
        const char c = s[i];
        if (c == '+' && plus == plus_sign::space) {
            out += ' ';
            continue;
        }
        if (c != '%') {
            out += c;
            continue;
        }
        const int hi = i + 2 < s.size() ? hex_digit_value(s[i + 1]) : -1;
        const int lo = i + 2 < s.size() ? hex_digit_value(s[i + 2]) : -1;
        if (hi < 0 || lo < 0) {
            if (bad == bad_escape::reject) return failure{i};
            out += c;
            continue;
        }
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
    }
    return out;
}

std::string form_decode(std::string_view s) {
    auto r = percent_decode(s, plus_sign::space, bad_escape::keep);
    return std::move(*r); // bad_escape::keep never fails
}

std::optional<std::string> form_value(std::string_view query, std::string_view name) {
    while (!query.empty()) {
        const auto amp = query.find('&');
        const std::string_view part = query.substr(0, amp);
        query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
        const auto eq = part.find('=');
        if (form_decode(part.substr(0, eq)) != name) continue;
        return eq == std::string_view::npos ? std::string{} : form_decode(part.substr(eq + 1));
    }
    return std::nullopt;
}

} // namespace skiff
