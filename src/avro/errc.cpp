// avro::errc as a std::error_category.
#include <skiff/avro/errc.hpp>

#include <fmt/format.h>

namespace skiff::avro {

const char* to_string(errc e) noexcept {
    switch (e) {
    case errc::invalid_schema: return "invalid_schema";
    case errc::corrupt: return "corrupt";
    case errc::truncated: return "truncated";
    case errc::too_large: return "too_large";
    case errc::unsupported: return "unsupported";
    case errc::type_mismatch: return "type_mismatch";
    }
    return "unknown";
}

namespace {

class category final : public std::error_category {
public:
    const char* name() const noexcept override { return "skiff.avro"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::invalid_schema: return "invalid Avro schema";
        case errc::corrupt: return "corrupt Avro data";
        case errc::truncated: return "truncated Avro data";
        case errc::too_large: return "Avro length or count beyond the input or the limits";
        case errc::unsupported: return "unsupported Avro feature";
        case errc::type_mismatch: return "value does not fit the Avro schema";
        }
        return fmt::format("unknown skiff.avro error {}", ev);
    }
};

} // namespace

const std::error_category& error_category() noexcept {
    static const category c;
    return c;
}

} // namespace skiff::avro
