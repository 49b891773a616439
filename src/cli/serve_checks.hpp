// The checks `skiff serve` runs before it serves, and all that `skiff serve --check` does: the
// Kafka and HTTP ports are free, the data directory can be created, written and locked, the S3
// bucket can be listed with the credentials at hand. Each failure is one sentence for the
// operator; each success a short line for --check.
#pragma once

#include <skiff/broker/config.hpp>
#include <skiff/core/result.hpp>

#include <string>
#include <string_view>

namespace skiff::cli {

// A lock on <data dir>/.skiff.lock, held until destroyed (or the process ends: flock locks die
// with their last descriptor, so a crashed broker never leaves its directory locked).
class data_dir_lock {
public:
    data_dir_lock() = default;
    explicit data_dir_lock(int fd) noexcept : _fd(fd) {}
    data_dir_lock(data_dir_lock&& o) noexcept : _fd(o._fd) { o._fd = -1; }
    data_dir_lock& operator=(data_dir_lock&& o) noexcept;
    data_dir_lock(const data_dir_lock&) = delete;
    data_dir_lock& operator=(const data_dir_lock&) = delete;
    ~data_dir_lock();

private:
    int _fd = -1;
};

// Creates `dir` with its parents, proves it writable (a file created, written, synced and
// removed) and locks it: exclusively for a broker on its own, shared in cluster mode (brokers
// of one cluster may share a directory; a broker on its own may not join them, nor they it).
// On success `detail` says what was checked.
result<data_dir_lock, std::string> claim_data_dir(const std::string& dir, bool cluster_mode, std::string& detail);

// Binds `addr` (and releases it at once; never listens) to learn whether the broker could; a
// port in use is asked again for up to a second (a broker that just exited may still hold it).
// Port 0 always passes. `flag` names the setting in the sentence ("kafka-addr").
result<std::string, std::string> check_port(const std::string& addr, std::string_view flag);

// Lists one key of the namespace through the broker's S3 client, within about 15 seconds:
// a missing bucket, refused credentials or an unreachable endpoint fail here rather than as
// the first request's error. Runs its own reactor on the calling thread; call it before the
// broker's cores start.
result<std::string, std::string> check_s3_store(const broker::broker_config& cfg);

} // namespace skiff::cli
