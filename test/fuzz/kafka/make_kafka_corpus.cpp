// Writes the seed corpus of fuzz_kafka_request: request frames (size prefix removed) for every
// API at its lowest, first flexible and highest version, with a few array elements so the
// fuzzer starts inside nested structs, plus requests captured from librdkafka and kafkajs.
//   fuzz_kafka_corpus <dir>     (test/fuzz/corpus/kafka holds the committed output)
#include <skiff/kafka/frame.hpp>

#include <cstdio>
#include <fstream>
#include <set>
#include <string>
#include <utility>
#include <variant>

using namespace skiff::kafka;

namespace {

bool write(const std::string& dir, const std::string& name, const std::string& bytes) {
    std::ofstream f(dir + "/" + name, std::ios::binary | std::ios::trunc);
    f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    return static_cast<bool>(f);
}

std::string unhex(const char* h) {
    std::string out;
    for (std::size_t i = 0; h[i] != 0 && h[i + 1] != 0; i += 2) {
        auto nib = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
        out.push_back(static_cast<char>(nib(h[i]) * 16 + nib(h[i + 1])));
    }
    return out;
}

// Some population for the messages the broker handles most.
void populate(ProduceRequest& m, std::int16_t) {
    m.topic_data.emplace_back();
    m.topic_data[0].name = "t";
    m.topic_data[0].partition_data.emplace_back();
    m.topic_data[0].partition_data[0].records = std::string(70, '\0');
}
void populate(FetchRequest& m, std::int16_t version) {
    m.topics.emplace_back();
    m.topics[0].topic = "t";
    m.topics[0].partitions.emplace_back();
    if (version >= 7) { // not ignorable: only where the version has it
        m.forgotten_topics_data.emplace_back();
        m.forgotten_topics_data[0].partitions = {1, 2};
    }
}
void populate(MetadataRequest& m, std::int16_t) {
    m.topics.emplace();
    m.topics->emplace_back();
    m.topics->at(0).name = "t";
}
template <typename T>
void populate(T&, std::int16_t) {}

template <typename Req>
int write_api(const std::string& dir) {
    int failures = 0;
    std::set<std::int16_t> versions{Req::min_version, Req::max_version};
    if (Req::flexible_from >= 0) versions.insert(Req::flexible_from);
    for (std::int16_t v : versions) {
        Req m;
        populate(m, v);
        auto framed = encode_request(m, v, 1, std::string("seed"));
        if (!framed) {
            std::fprintf(stderr, "%s v%d: %s\n", std::string(Req::message_name).c_str(), v,
                         framed.error().message.c_str());
            ++failures;
            continue;
        }
        const std::string name = std::string(Req::message_name) + "_v" + std::to_string(v);
        if (!write(dir, name, framed->substr(size_prefix_bytes))) ++failures;
    }
    return failures;
}

template <std::size_t... I>
int write_all(const std::string& dir, std::index_sequence<I...>) {
    return (write_api<std::variant_alternative_t<I, any_request>>(dir) + ...);
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s <dir>\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    int failures = write_all(dir, std::make_index_sequence<std::variant_size_v<any_request>>{});
    // Captured from real clients (see test/unit/kafka/test_golden.cpp), size prefix removed.
    const std::pair<const char*, const char*> captured[] = {
        {"rdkafka_api_versions_v3",
         "0012000300000001000772646b61666b61000b6c696272646b61666b6106322e302e3200"},
        {"kafkajs_api_versions_v2", "001200020000000000076b61666b616a73"},
        {"rdkafka_metadata_v4", "0003000400000003000772646b61666b61ffffffff01"},
        {"rdkafka_produce_v7",
         "0000000700000004000772646b61666b61ffffffff0000753000000001000174000000010000000000000049"
         "00000000000000000000003d0000000002acd4f99f000000000000000001a236a1d37b000001a236a1d37b"
         "ffffffffffffffffffffffffffff0000000116000000010a68656c6c6f00"},
    };
    for (const auto& [name, h] : captured) {
        if (!write(dir, name, unhex(h))) ++failures;
    }
    return failures == 0 ? 0 : 1;
}
