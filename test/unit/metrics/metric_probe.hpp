// Test helper: read one series of this thread's (core's) metrics registry by name and labels.
// Tests compare values before and after an operation, since the registry lives as long as
// the thread and other test cases on it record into the same cells.
#pragma once

#include <skiff/metrics/registry.hpp>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace skiff::test {

// The series `name{labels}` of this core's registry, if registered.
inline std::optional<metrics::series_snapshot> find_series(std::string_view name, metrics::labels l = {}) {
    std::sort(l.begin(), l.end());
    auto snap = metrics::registry::local().snapshot();
    for (auto& f : snap.families) {
        if (f.name != name) continue;
        for (auto& s : f.series) {
            if (s.labels == l) return s;
        }
    }
    return std::nullopt;
}

inline std::uint64_t counter_value(std::string_view name, metrics::labels l = {}) {
    auto s = find_series(name, std::move(l));
    return s ? s->counter : 0;
}

inline std::int64_t gauge_value(std::string_view name, metrics::labels l = {}) {
    auto s = find_series(name, std::move(l));
    return s ? s->gauge : 0;
}

inline std::uint64_t histogram_count(std::string_view name, metrics::labels l = {}) {
    auto s = find_series(name, std::move(l));
    return s ? s->hist.count : 0;
}

} // namespace skiff::test
