// The pieces of RFC 5802's message grammar that the server (scram.cpp) and the client
// (scram_client.cpp) both parse with; internal to the sasl module.
#pragma once

#include <algorithm>
#include <string_view>
#include <vector>

namespace skiff::sasl::detail {

// Splits on ','; empty fields are kept (and refused by the callers).
inline std::vector<std::string_view> split_commas(std::string_view s) {
    std::vector<std::string_view> out;
    std::size_t start = 0;
    for (;;) {
        auto pos = s.find(',', start);
        if (pos == std::string_view::npos) {
            out.push_back(s.substr(start));
            return out;
        }
        out.push_back(s.substr(start, pos - start));
        start = pos + 1;
    }
}

// RFC 5802 printable: %x21-2B / %x2D-7E (no ','), at least one.
inline bool valid_nonce(std::string_view s) noexcept {
    return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= 0x21 && c <= 0x7E && c != ','; });
}

} // namespace skiff::sasl::detail
