// segment_scan: reads planned segments in order with parallel ranged GETs.
//
// Fetching is a rolling window: pump() starts GETs for the bytes that come next in plan order
// (the consumer's segment first, then the following ones) while fewer than parallel_gets are
// in flight and the bytes held or on their way fit in read_ahead_bytes; every GET that ends
// calls pump() again, so the window refills as soon as a slot frees, whether or not the
// consumer is inside next(). Each GET runs as a task under the scan's gate and holds a
// shared_ptr to this state, so a scan destroyed without close() leaves nothing dangling: its
// stop_source stops the GETs, and their tasks end (and free the state) on a later reactor turn.
// GETs are issued strictly in plan order and the consumer's own segment is never held back by
// the byte budget (one GET of it at a time), so read-ahead can never starve the consumer.
//
// Every segment's first GET is a range of part_bytes: a segment that fits is validated whole
// (decode_segment, every batch CRC); a larger one (a merge may have grown it since it was
// listed) is walked part after part with walk_batches, which also checks every batch CRC.
#include <skiff/reader/segment_reader.hpp>
#include <skiff/runtime/gate.hpp>
#include <skiff/runtime/oneshot.hpp>
#include <skiff/storage/compression.hpp>
#include <skiff/storage/index_format.hpp>
#include <skiff/storage/layout.hpp>
#include <skiff/storage/segment_format.hpp>

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <utility>

namespace skiff::reader {

namespace {

reader_error corrupt(const std::string& key, std::string_view what) {
    return reader_error(errc::corrupt, fmt::format("{} is corrupt: {}", key, what));
}

struct seg_state {
    bool started = false;           // its prepare GETs were issued
    bool prepared = false;
    bool pruned = false;
    bool finished = false;          // the consumer is done with it (or stopped early)
    std::uint64_t start_pos = 0;    // where reading starts: 0, or an .index position
    std::uint64_t fetch_pos = 0;    // the next byte a GET asks for
    std::uint64_t size = 0;         // the object's size, from the first GET
    std::map<std::uint64_t, std::string> parts; // fetched and not yet consumed, by position
    // A GET of read-ahead failed: reported when the consumer gets here, not before the
    // records of the segments ahead of it.
    std::optional<reader_error> error;
    std::size_t gets = 0;           // GET tasks of this segment still running
};

} // namespace

struct segment_scan::impl : std::enable_shared_from_this<segment_scan::impl> {
    storage::object_store& store;
    std::string ns;
    std::vector<segment_ref> segs;
    scan_bounds b;
    scan_config cfg;
    std::vector<seg_state> state;

    std::size_t cur = 0;            // the segment the consumer is in
    bool entered = false;           // the consumer has counted `cur` (read-ahead hit or not)
    bool positioned = false;        // consume_pos is set for `cur`
    std::uint64_t consume_pos = 0;  // next part the consumer takes
    std::string carry;              // bytes of an unfinished batch (and the footer) between parts
    std::string buf;                // the bytes `batches` point into
    std::vector<storage::batch_view> batches;
    std::size_t next_batch = 0;
    storage::decoded_records decoded;
    std::map<std::int32_t, std::int64_t> last_emitted; // per partition, offsets only increase
    chunk out;
    std::optional<reader_error> failed;
    bool done = false;
    std::size_t held = 0;           // fetched bytes not yet consumed
    std::size_t reserved = 0;       // bytes the running GET tasks may bring
    std::size_t tasks = 0;          // GET tasks running (waiting for a budget permit or in a GET)
    std::uint64_t in_flight = 0;    // GETs inside the store
    bool pumping = false, repump = false;
    std::optional<runtime::oneshot<void>> waiter; // the consumer waits here for a GET to end
    std::stop_source stop;          // stops every GET: an error, close(), the destructor
    runtime::gate gate{"segment_scan"};
    std::vector<finding> found;
    scan_stats stats;

    impl(storage::object_store& s, std::string n, std::vector<segment_ref> p, scan_bounds bb, scan_config c)
        : store(s), ns(std::move(n)), segs(std::move(p)), b(bb), cfg(c), state(segs.size()) {
        if (cfg.parallel_gets == 0) cfg.parallel_gets = 1;
        if (cfg.part_bytes < 64) cfg.part_bytes = 64;
        stats.segments_planned = segs.size();
    }

    std::string key_of(const segment_ref& s) const { return storage::segment_key(ns, {s.topic, s.partition}, s.base); }

