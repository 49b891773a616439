// Walking the committed batches of a partition log in offset order, for whoever rebuilds
// state from the log (the broker's producer table, offset-for-timestamp lookups).
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/runtime/task.hpp>
#include <skiff/storage/object_store.hpp>
#include <skiff/storage/partition_log.hpp>
#include <skiff/storage/record_batch.hpp>

#include <cstdint>
#include <functional>
#include <stop_token>

namespace skiff::storage {

// Calls visit(batch) for each committed batch from the one holding `from` onward, in offset
// order, until visit returns false or the high watermark (as it moves) is reached. Reads
// return whole batches, so the first batch may start before `from`. The batch_view points
// into a buffer that lives only during that visit call.
//
// Errors: the first failed read (see partition_log::read: invalid_argument when `from` is
// outside the log, corrupt, a store error); errc::cancelled when `st` fires. Stops quietly
// at bytes that do not parse as a batch (a read only returns batches it validated).
// On the log's core.
runtime::task<result<void, store_error>> walk_committed(partition_log& log, std::int64_t from,
                                                        std::function<bool(const batch_view&)> visit,
                                                        std::stop_token st = {});

} // namespace skiff::storage
