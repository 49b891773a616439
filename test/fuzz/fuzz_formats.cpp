// libFuzzer target for the storage formats: arbitrary bytes go to every decoder (record
// sets, .kfs segments and their partial readers, the range walker, .index, .kfst), and
// whatever decodes must satisfy the round-trip invariants below (a violation aborts, so the
// fuzzer reports it like a crash).
//
// CRCs stand between random bytes and most of the decoders' logic, so each input is also run
// a second time with its CRCs recomputed (batch CRCs as a record set, and batch + body CRCs as
// a segment): the fuzzer then explores lengths, offsets and counts behind the checksums.
//
//   CXX=clang++-14 meson setup build-fuzz -Dfuzzers=true -Db_lundef=false
//   ninja -C build-fuzz test/fuzz/fuzz_formats
//   build-fuzz/test/fuzz/fuzz_formats -max_total_time=60 test/fuzz/corpus/formats
#include <skiff/core/crc32c.hpp>
#include <skiff/storage/compression.hpp>
#include <skiff/storage/index_format.hpp>
#include <skiff/storage/manifest_format.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <span>
#include <string>

using namespace skiff;
using namespace skiff::storage;

namespace {

#define FUZZ_CHECK(cond)                                                                  \
    do {                                                                                  \
        if (!(cond)) {                                                                    \
            std::fprintf(stderr, "fuzz invariant failed: %s (%s:%d)\n", #cond, __FILE__, __LINE__); \
            std::abort();                                                                 \
        }                                                                                 \
    } while (0)

std::span<const char> sp(const std::string& s) { return {s.data(), s.size()}; }

// Recomputes the CRC of every complete batch found by walking lengths in [from, to).
void fix_batch_crcs(std::string& s, std::size_t from, std::size_t to) {
    std::size_t pos = from;
    while (to - pos >= batch_header_size) {
        const auto len = be::read_i32(s.data() + pos + batch_field::batch_length);
        if (len < min_batch_length) return;
        const auto full = static_cast<std::size_t>(len) + batch_log_overhead;
        if (full > to - pos) return;
        be::write_u32(s.data() + pos + batch_field::crc,
                      crc32c(s.data() + pos + batch_field::attributes, full - batch_field::attributes));
        pos += full;
    }
}

void exercise_index(std::span<const char> in) {
    auto idx = decode_index(in);
    if (!idx) return;
    // Re-encoding gives back the input, except the reserved bytes (not checked on decode).
    std::string again = encode_index(idx->entries, idx->interval);
    std::string orig(in.data(), in.size());
    orig[14] = orig[15] = '\0';
    FUZZ_CHECK(again == orig);
    for (const auto& e : idx->entries) {
        FUZZ_CHECK(lookup(*idx, e.offset) == e.position);
        if (e.offset < std::numeric_limits<std::int64_t>::max()) {
            FUZZ_CHECK(lookup(*idx, e.offset + 1) >= e.position);
        }
    }
    const auto pos = lookup(*idx, idx->entries.empty() ? 0 : idx->entries.back().offset / 2);
    FUZZ_CHECK(pos >= 32);
    (void)check_index_fits(*idx, idx->entries.empty() ? 0 : idx->entries.front().offset, in.size() * 100);
}

// Partition manifests (docs/format.md): what decodes re-encodes to bytes that decode the same.
// A copy with its CRC and trailer made right lets mutations reach the field checks.
void exercise_manifest(std::span<const char> in) {
    auto check = [](std::span<const char> bytes) {
        auto m = decode_manifest(bytes);
        if (!m) return;
        const std::string once = encode_manifest(*m);
        auto again = decode_manifest(sp(once));
        FUZZ_CHECK(again);
        FUZZ_CHECK(encode_manifest(*again) == once);
        FUZZ_CHECK(again->segments.size() == m->segments.size());
    };
    check(in);
    if (in.size() >= 8) {
        std::string fixed(in.data(), in.size());
        be::write_u32(fixed.data() + fixed.size() - 8, crc32c(fixed.data(), fixed.size() - 8));
        fixed.replace(fixed.size() - 4, 4, "END!");
        check(sp(fixed));
    }
}

void exercise_time_index(std::span<const char> in) {
    auto t = decode_time_index(in);
    if (!t) return;
    std::string again = encode_time_index(*t);
    FUZZ_CHECK(again == std::string(in.data() + in.size() - time_index_size, time_index_size));
}

// Builds a segment from validated batches and checks that every reader agrees with it.
void check_built_segment(const std::vector<batch_view>& batches, std::int64_t base) {
    segment_builder b(base, 2);
    for (const auto& v : batches) {
        auto r = b.append(v);
        if (!r) {
            FUZZ_CHECK(r.error().code == format_errc::too_large); // batches from split are valid
            break;
        }
    }
    if (b.empty()) return;
    const auto n = b.batch_count();
    auto seg = std::move(b).finish(1);
    auto dec = decode_segment(sp(seg.kfs), true);
    FUZZ_CHECK(dec);
    FUZZ_CHECK(dec->batches.size() == n);
    FUZZ_CHECK(dec->footer.last_offset == seg.meta.last_offset);
    FUZZ_CHECK(dec->header.message_count == seg.meta.message_count);
    auto rebuilt = rebuild_index(sp(seg.kfs), 2);
    FUZZ_CHECK(rebuilt && *rebuilt == seg.index);
    auto idx = decode_index(sp(seg.index));
    FUZZ_CHECK(idx);
    FUZZ_CHECK(check_index_fits(*idx, base, seg.kfs.size()));
    auto walked = walk_batches(dec->body, std::numeric_limits<std::int64_t>::min());
    FUZZ_CHECK(walked && walked->batches.size() == n && walked->consumed == dec->body.size());
    auto t = decode_time_index(sp(encode_time_index(time_index_of(seg.meta))));
    FUZZ_CHECK(t && *t == time_index_of(*dec));
}

void exercise_record_set(std::span<const char> in) {
    auto batches = split_batches(in);
    if (batches) {
        std::size_t total = 0;
        for (const auto& v : *batches) {
            total += v.size();
            FUZZ_CHECK(parse_batch(v.bytes));
            if (!v.is_compressed()) {
                auto recs = parse_records(v);
                if (recs) FUZZ_CHECK(recs->size() == static_cast<std::size_t>(v.record_count));
            }
        }
        FUZZ_CHECK(total == in.size());
        check_built_segment(*batches, 7);
        check_built_segment(*batches, std::numeric_limits<std::int64_t>::max() - 1000);
    }
    (void)parse_batch(in, false);
    const std::int64_t min_offset = in.size() >= 8 ? be::read_i64(in.data()) : 0;
    for (bool crc : {true, false}) {
        walk_options o;
        o.verify_crc = crc;
        auto w = walk_batches(in, min_offset, o);
        if (!w) continue;
        FUZZ_CHECK(w->consumed <= in.size());
        FUZZ_CHECK(w->selected.size() <= w->consumed);
        FUZZ_CHECK(w->selected.data() + w->selected.size() == in.data() + w->consumed);
        if (w->pending_batch_size != 0) FUZZ_CHECK(w->pending_batch_size > in.size() - w->consumed);
    }
}

void exercise_segment(std::span<const char> in) {
    (void)parse_segment_header(in);
    (void)parse_segment_footer(in);
    (void)has_segment_end_marker(in);
    for (bool crc : {false, true}) {
        auto seg = decode_segment(in, crc);
        if (!seg) continue;
        auto w = walk_batches(seg->body, std::numeric_limits<std::int64_t>::min(), walk_options());
        // The body CRC vouches for the bytes but not for each batch's own CRC.
        if (crc) FUZZ_CHECK(w && w->batches.size() == seg->batches.size() && w->consumed == seg->body.size());
        auto idx = rebuild_index(in);
        FUZZ_CHECK(idx);
        auto dec = decode_index(sp(*idx));
        FUZZ_CHECK(dec);
        FUZZ_CHECK(check_index_fits(*dec, seg->base_offset(), in.size()));
    }
}

} // namespace

// One codec's decoder (picked by the first byte, to keep the fuzzer fast) on the rest of the
// bytes: bounded output, and what decodes re-encodes to the same content. Then the records of
// each batch found, decompressed as produce validation does.
void exercise_codecs(std::span<const char> in) {
    constexpr std::size_t limit = 1u << 20;
    if (!in.empty()) {
        const auto codec = static_cast<compression_codec>(1 + (static_cast<unsigned char>(in[0]) & 3));
        auto out = decompress(codec, in.subspan(1), limit);
        if (out) {
            FUZZ_CHECK(out->size() <= limit);
            auto again = compress(codec, sp(*out));
            FUZZ_CHECK(again);
            auto back = decompress(codec, sp(*again), limit);
            FUZZ_CHECK(back && *back == *out);
        }
    }
    auto batches = split_batches(in);
    if (!batches) return;
    for (const auto& b : *batches) {
        auto d = decode_records(b, limit);
        if (d) FUZZ_CHECK(d->records.size() == static_cast<std::size_t>(b.record_count));
    }
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const char> in(reinterpret_cast<const char*>(data), size);
    exercise_record_set(in);
    exercise_segment(in);
    exercise_index(in);
    exercise_time_index(in);
    exercise_manifest(in);
    exercise_codecs(in);

    std::string as_set(in.data(), in.size());
    fix_batch_crcs(as_set, 0, as_set.size());
    exercise_record_set(sp(as_set));
    exercise_codecs(sp(as_set)); // batches behind valid CRCs reach decode_records

    if (size >= segment_header_size + segment_footer_size) {
        std::string as_seg(in.data(), in.size());
        const std::size_t end = as_seg.size() - segment_footer_size;
        fix_batch_crcs(as_seg, segment_header_size, end);
        be::write_u32(as_seg.data() + end, crc32c(as_seg.data() + segment_header_size, end - segment_header_size));
        exercise_segment(sp(as_seg));
    }
    return 0;
}
