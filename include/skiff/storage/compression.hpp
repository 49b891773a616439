// Kafka's record compression codecs (gzip, snappy, lz4, zstd) and the record-batch helpers
// built on them: decode the records of a compressed batch, rebuild a batch around a records
// section with another codec.
//
// Pure functions over caller-owned bytes, no I/O, callable from any core or thread. Input is
// never trusted: malformed or truncated data is a format_error (invalid / truncated), never a
// crash, and every decompression takes a limit on the bytes it may produce (too_large beyond
// it), so a small "decompression bomb" cannot make the caller allocate gigabytes.
//
// Wire formats, as Kafka's clients and broker use them:
//   gzip   RFC 1952 (zlib); concatenated members are read as one stream
//   snappy written in the xerial framing Kafka's Java broker and client write (magic
//          "\x82SNAPPY\0", two int32 versions, then int32-length-prefixed raw blocks); read
//          in that framing or as one raw snappy block, which librdkafka writes
//   lz4    the LZ4 frame format (KIP-57), written with independent 64 KiB blocks
//   zstd   zstd frames, read with the streaming decoder (Kafka's writers omit the content size)
#pragma once

#include <skiff/core/result.hpp>
#include <skiff/storage/record_batch.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace skiff::storage {

// `codec`'s encoding of `in`. compression_codec::none copies. Fails (invalid) only for an
// unknown codec or a library failure (out of memory).
result<std::string, format_error> compress(compression_codec codec, std::span<const char> in);

// Decodes `in` (see the formats above). Fails with too_large once the output would exceed
// `max_output` bytes, with invalid/truncated on malformed input or an unknown codec.
// compression_codec::none copies (still bounded by max_output).
result<std::string, format_error> decompress(compression_codec codec, std::span<const char> in,
                                             std::size_t max_output);

// The records of a batch, compressed or not. `records` point into `data` (the decompressed
// records section) for a compressed batch, else into the batch's own bytes. Moving keeps the
// views valid (a vector's buffer moves with it).
struct decoded_records {
    decoded_records() = default;
    std::vector<char> data;
    std::vector<record_view> records;
    // The uncompressed records section the views point into.
    std::span<const char> section;
};

// Decodes every record of a validated batch, decompressing it first (bounded by
// `max_uncompressed`). Fails as decompress does, or as parse_records does when the records
// disagree with the header (count, lengths, bytes left over).
result<decoded_records, format_error> decode_records(const batch_view& batch, std::size_t max_uncompressed);

// A copy of `header`'s batch (base offset, leader epoch, offset delta, timestamps, producer
// fields, record count) with `records` (an UNcompressed records section, as decode_records
// returns it) compressed with `codec`, `attributes` as its attributes (the codec bits are
// replaced by `codec`), `max_timestamp` as its max timestamp, a new batchLength and CRC.
result<std::string, format_error> rebuild_batch(const batch_view& header, std::span<const char> records,
                                                compression_codec codec, std::int16_t attributes,
                                                std::int64_t max_timestamp);

} // namespace skiff::storage
