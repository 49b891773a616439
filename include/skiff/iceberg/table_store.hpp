// One Iceberg table in an object store, the way a file-system ("Hadoop") catalog keeps it:
//   <prefix>/metadata/v<N>.metadata.json   every version, each written once, if absent
//   <prefix>/metadata/version-hint.text    N of the latest (a hint: readers probe past it)
//   <prefix>/metadata/*.avro               manifest lists and manifests
//   <prefix>/data/...                      Parquet data files
// Committing version N+1 is a put of v<N+1>.metadata.json with If-None-Match: * (an exclusive
// create on the local store): of two writers that read version N, exactly one succeeds and the
// other learns of the conflict, rebases on N+1 and tries N+2. No second system (no catalog
// service, no etcd) decides who won.
//
// Keys and locations: the metadata names files by URI (`location` + the part of the key after
// `prefix`: s3://bucket/warehouse/topic/data/...), which engines read; this module maps them
// back to keys to read and delete them, and never deletes a file outside its prefix.
//
// One core: the store's.
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/iceberg/errc.hpp>
#include <skiff/iceberg/table_metadata.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/storage/io_budget.hpp>
#include <skiff/storage/object_store.hpp>

#include <optional>
#include <span>
#include <stop_token>
#include <string>
#include <string_view>

namespace skiff::iceberg {

struct loaded_table {
    loaded_table() = default;
    int version = 0; // N of v<N>.metadata.json
    table_metadata metadata;
};

class table_store {
public:
    // prefix: the table's key prefix without a trailing '/'; location: the URI engines use for
    // the same place (the table's "location" in its metadata).
    table_store(storage::object_store& store, std::string prefix, std::string location);

    const std::string& prefix() const noexcept { return _prefix; }
    const std::string& location() const noexcept { return _location; }
    std::string metadata_key(int version) const;
    std::string uri_of(std::string_view key) const;
    // The key of a file this table's location holds; nullopt for a URI elsewhere (another
    // table's, another bucket's): never read-modified or deleted by this module.
    std::optional<std::string> key_of(std::string_view uri) const;

    // The latest version: the hint, then a probe for later versions (a writer may have died
    // between its commit and the hint, or two writers raced on it); without a usable hint, the
    // highest version listed. A hint that named another version is rewritten (best effort).
    // not_found when the table has no metadata file.
    runtime::task<result<loaded_table, iceberg_error>> load(std::stop_token st);
    // Writes `next` as version base_version + 1 if no writer has yet; conflict otherwise. Then
    // updates the hint (its failure is not the commit's: readers probe).
    runtime::task<result<int, iceberg_error>> commit(int base_version, const table_metadata& next, std::stop_token st);

    runtime::task<result<std::string, iceberg_error>> read(std::string key, std::stop_token st);
    runtime::task<result<void, iceberg_error>> write(std::string key, std::span<const char> body, std::stop_token st);
    runtime::task<result<void, iceberg_error>> remove_many(std::vector<std::string> keys, std::stop_token st);
    // Every key under <prefix>/<sub> (all pages).
    runtime::task<result<std::vector<storage::object_entry>, iceberg_error>> list(std::string sub, std::stop_token st);

    storage::object_store& store() noexcept { return _store; }
    // Every request of this table takes a permit of `b` first (normal priority: below flush
    // uploads), so sinks and maintenance share the broker's S3 budget. Null: none.
    void set_budget(storage::io_budget* b) noexcept { _budget = b; }

private:
    // A permit of the budget, or none without one; cancelled when `st` fires while waiting.
    runtime::task<result<std::optional<storage::io_budget::permit>, iceberg_error>> permit(std::stop_token st);
    runtime::task<result<storage::get_result, storage::store_error>> budgeted_get(std::string key, std::optional<storage::byte_range> r,
                                                                                 std::stop_token st);
    runtime::task<result<void, storage::store_error>> budgeted_put(std::string key, std::span<const char> body, bool if_absent,
                                                                  std::stop_token st);
    runtime::task<result<std::uint64_t, storage::store_error>> budgeted_size(std::string key, std::stop_token st);
    runtime::task<result<void, storage::store_error>> budgeted_remove_many(std::vector<std::string> keys, std::stop_token st);
    runtime::task<result<storage::list_result, storage::store_error>> budgeted_list(std::string prefix, std::string after,
                                                                                   std::string token, int max_keys,
                                                                                   std::stop_token st);
    runtime::task<result<std::optional<int>, iceberg_error>> read_hint(std::stop_token st);
    runtime::task<result<std::optional<int>, iceberg_error>> highest_listed(std::stop_token st);

    storage::object_store& _store;
    std::string _prefix;
    std::string _location;
    storage::io_budget* _budget = nullptr;
};

// The version in "v<N>.metadata.json" (the last path component of `key`); nullopt otherwise.
std::optional<int> metadata_version(std::string_view key);

} // namespace skiff::iceberg
