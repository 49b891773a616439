#include <skiff/core/allocator.hpp>

#include <malloc.h>

namespace skiff {

void tune_allocator() noexcept {
#if defined(__GLIBC__)
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
#endif
}

} // namespace skiff
