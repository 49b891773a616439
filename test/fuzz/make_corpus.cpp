// Writes the seed corpus of fuzz_formats: one valid example of each format the target
// decodes (record sets, a gzip batch, a v0 message, segments, indexes, a .kfst), so the
// fuzzer starts from deep inside each parser instead of from random bytes.
//   make_corpus <dir>        (test/fuzz/corpus/formats holds the committed output)
#include <skiff/storage/index_format.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include <cstdio>
#include <fstream>
#include <string>

using namespace skiff::storage;

namespace {

bool write(const std::string& dir, const std::string& name, const std::string& bytes) {
    std::ofstream f(dir + "/" + name, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return static_cast<bool>(f);
}

std::span<const char> sp(const std::string& s) { return {s.data(), s.size()}; }

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <dir>\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    bool ok = true;

    batch_options o;
    o.base_timestamp = 1700000000000;
    o.producer_id = 9;
    o.producer_epoch = 1;
    o.base_sequence = 0;
    std::vector<record> rich;
    rich.emplace_back(std::string("key"), std::string("value"),
                      std::vector<record_header>{record_header("h1", std::string("v1")), record_header("h2", std::nullopt)}, 3);
    rich.emplace_back(std::nullopt, std::string("tombstone-less"));
    rich.emplace_back(std::string("k"), std::nullopt);
    const auto b1 = build_batch(0, {"a"});
    const auto b2 = build_batch(0, rich, o);
    const auto b3 = build_batch(0, {"x", "y", "z"});
    ok &= write(dir, "record_set_3_batches", b1 + b2 + b3);
    ok &= write(dir, "record_set_1_batch", b2);

    batch_options gz;
    gz.attributes = static_cast<std::int16_t>(compression_codec::gzip);
    gz.record_count = 1;
    gz.raw_records = std::string("\x1f\x8b\x08\x00\x00\x09\x6e\x88\x00\xff\x00\x15\x00\xea\xff\x28\x00\x0a\x00\x08"
                                 "\x01\x02\x03\x04\x06\x05\x06\x07\x02\x06\x08\x09\x0a\x04\x0b\x0c\x03\x00\xad\xc9"
                                 "\x58\x67\x15\x00\x00\x00",
                                 46);
    ok &= write(dir, "gzip_batch", build_batch(0, {}, gz));

    std::string v0(8, '\0');
    v0 += std::string("\x00\x00\x00\x11\x12\x34\x56\x78\x00\x00\xff\xff\xff\xff\x00\x00\x00\x03" "abc", 21);
    ok &= write(dir, "message_v0", v0);

    segment_builder sb(42, 2);
    for (const auto* b : {&b1, &b2, &b3, &b1}) {
        if (!sb.append(sp(*b))) ok = false;
    }
    auto seg = std::move(sb).finish(1700000000000);
    ok &= write(dir, "segment_4_batches.kfs", seg.kfs);
    ok &= write(dir, "segment_4_batches.index", seg.index);
    ok &= write(dir, "segment_4_batches.kfst", encode_time_index(time_index_of(seg.meta)));

    segment_builder one(0);
    if (!one.append(sp(b3))) ok = false;
    auto small = std::move(one).finish(0);
    ok &= write(dir, "segment_1_batch.kfs", small.kfs);
    ok &= write(dir, "segment_1_batch.index", small.index);

    std::vector<index_entry> es{{42, 32}, {100, 500}, {250, 4000}};
    ok &= write(dir, "index_3_entries", encode_index(es, 100));

    if (!ok) {
        std::fprintf(stderr, "make_corpus: writing to %s failed\n", dir.c_str());
        return 1;
    }
    return 0;
}
