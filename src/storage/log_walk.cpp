#include <skiff/storage/log_walk.hpp>

#include <span>

namespace skiff::storage {

runtime::task<result<void, store_error>> walk_committed(partition_log& log, std::int64_t from,
                                                        std::function<bool(const batch_view&)> visit,
                                                        std::stop_token st) {
    // Chunks of a few MiB: large enough that a walk over a whole segment costs few reads,
    // small enough not to hold much memory per walker.
    constexpr std::size_t chunk = 4u << 20;
    std::int64_t pos = from;
    while (pos < log.high_watermark()) {
        // A read served from the cache never looks at the token: check it between reads.
        if (st.stop_requested()) co_return failure{store_error(errc::cancelled, "the walk was cancelled")};
        auto r = co_await log.read(pos, chunk, st);
        if (!r) co_return failure{r.error()};
        if (r->records.empty()) break;
        std::span<const char> rest(r->records);
        std::int64_t next = pos;
        while (!rest.empty()) {
            auto b = parse_batch(rest, false);
            if (!b) break;
            if (!visit(*b)) co_return ok();
            next = b->next_offset();
            rest = rest.subspan(b->size());
        }
        if (next <= pos) break; // no progress: never loop on the same bytes
        pos = next;
    }
    co_return ok();
}

} // namespace skiff::storage
