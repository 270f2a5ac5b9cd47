/* memory.c - see memory.h. */
#define _DEFAULT_SOURCE  // madvise, MADV_HUGEPAGE
#include "memory.h"

#include "bytes.h"

#include <stdlib.h>
#include <sys/mman.h>

enum { HUGE_PAGE = 2 << 20 };

void *memory_alloc_large(size_t bytes) {
    if (bytes == 0) bytes = 1;
    if (bytes < HUGE_PAGE) return aligned_alloc(64, round_up(bytes, 64));
    void *p = NULL;
    size_t rounded = round_up(bytes, HUGE_PAGE);
    if (posix_memalign(&p, HUGE_PAGE, rounded) != 0) return NULL;
#ifdef MADV_HUGEPAGE
    // Advice only: a kernel without transparent huge pages ignores or refuses
    // it, and the memory works the same.
    (void)madvise(p, rounded, MADV_HUGEPAGE);
#endif
    return p;
}
