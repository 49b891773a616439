// A wall-clock time as ISO 8601 in UTC with whole seconds ("2026-12-06T10:00:00Z"): the form
// AWS uses for credential expirations and S3 Express sessions.
#pragma once

#include <chrono>
#include <string>

namespace skiff {

std::string iso8601_utc(std::chrono::system_clock::time_point t);

} // namespace skiff
