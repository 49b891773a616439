// The dispatcher's contract with clients: ApiVersions lists exactly what is served (every served
// range within what the codec implements, one entry per API), and a request for an API or a
// version that is not served is refused the way Kafka refuses it (the connection closes: the
// dispatcher throws unserved_request) while ApiVersions answers UNSUPPORTED_VERSION in v0.
#include "fake_shard.hpp"
#include "run_task.hpp"

#include "handlers.hpp"

#include <skiff/broker/kafka_errors.hpp>
#include <skiff/kafka/frame.hpp>

#include <catch2/catch.hpp>

#include <set>

using namespace skiff;
using namespace skiff::broker;
using skiff::test::fake_shard;

TEST_CASE("dispatch: every served range is one the codec implements, each API once", "[broker][dispatch]") {
    std::set<std::int16_t> keys;
    for (const auto& a : served_apis()) {
        const auto key = static_cast<std::int16_t>(a.key);
        INFO("API key " << key);
        CHECK(keys.insert(key).second);
        const kafka::api_info* codec = kafka::find_api(key);
        REQUIRE(codec != nullptr);
        CHECK(a.min_version >= codec->min_version);
        CHECK(a.max_version <= codec->max_version);
        CHECK(a.min_version <= a.max_version);
        // A version still in development upstream is never offered to clients.
        if (codec->latest_version_unstable) CHECK(a.max_version < codec->max_version);
    }
    CHECK(keys.count(static_cast<std::int16_t>(kafka::api_key::api_versions)) == 1);
}

namespace {
// Frames a request header (v1: key, version, correlation id, client id) and `body`.
std::string raw_request(std::int16_t key, std::int16_t version, std::string body) {
    std::string out(4, '\0');
    auto put16 = [&](std::int16_t v) {
        out.push_back(static_cast<char>((v >> 8) & 0xff));
        out.push_back(static_cast<char>(v & 0xff));
    };
    put16(key);
    put16(version);
    for (int shift : {24, 16, 8, 0}) out.push_back(static_cast<char>((77 >> shift) & 0xff));
    put16(4);
    out += "test";
    out += body;
    const auto n = static_cast<std::uint32_t>(out.size() - 4);
    for (int i = 0; i < 4; ++i) out[static_cast<std::size_t>(i)] = static_cast<char>((n >> (24 - 8 * i)) & 0xff);
    return out;
}

// What the dispatcher does with `frame`: "answered", "unserved: <message>" or "closed: <message>".
runtime::task<std::string> outcome(fake_shard& f, std::string frame) {
    conn_info ci;
    try {
        auto out = co_await handle_request(f.sh, ci, std::move(frame), kafka::size_prefix_bytes);
        co_return out ? std::string("answered") : std::string("no answer");
    } catch (const unserved_request& e) {
        co_return std::string("unserved: ") + e.what();
    } catch (const connection_error& e) {
        co_return std::string("closed: ") + e.what();
    }
}
} // namespace

TEST_CASE("dispatch: an API or version not served closes the connection, ApiVersions answers", "[broker][dispatch]") {
    runtime::run_task([]() -> runtime::task<void> {
        fake_shard f({{"t", 1}});
        auto unknown_frame = raw_request(9999, 0, std::string(8, '\0'));
        auto unknown = co_await outcome(f, std::move(unknown_frame));
        CHECK(unknown == "unserved: unknown API (key 9999) v0 is not served, from client id 'test'");
        auto old_fetch_frame = raw_request(1, 3, std::string(16, '\0'));
        auto old_fetch = co_await outcome(f, std::move(old_fetch_frame));
        CHECK(old_fetch == "unserved: Fetch (key 1) v3 is not served (versions 4-12 are), from client id 'test'");
        auto new_metadata_frame = raw_request(3, 13, std::string(4, '\0'));
        auto new_metadata = co_await outcome(f, std::move(new_metadata_frame));
        CHECK(new_metadata.rfind("unserved: Metadata (key 3) v13 is not served (versions 0-12 are)", 0) == 0);
        // ApiVersions at a version beyond the served ones: answered (UNSUPPORTED_VERSION, v0 body).
        auto av_frame = raw_request(18, 99, std::string(3, '\0'));
        auto av = co_await outcome(f, std::move(av_frame));
        CHECK(av == "answered");
        co_await f.close();
    }());
}
