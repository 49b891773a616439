#include <skiff/storage/layout.hpp>

#include <fmt/format.h>

#include <charconv>

namespace skiff::storage {

namespace {
constexpr std::string_view name_prefix = "segment-";
constexpr std::size_t base_digits = 20;

std::string_view extension(object_kind k) {
    switch (k) {
    case object_kind::kfs: return ".kfs";
    case object_kind::index: return ".index";
    case object_kind::kfst: return ".kfst";
    }
    return ".kfs";
}
} // namespace

std::string partition_prefix(const std::string& ns, const partition_id& p) {
    return fmt::format("{}/{}/{}/", ns, p.topic, p.partition);
}

std::string object_key(const std::string& ns, const partition_id& p, std::int64_t base, object_kind kind) {
    return fmt::format("{}segment-{:020}{}", partition_prefix(ns, p), base, extension(kind));
}
std::string segment_key(const std::string& ns, const partition_id& p, std::int64_t base) {
    return object_key(ns, p, base, object_kind::kfs);
}
std::string index_key(const std::string& ns, const partition_id& p, std::int64_t base) {
    return object_key(ns, p, base, object_kind::index);
}
std::string time_index_key(const std::string& ns, const partition_id& p, std::int64_t base) {
    return object_key(ns, p, base, object_kind::kfst);
}

std::optional<segment_name> parse_segment_name(std::string_view name) {
    if (name.size() <= name_prefix.size() + base_digits || name.substr(0, name_prefix.size()) != name_prefix) {
        return std::nullopt;
    }
    segment_name out;
    const auto ext = name.substr(name_prefix.size() + base_digits);
    if (ext == extension(object_kind::kfs)) {
        out.kind = object_kind::kfs;
    } else if (ext == extension(object_kind::index)) {
        out.kind = object_kind::index;
    } else if (ext == extension(object_kind::kfst)) {
        out.kind = object_kind::kfst;
    } else {
        return std::nullopt;
    }
    const auto digits = name.substr(name_prefix.size(), base_digits);
    auto [p, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), out.base);
    if (ec != std::errc{} || p != digits.data() + digits.size() || out.base < 0) return std::nullopt;
    return out;
}

std::optional<object_address> parse_object_key(std::string_view rest) {
    const auto s1 = rest.find('/');
    if (s1 == std::string_view::npos || s1 == 0) return std::nullopt;
    const auto s2 = rest.find('/', s1 + 1);
    if (s2 == std::string_view::npos) return std::nullopt;
    object_address out;
    out.partition.topic = std::string(rest.substr(0, s1));
    const auto part = rest.substr(s1 + 1, s2 - s1 - 1);
    auto [p, ec] = std::from_chars(part.data(), part.data() + part.size(), out.partition.partition);
    if (ec != std::errc{} || p != part.data() + part.size() || out.partition.partition < 0) return std::nullopt;
    auto name = parse_segment_name(rest.substr(s2 + 1));
    if (!name) return std::nullopt;
    out.name = *name;
    return out;
}

} // namespace skiff::storage
