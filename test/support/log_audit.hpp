// Shared by the partition-log tests (unit and integration): record sets whose values name
// their sequence, a durable producer, a whole-log reader, and the audit every failure
// scenario ends with — every acknowledged record readable at its offset with its value,
// in order, once per offset.
#pragma once

#include <skiff/runtime/task.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/record_batch.hpp>

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace skiff::test {

using runtime::task;
using namespace skiff::storage;

// A record set with one batch of `n` records whose values name the producer's sequence.
inline std::string batch_of(int first_seq, int n) {
    std::vector<record> recs;
    for (int i = 0; i < n; ++i) recs.emplace_back(std::string("k"), fmt::format("v{}", first_seq + i));
    return build_batch(0, recs);
}

struct outcome {
    bool acked = false;
    std::int64_t base = -1, last = -1;
    std::optional<append_errc> error;
};

inline task<outcome> produce(partition_log* log, std::string set) {
    auto r = co_await log->append(std::span<const char>(set.data(), set.size()), ack_mode::durable);
    outcome o;
    if (r) {
        o.acked = true;
        o.base = r->base_offset;
        o.last = r->last_offset;
    } else {
        o.error = r.error().code;
    }
    co_return o;
}

// Reads the whole log and returns offset -> value.
inline task<std::map<std::int64_t, std::string>> read_all(partition_log* log) {
    std::map<std::int64_t, std::string> out;
    std::int64_t off = log->log_start_offset();
    while (off < log->high_watermark()) {
        auto r = co_await log->read(off, 1 << 20);
        REQUIRE(r.has_value());
        auto batches = split_batches(std::span<const char>(r->records.data(), r->records.size()));
        REQUIRE(batches.has_value());
        if (batches->empty()) break;
        for (auto& b : *batches) {
            auto recs = parse_records(b);
            REQUIRE(recs.has_value());
            for (auto& rec : *recs) {
                auto o = b.base_offset + rec.offset_delta;
                REQUIRE(out.count(o) == 0); // once per offset
                out[o] = std::string(*rec.value);
            }
            off = b.next_offset();
        }
    }
    co_return out;
}

// The audit: every acknowledged record is readable at its offset with its value.
inline void audit(const std::vector<outcome>& outcomes, const std::vector<int>& first_seqs,
           const std::map<std::int64_t, std::string>& log) {
    for (std::size_t i = 0; i < outcomes.size(); ++i) {
        if (!outcomes[i].acked) continue;
        for (std::int64_t o = outcomes[i].base; o <= outcomes[i].last; ++o) {
            INFO("offset " << o);
            auto it = log.find(o);
            REQUIRE(it != log.end());
            CHECK(it->second == fmt::format("v{}", first_seqs[i] + (o - outcomes[i].base)));
        }
    }
    // Offsets ascend with the values (in order).
    std::int64_t prev = -1;
    for (auto& [o, v] : log) {
        CHECK(o > prev);
        prev = o;
    }
}

} // namespace skiff::test
