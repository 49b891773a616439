// The engine over a memory bucket of real segments, driven through pgwire::session (the test
// thread is the home core), with an optional store latency: test_engine.cpp and test_observe.cpp.
#pragma once

#include <skiff/sql/engine.hpp>

#include <skiff/storage/layout.hpp>
#include <skiff/storage/memory_store.hpp>
#include <skiff/storage/record_batch.hpp>
#include <skiff/storage/segment_format.hpp>

#include "run_task.hpp"

#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <chrono>
#include <span>

namespace sql_test {

using namespace skiff;
using pgwire::sql_error;

constexpr std::int64_t ts0 = 1700000000000;

// Records key "k{i}", value {"n":i,"kind":"a"|"b"}, header h=i, timestamps ts0 + i.
inline std::string batch(int first, int n, storage::compression_codec codec = storage::compression_codec::none) {
    std::vector<storage::record> recs;
    for (int i = first; i < first + n; ++i) {
        std::vector<storage::record_header> h;
        h.emplace_back("h", fmt::format("{}", i));
        recs.emplace_back(fmt::format("k{}", i), fmt::format(R"({{"n":{},"kind":"{}"}})", i, i % 2 ? "b" : "a"),
                          std::move(h), i - first);
    }
    storage::batch_options o;
    o.base_timestamp = ts0 + first;
    o.compress = codec;
    return storage::build_batch(0, recs, o);
}

inline void put_segment(storage::memory_bucket& bucket, const std::string& topic, std::int32_t p, std::int64_t base,
                 const std::vector<std::string>& batches) {
    storage::segment_builder sb(base, 1);
    for (auto& b : batches) REQUIRE(sb.append(std::span<const char>(b.data(), b.size())).has_value());
    auto built = std::move(sb).finish(ts0);
    storage::partition_id pid(topic, p);
    bucket.objects[storage::segment_key("default", pid, base)] = built.kfs;
    bucket.objects[storage::index_key("default", pid, base)] = built.index;
}

// orders: partition 0 = offsets 0..199 in two segments, partition 1 = 0..49; payments: 0..19.
inline std::shared_ptr<storage::memory_bucket> make_bucket() {
    auto b = std::make_shared<storage::memory_bucket>();
    put_segment(*b, "orders", 0, 0, {batch(0, 50), batch(50, 50, storage::compression_codec::gzip)});
    put_segment(*b, "orders", 0, 100, {batch(100, 100)});
    put_segment(*b, "orders", 1, 0, {batch(0, 50)});
    put_segment(*b, "payments", 0, 0, {batch(0, 20)});
    return b;
}

struct collecting_writer final : pgwire::result_writer {
    std::vector<pgwire::column_desc> cols;
    std::vector<pgwire::row> got;
    std::vector<std::string> tags;
    runtime::task<result<void, sql_error>> columns(std::vector<pgwire::column_desc> c) override {
        cols = std::move(c);
        co_return ok();
    }
    runtime::task<result<void, sql_error>> rows(std::vector<pgwire::row> batch) override {
        for (auto& r : batch) got.push_back(std::move(r));
        co_return ok();
    }
    runtime::task<result<void, sql_error>> complete(std::string tag) override {
        tags.push_back(std::move(tag));
        co_return ok();
    }
    std::string cell(std::size_t r, std::size_t c) const { return got.at(r).at(c).value_or("NULL"); }
};

struct fixture {
    std::unique_ptr<runtime::reactor> home = runtime::make_test_reactor();
    std::shared_ptr<storage::memory_bucket> bucket = make_bucket();
    std::vector<storage::mem_fault_rule> faults;
    std::chrono::nanoseconds latency{0}; // per GET of the workers' stores
    std::unique_ptr<sql::engine> engine;
    std::unique_ptr<pgwire::session> session;

    void start(sql::engine_config cfg = sql::engine_config()) {
        auto b = bucket;
        auto f = faults;
        auto lat = latency;
        auto e = sql::engine::create(cfg, [b, f, lat](runtime::reactor&) -> result<sql::worker_store, std::string> {
            auto store = std::make_shared<storage::memory_store>(b);
            store->set_latency(lat);
            for (auto& rule : f) store->add_fault(rule);
            sql::worker_store w;
            w.store = store.get();
            w.keep_alive = store;
            return w;
        }, *home);
        REQUIRE(e.has_value());
        engine = std::move(*e);
        pgwire::startup_info who;
        who.user = "tester";
        auto s = engine->open(who);
        REQUIRE(s.has_value());
        session = std::move(*s);
    }

    result<void, sql_error> run(const std::string& sql, collecting_writer& w, std::stop_token st = {}) {
        return home->run_until_complete(session->simple_query(sql, w, st));
    }
    collecting_writer ok_query(const std::string& sql) {
        collecting_writer w;
        auto r = run(sql, w);
        INFO(sql << " -> " << (r ? std::string("ok") : r.error().sqlstate + " " + r.error().message));
        REQUIRE(r.has_value());
        return w;
    }
    sql_error failed_query(const std::string& sql) {
        collecting_writer w;
        auto r = run(sql, w);
        INFO(sql);
        REQUIRE_FALSE(r.has_value());
        return r.error();
    }
};


} // namespace sql_test
