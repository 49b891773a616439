// reader::errc as a std::error_category, and the names of findings.
#include <skiff/reader/errc.hpp>
#include <skiff/reader/segment_reader.hpp>

#include <fmt/format.h>

#include <string>

namespace skiff::reader {

const char* to_string(errc e) noexcept {
    switch (e) {
    case errc::store_failed: return "store_failed";
    case errc::corrupt: return "corrupt";
    case errc::too_large: return "too_large";
    case errc::cancelled: return "cancelled";
    case errc::invalid_argument: return "invalid_argument";
    }
    return "unknown";
}

const char* to_string(finding::kind k) noexcept {
    switch (k) {
    case finding::kind::orphan_index: return "orphan_index";
    case finding::kind::stray_key: return "stray_key";
    case finding::kind::corrupt_segment: return "corrupt_segment";
    case finding::kind::missing_index: return "missing_index";
    }
    return "unknown";
}

namespace {

class category final : public std::error_category {
public:
    const char* name() const noexcept override { return "skiff.reader"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::store_failed: return "the object store failed";
        case errc::corrupt: return "a segment or batch is corrupt";
        case errc::too_large: return "a segment or batch is beyond the configured bound";
        case errc::cancelled: return "read cancelled";
        case errc::invalid_argument: return "invalid read arguments";
        }
        return fmt::format("unknown skiff.reader error {}", ev);
    }
};

} // namespace

const std::error_category& error_category() noexcept {
    static const category c;
    return c;
}

} // namespace skiff::reader
