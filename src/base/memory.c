/* memory.c - see memory.h. */
#define _DEFAULT_SOURCE  // madvise, MADV_HUGEPAGE, MAP_ANONYMOUS, MAP_NORESERVE
#include "base/memory.h"

#include "base/bytes.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>

enum { HUGE_PAGE = 2 << 20 };

#if defined(__SANITIZE_ADDRESS__)
#define GPT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPT_ASAN 1
#endif
#endif
#ifdef GPT_ASAN
#include <sanitizer/asan_interface.h>
void memory_poison(const void *p, size_t bytes) { ASAN_POISON_MEMORY_REGION(p, bytes); }
void memory_unpoison(const void *p, size_t bytes) { ASAN_UNPOISON_MEMORY_REGION(p, bytes); }
#else
void memory_poison(const void *p, size_t bytes) { (void)p, (void)bytes; }
void memory_unpoison(const void *p, size_t bytes) { (void)p, (void)bytes; }
#endif

// Advice only: a kernel without transparent huge pages ignores or refuses
// it, and the memory works the same.
static void advise_huge_pages(void *p, size_t bytes) {
#ifdef MADV_HUGEPAGE
    (void)madvise(p, bytes, MADV_HUGEPAGE);
#else
    (void)p, (void)bytes;
#endif
}

void *memory_alloc_large(size_t bytes) {
    if (bytes == 0) bytes = 1;
    if (bytes < HUGE_PAGE) return aligned_alloc(64, round_up(bytes, 64));
    void *p = NULL;
    size_t rounded = round_up(bytes, HUGE_PAGE);
    if (posix_memalign(&p, HUGE_PAGE, rounded) != 0) return NULL;
    advise_huge_pages(p, rounded);
    return p;
}

void *memory_reserve(size_t bytes) {
    if (bytes == 0) bytes = 1;
    int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
    if (bytes < HUGE_PAGE) {
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, flags, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    if (bytes > SIZE_MAX - 2 * (size_t)HUGE_PAGE) return NULL;
    // One huge page more than asked, to start on a huge-page boundary; the
    // unaligned head and tail go back at once.
    size_t rounded = round_up(bytes, HUGE_PAGE), mapped = rounded + HUGE_PAGE;
    unsigned char *p = mmap(NULL, mapped, PROT_READ | PROT_WRITE, flags, -1, 0);
    if (p == MAP_FAILED) return NULL;
    size_t head = round_up((size_t)p, HUGE_PAGE) - (size_t)p;
    if (head) munmap(p, head);
    if (mapped - head > rounded) munmap(p + head + rounded, mapped - head - rounded);
    advise_huge_pages(p + head, rounded);
    return p + head;
}

void memory_release(void *p, size_t bytes) {
    if (bytes == 0) bytes = 1;
    if (p) munmap(p, bytes < HUGE_PAGE ? bytes : round_up(bytes, HUGE_PAGE));
}
