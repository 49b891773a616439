// Typed columns from JSON record values (schema.hpp's projections), for the sink. A value that
// is not JSON, or whose path holds something of another type, gives nulls for the columns it
// cannot fill and counts as one dead letter; a missing member is a plain null (JSON documents
// leave out what they do not have). One core.
#pragma once

#include <skiff/iceberg/schema.hpp>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace skiff::iceberg {

// null, string, long (also timestamptz in microseconds), double, boolean
using projected_value = std::variant<std::monostate, std::string, std::int64_t, double, bool>;

class projector {
public:
    // `ps` already checked (check_projections).
    explicit projector(std::span<const projection> ps);

    bool empty() const noexcept { return _cols.empty(); }
    // One value per projection, in order, into `out` (resized). True when every column that
    // has a member at its path got a value of its type; false (a dead letter) otherwise.
    bool project(std::optional<std::string_view> value, std::vector<projected_value>& out) const;

private:
    struct column {
        std::vector<std::string> path;
        std::string type;
    };
    std::vector<column> _cols;
};

// Days since 1970-01-01 of a timestamp in ms (Iceberg's day transform: floor, also before 1970).
std::int32_t day_of(std::int64_t timestamp_ms) noexcept;
// Microseconds since the epoch of an ISO-8601 / RFC 3339 time with a zone ("Z" or ±hh:mm);
// nullopt when it does not parse.
std::optional<std::int64_t> parse_iso_micros(std::string_view s) noexcept;

} // namespace skiff::iceberg
