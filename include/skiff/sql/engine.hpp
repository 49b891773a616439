// The SQL engine of `skiff sql`: SQLite over the topics of one namespace, behind the Postgres
// wire server (pgwire/backend.hpp). docs/sql.md says what SQL it accepts and how topics look.
//
// SQLite is synchronous, so queries run on a pool of worker threads; each owns a reactor, an
// object store opened on that reactor and a sqlite3 connection with the skiff_topic virtual
// table module. Rows travel back to the session's core in bounded chunks, so a slow client
// stalls its worker instead of growing a buffer. Create the engine on the core that runs the
// pgwire server: sessions resume there.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/pgwire/backend.hpp>
#include <skiff/storage/object_store.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace skiff::runtime {
class reactor;
}

namespace skiff::sql {

// Opens a worker's store on the worker's reactor (called on the worker thread, once). The
// error is one sentence. The store (and whatever it needs, e.g. an S3 client) lives as long as
// the worker.
struct worker_store {
    worker_store() = default;
    std::shared_ptr<void> keep_alive;              // owns the store's dependencies
    storage::object_store* store = nullptr;
};
using store_opener = std::function<result<worker_store, std::string>(runtime::reactor&)>;

struct engine_config {
    engine_config() = default;
    std::string ns = "default";
    std::size_t max_concurrent_queries = 4;  // worker threads
    std::size_t max_queued_queries = 64;     // beyond: 53300
    std::uint64_t max_scan_bytes = 0;        // per query; 0 = unlimited (54000 beyond)
    std::uint64_t max_scan_segments = 0;     // per query; 0 = unlimited (54000 beyond)
    std::chrono::milliseconds query_timeout{0}; // 0 = none (57014 beyond)
    std::size_t rows_per_chunk = 1000;
    std::size_t chunks_in_flight = 4;        // per query, worker -> session
    std::size_t parallel_gets = 8;
    std::size_t read_ahead_bytes = 64u << 20;
};

// Counters, readable from any thread (relaxed atomics inside; a snapshot here).
struct engine_stats {
    std::uint64_t queries = 0;
    std::uint64_t query_errors = 0;
    std::uint64_t rows = 0;
    std::uint64_t bytes_scanned = 0;
    std::uint64_t segments_scanned = 0;
    std::uint64_t gets = 0;
    std::uint64_t gets_in_flight = 0;
    std::uint64_t read_ahead_hits = 0;
    std::uint64_t queries_running = 0;
    std::uint64_t queries_queued = 0;
};

class engine final : public pgwire::backend {
public:
    // Starts the workers; each opens its store with `open` and fails the engine when it cannot.
    // `home` is the reactor of the sessions (the pgwire server's).
    static result<std::unique_ptr<engine>, std::string> create(engine_config cfg, store_opener open,
                                                               runtime::reactor& home);
    ~engine() override; // cancels queued and running queries and joins the workers
    engine(const engine&) = delete;
    engine& operator=(const engine&) = delete;

    result<std::unique_ptr<pgwire::session>, pgwire::sql_error> open(const pgwire::startup_info& who) override;
    engine_stats stats() const;

    struct impl;

private:
    explicit engine(std::unique_ptr<impl> i);
    std::unique_ptr<impl> _impl;
};

} // namespace skiff::sql
