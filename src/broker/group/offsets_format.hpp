// The persisted form of a group's committed offsets: the JSON object stored at
// `group_offsets_key(ns, group)` and the grammar of those keys. Pure functions, no I/O; the
// bytes written here are what brokers restarted over the same bucket read back, so any change
// must stay readable by (and readable from) what is already stored — the known-answer tests in
// test/unit/broker/test_offsets_format.cpp pin the exact bytes.
#pragma once

#include <skiff/core/result.hpp>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

namespace skiff::broker::groups {

struct committed_offset {
    std::int64_t offset = -1;
    std::int32_t leader_epoch = -1;
    std::string metadata;
    std::int64_t commit_timestamp_ms = -1;
    bool operator==(const committed_offset&) const = default;
};
// topic -> partition -> committed offset (ordered, so serialisation is deterministic).
using offset_map = std::map<std::string, std::map<std::int32_t, committed_offset>>;

inline constexpr int offsets_format_version = 1;

// Whether `s` is well-formed UTF-8 (no overlong forms, surrogates or code points past
// U+10FFFF). Strings that are not are stored base64-encoded.
bool valid_utf8(std::string_view s) noexcept;

// The offsets object for `group_id` (compact JSON, keys in a fixed order).
std::string serialize_offsets(std::string_view group_id, const offset_map& offsets);

struct parsed_offsets {
    std::string group_id;
    offset_map offsets;
};
// The object's contents, or one sentence saying why it is unusable (not JSON, another format
// version, a missing or mistyped field). Unknown fields are ignored.
result<parsed_offsets, std::string> parse_offsets(std::string_view body);

// `{ns}/skiff~meta/groups/`: the prefix every group's offsets object lives under.
std::string groups_prefix(std::string_view ns);

// What a key listed under groups_prefix(ns) names (see group_offsets_key in
// include/skiff/broker/group_coordinator.hpp for the forward direction).
enum class offsets_key_kind {
    other,     // not `{escaped id}/offsets.json` (ignore it)
    malformed, // shaped like one, but its escaped id does not decode to a non-empty id
    plain,     // `group_id` is the group it holds
    hashed,    // a shortened long id: only the object's contents name the group
};
struct offsets_key {
    offsets_key_kind kind = offsets_key_kind::other;
    std::string group_id; // for `plain`
};
offsets_key classify_offsets_key(std::string_view ns, std::string_view key);

} // namespace skiff::broker::groups

namespace skiff::broker {
// An id (group or transactional) as one path segment of a meta key: everything outside
// [A-Za-z0-9._-] (and a leading '.') as %XX; an escaped form over 200 bytes is shortened to a
// prefix plus '~' and a hash, so only the object's contents name such an id.
std::string escape_meta_id(std::string_view id);
} // namespace skiff::broker
