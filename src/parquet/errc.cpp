// parquet::errc as a std::error_category.
#include <skiff/parquet/errc.hpp>

#include <string>

namespace skiff::parquet {

const char* to_string(errc e) noexcept {
    switch (e) {
    case errc::invalid_schema: return "invalid_schema";
    case errc::column_mismatch: return "column_mismatch";
    case errc::level_out_of_range: return "level_out_of_range";
    case errc::value_mismatch: return "value_mismatch";
    case errc::corrupt: return "corrupt";
    case errc::compression_failed: return "compression_failed";
    case errc::invalid_state: return "invalid_state";
    }
    return "unknown";
}

namespace {

class category final : public std::error_category {
public:
    const char* name() const noexcept override { return "skiff.parquet"; }
    std::string message(int ev) const override {
        switch (static_cast<errc>(ev)) {
        case errc::invalid_schema: return "invalid Parquet schema";
        case errc::column_mismatch: return "columns do not match the schema";
        case errc::level_out_of_range: return "definition or repetition level out of range";
        case errc::value_mismatch: return "values do not match the levels";
        case errc::corrupt: return "corrupt Parquet or Thrift bytes";
        case errc::compression_failed: return "page compression failed";
        case errc::invalid_state: return "call not allowed in the writer's state";
        }
        return "unknown skiff.parquet error " + std::to_string(ev);
    }
};

} // namespace

const std::error_category& error_category() noexcept {
    static const category c;
    return c;
}

} // namespace skiff::parquet
