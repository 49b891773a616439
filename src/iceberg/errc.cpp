// iceberg::errc as a std::error_category.
#include <skiff/iceberg/errc.hpp>

#include <fmt/format.h>

namespace skiff::iceberg {

const char* to_string(errc e) noexcept {
    switch (e) {
    case errc::store_failed: return "store_failed";
    case errc::not_found: return "not_found";
    case errc::conflict: return "conflict";
    case errc::invalid_metadata: return "invalid_metadata";
    case errc::invalid_argument: return "invalid_argument";
    case errc::cancelled: return "cancelled";
    }
    return "unknown";
}

namespace {

class category final : public std::error_category {
public:
    const char* name() const noexcept override { return "skiff.iceberg"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::store_failed: return "the object store failed";
        case errc::not_found: return "no Iceberg table at this location";
        case errc::conflict: return "another writer committed this table version first";
        case errc::invalid_metadata: return "Iceberg metadata does not parse or breaks the spec";
        case errc::invalid_argument: return "invalid Iceberg arguments";
        case errc::cancelled: return "cancelled";
        }
        return fmt::format("unknown skiff.iceberg error {}", ev);
    }
};

} // namespace

const std::error_category& error_category() noexcept {
    static const category c;
    return c;
}

} // namespace skiff::iceberg
