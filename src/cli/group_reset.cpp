#include "group_reset.hpp"

#include <algorithm>

namespace skiff::cli {

result<std::vector<planned_reset>, std::string> plan_reset(const std::vector<partition_state>& parts,
                                                           const reset_spec& spec) {
    std::vector<planned_reset> out;
    out.reserve(parts.size());
    for (const auto& p : parts) {
        // A log whose start passed its end cannot happen on a sane broker; trust the end.
        const std::int64_t lo = std::min(p.earliest, p.latest);
        const std::int64_t hi = p.latest;
        auto clamp = [&](std::int64_t v) { return std::clamp(v, lo, hi); };
        planned_reset r;
        r.topic = p.topic;
        r.partition = p.partition;
        r.current = p.committed;
        switch (spec.mode) {
        case reset_mode::to_earliest: r.target = lo; break;
        case reset_mode::to_latest: r.target = hi; break;
        case reset_mode::to_offset: r.target = clamp(spec.value); break;
        case reset_mode::to_datetime: r.target = p.offset_for_time ? clamp(*p.offset_for_time) : hi; break;
        case reset_mode::shift_by: {
            if (!p.committed)
                return failure{std::string("cannot shift the offset of ") + p.topic + "-" +
                               std::to_string(p.partition) + ": the group has no committed offset there"};
            // Saturate instead of overflowing on absurd shifts; the clamp brings it in range.
            std::int64_t c = *p.committed;
            std::int64_t v = spec.value;
            std::int64_t sum = 0;
            if (__builtin_add_overflow(c, v, &sum)) sum = v > 0 ? hi : lo;
            r.target = clamp(sum);
            break;
        }
        }
        out.push_back(std::move(r));
    }
    return out;
}

std::optional<std::int64_t> lag(std::optional<std::int64_t> committed, std::int64_t log_end) {
    if (!committed) return std::nullopt;
    return std::max<std::int64_t>(0, log_end - *committed);
}

} // namespace skiff::cli
