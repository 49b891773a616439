// The client's connection against tiny fake brokers on the reactor that answer canned frames:
// version negotiation (also KIP-511's fallback), pipelined answers out of order, a broker that
// never answers (timeouts, never a hang), one that sends garbage, and a closed port.
#include "run_task.hpp"

#include <skiff/client/connection.hpp>
#include <skiff/client/versions.hpp>
#include <skiff/runtime/socket.hpp>
#include <skiff/runtime/when_all.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <string>
#include <utility>
#include <vector>

using namespace skiff;
using namespace std::chrono_literals;

namespace {

struct received {
    received() = default;
    kafka::RequestHeader header;
    std::string body;
};

// One request frame from the client, or nullopt when it closed the connection.
runtime::task<std::optional<received>> read_request(runtime::tcp_stream* s) {
    char size_buf[4];
    auto rt = s->read_exactly(std::span<char>(size_buf, 4));
    auto r = co_await std::move(rt);
    if (!r) co_return std::nullopt;
    auto size = kafka::peek_frame_size(std::span<const char>(size_buf, 4), 1 << 20);
    if (!size || !*size) co_return std::nullopt;
    std::string frame(**size, '\0');
    auto bt = s->read_exactly(std::span<char>(frame.data(), frame.size()));
    auto b = co_await std::move(bt);
    if (!b) co_return std::nullopt;
    auto parsed = kafka::parse_request_header(std::span<const char>(frame.data(), frame.size()));
    if (!parsed) co_return std::nullopt;
    received out;
    out.header = parsed->header;
    out.body.assign(parsed->body.data(), parsed->body.size());
    co_return out;
}

runtime::task<bool> write(runtime::tcp_stream* s, std::string bytes) {
    auto wt = s->write_all(std::span<const char>(bytes.data(), bytes.size()));
    auto w = co_await std::move(wt);
    co_return w.has_value();
}

// Every API of skiff's codecs, ApiVersions capped at `api_versions_max`.
std::string api_versions_answer(const kafka::RequestHeader& h, kafka::error_code ec, std::int16_t api_versions_max,
                                 std::int16_t answer_version) {
    kafka::ApiVersionsResponse r;
    r.error_code = ec;
    for (const auto& a : kafka::api_table) {
        kafka::ApiVersionsResponse::ApiVersion v;
        v.api_key = static_cast<std::int16_t>(a.key);
        v.min_version = a.min_version;
        v.max_version = a.key == kafka::api_key::api_versions ? api_versions_max : a.max_version;
        r.api_keys.push_back(v);
    }
    return *kafka::encode_response(r, answer_version, h.correlation_id);
}

// A Metadata answer whose cluster id names the first topic asked for, so that a test can
// tell which request an answer belongs to.
std::string metadata_answer(const received& req) {
    const std::span<const char> body(req.body.data(), req.body.size());
    auto md = kafka::decode_message<kafka::MetadataRequest>(body, req.header.request_api_version);
    kafka::MetadataResponse r;
    r.cluster_id = md && md->topics && !md->topics->empty() ? *md->topics->front().name : std::string("none");
    kafka::MetadataResponse::MetadataResponseBroker b;
    b.node_id = 7;
    b.host = "127.0.0.1";
    b.port = 9092;
    r.brokers.push_back(b);
    r.controller_id = 7;
    return *kafka::encode_response(r, req.header.request_api_version, req.header.correlation_id);
}

enum class behaviour {
    normal,                // answers ApiVersions and every Metadata
    reverse_pairs,         // answers ApiVersions, then Metadata two at a time, the second first
    silent,                // reads and never answers
    silent_after_versions, // answers ApiVersions only
    garbage,               // answers the first request with an HTTP error page
    old_api_versions,      // speaks ApiVersions up to v2 only (answers newer ones as KIP-511 says)
};

struct server_log {
    server_log() = default;
    std::vector<std::int16_t> api_versions_versions; // versions of the ApiVersions requests seen
    int requests = 0;
};

runtime::task<void> fake_broker(runtime::tcp_listener* l, behaviour b, server_log* log) {
    auto at = l->accept();
    auto accepted = co_await std::move(at);
    if (!accepted) co_return;
    runtime::tcp_stream s = std::move(*accepted);
    std::vector<received> held;
    for (;;) {
        auto rt = read_request(&s);
        auto req = co_await std::move(rt);
        if (!req) break; // the client closed: done
        ++log->requests;
        const auto key = static_cast<kafka::api_key>(req->header.request_api_key);
        const std::int16_t version = req->header.request_api_version;
        if (b == behaviour::silent) continue;
        if (b == behaviour::garbage) {
            auto wt = write(&s, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
            co_await std::move(wt);
            continue;
        }
        if (key == kafka::api_key::api_versions) {
            log->api_versions_versions.push_back(version);
            std::string answer;
            if (b == behaviour::old_api_versions && version > 2) {
                answer = api_versions_answer(req->header, kafka::error_code::unsupported_version, 2, 0);
            } else {
                answer = api_versions_answer(req->header, kafka::error_code::none,
                                             b == behaviour::old_api_versions ? 2 : 4, version);
            }
            auto wt = write(&s, std::move(answer));
            co_await std::move(wt);
            continue;
        }
        if (b == behaviour::silent_after_versions) continue;
        if (b == behaviour::reverse_pairs) {
            held.push_back(std::move(*req));
            if (held.size() == 2) {
                auto w1 = write(&s, metadata_answer(held[1]));
                co_await std::move(w1);
                auto w0 = write(&s, metadata_answer(held[0]));
                co_await std::move(w0);
                held.clear();
            }
            continue;
        }
        auto wt = write(&s, metadata_answer(*req));
        co_await std::move(wt);
    }
}

runtime::tcp_listener listen_local() {
    auto addr = runtime::socket_address::parse("127.0.0.1:0");
    auto l = runtime::tcp_listener::listen(*addr);
    if (!l) FAIL("cannot listen: " << l.error());
    return std::move(*l);
}

kafka::MetadataRequest metadata_for(std::string topic) {
    kafka::MetadataRequest req;
    kafka::MetadataRequest::MetadataRequestTopic t;
    t.name = std::move(topic);
    req.topics.emplace();
    req.topics->push_back(std::move(t));
    return req;
}

struct outcome {
    outcome() = default;
    std::optional<client::error> open_error;
    std::vector<result<kafka::MetadataResponse, client::error>> answers;
    bool open_after = true;
    std::int16_t metadata_version = -1;
};

// Opens a connection to the fake broker and sends `n` Metadata requests at once (topics
// "t0".."t<n-1>"), each with `timeout`; then one more after those, to see the connection's state.
runtime::task<outcome> run_client(std::string address, client::connection_options opts, int n,
                                  std::optional<runtime::duration> timeout, bool one_more) {
    outcome out;
    auto ot = client::connection::open(address, opts);
    auto c = co_await std::move(ot);
    if (!c) {
        out.open_error = c.error();
        co_return out;
    }
    auto v = (*c)->versions().pick(kafka::api_key::metadata);
    if (v) out.metadata_version = *v;
    std::vector<runtime::task<result<kafka::MetadataResponse, client::error>>> sends;
    client::request_options o;
    o.timeout = timeout;
    for (int i = 0; i < n; ++i) sends.push_back((*c)->send(metadata_for("t" + std::to_string(i)), o));
    auto wt = runtime::when_all(std::move(sends));
    auto all = co_await std::move(wt);
    for (auto& r : all) out.answers.push_back(std::move(r));
    if (one_more) {
        auto t = (*c)->send(metadata_for("late"), o);
        auto r = co_await std::move(t);
        out.answers.push_back(std::move(r));
    }
    out.open_after = (*c)->is_open();
    co_await (*c)->close();
    co_return out;
}

runtime::task<std::pair<outcome, server_log>> scenario(behaviour b, client::connection_options opts, int n,
                                                       std::optional<runtime::duration> timeout, bool one_more) {
    auto l = listen_local();
    const std::string address = l.local_address().to_string();
    server_log log;
    auto st = fake_broker(&l, b, &log);
    auto ct = run_client(address, std::move(opts), n, timeout, one_more);
    auto both = runtime::when_all(std::move(st), std::move(ct));
    auto [ignored, out] = co_await std::move(both);
    co_return std::make_pair(std::move(out), std::move(log));
}

client::connection_options quick() {
    client::connection_options o;
    o.connect_timeout = 2s;
    o.request_timeout = 2s;
    return o;
}

} // namespace

TEST_CASE("api_versions: the highest version both sides speak", "[client]") {
    kafka::ApiVersionsResponse r;
    kafka::ApiVersionsResponse::ApiVersion md;
    md.api_key = static_cast<std::int16_t>(kafka::api_key::metadata);
    md.min_version = 0;
    md.max_version = 99; // newer than skiff's codec
    kafka::ApiVersionsResponse::ApiVersion ct;
    ct.api_key = static_cast<std::int16_t>(kafka::api_key::create_topics);
    ct.min_version = 2;
    ct.max_version = 4; // older than skiff's codec
    kafka::ApiVersionsResponse::ApiVersion fe;
    fe.api_key = static_cast<std::int16_t>(kafka::api_key::fetch);
    fe.min_version = 40; // newer than anything skiff speaks
    fe.max_version = 50;
    r.api_keys = {md, ct, fe};
    auto v = client::api_versions::from(r);

    CHECK(*v.pick(kafka::api_key::metadata) == kafka::MetadataRequest::max_version);
    CHECK(*v.pick(kafka::api_key::create_topics) == 4);
    CHECK(*v.pick(kafka::api_key::create_topics, 3) == 3);
    auto capped_below = v.pick(kafka::api_key::create_topics, 1);
    REQUIRE(!capped_below);
    CHECK(capped_below.error().code == client::errc::unsupported_version);
    auto none = v.pick(kafka::api_key::fetch);
    REQUIRE(!none);
    CHECK(none.error().code == client::errc::unsupported_version);
    CHECK(none.error().message.find("Fetch") != std::string::npos);
    auto missing = v.pick(kafka::api_key::produce);
    REQUIRE(!missing);
    CHECK(missing.error().message == "the broker does not support Produce");
}

TEST_CASE("connection: negotiates and gets an answer", "[client]") {
    auto [out, log] = runtime::run_task(scenario(behaviour::normal, quick(), 1, std::nullopt, false));
    REQUIRE(!out.open_error);
    REQUIRE(out.answers.size() == 1);
    REQUIRE(out.answers[0]);
    CHECK(out.answers[0]->cluster_id == "t0");
    CHECK(out.answers[0]->controller_id == 7);
    CHECK(out.metadata_version == kafka::MetadataRequest::max_version);
    CHECK(log.api_versions_versions == std::vector<std::int16_t>{kafka::ApiVersionsRequest::max_version});
    CHECK(out.open_after);
}

TEST_CASE("connection: pipelined requests get their own answers when they come back out of order", "[client]") {
    auto [out, log] = runtime::run_task(scenario(behaviour::reverse_pairs, quick(), 2, std::nullopt, false));
    REQUIRE(!out.open_error);
    REQUIRE(out.answers.size() == 2);
    REQUIRE(out.answers[0]);
    REQUIRE(out.answers[1]);
    CHECK(out.answers[0]->cluster_id == "t0");
    CHECK(out.answers[1]->cluster_id == "t1");
    CHECK(log.requests == 3); // ApiVersions + both Metadata on one connection
}

TEST_CASE("connection: a broker with an older ApiVersions is asked again in its version (KIP-511)", "[client]") {
    auto [out, log] = runtime::run_task(scenario(behaviour::old_api_versions, quick(), 1, std::nullopt, false));
    REQUIRE(!out.open_error);
    CHECK(log.api_versions_versions == std::vector<std::int16_t>{kafka::ApiVersionsRequest::max_version, 2});
    REQUIRE(out.answers.size() == 1);
    CHECK(out.answers[0]);
}

TEST_CASE("connection: a broker that never answers ApiVersions times the open out", "[client]") {
    auto opts = quick();
    opts.connect_timeout = 300ms;
    const auto t0 = std::chrono::steady_clock::now();
    auto [out, log] = runtime::run_task(scenario(behaviour::silent, opts, 1, std::nullopt, false));
    const auto took = std::chrono::steady_clock::now() - t0;
    REQUIRE(out.open_error);
    CHECK(out.open_error->code == client::errc::timed_out);
    CHECK(out.open_error->message.find("did not answer ApiVersions within 300 ms") != std::string::npos);
    CHECK(took < 5s);
}

TEST_CASE("connection: a request that is never answered times out and closes the connection", "[client]") {
    auto [out, log] = runtime::run_task(scenario(behaviour::silent_after_versions, quick(), 2, 200ms, true));
    REQUIRE(!out.open_error);
    REQUIRE(out.answers.size() == 3);
    // The first to time out reports the timeout; the other one in flight had its
    // connection closed under it; the one sent afterwards finds it closed.
    int timed_out = 0;
    for (int i = 0; i < 2; ++i) {
        REQUIRE(!out.answers[i]);
        const auto code = out.answers[i].error().code;
        CHECK((code == client::errc::timed_out || code == client::errc::disconnected));
        if (code == client::errc::timed_out) ++timed_out;
    }
    CHECK(timed_out >= 1);
    REQUIRE(!out.answers[2]);
    CHECK(out.answers[2].error().code == client::errc::disconnected);
    CHECK(!out.open_after);
}

TEST_CASE("connection: garbage instead of a Kafka answer is a protocol error, not a hang", "[client]") {
    auto [out, log] = runtime::run_task(scenario(behaviour::garbage, quick(), 1, std::nullopt, false));
    REQUIRE(out.open_error);
    CHECK(out.open_error->code == client::errc::protocol_error);
    CHECK(out.open_error->message.find("is it a Kafka port?") != std::string::npos);
}

namespace {
runtime::task<result<std::unique_ptr<client::connection>, client::error>> open_only(std::string address) {
    auto t = client::connection::open(std::move(address), quick());
    auto c = co_await std::move(t);
    if (c) co_await (*c)->close();
    co_return c;
}
} // namespace

TEST_CASE("connection: a closed port is refused, a bad address is named", "[client]") {
    std::string address;
    {
        // A port that was just free: nothing listens there once the listener is closed.
        auto r = runtime::make_test_reactor();
        auto l = listen_local();
        address = l.local_address().to_string();
    }
    auto refused = runtime::run_task(open_only(address));
    REQUIRE(!refused);
    CHECK(refused.error().code == client::errc::connection_refused);
    CHECK(refused.error().message == "cannot connect to " + address + ": connection refused");

    auto bad = runtime::run_task(open_only("127.0.0.1"));
    REQUIRE(!bad);
    CHECK(bad.error().code == client::errc::bad_address);
}