    std::int64_t low_of(const segment_ref& s) const {
        return std::max({s.base, s.log_start, b.min_offset.value_or(0)});
    }
    std::int64_t high_of(const segment_ref& s) const { // exclusive
        std::int64_t h = s.end >= 0 ? s.end : std::numeric_limits<std::int64_t>::max();
        if (b.max_offset && *b.max_offset < std::numeric_limits<std::int64_t>::max()) h = std::min(h, *b.max_offset + 1);
        return h;
    }

    // One GET, under an io_budget permit when there is a budget.
    runtime::task<result<storage::get_result, reader_error>> get(std::string key, std::optional<storage::byte_range> r,
                                                                 std::stop_token st) {
        storage::io_budget::permit permit;
        if (cfg.budget) {
            auto p = co_await cfg.budget->acquire(storage::io_budget::priority::normal, st);
            if (!p) {
                if (st.stop_requested()) co_return failure{reader_error(errc::cancelled, "read cancelled")};
                co_return failure{reader_error(errc::store_failed, fmt::format("GET {}: no io budget: {}", key, p.error().message()))};
            }
            permit = std::move(*p);
        }
        ++in_flight;
        stats.max_gets_in_flight = std::max(stats.max_gets_in_flight, in_flight);
        const auto started = std::chrono::steady_clock::now();
        auto g = co_await store.get(key, r, st);
        --in_flight;
        ++stats.gets;
        if (cfg.on_get) {
            get_event e;
            e.key = key;
            e.range = r;
            e.bytes = g ? g->data.size() : 0;
            e.start = started;
            e.end = std::chrono::steady_clock::now();
            e.ok = g.has_value();
            cfg.on_get(e);
        }
        if (cfg.budget && g) cfg.budget->on_success();
        if (!g) {
            if (g.error().code == storage::errc::cancelled || st.stop_requested())
                co_return failure{reader_error(errc::cancelled, fmt::format("GET {} cancelled", key))};
            if (g.error().code == storage::errc::not_found)
                co_return failure{reader_error(errc::store_failed,
                                               fmt::format("GET {}: not found; deleted since it was listed (retention "
                                                           "or a merge): refresh and plan again", key))};
            co_return failure{reader_error(errc::store_failed, fmt::format("GET {} failed: {}", key, g.error().message))};
        }
        stats.bytes_read += g->data.size();
        co_return std::move(*g);
    }

    // The .kfst says no record of segment i can be within the time bounds.
    runtime::task<result<bool, reader_error>> prune_by_time(std::size_t i, std::stop_token st) {
        const auto& s = segs[i];
        if (!s.has_time_index || (!b.min_timestamp && !b.max_timestamp)) co_return false;
        std::string key = storage::time_index_key(ns, {s.topic, s.partition}, s.base);
        std::optional<storage::byte_range> tail = storage::byte_range::suffix(storage::time_index_size);
        auto g = co_await get(key, tail, st);
        if (!g) {
            if (g.error().code == errc::cancelled) co_return failure{g.error()};
            co_return false; // a sidecar that went away or fails: read the segment instead
        }
        auto t = storage::decode_time_index(std::span<const char>(g->data.data(), g->data.size()));
        if (!t || t->min_timestamp < 0 || t->max_timestamp < 0) co_return false; // unusable: read it
        if (b.min_timestamp && t->max_timestamp < *b.min_timestamp) co_return true;
        if (b.max_timestamp && t->min_timestamp > *b.max_timestamp) co_return true;
        co_return false;
    }

    // Where to start reading segment i: past an .index entry when the lower bound is inside a
    // large segment; 0 (the header) otherwise or when the index is unusable.
    runtime::task<result<std::uint64_t, reader_error>> start_of(std::size_t i, std::stop_token st) {
        const auto& s = segs[i];
        const std::int64_t lo = low_of(s);
        if (!s.has_index || lo <= s.base || s.kfs_size <= cfg.part_bytes) co_return std::uint64_t{0};
        std::string key = storage::index_key(ns, {s.topic, s.partition}, s.base);
        std::optional<storage::byte_range> whole;
        auto g = co_await get(key, whole, st);
        if (!g) {
            if (g.error().code == errc::cancelled) co_return failure{g.error()};
            co_return std::uint64_t{0};
        }
        auto idx = storage::decode_index(std::span<const char>(g->data.data(), g->data.size()));
        if (!idx || !storage::check_index_fits(*idx, s.base, s.kfs_size)) co_return std::uint64_t{0};
        co_return static_cast<std::uint64_t>(storage::lookup(*idx, lo));
    }

