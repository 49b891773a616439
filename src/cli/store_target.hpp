// Opening the store a command names on its command line: `s3://BUCKET[/NAMESPACE]` or a local
// data directory (whose namespace comes separately). Shared by `skiff fsck` and `skiff cat`;
// `skiff sql` should use it too rather than keep its own copy.
#pragma once

#include "s3_config.hpp"

#include <skiff/core/result.hpp>
#include <skiff/s3/client.hpp>
#include <skiff/storage/object_store.hpp>

#include <memory>
#include <string>

namespace skiff::cli {

struct store_target {
    store_target() = default;
    // Declared before the store: an s3_store borrows the client, so the client goes last.
    std::unique_ptr<s3::client> client;
    std::unique_ptr<storage::object_store> store;
    std::string ns;
};

struct store_target_error {
    int status = 1;      // the exit status: 2 for a target that cannot name a store, 1 otherwise
    std::string message; // one sentence, without the "skiff: " prefix
};

// `s3://BUCKET` or `s3://BUCKET/NS` (trailing slashes ignored; the namespace may contain '/'):
// an s3_store with the settings of make_s3_config(flags), namespace NS or `default_ns`.
// Anything else is a local data directory: a local_store rooted there, namespace `default_ns`.
// An empty namespace becomes "default".
result<store_target, store_target_error> open_store_target(const std::string& target, const std::string& default_ns,
                                                           const s3_flags& flags);

} // namespace skiff::cli
