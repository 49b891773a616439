// Shredding Kafka-style headers, list<struct<key, value>>, into the levels of their two leaf
// columns, so the sink and the tests do not each work out the 3-level list levels by hand.
// Pure; any core or thread.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/parquet/column.hpp>
#include <skiff/parquet/errc.hpp>
#include <skiff/parquet/schema.hpp>

#include <optional>
#include <span>
#include <string_view>

namespace skiff::parquet {

struct kv_entry {
    std::string_view key;
    std::optional<std::string_view> value; // nullopt: a null value (Kafka allows it)
};

// For leaves <list>.list.element.<key> and <list>.list.element.<value> of a
// `[optional|required] list<required struct<key: byte_array, value: byte_array>>` outside any
// other repeated field (the key and value leaves may be required or optional).
class kv_list_shredder {
public:
    kv_list_shredder() = default;
    // errc::invalid_schema when the two leaves are not shaped like that.
    static result<kv_list_shredder, parquet_error> make(const leaf& key_leaf, const leaf& value_leaf);

    // One row. An empty span is an empty list. Errors (errc::value_mismatch): a null list when
    // the list is required, a null value when the value leaf is required; on error nothing
    // was appended.
    result<void, parquet_error> null_list(column_data& keys, column_data& values) const;
    result<void, parquet_error> add(std::span<const kv_entry> entries, column_data& keys, column_data& values) const;

private:
    std::uint8_t _list_def = 0;     // the list is present (maybe empty)
    std::uint8_t _element_def = 0;  // an element is present, its field null
    std::uint8_t _repeat = 1;       // the repetition level of the 2nd.. element
    bool _list_optional = false;
    bool _value_optional = false;
};

} // namespace skiff::parquet
