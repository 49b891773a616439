// The sample table shared by the writer tests and write_sample (the end-to-end check with
// DuckDB and hyparquet): Iceberg's Kafka table plus one optional column of every other kind.
// Rows come from a formula, so the expected values never pass through the writer.
#pragma once

#include <skiff/parquet/column.hpp>
#include <skiff/parquet/schema.hpp>
#include <skiff/parquet/writer.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace sample {

struct header {
    std::string key;
    std::optional<std::string> value;
};

struct row {
    std::int32_t partition = 0;
    std::int64_t offset = 0;
    std::int64_t timestamp = 0; // micros UTC
    std::optional<std::string> key;
    std::optional<std::string> value;
    std::optional<std::vector<header>> headers;
    std::optional<std::string> s;      // string, few distinct (dictionary)
    std::optional<std::int64_t> l;     // long, all distinct (plain)
    std::optional<double> d;
    std::optional<bool> b;
    std::optional<std::int64_t> t;     // timestamptz
    std::optional<std::int32_t> day;   // date
    std::optional<std::string> fixed;  // fixed_len_byte_array(4)
};

row make_row(std::int64_t i);
skiff::parquet::schema make_schema();
// Shreds rows [first, first + n) into one column per leaf.
std::vector<skiff::parquet::column_data> shred(const skiff::parquet::schema& s, std::int64_t first, std::int64_t n);
// The row group sizes of the sample file.
inline const std::vector<std::int64_t>& group_sizes() {
    static const std::vector<std::int64_t> g{300, 1200, 37};
    return g;
}
// Writes the whole sample with these options.
skiff::parquet::file_result write(const skiff::parquet::writer_options& o);
// The rows as JSON in the form verify_parquet.mjs prints (int64 as strings, binary as hex).
std::string rows_json(std::int64_t n);

} // namespace sample
