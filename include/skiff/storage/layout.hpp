// The bucket layout (KafScale's): where a partition's objects live, both ways.
//
//   {ns}/{topic}/{partition}/segment-{base:020d}.kfs     the segment
//   {ns}/{topic}/{partition}/segment-{base:020d}.index   its sparse offset index
//   {ns}/{topic}/{partition}/segment-{base:020d}.kfst    its time-index sidecar (optional)
//
// Keys of one base sort .index < .kfs < .kfst.
//
// Pure functions; any core.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace skiff::storage {

struct partition_id {
    partition_id() = default;
    partition_id(std::string t, std::int32_t p) : topic(std::move(t)), partition(p) {}
    std::string topic;
    std::int32_t partition = 0;
};

enum class object_kind : std::uint8_t { kfs, index, kfst };

// "{ns}/{topic}/{partition}/"
std::string partition_prefix(const std::string& ns, const partition_id& p);
std::string segment_key(const std::string& ns, const partition_id& p, std::int64_t base);
std::string index_key(const std::string& ns, const partition_id& p, std::int64_t base);
std::string time_index_key(const std::string& ns, const partition_id& p, std::int64_t base);
std::string object_key(const std::string& ns, const partition_id& p, std::int64_t base, object_kind kind);

struct segment_name {
    std::int64_t base = 0;
    object_kind kind = object_kind::kfs;
};
// "segment-{base:020d}.kfs|.index|.kfst" (exactly 20 digits, base >= 0); nullopt for anything else.
std::optional<segment_name> parse_segment_name(std::string_view name);

struct object_address {
    partition_id partition;
    segment_name name;
};
// "{topic}/{partition}/segment-..." (a key with its "{ns}/" removed); nullopt for keys that
// are not a segment object (they are someone else's and left alone).
std::optional<object_address> parse_object_key(std::string_view key_in_ns);

} // namespace skiff::storage