    runtime::task<result<void, reader_error>> fetch_part(std::size_t i, std::uint64_t pos, std::stop_token st) {
        std::string key = key_of(segs[i]);
        std::optional<storage::byte_range> r = storage::byte_range::between(pos, pos + cfg.part_bytes - 1);
        auto g = co_await get(key, r, st);
        if (!g) co_return failure{g.error()};
        auto& ss = state[i];
        if (ss.size == 0) {
            if (g->object_size > cfg.max_segment_bytes)
                co_return failure{reader_error(errc::too_large, fmt::format("{} is {} bytes, above the limit of {}", key,
                                                                            g->object_size, cfg.max_segment_bytes))};
            ss.size = g->object_size;
        }
        if (ss.finished || stop.stop_requested()) co_return ok(); // the consumer left early: drop it
        held += g->data.size();
        ss.parts[pos] = std::move(g->data);
        co_return ok();
    }

    // The first GET task of a segment: time pruning, the start position, and its first part.
    runtime::task<result<void, reader_error>> prepare(std::size_t i, std::stop_token st) {
        auto pruned = co_await prune_by_time(i, st);
        if (!pruned) co_return failure{pruned.error()};
        auto& ss = state[i];
        if (*pruned) {
            ss.pruned = true;
            ss.prepared = true;
            co_return ok();
        }
        auto start = co_await start_of(i, st);
        if (!start) co_return failure{start.error()};
        ss.start_pos = *start;
        auto f = co_await fetch_part(i, *start, st);
        if (!f) co_return failure{f.error()};
        ss.fetch_pos = *start + cfg.part_bytes;
        ss.prepared = true;
        co_return ok();
    }

    // Bytes a GET starting at `pos` of segment i may bring.
    std::size_t part_estimate(std::size_t i, std::uint64_t pos) const {
        const auto& ss = state[i];
        const std::uint64_t size = ss.prepared ? ss.size : std::max<std::uint64_t>(segs[i].kfs_size, 1);
        return static_cast<std::size_t>(std::min<std::uint64_t>(size > pos ? size - pos : 1, cfg.part_bytes));
    }

    // Starts the GETs that come next in plan order, within parallel_gets and read_ahead_bytes.
    // The consumer's segment is exempt from the byte budget while none of its GETs runs, so a
    // part larger than the budget, or read-ahead of later segments, never blocks it. Re-entrant
    // calls (a GET that ends without suspending calls pump() from inside a spawn) only ask the
    // running loop to look again.
    void pump() {
        if (pumping) {
            repump = true;
            return;
        }
        pumping = true;
        do {
            repump = false;
            pump_once();
        } while (repump);
        pumping = false;
    }

    void pump_once() {
        for (std::size_t i = cur; i < segs.size(); ++i) {
            if (tasks >= cfg.parallel_gets || stop.stop_requested() || failed || done) return;
            auto& ss = state[i];
            if (ss.error) return; // reported when the consumer gets there; nothing past it
            if (ss.finished || ss.pruned) continue;
            if (!ss.started) {
                if (!start(i, 0, true)) return;
                continue;
            }
            if (!ss.prepared) continue; // its first GET runs: the next segments may go meanwhile
            while (ss.fetch_pos < ss.size) {
                if (tasks >= cfg.parallel_gets) return;
                if (!start(i, ss.fetch_pos, false)) return;
            }
        }
    }

    // Starts one GET task when the budget allows; false when it does not (or the gate closed).
    bool start(std::size_t i, std::uint64_t pos, bool first) {
        auto& ss = state[i];
        const std::size_t est = part_estimate(i, pos);
        const bool exempt = i == cur && ss.gets == 0;
        if (!exempt && held + reserved + est > cfg.read_ahead_bytes) return false;
        if (gate.is_closed()) return false;
        ++tasks;
        ++ss.gets;
        reserved += est;
        if (first)
            ss.started = true;
        else
            ss.fetch_pos += cfg.part_bytes;
        auto spawned = gate.spawn(run_get(shared_from_this(), i, pos, first, est));
        if (!spawned) { // cannot happen: the gate was open a line above
            --tasks;
            --ss.gets;
            reserved -= est;
            if (first)
                ss.started = false;
            else
                ss.fetch_pos -= cfg.part_bytes;
            return false;
        }
        return true;
    }

