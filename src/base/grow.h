/*
 * grow.h - a malloc'd array that grows: one rule and one overflow check for
 * every array the library fills without knowing its length in advance (a
 * file read to its end, a text's token ids, a file's tensor list, a token
 * stream's output). Header-only.
 *
 *     int32_t *ids = NULL;
 *     size_t n = 0, cap = 0;
 *     for each id:  if (grow_array(&ids, &cap, n + 1, sizeof *ids)) fail;
 *                   ids[n++] = id;
 *     free(ids);
 */
#ifndef GPT_GROW_H
#define GPT_GROW_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

// array_ptr is the address of an array pointer (int32_t **, char **, ...)
// whose allocation holds *cap elements of elem_size (> 0) bytes (NULL and
// 0 to start). Makes it hold at least `need` elements: when it does not, it is
// reallocated to the largest of need, twice *cap and 16 elements, its
// contents kept, and *cap says the new size; when it does, nothing happens.
// Returns 0; or -1, out of memory or a size beyond size_t, with the array
// and *cap as they were (still the caller's to free).
static inline int grow_array(void *array_ptr, size_t *cap, size_t need, size_t elem_size) {
    if (need <= *cap) return 0;
    size_t n = *cap <= SIZE_MAX / 2 ? 2 * *cap : SIZE_MAX;
    if (n < need) n = need;
    if (n < 16) n = 16;
    if (n > SIZE_MAX / elem_size) {
        n = SIZE_MAX / elem_size;  // the most there can be; enough if need fits
        if (n < need) return -1;
    }
    void *p;
    memcpy(&p, array_ptr, sizeof p);  // *array_ptr, whatever its pointer type
    p = realloc(p, n * elem_size);
    if (!p) return -1;
    memcpy(array_ptr, &p, sizeof p);
    *cap = n;
    return 0;
}

#endif
