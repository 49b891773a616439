// Positions in a partition given on the command line: `beginning`, `end`, an offset, `-N`
// (N before the end, as kcat's -o -N), or a time (`@1700000000000` in Unix ms, or an ISO-8601
// date-time as kafka-consumer-groups' --to-datetime takes it). Shared by `skiff consume`
// (--from/--to) and `skiff group reset-offsets` (--to-datetime). Pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace skiff::cli {

// Milliseconds since the Unix epoch of an ISO-8601 date-time: `YYYY-MM-DD`,
// `YYYY-MM-DDTHH:MM[:SS[.sss]]`, a space allowed for `T`, then optionally `Z` or `+HH:MM` /
// `-HH:MM` / `+HHMM`. Without a zone the time is UTC (Kafka's tool uses the local zone; a CLI
// that runs on servers set to UTC anyway is more predictable this way, and the zone can be
// given). Also accepts a bare integer (Unix ms). nullopt on anything else, with `why` set.
std::optional<std::int64_t> parse_time_ms(std::string_view text, std::string* why = nullptr);

// The same time written back as `YYYY-MM-DDTHH:MM:SS.sssZ` (for tables).
std::string format_time_ms(std::int64_t ms);

struct position {
    enum class kind : std::uint8_t { beginning, end, offset, from_end, time };
    position() = default;
    position(kind k, std::int64_t v) : what(k), value(v) {}
    kind what = kind::beginning;
    std::int64_t value = 0; // the offset, N for from_end, or Unix ms for time
};

// Parses `beginning`/`earliest`, `end`/`latest`, `OFFSET` (>= 0), `-N`, `@TIME` (parse_time_ms).
std::optional<position> parse_position(std::string_view text, std::string* why = nullptr);

} // namespace skiff::cli