    // One GET task. Takes the state as a parameter (never a capture): the scan object may be
    // gone by the time the GET ends, and the last task frees the state.
    static runtime::task<void> run_get(std::shared_ptr<impl> self, std::size_t i, std::uint64_t pos, bool first,
                                       std::size_t est) {
        std::stop_token st = self->stop.get_token();
        result<void, reader_error> r = ok();
        if (first)
            r = co_await self->prepare(i, st);
        else
            r = co_await self->fetch_part(i, pos, st);
        auto& ss = self->state[i];
        --self->tasks;
        --ss.gets;
        self->reserved -= est;
        if (!r && !self->stop.stop_requested() && !ss.error) ss.error = r.error();
        if (self->waiter) self->waiter->set();
        self->pump();
    }

    // Stops every GET and waits until their tasks have ended.
    runtime::task<void> close() {
        stop.request_stop();
        if (!failed) failed = reader_error(errc::cancelled, "the scan was closed");
        if (waiter) waiter->set();
        co_await gate.close();
    }

    // Ends the scan with `e`; corruption is also kept as a finding for the caller to report.
    reader_error fail(reader_error e) {
        if (e.code == errc::corrupt && cur < segs.size()) {
            finding f;
            f.what = finding::kind::corrupt_segment;
            f.key = key_of(segs[cur]);
            f.detail = e.message;
            bool seen = false;
            for (auto& x : found) seen = seen || x.key == f.key;
            if (!seen) found.push_back(std::move(f));
        }
        failed = e;
        stop.request_stop(); // nothing more will be read: the GETs ahead are wasted
        return e;
    }
    void leave_segment() {
        auto& ss = state[cur];
        ss.finished = true;
        for (auto& [pos, data] : ss.parts) held -= data.size();
        ss.parts.clear();
        carry.clear();
        ++cur;
        entered = positioned = false;
        pump();
    }

    // Turns the next fetched part of the current segment into batches.
    result<void, reader_error> take_part() {
        auto& s = segs[cur];
        auto& ss = state[cur];
        const std::string key = key_of(s);
        auto it = ss.parts.find(consume_pos);
        std::string data = std::move(it->second);
        ss.parts.erase(it);
        held -= data.size();
        const bool first = consume_pos == ss.start_pos;
        const bool last = consume_pos + data.size() >= ss.size;
        consume_pos += data.size();
        batches.clear();
        next_batch = 0;
        if (first && last && ss.start_pos == 0) {
            // Whole object: full validation, footer and body CRC included.
            buf = std::move(data);
            auto v = storage::decode_segment(std::span<const char>(buf.data(), buf.size()), true);
            if (!v) return failure{corrupt(key, v.error().message)};
            if (v->base_offset() != s.base) return failure{corrupt(key, "its header's base offset is not its key's")};
            batches = std::move(v->batches);
            ss.finished = true;
            return ok();
        }
        if (first && ss.start_pos == 0) {
            auto h = storage::parse_segment_header(std::span<const char>(data.data(), data.size()));
            if (!h) return failure{corrupt(key, h.error().message)};
            if (h->base_offset != s.base) return failure{corrupt(key, "its header's base offset is not its key's")};
            data.erase(0, storage::segment_header_size);
        }
        buf = std::move(carry);
        buf += data;
        carry.clear();
        storage::walk_options wo;
        wo.verify_crc = true;
        auto w = storage::walk_batches(std::span<const char>(buf.data(), buf.size()), low_of(s), wo);
        if (!w) return failure{corrupt(key, w.error().message)};
        batches = std::move(w->batches);
        carry.assign(buf.data() + w->consumed, buf.size() - w->consumed);
        if (last) {
            if (carry.size() != storage::segment_footer_size ||
                !storage::parse_segment_footer(std::span<const char>(carry.data(), carry.size())))
                return failure{corrupt(key, "its batches do not end at its footer")};
            carry.clear();
            ss.finished = true;
        }
        return ok();
    }

