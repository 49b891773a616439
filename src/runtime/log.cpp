#include <skiff/core/log.hpp>
#include <skiff/runtime/reactor.hpp>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <mutex>

namespace skiff::log {

namespace {
std::atomic<level> g_level{level::info};
std::mutex g_write_mutex;
constexpr const char* names[] = {"TRACE", "DEBUG", "INFO", "WARN", "ERROR", "OFF"};
} // namespace

level current_level() noexcept { return g_level.load(std::memory_order_relaxed); }
void set_level(level l) noexcept { g_level.store(l, std::memory_order_relaxed); }

bool set_level(std::string_view name) noexcept {
    for (int i = 0; i <= static_cast<int>(level::off); ++i) {
        std::string_view n = names[i];
        if (n.size() != name.size()) continue;
        bool eq = true;
        for (std::size_t k = 0; k < n.size(); ++k) {
            if (n[k] != (name[k] >= 'a' && name[k] <= 'z' ? name[k] - 32 : name[k])) eq = false;
        }
        if (eq) {
            set_level(static_cast<level>(i));
            return true;
        }
    }
    return false;
}

void write(level l, std::string_view msg) noexcept {
    try {
        auto now = std::chrono::system_clock::now();
        auto secs = std::chrono::system_clock::to_time_t(now);
        auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count() % 1000;
        std::tm tm{};
        gmtime_r(&secs, &tm);
        auto* r = runtime::reactor::try_local();
        std::string line = fmt::format("{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z {} [{}] {}\n", tm.tm_year + 1900,
                                       tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms,
                                       names[static_cast<int>(l)],
                                       r ? fmt::format("core {}", r->core_id()) : std::string("main"), msg);
        std::lock_guard lk(g_write_mutex);
        std::fwrite(line.data(), 1, line.size(), stderr);
    } catch (...) {
        // Logging must never take the process down.
    }
}

} // namespace skiff::log
