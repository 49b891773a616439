#include "log_instruments.hpp"

namespace skiff::storage::detail {

namespace {

const char* op_label(store_op o) noexcept {
    switch (o) {
    case store_op::put: return "put";
    case store_op::get: return "get";
    case store_op::get_range: return "get_range";
    case store_op::list: return "list";
    case store_op::del: return "delete";
    case store_op::count_: break;
    }
    return "other";
}

const char* kind_label(key_kind k) noexcept {
    switch (k) {
    case key_kind::kfs: return "kfs";
    case key_kind::index: return "index";
    case key_kind::manifest: return "manifest";
    case key_kind::kfst: return "kfst";
    case key_kind::none:
    case key_kind::count_: break;
    }
    return "none";
}

} // namespace

log_instruments log_instruments::make() {
    log_instruments m;
    if (!metrics::metrics_enabled()) return m;
    m.enabled = true;
    auto& reg = metrics::registry::local();
    using metrics::unit;

    m.flushes = reg.counter("skiff_flushes_total", "Segments flushed: both objects stored and committed.");
    m.flush_records = reg.counter("skiff_flush_records_total", "Records in committed segments.");
    m.flush_failures = reg.counter("skiff_flush_failures_total",
                                   "Segments whose upload was abandoned (the log closed first); never acknowledged.");
    m.flush_bytes[0] = reg.counter("skiff_flush_bytes_total", "Bytes of committed segments' objects.",
                                   {{"kind", "kfs"}}, unit::bytes);
    m.flush_bytes[1] = reg.counter("skiff_flush_bytes_total", "Bytes of committed segments' objects.",
                                   {{"kind", "index"}}, unit::bytes);
    m.upload_retries[0] = reg.counter("skiff_flush_upload_retries_total",
                                      "Segment uploads the log sent again after a failed PUT.", {{"kind", "kfs"}});
    m.upload_retries[1] = reg.counter("skiff_flush_upload_retries_total",
                                      "Segment uploads the log sent again after a failed PUT.", {{"kind", "index"}});
    m.upload_already_landed =
        reg.counter("skiff_flush_upload_already_landed_total",
                    "Segment PUTs refused as already existing where the object held our own bytes (an earlier "
                    "attempt landed, its answer was lost).");
    m.fences = reg.counter("skiff_partition_fenced_total",
                           "Partition logs that found another owner's object under one of their keys and stopped.");
    m.flush_duration = reg.histogram("skiff_flush_duration_seconds",
                                     "From the start of a segment's upload to its commit (both PUTs, retries, "
                                     "waiting for earlier segments).",
                                     unit::seconds);
    m.flush_size = reg.histogram("skiff_flush_size_bytes", "Size of a flushed segment (.kfs).", unit::bytes);
    m.flushes_in_flight = reg.gauge("skiff_flushes_in_flight", "Segments uploading.");
    m.flush_puts = reg.counter("skiff_flush_puts_total",
                               "PUT requests of segment uploads (.kfs and .index, retries included): the request cost.");
    m.hedges = reg.counter("skiff_store_hedges_total",
                           "Segment PUTs and GETs sent a second time because the first was slower than the recent p99.");
    m.put_size = reg.histogram("skiff_flush_put_size_bytes", "Bytes carried by one segment-upload PUT.", unit::bytes);
    m.segment_records = reg.histogram("skiff_flush_segment_records", "Records in one committed segment.", unit::none);
    m.flush_wait = reg.histogram("skiff_flush_wait_duration_seconds",
                                 "From the first append of a segment to the start of its upload.", unit::seconds);
    m.time_index_writes = reg.counter("skiff_store_time_index_writes_total",
                                      "Time-index sidecars (.kfst) stored, by flushes, merges and compactions.");
    m.time_index_failures = reg.counter(
        "skiff_store_time_index_failures_total",
        "Time-index sidecars (.kfst) not stored after their bounded attempts; readers fall back to the segment.");
    m.time_index_skipped = reg.counter("skiff_store_time_index_skipped_total",
                                       "Time-index sidecars (.kfst) not sent because a request budget is in force.");

    const store_op ops[] = {store_op::put, store_op::get, store_op::get_range};
    for (auto op : ops) {
        for (auto k : {key_kind::kfs, key_kind::index, key_kind::manifest, key_kind::kfst}) {
            if (op == store_op::get_range && k != key_kind::kfs) continue; // indexes and manifests are read whole
            const metrics::labels l{{"op", op_label(op)}, {"kind", kind_label(k)}};
            auto& s = m.slot(op, k);
            s.requests = reg.counter("skiff_store_requests_total", "Object store requests made by partition logs.", l);
            s.sent = reg.counter("skiff_store_sent_bytes_total", "Bytes partition logs stored.", l, unit::bytes);
            s.received = reg.counter("skiff_store_received_bytes_total", "Bytes partition logs read from the store.",
                                     l, unit::bytes);
            s.latency = reg.histogram("skiff_store_request_duration_seconds",
                                      "Latency of one object store request (for S3: all its attempts).",
                                      unit::seconds, l);
        }
    }
    for (auto op : {store_op::list, store_op::del}) {
        const metrics::labels l{{"op", op_label(op)}, {"kind", "none"}};
        auto& s = m.slot(op, key_kind::none);
        s.requests = reg.counter("skiff_store_requests_total", "Object store requests made by partition logs.", l);
        s.received = reg.counter("skiff_store_received_bytes_total", "Bytes partition logs read from the store.", l,
                                 unit::bytes);
        s.latency = reg.histogram("skiff_store_request_duration_seconds",
                                  "Latency of one object store request (for S3: all its attempts).", unit::seconds, l);
    }
    for (std::size_t o = 0; o < n_store_ops; ++o) {
        for (std::size_t c = 1; c < n_store_classes; ++c) {
            m.store_errors[o * n_store_classes + c] =
                reg.counter("skiff_store_errors_total", "Object store requests of partition logs that failed, by class.",
                            {{"op", op_label(static_cast<store_op>(o))}, {"class", to_string(static_cast<errc>(c))}});
        }
    }

    m.appends = reg.counter("skiff_log_appends_total", "Record sets appended to partition logs.");
    m.appended_records = reg.counter("skiff_log_appended_records_total", "Records appended to partition logs.");
    m.appended_bytes = reg.counter("skiff_log_appended_bytes_total", "Record-set bytes appended to partition logs.", {},
                                   unit::bytes);
    m.append_timeouts = reg.counter("skiff_log_append_timeouts_total",
                                    "Durable appends not acknowledged within the append timeout.");
    m.room_waits = reg.counter("skiff_log_room_waits_total",
                               "Appends that waited for room under the pending-bytes bounds (the store was behind).");
    m.room_timeouts = reg.counter("skiff_log_room_timeouts_total",
                                  "Appends that found no room within their request timeout (nothing written).");
    m.room_wait = reg.histogram("skiff_log_room_wait_duration_seconds",
                                "How long an append that had to wait for room waited.", unit::seconds);
    m.buffered_bytes = reg.gauge("skiff_log_buffered_bytes", "Appended bytes not yet sealed into a segment.", {},
                                 unit::bytes);
    m.in_flight_bytes = reg.gauge("skiff_log_in_flight_bytes",
                                  "Bytes of sealed segments (.kfs + .index) not yet committed.", {}, unit::bytes);

    m.cache_hits = reg.counter("skiff_cache_hits_total", "Segment reads served from the in-memory segment cache.");
    m.cache_misses = reg.counter("skiff_cache_misses_total", "Segment reads that had to go to the object store.");
    m.cache_evictions = reg.counter("skiff_cache_evictions_total", "Segments dropped from the cache to make room.");
    m.prefetches = reg.counter("skiff_cache_prefetches_total", "Read-ahead GETs of the next segment.");
    m.cache_bytes = reg.gauge("skiff_cache_bytes", "Bytes of segments held in the cache.", {}, unit::bytes);

    m.restores = reg.counter("skiff_restores_total", "Partitions restored from the object store.");
    m.restore_failures = reg.counter("skiff_restore_failures_total", "Partition restores that failed.");
    m.restored_segments = reg.counter("skiff_restore_segments_total", "Segments found by restores.");
    m.corrupt_segments = reg.counter("skiff_restore_corrupt_segments_total",
                                     "Newest segments with a missing or wrong footer found by restores (not served).");
    m.repairs = reg.counter("skiff_restore_repairs_total", "Missing .index files rebuilt and uploaded.");
    m.repair_failures = reg.counter("skiff_restore_repair_failures_total", "Index rebuilds that failed.");
    m.orphans[0] = reg.counter("skiff_restore_orphans_total", "Orphan objects found by restores.", {{"kind", "kfs"}});
    m.orphans[1] = reg.counter("skiff_restore_orphans_total", "Orphan objects found by restores.", {{"kind", "index"}});
    m.restore_duration = reg.histogram("skiff_restore_duration_seconds", "Time to restore one partition.",
                                       unit::seconds);
    m.restores_from_manifest = reg.counter("skiff_restore_from_manifest_total",
                                           "Restores that started from a partition manifest instead of a full LIST.");
    m.manifests_unusable = reg.counter("skiff_restore_manifests_unusable_total",
                                       "Manifests restore skipped because they were corrupt or named another partition.");
    m.verify_mismatches[0] = reg.counter("skiff_manifest_verify_mismatches_total",
                                         "Differences between a manifest and the bucket found after restore.",
                                         {{"kind", "missing"}});
    m.verify_mismatches[1] = reg.counter("skiff_manifest_verify_mismatches_total",
                                         "Differences between a manifest and the bucket found after restore.",
                                         {{"kind", "unlisted"}});
    m.verify_mismatches[2] = reg.counter("skiff_manifest_verify_mismatches_total",
                                         "Differences between a manifest and the bucket found after restore.",
                                         {{"kind", "merge"}});
    m.manifest_writes = reg.counter("skiff_manifest_writes_total", "Partition manifests written.");
    m.manifest_write_failures = reg.counter("skiff_manifest_write_failures_total",
                                            "Partition manifest writes that failed (retried later).");
    m.retention_segments = reg.counter("skiff_retention_segments_total",
                                       "Segments that left partition logs by retention or DeleteRecords.");
    m.retention_bytes = reg.counter("skiff_retention_bytes_total",
                                    "Bytes of .kfs that left partition logs by retention or DeleteRecords.", {},
                                    unit::bytes);
    m.deleted_objects = reg.counter("skiff_lifecycle_deleted_objects_total",
                                    "Objects (segments, indexes, old manifests) deleted from the store.");
    m.delete_failures = reg.counter("skiff_lifecycle_delete_failures_total",
                                    "Batched deletes that failed (tried again on a later tick).");
    m.merges = reg.counter("skiff_merges_total", "Segment merges stored (small adjacent segments into one).");
    m.merge_sources = reg.counter("skiff_merge_source_segments_total", "Segments that merges replaced.");
    m.merge_bytes = reg.counter("skiff_merge_bytes_total", "Bytes of merged .kfs written.", {}, unit::bytes);
    m.merge_failures = reg.counter("skiff_merge_failures_total",
                                   "Merges that failed (a GET or PUT failed, or the log changed under them); tried again later.");
    m.compactions = reg.counter("skiff_compactions_total", "Compaction passes over a partition's compactable segments.");
    m.compacted_segments = reg.counter("skiff_compaction_segments_total", "Segments compaction rewrote.");
    m.compaction_bytes_in = reg.counter("skiff_compaction_read_bytes_total", "Bytes of segments compaction read.", {},
                                        unit::bytes);
    m.compaction_records_removed = reg.counter("skiff_compaction_records_removed_total",
                                               "Records compaction removed (older versions of a key, expired tombstones).");
    m.compaction_failures = reg.counter("skiff_compaction_failures_total",
                                        "Compaction passes that stopped (a request failed, or the log changed); tried again later.");
    m.background_skipped = reg.counter(
        "skiff_lifecycle_not_owner_total",
        "Background changes (manifest, deletes, merge, compaction) not made because this broker's lease no longer covered them.");
    return m;
}

} // namespace skiff::storage::detail