    // Rows of one batch within the bounds; false when the segment has nothing more to give.
    result<bool, reader_error> emit(const storage::batch_view& batch) {
        const auto& s = segs[cur];
        const std::int64_t lo = low_of(s), hi = high_of(s);
        if (batch.base_offset >= hi) return false; // the rest belongs to later segments (a merge)
        if (batch.last_offset() < lo || batch.is_control()) return true;
        // maxTimestamp bounds every record's timestamp (and is the timestamp of LogAppendTime batches).
        if (b.min_timestamp && batch.max_timestamp < *b.min_timestamp) return true;
        ++stats.batches;
        auto d = storage::decode_records(batch, cfg.max_uncompressed_batch_bytes);
        if (!d) {
            const auto code = d.error().code == storage::format_errc::too_large ? errc::too_large : errc::corrupt;
            return failure{reader_error(code, fmt::format("{} batch at offset {}: {}", key_of(s), batch.base_offset,
                                                          d.error().message))};
        }
        decoded = std::move(*d);
        auto last = last_emitted.find(s.partition);
        out.topic = s.topic;
        out.partition = s.partition;
        for (auto& r : decoded.records) {
            const std::int64_t off = batch.base_offset + r.offset_delta;
            if (off < lo || off >= hi) continue;
            if (last != last_emitted.end() && off <= last->second) continue;
            const std::int64_t ts = batch.log_append_time() ? batch.max_timestamp : batch.base_timestamp + r.timestamp_delta;
            if (b.min_timestamp && ts < *b.min_timestamp) continue;
            if (b.max_timestamp && ts > *b.max_timestamp) continue;
            record_row row;
            row.partition = s.partition;
            row.offset = off;
            row.timestamp = ts;
            row.key = r.key;
            row.value = r.value;
            row.headers = &r.headers;
            out.rows.push_back(row);
        }
        if (!out.rows.empty()) last_emitted[s.partition] = out.rows.back().offset;
        stats.records += out.rows.size();
        return true;
    }

    runtime::task<result<const chunk*, reader_error>> next(std::stop_token st) {
        out.rows.clear();
        for (;;) {
            if (failed) co_return failure{*failed};
            if (done) co_return static_cast<const chunk*>(nullptr);
            if (st.stop_requested()) co_return failure{fail(reader_error(errc::cancelled, "read cancelled"))};
            while (next_batch < batches.size()) {
                auto more = emit(batches[next_batch++]);
                if (!more) co_return failure{fail(more.error())};
                if (!*more) {
                    batches.clear();
                    next_batch = 0;
                    state[cur].finished = true;
                    state[cur].fetch_pos = state[cur].size; // nothing more to fetch
                }
                if (!out.rows.empty()) co_return static_cast<const chunk*>(&out);
            }
            if (cur >= segs.size()) {
                done = true;
                continue;
            }
            auto& ss = state[cur];
            if (!entered) {
                entered = true;
                if (ss.prepared && !ss.pruned && ss.parts.count(ss.start_pos)) ++stats.read_ahead_hits;
            }
            if (ss.prepared && ss.pruned) {
                ++stats.segments_pruned;
                leave_segment();
                continue;
            }
            if (ss.finished && ss.prepared) {
                if (positioned) ++stats.segments_read;
                leave_segment();
                continue;
            }
            if (ss.prepared && !positioned) {
                consume_pos = ss.start_pos;
                positioned = true;
            }
            if (!ss.prepared || !ss.parts.count(consume_pos)) {
                // Records before a failed GET are given first; the error when they run out.
                if (ss.error) co_return failure{fail(*ss.error)};
                pump();
                // A GET that did not suspend may have brought it (or pruned the segment).
                if (ss.error || (ss.prepared && (ss.pruned || !positioned || ss.parts.count(consume_pos)))) continue;
                if (tasks == 0) {
                    // The consumer waits for bytes no GET will bring: a bug, never a silent end.
                    co_return failure{fail(reader_error(errc::corrupt, fmt::format("{}: reader lost its place at byte {}",
                                                                                   key_of(segs[cur]), consume_pos)))};
                }
                waiter.emplace();
                auto woke = co_await waiter->wait(st);
                waiter.reset();
                if (!woke && !failed) co_return failure{fail(reader_error(errc::cancelled, "read cancelled"))};
                continue;
            }
            auto t = take_part();
            if (!t) co_return failure{fail(t.error())};
            pump(); // the part's bytes left the budget: the window moves on
        }
    }
};

segment_scan::segment_scan(storage::object_store& store, std::string ns, std::vector<segment_ref> plan,
                           scan_bounds bounds, scan_config cfg)
    : _impl(std::make_shared<impl>(store, std::move(ns), std::move(plan), bounds, cfg)) {}

segment_scan::~segment_scan() {
    // GETs still running hold the state; stopped, they end on a later turn of this reactor.
    if (_impl) _impl->stop.request_stop();
}

runtime::task<void> segment_scan::close() { return _impl->close(); }
const std::vector<finding>& segment_scan::findings() const noexcept { return _impl->found; }

runtime::task<result<const chunk*, reader_error>> segment_scan::next(std::stop_token st) { return _impl->next(std::move(st)); }
const scan_stats& segment_scan::stats() const noexcept { return _impl->stats; }
std::uint64_t segment_scan::gets_in_flight() const noexcept { return _impl->in_flight; }

} // namespace skiff::reader
