// The broker's short spelling of Kafka's error codes: kerr::not_coordinator is
// kafka::error_code::not_coordinator (skiff/kafka/errors.hpp, the one table of codes, names and
// retriability). Typed, so a code cannot be mixed up with a count, an api key or a version.
// Header-only; usable on any core.
#pragma once

#include "skiff/kafka/errors.hpp"

namespace skiff::broker::kerr {
using enum kafka::error_code;
} // namespace skiff::broker::kerr
