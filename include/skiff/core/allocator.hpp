// Process-wide allocator settings for a broker that moves multi-MiB buffers (segments,
// S3 bodies) all the time. Call once at start, before any threads.
#pragma once

namespace skiff {

// glibc returns freed blocks above its mmap threshold to the kernel, so every new 1-8 MiB
// body is faulted in page by page again; profiling the S3 client showed ~60% of large-GET
// CPU there (docs/benchmarks.md). Raising the mmap and trim thresholds keeps such buffers
// in the heap for reuse.
void tune_allocator() noexcept;

} // namespace skiff
