// Levels of the 3-level list (LogicalTypes.md, "Lists"; Dremel's shredding).
#include <skiff/parquet/shred.hpp>

namespace skiff::parquet {

result<kv_list_shredder, parquet_error> kv_list_shredder::make(const leaf& key_leaf, const leaf& value_leaf) {
    auto bad = [&](const char* what) {
        return failure{parquet_error(errc::invalid_schema, "kv_list_shredder: " + key_leaf.dotted() + ": " + what)};
    };
    const auto& kp = key_leaf.path;
    const auto& vp = value_leaf.path;
    if (kp.size() != 4 || vp.size() != 4) return bad("leaves are not <list>.list.element.<field>");
    for (std::size_t i = 0; i < 3; ++i)
        if (kp[i] != vp[i]) return bad("key and value are not in the same list element");
    if (key_leaf.max_rep != 1 || value_leaf.max_rep != 1 || key_leaf.path_rep[1] != 1)
        return bad("the list must be the only repeated field on the path");
    // path_def: [list group, repeated group, element, field]
    if (key_leaf.path_def[2] != key_leaf.path_def[1]) return bad("the element must be required");
    if (key_leaf.type != physical_type::byte_array || value_leaf.type != physical_type::byte_array)
        return bad("key and value must be byte arrays");
    kv_list_shredder s;
    s._list_optional = key_leaf.path_def[0] == 1;
    s._list_def = key_leaf.path_def[0];
    s._element_def = key_leaf.path_def[2];
    s._repeat = 1;
    s._value_optional = value_leaf.max_def > value_leaf.path_def[2];
    return s;
}

result<void, parquet_error> kv_list_shredder::null_list(column_data& keys, column_data& values) const {
    if (!_list_optional) return failure{parquet_error(errc::value_mismatch, "kv_list_shredder: null for a required list")};
    keys.push_null(0, 0);
    values.push_null(0, 0);
    return ok();
}

result<void, parquet_error> kv_list_shredder::add(std::span<const kv_entry> entries, column_data& keys,
                                                  column_data& values) const {
    if (entries.empty()) {
        // Present but empty: the path stops at the list group.
        keys.push_null(_list_def, 0);
        values.push_null(_list_def, 0);
        return ok();
    }
    if (!_value_optional)
        for (const auto& e : entries)
            if (!e.value)
                return failure{parquet_error(errc::value_mismatch, "kv_list_shredder: null value for a required field")};
    std::uint8_t rep = 0;
    for (const auto& e : entries) {
        keys.push_bytes(e.key, rep);
        if (e.value) {
            values.push_bytes(*e.value, rep);
        } else {
            values.push_null(_element_def, rep);
        }
        rep = _repeat;
    }
    return ok();
}

} // namespace skiff::parquet
