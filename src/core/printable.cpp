#include <skiff/core/printable.hpp>

namespace skiff {

std::string printable(std::string_view s, std::size_t limit, char replacement) {
    std::string out;
    const auto kept = s.substr(0, limit);
    out.reserve(kept.size() + 3);
    for (char c : kept) {
        const auto u = static_cast<unsigned char>(c);
        out += (u < 0x20 || u == 0x7f) ? replacement : c;
    }
    if (s.size() > limit) out += "...";
    return out;
}

} // namespace skiff
