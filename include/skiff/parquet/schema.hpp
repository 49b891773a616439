// A Parquet schema: a tree of named nodes with repetition, physical type, the few logical
// types skiff writes (STRING, DATE, TIMESTAMP(UTC, MICROS), LIST) and optional field ids
// (Iceberg's column ids). schema::make checks the tree and flattens its leaves, each with the
// maximum definition and repetition levels that its shredded column carries.
// Pure; any core or thread.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/parquet/errc.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::parquet {

// Values are parquet.thrift's Type.
enum class physical_type : std::uint8_t {
    boolean = 0,
    int32 = 1,
    int64 = 2,
    double_ = 5,
    byte_array = 6,
    fixed_len_byte_array = 7,
};

// Values are parquet.thrift's FieldRepetitionType.
enum class repetition : std::uint8_t { required = 0, optional = 1, repeated = 2 };

enum class logical_type : std::uint8_t {
    none,
    string,               // BYTE_ARRAY, UTF-8 (converted UTF8)
    date,                 // INT32, days since 1970-01-01 (converted DATE)
    timestamp_micros_utc, // INT64, isAdjustedToUTC=true, MICROS (converted TIMESTAMP_MICROS)
    list,                 // a group in the 3-level form, see list() below
};

struct node {
    node() {}
    std::string name;
    repetition rep = repetition::required;
    std::optional<std::int32_t> field_id;
    bool is_group = false;
    physical_type type = physical_type::int32; // leaves only
    std::int32_t type_length = 0;              // fixed_len_byte_array only
    logical_type logical = logical_type::none;
    std::vector<node> children; // groups only
};

node primitive(std::string name, physical_type t, repetition r, std::optional<std::int32_t> field_id,
               logical_type lt = logical_type::none);
node group(std::string name, repetition r, std::optional<std::int32_t> field_id, std::vector<node> children);
// The 3-level list of LogicalTypes.md:
//   <r> group <name> (LIST) { repeated group list { <element, renamed "element"> } }
// field_id goes on the outer group; the element keeps its own (Iceberg's element id).
node list(std::string name, repetition r, std::optional<std::int32_t> field_id, node element);

// One leaf column, in depth-first order.
struct leaf {
    std::vector<std::string> path; // names from the top-level field down to the leaf
    physical_type type = physical_type::int32;
    std::int32_t type_length = 0;
    logical_type logical = logical_type::none;
    std::optional<std::int32_t> field_id;
    std::uint8_t max_def = 0;
    std::uint8_t max_rep = 0;
    // The definition / repetition level reached once node path[i] is present (counting it).
    std::vector<std::uint8_t> path_def;
    std::vector<std::uint8_t> path_rep;
    std::size_t top_field = 0; // index of its top-level field

    // path joined with '.', as Iceberg and engines name nested columns.
    std::string dotted() const;
};

class schema {
public:
    schema() = default;
    // Errors (errc::invalid_schema): no fields, empty or duplicate sibling names, a group
    // without children, a leaf with children, a logical type on the wrong physical type, a LIST
    // group not in the 3-level form, fixed_len_byte_array without a length, levels above 255.
    static result<schema, parquet_error> make(std::vector<node> fields, std::string root_name = "schema");

    const std::vector<node>& fields() const noexcept { return _fields; }
    const std::vector<leaf>& leaves() const noexcept { return _leaves; }
    const std::string& root_name() const noexcept { return _root; }
    // Index of the first leaf whose dotted path is `dotted`, or nullopt.
    std::optional<std::size_t> find_leaf(std::string_view dotted) const;

private:
    std::string _root;
    std::vector<node> _fields;
    std::vector<leaf> _leaves;
};

} // namespace skiff::parquet
