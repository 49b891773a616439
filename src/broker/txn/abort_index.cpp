#include "abort_index.hpp"

#include <fmt/format.h>

#include <charconv>

namespace skiff::broker::txn {

namespace {
// Exactly 20 decimal digits, the value fitting an int64 and not negative.
std::optional<std::int64_t> parse20(std::string_view s) {
    if (s.size() != 20) return std::nullopt;
    std::int64_t v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || v < 0) return std::nullopt;
    for (char c : s) {
        if (c < '0' || c > '9') return std::nullopt;
    }
    return v;
}
} // namespace

std::string abort_index_prefix(std::string_view partition_prefix) {
    return fmt::format("{}txn-aborted-", partition_prefix);
}

std::string abort_index_key(std::string_view partition_prefix, const aborted_txn& t) {
    return fmt::format("{}{:020}-{:020}-{:020}", abort_index_prefix(partition_prefix), t.last_offset, t.first_offset,
                       t.producer_id);
}

std::string abort_index_body(const aborted_txn& t) {
    return fmt::format(R"({{"producer_id":{},"first_offset":{},"last_offset":{}}})", t.producer_id, t.first_offset,
                       t.last_offset);
}

std::optional<aborted_txn> parse_abort_index_key(std::string_view partition_prefix, std::string_view key) {
    const std::string prefix = abort_index_prefix(partition_prefix);
    if (key.size() != prefix.size() + 62 || key.substr(0, prefix.size()) != prefix) return std::nullopt;
    std::string_view rest = key.substr(prefix.size());
    if (rest[20] != '-' || rest[41] != '-') return std::nullopt;
    auto last = parse20(rest.substr(0, 20));
    auto first = parse20(rest.substr(21, 20));
    auto pid = parse20(rest.substr(42, 20));
    if (!last || !first || !pid || *first > *last) return std::nullopt;
    aborted_txn t;
    t.producer_id = *pid;
    t.first_offset = *first;
    t.last_offset = *last;
    return t;
}

} // namespace skiff::broker::txn
