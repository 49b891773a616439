// storage::errc as a std::error_category.
#include <skiff/storage/errc.hpp>

#include <fmt/format.h>

#include <string>

namespace skiff::storage {

const char* to_string(errc e) noexcept {
    switch (e) {
    case errc::not_found: return "not_found";
    case errc::precondition_failed: return "precondition_failed";
    case errc::transient: return "transient";
    case errc::permanent: return "permanent";
    case errc::corrupt: return "corrupt";
    case errc::cancelled: return "cancelled";
    case errc::deadline_exceeded: return "deadline_exceeded";
    case errc::invalid_argument: return "invalid_argument";
    }
    return "unknown";
}

namespace {

class category final : public std::error_category {
public:
    const char* name() const noexcept override { return "skiff.storage"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::not_found: return "object not found";
        case errc::precondition_failed: return "object already exists";
        case errc::transient: return "transient storage failure; retrying may succeed";
        case errc::permanent: return "storage failure that retrying will not fix";
        case errc::corrupt: return "stored data is corrupt";
        case errc::cancelled: return "storage operation cancelled";
        case errc::deadline_exceeded: return "storage operation deadline exceeded";
        case errc::invalid_argument: return "invalid storage key or range";
        }
        return fmt::format("unknown skiff.storage error {}", ev);
    }
};

} // namespace

const std::error_category& error_category() noexcept {
    static const category c;
    return c;
}

} // namespace skiff::storage
