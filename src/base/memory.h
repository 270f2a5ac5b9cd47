/*
 * memory.h - large buffers (weights, KV cache, activations) backed by huge
 * pages where the kernel offers them.
 *
 * The first touch of a fresh 4 KiB page is a page fault, microseconds each
 * on a virtual machine: 500 MB of weights is 120,000 faults, seconds before
 * the first token (docs/performance.md). Asking for transparent huge pages
 * (MADV_HUGEPAGE) makes that a few hundred 2 MiB faults.
 * Where the kernel says no, this is plain aligned memory; nothing else differs.
 */
#ifndef GPT_MEMORY_H
#define GPT_MEMORY_H

#include <stddef.h>

// `bytes` of uninitialised memory, 64-byte aligned (2 MiB aligned when large).
// NULL when out of memory. Free with free().
void *memory_alloc_large(size_t bytes);

// `bytes` of address space, zero-filled (2 MiB aligned when large), whose pages take
// memory only once they are first touched: an upper limit (a KV budget),
// not an allocation. It is mapped without a reservation of swap
// (MAP_NORESERVE), so that the kernel's overcommit check does not refuse a
// limit larger than the machine's memory; what is touched beyond what the
// machine has is then the kernel's out-of-memory killer's to decide, as with
// any memory touched late. NULL when the address space cannot be had. Give
// it back with memory_release(p, bytes) (NULL-safe).
void *memory_reserve(size_t bytes);
void memory_release(void *p, size_t bytes);

// Under AddressSanitizer, marks bytes of a reserved block that must not be
// read or written (its unused parts) and makes them usable again, so that a
// read past a part is reported as a heap overflow would be; nothing
// otherwise. Whoever poisons a part unpoisons it before memory_release (the
// address range may be mapped again): release does not, because a reserved
// range can be far larger than the memory used (a 200 GB KV budget has 25 GB
// of shadow).
void memory_poison(const void *p, size_t bytes);
void memory_unpoison(const void *p, size_t bytes);

#endif
