/*
 * formats.c - what the format files share: the ModelInfo they fill
 * (formats.h). No format and no loading here.
 */
#include "model/formats.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/grow.h"

int model_info_add(ModelInfo *info, size_t *cap, const char *name, const char *dtype, int ndim,
                   const uint64_t *dims, uint64_t offset, uint64_t nbytes) {
    if (grow_array(&info->tensors, cap, info->n_tensors + 1, sizeof *info->tensors) != 0) return -1;
    TensorInfo *t = &info->tensors[info->n_tensors++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    snprintf(t->dtype, sizeof t->dtype, "%s", dtype);
    t->ndim = ndim > 8 ? 8 : ndim;
    for (int d = 0; d < t->ndim; d++) t->dims[d] = dims[d];
    t->offset = offset;
    t->nbytes = nbytes;
    return 0;
}

void model_info_free(ModelInfo *info) {
    if (!info) return;
    free(info->tensors);
    info->tensors = NULL;
    info->n_tensors = 0;
}
