#include <skiff/storage/compression.hpp>
#include <skiff/storage/fsck.hpp>
#include <skiff/storage/index_format.hpp>
#include <skiff/storage/layout.hpp>
#include <skiff/storage/segment_format.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <tuple>

namespace skiff::storage {

namespace {

std::string seg_key(const std::string& ns, const std::string& topic, std::int32_t p, std::int64_t base, bool index) {
    return object_key(ns, partition_id(topic, p), base, index ? object_kind::index : object_kind::kfs);
}

// Every entry must name a batch start of this very segment: an index that fits the size but
// points elsewhere belongs to another segment with the same base (two owners' halves of a
// pair, docs/cluster.md), and a range GET from it would start mid-batch.
result<void, format_error> check_index_matches(const index_view& index, const segment_view& seg) {
    std::map<std::int32_t, std::int64_t> starts; // position -> base offset
    for (const auto& b : seg.batches) starts.emplace(seg.position_of(b), b.base_offset);
    for (const auto& e : index.entries) {
        auto it = starts.find(e.position);
        if (it == starts.end() || it->second != e.offset) {
            return failure{format_error(format_errc::invalid,
                                        fmt::format("entry (offset {}, position {}) is not a batch start of its "
                                                    "segment",
                                                    e.offset, e.position))};
        }
    }
    return ok();
}

// Whether the part of the earlier segment (`cover`, its batches by base offset) within
// `source`'s range is a compaction of `source`: each of its batches there is one of the
// source's (same offsets and producer fields, as compaction keeps batch headers) holding a
// subset of its records, each with the same offset, timestamp, key and value. Batches the
// compaction dropped are simply absent (all of them, when every record there was superseded).
bool compacted_from(const std::map<std::int64_t, batch_view>& cover, const segment_view& source) {
    std::map<std::int64_t, const batch_view*> src;
    for (const auto& b : source.batches) src.emplace(b.base_offset, &b);
    if (src.empty()) return false;
    const std::int64_t first = source.base_offset();
    const std::int64_t last = source.last_offset();
    // A batch of the earlier segment starting before the source and reaching into it would
    // mean other batch boundaries: not a compaction.
    if (auto it = cover.lower_bound(first); it != cover.begin() && std::prev(it)->second.last_offset() >= first) {
        return false;
    }
    constexpr std::size_t max_uncompressed = 64u << 20;
    for (auto it = cover.lower_bound(first); it != cover.end() && it->first <= last; ++it) {
        auto s = src.find(it->first);
        if (s == src.end()) return false;
        const auto& a = it->second;
        const auto& b = *s->second;
        if (a.last_offset_delta != b.last_offset_delta || a.producer_id != b.producer_id ||
            a.producer_epoch != b.producer_epoch || a.base_sequence != b.base_sequence ||
            a.record_count > b.record_count || a.is_control() != b.is_control()) {
            return false;
        }
        if (a.crc == b.crc && a.batch_length == b.batch_length) continue; // kept whole
        auto ra = decode_records(a, max_uncompressed);
        auto rb = decode_records(b, max_uncompressed);
        if (!ra || !rb) return false;
        std::map<std::int32_t, const record_view*> by_delta;
        for (const auto& r : rb->records) by_delta.emplace(r.offset_delta, &r);
        const auto ts = [](const batch_view& batch, const record_view& r) {
            return batch.log_append_time() ? batch.max_timestamp : batch.base_timestamp + r.timestamp_delta;
        };
        for (const auto& r : ra->records) {
            auto o = by_delta.find(r.offset_delta);
            if (o == by_delta.end()) return false;
            const auto& q = *o->second;
            if (r.key != q.key || r.value != q.value || ts(a, r) != ts(b, q)) return false;
        }
    }
    // No batch of the earlier segment in the range at all: the compaction dropped every one
    // (each record superseded later), and no offset there has two contents either.
    return true;
}

// The time index of the batches of `seg` below `next_base` (all of them when < 0), with the
// builder's rule: both timestamps of every batch bound the range, values below 0 say nothing.
time_index served_time_index(const segment_view& seg, std::int64_t next_base) {
    time_index t{-1, -1, seg.base_offset(), seg.base_offset()};
    for (const auto& b : seg.batches) {
        if (next_base >= 0 && b.base_offset >= next_base) break;
        for (std::int64_t ts : {b.base_timestamp, b.max_timestamp}) {
            if (ts < 0) continue;
            t.min_timestamp = t.min_timestamp < 0 ? ts : std::min(t.min_timestamp, ts);
            t.max_timestamp = std::max(t.max_timestamp, ts);
        }
        t.max_offset = b.last_offset();
    }
    return t;
}

} // namespace

runtime::task<result<fsck_report, store_error>> fsck(object_store& store, std::string ns, bool repair,
                                                     std::int32_t index_interval) {
    fsck_report report;
    const std::string prefix = ns + "/";
    struct objects {
        std::map<std::int64_t, std::uint64_t> kfs;
        std::set<std::int64_t> index;
        std::set<std::int64_t> kfst;
    };
    std::map<std::pair<std::string, std::int32_t>, objects> parts;
    std::string token;
    for (;;) {
        auto page = co_await store.list(prefix, "", token, 1000, {});
        if (!page) co_return failure{std::move(page).error()};
        for (auto& o : page->objects) {
            ++report.objects_listed;
            auto k = parse_object_key(std::string_view(o.key).substr(prefix.size()));
            if (!k) {
                ++report.foreign_keys;
                continue;
            }
            auto& slot = parts[{k->partition.topic, k->partition.partition}];
            switch (k->name.kind) {
            case object_kind::index: slot.index.insert(k->name.base); break;
            case object_kind::kfst: slot.kfst.insert(k->name.base); break;
            case object_kind::kfs: slot.kfs[k->name.base] = o.size; break;
            }
        }
        if (page->next_token.empty()) break;
        token = page->next_token;
    }

    for (auto& [tp, objs] : parts) {
        fsck_partition fp;
        fp.topic = tp.first;
        fp.partition = tp.second;
        for (auto b : objs.index) {
            if (!objs.kfs.count(b)) fp.orphan_index.push_back(b);
        }
        for (auto b : objs.kfst) {
            if (!objs.kfs.count(b)) fp.orphan_time_index.push_back(b);
        }
        std::int64_t expected_next = -1;
        // The batches of the segment reaching furthest so far: a later segment inside it must
        // be a byte-for-byte copy (a merge's source) or what it was compacted from to be
        // harmless.
        std::map<std::int64_t, batch_view> cover;
        std::shared_ptr<const std::string> cover_bytes; // what `cover`'s views point into
        for (auto& [base, size] : objs.kfs) {
            const std::string key = seg_key(ns, fp.topic, fp.partition, base, false);
            auto whole = co_await store.get(key, std::nullopt, {});
            if (!whole) {
                fp.corrupt.push_back(fmt::format("{}: cannot read: {}", key, whole.error().message));
                continue;
            }
            auto seg = decode_segment(whole->data, true);
            if (!seg) {
                fp.corrupt.push_back(fmt::format("{}: {}", key, seg.error().message));
                continue;
            }
            fsck_segment fs;
            fs.base = base;
            fs.last = seg->last_offset();
            fs.size = whole->data.size();
            fs.has_index = objs.index.count(base) > 0;
            if (seg->base_offset() != base) {
                fp.corrupt.push_back(fmt::format("{}: header base offset {} does not match the key", key, seg->base_offset()));
                continue;
            }
            bool index_ok = fs.has_index;
            if (fs.has_index) {
                const std::string ikey = seg_key(ns, fp.topic, fp.partition, base, true);
                auto idx = co_await store.get(ikey, std::nullopt, {});
                if (!idx) {
                    fp.corrupt.push_back(fmt::format("{}: cannot read: {}", ikey, idx.error().message));
                    index_ok = false;
                } else {
                    auto view = decode_index(idx->data);
                    result<void, format_error> fits = ok();
                    if (view) fits = check_index_fits(*view, base, whole->data.size());
                    if (view && fits) fits = check_index_matches(*view, *seg);
                    if (!view || !fits) {
                        fp.corrupt.push_back(fmt::format("{}: {}", ikey, !view ? view.error().message : fits.error().message));
                        index_ok = false;
                    }
                }
            } else {
                fp.orphan_kfs.push_back(base);
            }
            if (repair && !index_ok) {
                auto rebuilt = rebuild_index(whole->data, index_interval);
                if (rebuilt) {
                    std::string bytes = std::move(*rebuilt);
                    auto put = co_await store.put(seg_key(ns, fp.topic, fp.partition, base, true),
                                                  std::span<const char>(bytes.data(), bytes.size()), false, {});
                    if (put) {
                        fp.repaired.push_back(base);
                        fs.has_index = true;
                    } else {
                        fp.corrupt.push_back(fmt::format("repair of {} failed: {}", key, put.error().message));
                    }
                }
            }
            if (objs.kfst.count(base)) {
                ++fp.time_indexes;
                const std::string tkey = object_key(ns, partition_id(fp.topic, fp.partition), base, object_kind::kfst);
                auto side = co_await store.get(tkey, std::nullopt, {});
                const auto want = time_index_of(*seg);
                // While a merge's later sources exist, the first one's old sidecar is right for
                // what readers take from the grown object: its batches below the next base.
                auto next = objs.kfs.upper_bound(base);
                const auto served = served_time_index(*seg, next == objs.kfs.end() ? -1 : next->first);
                std::string problem;
                if (!side) {
                    problem = fmt::format("{}: cannot read: {}", tkey, side.error().message);
                } else if (side->data.size() != time_index_size) {
                    problem = fmt::format("{}: {} bytes, a sidecar has {}", tkey, side->data.size(), time_index_size);
                } else if (auto t = decode_time_index(side->data); !t) {
                    problem = fmt::format("{}: {}", tkey, t.error().message);
                } else if (!(*t == want) && !(*t == served)) {
                    problem = fmt::format("{}: says timestamps {}..{}, offsets {}..{}; its segment holds {}..{}, {}..{}",
                                          tkey, t->min_timestamp, t->max_timestamp, t->min_offset, t->max_offset,
                                          want.min_timestamp, want.max_timestamp, want.min_offset, want.max_offset);
                }
                if (!problem.empty() && repair) {
                    const std::string bytes = encode_time_index(want);
                    auto put = co_await store.put(tkey, std::span<const char>(bytes.data(), bytes.size()), false, {});
                    if (put) {
                        fp.repaired_time_index.push_back(base);
                        problem.clear();
                    } else {
                        problem += fmt::format(" (repair failed: {})", put.error().message);
                    }
                }
                if (!problem.empty()) fp.bad_time_index.push_back(std::move(problem));
            }
            if (expected_next >= 0 && base < expected_next) {
                bool copy = true;
                for (const auto& b : seg->batches) {
                    if (!copy || b.base_offset >= expected_next) break;
                    auto it = cover.find(b.base_offset);
                    copy = it != cover.end() && it->second.crc == b.crc && it->second.batch_length == b.batch_length;
                }
                if (copy && fs.last < expected_next) {
                    fp.merged_away.push_back(base);
                    continue;
                }
                if (!copy && fs.last < expected_next && compacted_from(cover, *seg)) {
                    fp.compacted_away.push_back(base);
                    continue;
                }
                if (copy) fp.copies.push_back({base, expected_next - 1});
                else fp.overlaps.push_back({base, std::min(expected_next, fs.last + 1) - 1});
            }
            if (expected_next >= 0 && base > expected_next) fp.gaps.push_back({expected_next, base - 1});
            if (fs.last + 1 > expected_next) {
                cover.clear();
                cover_bytes = std::make_shared<const std::string>(std::move(whole->data));
                auto again = decode_segment(*cover_bytes, false);
                if (again) {
                    for (const auto& b : again->batches) cover[b.base_offset] = b;
                }
            }
            expected_next = std::max(expected_next, fs.last + 1);
            fp.segments.push_back(fs);
        }
        report.partitions.push_back(std::move(fp));
    }
    co_return report;
}

std::string format_fsck_report(const fsck_report& r, const std::string& where) {
    std::string out = fmt::format("{}: {} objects, {} partitions{}\n", where, r.objects_listed, r.partitions.size(),
                                  r.foreign_keys ? fmt::format(", {} other keys left alone", r.foreign_keys) : "");
    for (auto& p : r.partitions) {
        std::int64_t first = p.segments.empty() ? 0 : p.segments.front().base;
        std::int64_t last = p.segments.empty() ? -1 : p.segments.back().last;
        out += fmt::format("{}/{}: {} segments, offsets {}..{}{}\n", p.topic, p.partition, p.segments.size(), first, last,
                           p.clean() ? ", clean" : "");
        for (auto b : p.orphan_kfs) out += fmt::format("  orphan .kfs (no .index): segment {}\n", b);
        for (auto b : p.orphan_index) out += fmt::format("  orphan .index (no .kfs): segment {}\n", b);
        for (auto& g : p.gaps) {
            out += fmt::format("  gap (warning): offsets {}..{} are in no segment; readers skip them\n", g.first, g.last);
        }
        for (auto b : p.merged_away) {
            out += fmt::format("  merged (warning): segment {} is a copy inside an earlier merged segment; its "
                               "delete is pending\n", b);
        }
        for (auto b : p.compacted_away) {
            out += fmt::format("  compacted (warning): segment {} is a source inside an earlier compacted segment; its "
                               "delete is pending\n", b);
        }
        for (auto& c : p.copies) {
            out += fmt::format("  copy (warning): offsets {}..{} are stored twice, byte for byte (a merge cut off "
                               "before its manifest); read once\n", c.first, c.last);
        }
        for (auto& o : p.overlaps) {
            out += fmt::format("  overlap: offsets {}..{} are in more than one segment\n", o.first, o.last);
        }
        for (auto& c : p.corrupt) out += fmt::format("  corrupt: {}\n", c);
        for (auto b : p.repaired) out += fmt::format("  repaired: rebuilt the index of segment {}\n", b);
        for (auto b : p.orphan_time_index) {
            out += fmt::format("  orphan .kfst (warning): segment {} has a time-index sidecar but no .kfs; harmless\n", b);
        }
        for (auto& c : p.bad_time_index) out += fmt::format("  wrong time index: {}\n", c);
        for (auto b : p.repaired_time_index) {
            out += fmt::format("  repaired: rewrote the time-index sidecar of segment {}\n", b);
        }
    }
    out += r.clean() ? "no problems found\n" : "problems found\n";
    return out;
}

} // namespace skiff::storage
