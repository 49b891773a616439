#include <skiff/runtime/errc.hpp>

#include <cerrno>
#include <string>

namespace skiff::runtime {

namespace {
class category final : public std::error_category {
public:
    const char* name() const noexcept override { return "skiff.runtime"; }
    std::string message(int c) const override {
        switch (static_cast<errc>(c)) {
        case errc::cancelled: return "operation cancelled";
        case errc::timed_out: return "operation timed out";
        case errc::broken: return "resource broken by shutdown";
        case errc::gate_closed: return "shutting down: no new work accepted";
        case errc::eof: return "connection closed by peer";
        case errc::unsupported: return "not supported by this kernel";
        }
        return "unknown runtime error";
    }
};
} // namespace

const std::error_category& error_category() noexcept {
    static const category c;
    return c;
}

std::error_code from_errno(int err) noexcept {
    if (err < 0) err = -err;
    if (err == ECANCELED) return make_error_code(errc::cancelled);
    if (err == ETIME || err == ETIMEDOUT) return make_error_code(errc::timed_out);
    return {err, std::system_category()};
}

} // namespace skiff::runtime
