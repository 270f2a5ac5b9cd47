/*
 * llmc.c - llm.c checkpoints (karpathy/llm.c's gpt2_124M.bin, version 3,
 * float32): recognise, load and list (LLMC_FORMAT, formats.h).
 *
 * The file: a 256 x int32 header (magic 20240326, version 3 = float32, maxT,
 * V, L, NH, C, padded V), then the parameters grouped by kind across layers
 * in the tensor table's per-layer order (model.h's llm.c names: all layers'
 * ln1w, then all ln1b, ...), matrices stored (out, in), and wte padded to
 * padded-V rows. That is gpt's own layout for matrices, so the weights are
 * used in place from the mapping.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/bytes.h"
#include "model/formats.h"

#define LLMC_MAGIC 20240326u
#define LLMC_HEADER_BYTES 1024u

typedef struct {
    GPT2Config c;
    uint32_t version;
    size_t Vp;         // padded vocabulary rows of wte
    size_t n_floats;   // parameters in the file, padding included
} LlmcHeader;

static int llmc_header(const unsigned char *file, size_t size, const char *path, LlmcHeader *h, GptError *err) {
    if (size < LLMC_HEADER_BYTES)
        return gpt_error(err, "%s: file is %zu bytes, shorter than llm.c's %u-byte header", path, size,
                         LLMC_HEADER_BYTES);
    int32_t v[8];
    for (int k = 0; k < 8; k++) v[k] = (int32_t)rd32(file + 4 * k);
    if ((uint32_t)v[0] != LLMC_MAGIC) return gpt_error(err, "%s: not an llm.c checkpoint (bad magic)", path);
    h->version = (uint32_t)v[1];
    if (v[1] != 3)
        return gpt_error(err, "%s: llm.c checkpoint version %d%s; gpt reads version 3 (float32)", path, v[1],
                         v[1] == 5 ? " (bfloat16)" : "");
    GPT2Config *c = &h->c;
    *c = (GPT2Config){0};  // llm.c's GPT-2: its MLP, activation and attention, tied
    c->n_ctx = v[2];
    c->vocab_size = v[3];
    c->n_layer = v[4];
    c->n_head = v[5];
    c->n_embd = v[6];
    c->ln_eps = 1e-5f;  // llm.c's layernorm uses 1e-5, as GPT-2 does
    if (gpt2_config_validate(c, path, err) != 0) return -1;
    if (v[7] < v[3] || v[7] - v[3] > (1 << 20))
        return gpt_error(err, "%s: padded vocabulary %d is not %d or a little more", path, v[7], v[3]);
    h->Vp = (size_t)v[7];
    // The parameters: every tensor of the table, wte with its padded rows.
    h->n_floats = 0;
    for (size_t i = 0; i < gpt2_n_tensors(c); i++) {
        TensorSpec s;
        gpt2_tensor_spec(c, i, &s);
        h->n_floats += i == 0 ? h->Vp * (size_t)c->n_embd : s.numel;
    }
    // sizes are bounded by gpt2_config_validate: nothing here overflows 64 bits
    uint64_t want = LLMC_HEADER_BYTES + 4 * (uint64_t)h->n_floats;
    if (size != want)
        return gpt_error(err, "%s: file is %zu bytes; an llm.c checkpoint of the shape its header gives is %llu (%s)",
                         path, size, (unsigned long long)want, size < want ? "truncated?" : "damaged?");
    return 0;
}

// Where tensor i's floats start among the file's parameters. The file holds
// the table's kinds in order (the head, each layer kind for all layers, the
// tail); walking the table's layer-0 rows visits them in that order.
static size_t llmc_offset(const LlmcHeader *h, size_t i) {
    const GPT2Config *c = &h->c;
    size_t L = (size_t)c->n_layer, off = 0;
    TensorSpec s;
    gpt2_tensor_spec(c, i, &s);
    for (size_t j = 0; j < gpt2_n_tensors(c); j++) {
        TensorSpec t;
        gpt2_tensor_spec(c, j, &t);
        if (t.layer > 0) continue;  // layer 0 stands for its kind
        int same_kind = s.layer >= 0 ? t.layer == 0 && t.index_in_layer == s.index_in_layer : j == i;
        if (same_kind) return off + (s.layer > 0 ? (size_t)s.layer * s.numel : 0);
        size_t n = j == 0 ? h->Vp * (size_t)c->n_embd : t.numel;  // wte has Vp rows
        off += t.layer == 0 ? L * n : n;
    }
    return off;  // not reached: i is in the table
}

// A 256 x int32 header, the magic first (versions 3 = f32, 5 = bf16: the
// load says which it reads).
static int llmc_sniff(const unsigned char *head, size_t n, size_t file_size) {
    return n >= 4 && file_size >= LLMC_HEADER_BYTES && rd32(head) == LLMC_MAGIC;
}

// Validates the checkpoint mapped in m->map and hands its tensors to
// model_set_weights: llm.c stores matrices one row per output, as gpt holds
// them, so they are used in place (wte without its padded rows).
// m->tokenizer stays NULL (llm.c files carry none).
static int llmc_load(Model *m, const char *path, const WeightOptions *o, GptError *err) {
    LlmcHeader h;
    if (llmc_header(m->map.data, m->map.size, path, &h, err) != 0) return -1;
    m->config = h.c;
    const GPT2Config *c = &m->config;
    size_t nt = gpt2_n_tensors(c);
    TensorRef *t = calloc(nt, sizeof *t);
    if (!t) return gpt_error(err, "%s: out of memory", path);
    // The mapping is page-aligned and the header 1024 bytes: every tensor is
    // float-aligned in place. Matrices are (out, in), one row per output;
    // wte's first V of Vp rows are the vocabulary.
    const unsigned char *params = m->map.data + LLMC_HEADER_BYTES;
    for (size_t i = 0; i < nt; i++)
        t[i] = (TensorRef){DTYPE_F32, LAYOUT_OUT_IN, params + 4 * llmc_offset(&h, i)};
    int rc = model_set_weights(m, t, o, path, err);
    free(t);
    return rc;
}

static int llmc_list(const unsigned char *file, size_t size, ModelInfo *info, GptError *err) {
    LlmcHeader h;
    if (llmc_header(file, size, info->file, &h, err) != 0) return -1;
    info->version = h.version;
    info->data_offset = LLMC_HEADER_BYTES;
    const GPT2Config *c = &h.c;
    uint64_t L = (uint64_t)c->n_layer;
    size_t cap = 0;
    // One entry per kind, as llm.c stores them: layer tensors (L, ...),
    // matrices (out, in), wte with its padded rows.
    for (size_t i = 0; i < gpt2_n_tensors(c); i++) {
        TensorSpec s;
        gpt2_tensor_spec(c, i, &s);
        if (s.layer > 0) continue;
        uint64_t dims[3];
        int nd = 0;
        if (s.layer == 0) dims[nd++] = L;
        if (s.kind == TENSOR_MATRIX) {
            dims[nd++] = s.dims[1];
            dims[nd++] = s.dims[0];
        } else {
            dims[nd++] = i == 0 ? h.Vp : s.dims[0];
            if (s.ndim == 2) dims[nd++] = s.dims[1];
        }
        uint64_t n = 1;
        for (int d = 0; d < nd; d++) n *= dims[d];
        if (model_info_add(info, &cap, s.llmc_name, "F32", nd, dims,
                           LLMC_HEADER_BYTES + 4 * (uint64_t)llmc_offset(&h, i), 4 * n) != 0)
            return gpt_error(err, "%s: out of memory", info->file);
    }
    return 0;
}

const ModelFormat LLMC_FORMAT = {"llm.c", llmc_sniff, llmc_load, llmc_list};
