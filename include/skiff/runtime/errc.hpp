// Error codes of the runtime module. System call failures keep their errno in
// std::system_category; these are the runtime's own outcomes.
#pragma once

#include <system_error>

namespace skiff::runtime {

enum class errc {
    cancelled = 1,  // a stop_token fired; the operation did not complete
    timed_out,      // a deadline passed first
    broken,         // a semaphore or queue was broken (shutdown)
    gate_closed,    // new work refused: the gate is closing
    eof,            // the peer closed the connection
    unsupported,    // the kernel lacks an io_uring feature we need
};

const std::error_category& error_category() noexcept;
inline std::error_code make_error_code(errc e) noexcept { return {static_cast<int>(e), error_category()}; }

// errno → error_code, with ECANCELED mapped to errc::cancelled so callers test one thing.
std::error_code from_errno(int err) noexcept;

inline bool is_cancelled(const std::error_code& ec) noexcept {
    return ec == make_error_code(errc::cancelled);
}

} // namespace skiff::runtime

template <>
struct std::is_error_code_enum<skiff::runtime::errc> : std::true_type {};
