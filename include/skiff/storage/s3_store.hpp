// The S3 object store: object_store over s3::client. Key K lives at <prefix>K in the bucket,
// where "s3://bucket/some/prefix" gives the prefix "some/prefix/" (a '/' is added when
// missing, so "s3://b/p" and "s3://b/p/" are the same store) and "s3://bucket" none.
//
// put sends x-amz-checksum-crc32c (S3 verifies the body against it) and, for if_absent,
// If-None-Match: * (S3's conditional write: the PUT fails 412 when the key exists, atomically
// on the server). get, size (HEAD), remove and list (ListObjectsV2, keys returned without the
// store's prefix) map one-to-one onto S3 operations; the client retries transient failures
// under its own deadline, so an error from here has already been retried. put_once sends one
// request and leaves the retry to the caller (flush uploads, docs/retries.md). remove_many
// sends DeleteObjects, one request per 1000 keys.
//
// Every S3 request answered 503 / 429 / SlowDown calls the store's throttle observer at once,
// retried or not, and a failed operation whose last answer was one carries
// store_error::throttled. Metrics: the client's `kind` label is set here from the key
// (metric_kind), so the s3 module needs to know nothing about storage's file names.
//
// Errors keep the S3 client's sentence, prefixed with the operation and the object:
//   s3::errc::retryable, bad_response          → transient
//   not_found, precondition_failed, cancelled, deadline_exceeded → the same
//   InvalidRange (HTTP 416)                    → invalid_argument
//   access_denied, signature_mismatch, invalid_request, config → permanent
//
// A store borrows its client: both belong to one core, and the client must outlive the store.
#pragma once

#include <skiff/storage/object_store.hpp>

#include <memory>
#include <string>
#include <string_view>

namespace skiff::s3 {
class client;
struct error;
struct request_options;
} // namespace skiff::s3

namespace skiff::storage {

class s3_store final : public object_store {
public:
    // `url` is "s3://bucket" or "s3://bucket/prefix". Fails with errc::invalid_argument when
    // it is not of that form. Does no I/O (the bucket is not checked).
    static result<std::unique_ptr<s3_store>, store_error> create(s3::client& client, std::string_view url);

    runtime::task<result<void, store_error>> put(std::string key, std::span<const char> body, bool if_absent,
                                                 std::stop_token st) override;
    runtime::task<result<void, store_error>> put_once(std::string key, std::span<const char> body, bool if_absent,
                                                      std::stop_token st) override;
    runtime::task<result<get_result, store_error>> get(std::string key, std::optional<byte_range> range,
                                                       std::stop_token st) override;
    runtime::task<result<std::uint64_t, store_error>> size(std::string key, std::stop_token st) override;
    runtime::task<result<void, store_error>> remove(std::string key, std::stop_token st) override;
    // DeleteObjects in batches of s3::max_delete_keys (duplicates sent once), one batch after
    // the other. Every key is checked first (check_key): one invalid key fails the call with
    // invalid_argument before any request. Keys S3 refuses one by one do not stop the
    // batches that follow; the call then fails with the first refusal mapped as above (a
    // permanent one preferred over a transient one), naming its key and how many keys were
    // not removed, and calls the throttle observer once per batch with a per-key SlowDown.
    // A batch that fails as a whole (after the client's retries) ends the call at once with
    // that error: the next batch would only spend another retry budget on the same outage.
    runtime::task<result<void, store_error>> remove_many(std::vector<std::string> keys, std::stop_token st) override;
    // next_token is S3's continuation token.
    runtime::task<result<list_result, store_error>> list(std::string prefix, std::string start_after,
                                                         std::string token, int max_keys,
                                                         std::stop_token st) override;
    std::string describe() const override; // "s3://bucket/prefix/"

    const std::string& bucket() const noexcept { return _bucket; }
    const std::string& prefix() const noexcept { return _prefix; }
    // The S3 key that holds `key`.
    std::string object_key(std::string_view key) const;

    // The error mapping above; `what` is e.g. "put of 's3://bucket/key'".
    static store_error map_error(const s3::error& e, std::string_view what);

    // The `kind` label of the S3 client's metrics for a storage key: "kfs" for segments,
    // "index" for their indexes, "other" for anything else.
    static std::string_view metric_kind(std::string_view key) noexcept;

private:
    s3_store(s3::client& client, std::string bucket, std::string prefix);
    // The kind label and the throttle forwarding every request of this store carries.
    void fill(s3::request_options& o, std::string_view key) const;
    runtime::task<result<void, store_error>> put_with(std::string key, std::span<const char> body, bool if_absent,
                                                      int max_attempts, std::stop_token st);

    s3::client& _client;
    std::string _bucket;
    std::string _prefix; // empty or ending in '/'
};

} // namespace skiff::storage
