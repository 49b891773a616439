// Internal to the storage formats: the one batch-header check shared by split_batches,
// parse_batch, the segment decoder and the range walker. It tells "the bytes end inside this
// batch" (incomplete) apart from "this batch is wrong" (bad), which only the walker, reading a
// byte range that may end mid-batch, treats differently.
#pragma once

#include <skiff/storage/record_batch.hpp>

#include <cstddef>
#include <span>

namespace skiff::storage::detail {

enum class parse_step { ok, incomplete, bad };

// Validates the batch at the start of `in` (see parse_batch for the checks). On ok fills
// `out`. On incomplete and bad fills `err`. `full_size` is the batch's whole size
// (12 + batchLength) once the magic (byte 16) confirmed a v2 batch and the length is within
// limits, else 0, so a range reader knows how many bytes a cut-off batch needs.
parse_step parse_batch_prefix(std::span<const char> in, bool verify_crc, std::size_t max_batch_bytes,
                              batch_view& out, format_error& err, std::size_t& full_size);

} // namespace skiff::storage::detail
