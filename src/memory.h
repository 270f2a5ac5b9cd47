/*
 * memory.h - large buffers (weights, KV cache, activations) backed by huge
 * pages where the kernel offers them.
 *
 * On the virtual machines we run on, the first touch of a fresh 4 KiB page
 * costs about 16 us: 500 MB of weights is 120,000 faults, 1.7 s. Asking for
 * transparent huge pages (MADV_HUGEPAGE) makes that a few hundred 2 MiB faults.
 * Where the kernel says no, this is plain aligned memory; nothing else differs.
 */
#ifndef GPT_MEMORY_H
#define GPT_MEMORY_H

#include <stddef.h>

// `bytes` of uninitialised memory, 64-byte aligned (2 MiB aligned when large).
// NULL when out of memory. Free with free().
void *memory_alloc_large(size_t bytes);

#endif
