// A small SQL "engine" for the server tests, speaking a toy language over the real backend
// interface:
//   SELECT <n>       one int4 column "n", rows 1..n (streamed in batches of 100), "SELECT <n>";
//                    in the extended protocol $k is replaced by parameter k first
//   ECHO $1 $2 ...   one text column per parameter, one row of the parameter values
//   SLOW             waits until cancelled, then 57014
//   FAIL ...         42601 syntax_error
//   SET / BEGIN      no rows, the word as the tag
// Statements are separated by ';' in the simple protocol. Database "nodb" is refused (3D000).
#pragma once

#include <skiff/pgwire/backend.hpp>

#include <cstddef>
#include <memory>
#include <string>

namespace skiff::test {

struct toy_counters {
    std::size_t sessions_opened = 0;
    std::size_t slow_started = 0;
    std::size_t slow_cancelled = 0;
    std::string last_user;
    std::string last_application_name;
};

class toy_backend final : public pgwire::backend {
public:
    result<std::unique_ptr<pgwire::session>, pgwire::sql_error> open(const pgwire::startup_info& who) override;
    toy_counters counters;
};

} // namespace skiff::test
