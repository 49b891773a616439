// Running a long-lived command (`skiff sql`, `skiff iceberg`) on one reactor until it ends or
// SIGINT/SIGTERM asks it to stop. Signals go to one thread; the others (the reactor and any
// workers, which inherit the mask) have them blocked. The stop is posted to the reactor: stop
// callbacks touch the command's state and must run there (README, cross-core work). A second
// signal exits at once (status 130).
#pragma once

#include <skiff/runtime/task.hpp>

#include <functional>
#include <stop_token>

namespace skiff::cli {

// Blocks SIGINT/SIGTERM, ignores SIGPIPE, creates the reactor and runs `body(stop)` on it.
// Returns body's status, or 1 when no reactor can be created (the reason on stderr).
int run_until_signal(const std::function<runtime::task<int>(std::stop_token)>& body);

} // namespace skiff::cli
