// The client against a real in-process broker (`skiff serve` on a temporary directory, one
// core, on its own thread): bootstrap, Metadata, routing to the controller, a partition's
// leader and a group's coordinator, and reconnecting after the broker went away and came back.
#include "run_task.hpp"

#include <skiff/broker/broker.hpp>
#include <skiff/client/client.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <string>
#include <thread>
#include <utility>
#include <vector>

using namespace skiff;
using namespace std::chrono_literals;

namespace {

// A broker on its own thread, stopped and joined by the destructor.
class broker_thread {
public:
    broker_thread(std::string dir, std::string kafka_addr) {
        // Without io_uring the broker cannot start either: skip like every reactor test.
        if (const auto& why = test::reactor_unavailable()) test::reactor_refused("broker", *why);
        broker::broker_config cfg;
        cfg.kafka_addr = std::move(kafka_addr);
        cfg.http_addr = "";
        cfg.cores = 1;
        cfg.data_dir = std::move(dir);
        cfg.group_initial_rebalance_delay = 0ms;
        std::promise<std::string> ready;
        auto addr = ready.get_future();
        broker::serve_hooks hooks;
        hooks.on_ready = [p = &ready](const std::string& kafka, const std::string&) { p->set_value(kafka); };
        _thread = std::thread([this, cfg = std::move(cfg), hooks = std::move(hooks), p = &ready]() mutable {
            auto r = broker::serve(std::move(cfg), _stop.get_token(), std::move(hooks));
            if (!r) {
                _error = r.error();
                try {
                    p->set_value("");
                } catch (...) {
                }
            }
        });
        if (addr.wait_for(30s) != std::future_status::ready) {
            stop();
            FAIL("broker did not start");
        }
        address = addr.get();
        if (address.empty()) {
            stop();
            FAIL("broker failed: " << _error);
        }
        // The hook reports the bound address; 0.0.0.0 is not where a client connects.
        if (address.rfind("0.0.0.0:", 0) == 0) address = "127.0.0.1:" + address.substr(8);
    }
    ~broker_thread() { stop(); }
    void stop() {
        _stop.request_stop();
        if (_thread.joinable()) _thread.join();
    }
    std::string address;

private:
    std::stop_source _stop;
    std::thread _thread;
    std::string _error;
};

struct temp_dir {
    temp_dir() {
        char tmpl[] = "/tmp/skiff-client-test-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~temp_dir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
    std::string path;
};

struct admin_outcome {
    admin_outcome() = default;
    std::optional<client::error> failed; // the first step that failed
    std::string step;
    kafka::error_code create_code = kafka::error_code::unknown_server_error;
    kafka::error_code create_again_code = kafka::error_code::unknown_server_error;
    std::size_t partitions = 0;
    std::int32_t leader_of_2 = -1;
    std::size_t brokers = 0;
    std::optional<std::string> cluster_id;
    kafka::error_code list_offsets_code = kafka::error_code::unknown_server_error;
    std::int64_t end_offset = -2;
    std::string coordinator_address;
    kafka::error_code delete_code = kafka::error_code::unknown_server_error;
    kafka::error_code after_delete = kafka::error_code::none;
    std::optional<client::error> leader_of_deleted;
    std::optional<client::error> leader_of_missing_partition;
};

kafka::CreateTopicsRequest create_request(const std::string& name, std::int32_t partitions) {
    kafka::CreateTopicsRequest req;
    kafka::CreateTopicsRequest::CreatableTopic t;
    t.name = name;
    t.num_partitions = partitions;
    t.replication_factor = 1;
    req.topics.push_back(std::move(t));
    req.timeout_ms = 10000;
    return req;
}

runtime::task<admin_outcome> admin_round(std::string address) {
    admin_outcome out;
    client::client c(client::client_config({"127.0.0.1:1", address})); // the first is refused: the next one is tried
    auto fail = [&](std::string step, client::error e) {
        out.step = std::move(step);
        out.failed = std::move(e);
    };
    do {
        auto ct = c.connect();
        auto conn = co_await std::move(ct);
        if (!conn) {
            fail("connect", conn.error());
            break;
        }
        out.brokers = c.brokers().size();
        out.cluster_id = c.cluster_id();

        auto t1 = c.send(create_request("orders", 3), client::target::controller());
        auto created = co_await std::move(t1);
        if (!created) {
            fail("create", created.error());
            break;
        }
        out.create_code = created->topics.at(0).error_code;
        auto t2 = c.send(create_request("orders", 3), client::target::controller());
        auto again = co_await std::move(t2);
        if (!again) {
            fail("create again", again.error());
            break;
        }
        out.create_again_code = again->topics.at(0).error_code;

        auto mt = c.metadata(std::vector<std::string>{"orders"});
        auto md = co_await std::move(mt);
        if (!md) {
            fail("metadata", md.error());
            break;
        }
        if (!md->topics.empty()) {
            out.partitions = md->topics[0].partitions.size();
            for (const auto& p : md->topics[0].partitions)
                if (p.partition_index == 2) out.leader_of_2 = p.leader_id;
        }

        kafka::ListOffsetsRequest lo;
        lo.replica_id = -1;
        kafka::ListOffsetsRequest::ListOffsetsTopic lt;
        lt.name = "orders";
        kafka::ListOffsetsRequest::ListOffsetsPartition lp;
        lp.partition_index = 2;
        lp.timestamp = -1; // latest
        lt.partitions.push_back(lp);
        lo.topics.push_back(std::move(lt));
        auto t3 = c.send(std::move(lo), client::target::leader("orders", 2));
        auto offsets = co_await std::move(t3);
        if (!offsets) {
            fail("list offsets", offsets.error());
            break;
        }
        out.list_offsets_code = offsets->topics.at(0).partitions.at(0).error_code;
        out.end_offset = offsets->topics.at(0).partitions.at(0).offset;

        auto tp = c.connection_for(client::target::leader("orders", 7));
        auto no_partition = co_await std::move(tp);
        if (!no_partition) out.leader_of_missing_partition = no_partition.error();

        auto t4 = c.connection_for(client::target::group_coordinator("billing"));
        auto coord = co_await std::move(t4);
        if (!coord) {
            fail("coordinator", coord.error());
            break;
        }
        out.coordinator_address = (*coord)->address();

        kafka::DeleteTopicsRequest del;
        del.topic_names = {"orders"};
        kafka::DeleteTopicsRequest::DeleteTopicState ds;
        ds.name = "orders";
        del.topics.push_back(ds);
        del.timeout_ms = 10000;
        auto t5 = c.send(std::move(del), client::target::controller());
        auto deleted = co_await std::move(t5);
        if (!deleted) {
            fail("delete", deleted.error());
            break;
        }
        out.delete_code = deleted->responses.at(0).error_code;

        auto mt2 = c.metadata(std::vector<std::string>{"orders"});
        auto md2 = co_await std::move(mt2);
        if (md2 && !md2->topics.empty()) out.after_delete = md2->topics[0].error_code;
        // The Metadata answer dropped the cached leaders: routing to the topic now says why not.
        auto tl = c.connection_for(client::target::leader("orders", 0));
        auto gone = co_await std::move(tl);
        if (!gone) out.leader_of_deleted = gone.error();
    } while (false);
    co_await c.close();
    co_return out;
}

} // namespace

TEST_CASE("client: admin round trip against an in-process broker", "[client]") {
    temp_dir dir;
    broker_thread b(dir.path, "127.0.0.1:0");
    auto out = runtime::run_task(admin_round(b.address));
    INFO("failed at " << out.step << ": " << (out.failed ? out.failed->message : std::string()));
    REQUIRE(!out.failed);
    CHECK(out.brokers == 1);
    CHECK(out.cluster_id.has_value());
    CHECK(out.create_code == kafka::error_code::none);
    CHECK(out.create_again_code == kafka::error_code::topic_already_exists);
    CHECK(out.partitions == 3);
    CHECK(out.leader_of_2 == 0);
    CHECK(out.list_offsets_code == kafka::error_code::none);
    CHECK(out.end_offset == 0);
    CHECK(out.coordinator_address == b.address);
    CHECK(out.delete_code == kafka::error_code::none);
    CHECK(out.after_delete == kafka::error_code::unknown_topic_or_partition);
    REQUIRE(out.leader_of_missing_partition);
    CHECK(out.leader_of_missing_partition->code == client::errc::not_found);
    CHECK(out.leader_of_missing_partition->message == "topic 'orders' has no partition 7");
    REQUIRE(out.leader_of_deleted);
    CHECK(out.leader_of_deleted->code == client::errc::broker_error);
    CHECK(out.leader_of_deleted->kafka == kafka::error_code::unknown_topic_or_partition);
}

namespace {
// Step 1 and 3 on one client across a broker restart (step 2 runs with the broker stopped).
runtime::task<std::optional<client::error>> metadata_once(client::client* c) {
    auto mt = c->metadata(std::vector<std::string>{});
    auto md = co_await std::move(mt);
    if (!md) co_return md.error();
    co_return std::nullopt;
}
runtime::task<std::optional<client::error>> connect_once(client::client* c) {
    auto ct = c->connect();
    auto r = co_await std::move(ct);
    if (!r) co_return r.error();
    co_return std::nullopt;
}
runtime::task<void> close_client(client::client* c) { co_await c->close(); }
} // namespace

TEST_CASE("client: reconnects after the broker restarts", "[client]") {
    temp_dir dir;
    auto reactor = runtime::make_test_reactor();
    std::string address;
    client::connection_options opts;
    opts.connect_timeout = 2s;
    opts.request_timeout = 5s;
    std::optional<client::client> c;
    {
        broker_thread b(dir.path, "127.0.0.1:0");
        address = b.address;
        c.emplace(client::client_config({address}, opts));
        auto first = reactor->run_until_complete(connect_once(&*c));
        INFO((first ? first->message : std::string()));
        REQUIRE(!first);
    }
    // The broker is gone: the next request fails with a transport error, quickly.
    auto down = reactor->run_until_complete(metadata_once(&*c));
    REQUIRE(down);
    CHECK(down->is_transport());
    {
        broker_thread b(dir.path, address); // same port
        auto again = reactor->run_until_complete(metadata_once(&*c));
        INFO((again ? again->message : std::string()));
        CHECK(!again);
    }
    reactor->run_until_complete(close_client(&*c));
}
