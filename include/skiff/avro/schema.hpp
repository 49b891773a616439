// Avro schemas parsed from their JSON form (Avro 1.11 spec, "Schema Declaration"), keeping the
// Iceberg attributes a reader needs: "field-id" on record fields, "element-id" on arrays,
// "key-id"/"value-id" on maps, and "logicalType" (left as its base type). Named types may be
// referenced after their definition; recursive types are rejected. Pure; any thread.
#pragma once

#include <skiff/avro/errc.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace skiff::avro {

enum class type : std::uint8_t {
    null, boolean, int_, long_, float_, double_, bytes, string, record, enum_, array, map, union_, fixed,
};
const char* to_string(type t) noexcept;

struct node;
using node_ptr = std::shared_ptr<const node>;

struct field {
    std::string name;
    node_ptr schema;
    std::optional<std::int32_t> field_id; // Iceberg "field-id"
};

struct node {
    avro::type kind = avro::type::null;
    std::string name;                // full name of a record, enum or fixed
    std::string logical_type;        // "" when none
    std::vector<field> fields;       // record
    std::vector<std::string> symbols; // enum
    node_ptr items;                  // array items, map values
    std::vector<node_ptr> branches;  // union
    std::size_t size = 0;            // fixed
    std::optional<std::int32_t> element_id;       // Iceberg "element-id" on an array
    std::optional<std::int32_t> key_id, value_id; // Iceberg "key-id"/"value-id" on a map
    // The fewest bytes any datum of this schema encodes to; a count read from untrusted input
    // is checked against it before anything is allocated.
    std::size_t min_size = 0;

    // Index of the field with this Iceberg field id / name, or -1.
    int field_index(std::int32_t field_id) const noexcept;
    int field_index(std::string_view field_name) const noexcept;
};

// Parses a schema; errc::invalid_schema with the offending part on failure.
result<node_ptr> parse_schema(std::string_view json);

} // namespace skiff::avro
