/*
 * lora.c - reads PEFT LoRA adapters and llama.cpp's GGUF LoRA files and
 * says which matrices of a GPT-2 they change, by PEFT's rules and
 * llama.cpp's (lora.h). The merging itself is model_set_weights'
 * (model.c); the safetensors header and the GGUF file are read by
 * safetensors.c's and gguf.c's readers (formats.h).
 */
#include "model/lora.h"

#include <cJSON.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/fileio.h"
#include "model/formats.h"

static const char TENSOR_PREFIX[] = "base_model.model.";
static const char MODEL_PREFIX[] = "transformer.";  // GPT2LMHeadModel's; GPT2Model's names have none
// The most names target_modules may list (check_config refuses more).
enum { MAX_TARGETS = 256 };

// One module's tensors in the file.
typedef struct {
    char module[96];  // "transformer.h.0.attn.c_attn", as the file names it
    int has_a, has_b;
    SafetensorsEntry a, b;
    int used;  // targeted: becomes a delta
} Module;

struct LoraAdapter {
    char *config_path, *st_path;
    double scale;  // the request's
    cJSON *config;
    long r;
    double alpha;
    int rslora;
    MappedFile map;
    const unsigned char *data;  // the data region
    Module *modules;            // (n_modules)
    size_t n_modules;
    int prefixed;  // its names carry "transformer."
    int gguf;      // a GGUF file: modules named "blk.N.attn_qkv.weight", alpha its adapter.lora.alpha
};

// ---------------------------------------------------------------------------
// adapter_config.json

// Keys whose value must be false (or absent), and keys whose value must be
// null or empty: what gpt does not merge.
static const struct {
    const char *key, *why;
} MUST_BE_FALSE[] = {
    {"use_dora", "DoRA's magnitude vector is not merged by gpt"},
    {"lora_bias", "a trained lora_B bias is not merged by gpt"},
};
static const struct {
    const char *key, *why;
} MUST_BE_EMPTY[] = {
    {"modules_to_save", "whole replaced modules are not read by gpt"},
    {"layer_replication", "replicated layers are not built by gpt"},
    {"exclude_modules", "gpt does not implement exclusions"},
    {"target_parameters", "LoRA on parameters is not merged by gpt"},
    {"alora_invocation_tokens", "activated LoRA is not applied by gpt"},
    {"trainable_token_indices", "trained token rows are not read by gpt"},
};

static int is_empty(const cJSON *v) {
    return !v || cJSON_IsNull(v) || ((cJSON_IsArray(v) || cJSON_IsObject(v)) && !v->child) ||
           (cJSON_IsString(v) && !*v->valuestring);
}

static int check_config(LoraAdapter *a, GptError *err) {
    const char *path = a->config_path;
    const cJSON *c = a->config, *v;
    if ((v = cJSON_GetObjectItemCaseSensitive(c, "peft_type")) && !cJSON_IsNull(v) &&
        !(cJSON_IsString(v) && !strcmp(v->valuestring, "LORA")))
        return gpt_error(err, "%s: peft_type %.40s: gpt reads LORA adapters only", path,
                         cJSON_IsString(v) ? v->valuestring : "(not a string)");
    for (size_t i = 0; i < sizeof MUST_BE_FALSE / sizeof *MUST_BE_FALSE; i++)
        if ((v = cJSON_GetObjectItemCaseSensitive(c, MUST_BE_FALSE[i].key)) && !cJSON_IsNull(v) && !cJSON_IsFalse(v))
            return gpt_error(err, "%s: %s is %s: %s", path, MUST_BE_FALSE[i].key, cJSON_IsTrue(v) ? "true" : "set",
                             MUST_BE_FALSE[i].why);
    for (size_t i = 0; i < sizeof MUST_BE_EMPTY / sizeof *MUST_BE_EMPTY; i++)
        if (!is_empty(cJSON_GetObjectItemCaseSensitive(c, MUST_BE_EMPTY[i].key)))
            return gpt_error(err, "%s: %s is set: %s", path, MUST_BE_EMPTY[i].key, MUST_BE_EMPTY[i].why);
    if ((v = cJSON_GetObjectItemCaseSensitive(c, "bias")) && !cJSON_IsNull(v) &&
        !(cJSON_IsString(v) && !strcmp(v->valuestring, "none")))
        return gpt_error(err,
                         "%s: bias %.40s: gpt merges adapters with bias \"none\" only (trained biases are not "
                         "read)",
                         path, cJSON_IsString(v) ? v->valuestring : "(not a string)");
    v = cJSON_GetObjectItemCaseSensitive(c, "r");
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 || v->valuedouble > 65536)
        return gpt_error(err, "%s: r must be an integer in [1, 65536]", path);
    a->r = (long)v->valuedouble;
    a->alpha = 8;  // PEFT's default
    if ((v = cJSON_GetObjectItemCaseSensitive(c, "lora_alpha")) && !cJSON_IsNull(v)) {
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
            return gpt_error(err, "%s: lora_alpha must be a number", path);
        a->alpha = v->valuedouble;
    }
    static const char *const BOOLS[] = {"use_rslora", "fan_in_fan_out"};
    for (size_t i = 0; i < 2; i++)
        if ((v = cJSON_GetObjectItemCaseSensitive(c, BOOLS[i])) && !cJSON_IsNull(v) && !cJSON_IsBool(v))
            return gpt_error(err, "%s: %s must be true or false", path, BOOLS[i]);
    a->rslora = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "use_rslora"));
    v = cJSON_GetObjectItemCaseSensitive(c, "target_modules");
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v) && !cJSON_IsArray(v))
        return gpt_error(err, "%s: target_modules must be a string or a list of strings", path);
    for (const cJSON *e = cJSON_IsArray(v) ? v->child : NULL; e; e = e->next)
        if (!cJSON_IsString(e)) return gpt_error(err, "%s: target_modules must be a string or a list of strings", path);
    if (cJSON_IsArray(v) && cJSON_GetArraySize(v) > MAX_TARGETS)
        return gpt_error(err, "%s: target_modules lists more than %d names", path, MAX_TARGETS);
    v = cJSON_GetObjectItemCaseSensitive(c, "layers_to_transform");
    if (v && !cJSON_IsNull(v) && !cJSON_IsNumber(v) && !cJSON_IsArray(v))
        return gpt_error(err, "%s: layers_to_transform must be an integer or a list of integers", path);
    for (const cJSON *e = cJSON_IsArray(v) ? v->child : v; e && !cJSON_IsNull(e); e = cJSON_IsArray(v) ? e->next : NULL)
        if (!cJSON_IsNumber(e) || e->valuedouble != floor(e->valuedouble))
            return gpt_error(err, "%s: layers_to_transform must be an integer or a list of integers", path);
    v = cJSON_GetObjectItemCaseSensitive(c, "layers_pattern");
    if (v && !cJSON_IsNull(v) && !cJSON_IsString(v) && !cJSON_IsArray(v))
        return gpt_error(err, "%s: layers_pattern must be a string or a list of strings", path);
    for (const cJSON *e = cJSON_IsArray(v) ? v->child : NULL; e; e = e->next)
        if (!cJSON_IsString(e)) return gpt_error(err, "%s: layers_pattern must be a string or a list of strings", path);
    static const char *const PATTERNS[] = {"rank_pattern", "alpha_pattern"};
    for (size_t i = 0; i < 2; i++) {
        v = cJSON_GetObjectItemCaseSensitive(c, PATTERNS[i]);
        if (v && !cJSON_IsNull(v) && !cJSON_IsObject(v))
            return gpt_error(err, "%s: %s must be an object", path, PATTERNS[i]);
        for (const cJSON *e = v && cJSON_IsObject(v) ? v->child : NULL; e; e = e->next) {
            int ok = cJSON_IsNumber(e) && isfinite(e->valuedouble);
            if (i == 0)
                ok = ok && e->valuedouble == floor(e->valuedouble) && e->valuedouble >= 1 && e->valuedouble <= 65536;
            if (!ok)
                return gpt_error(err, "%s: %s[\"%.60s\"] must be %s", path, PATTERNS[i], e->string,
                                 i == 0 ? "an integer in [1, 65536]" : "a number");
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------
// Python regular expressions as POSIX extended ones

// Compiles Python regular expression `py` as a POSIX one (REG_EXTENDED)
// that must match all of a name: "^(" py ")$", with \d as [0-9] and the
// lazy *? +? ?? as the greedy ones (the same matches when the whole name
// must match). 0, or -1 with err naming `field` in `path`.
static int compile(regex_t *re, const char *prefix, const char *py, const char *suffix, const char *path,
                   const char *field, GptError *err) {
    size_t n = strlen(py);
    char *s = malloc(strlen(prefix) + 5 * n + strlen(suffix) + 1);
    if (!s) return gpt_error(err, "%s: out of memory", path);
    char *o = s + sprintf(s, "%s", prefix);
    for (size_t i = 0; i < n; i++) {
        if (py[i] == '(' && py[i + 1] == '?') {
            free(s);
            return gpt_error(err, "%s: %s %.80s: (?...) is a Python construct gpt's regular expressions lack", path,
                             field, py);
        }
        if (py[i] == '\\' && py[i + 1] == 'd') {
            o += sprintf(o, "[0-9]"), i++;
            continue;
        }
        if (py[i] == '\\' && py[i + 1]) {
            *o++ = py[i++];
            *o++ = py[i];
            continue;
        }
        *o++ = py[i];
        if ((py[i] == '*' || py[i] == '+' || py[i] == '?') && py[i + 1] == '?') i++;
    }
    strcpy(o, suffix);
    int rc = regcomp(re, s, REG_EXTENDED);
    free(s);
    if (rc != 0) return gpt_error(err, "%s: %s %.80s: not a regular expression gpt can read", path, field, py);
    return 0;
}

// Whether the regular expression prefix + py + suffix matches name; the
// text of its last group into group (cap bytes) when group is not NULL.
// 1, 0, or -1 with err set.
static int matches(const char *prefix, const char *py, const char *suffix, const char *name, char *group, size_t cap,
                   const char *path, const char *field, GptError *err) {
    regex_t re;
    if (compile(&re, prefix, py, suffix, path, field, err) != 0) return -1;
    regmatch_t m[16];
    size_t g = re.re_nsub;  // the last group: the suffix's, when it has one
    int hit = g < 16 && regexec(&re, name, g + 1, m, 0) == 0;
    if (hit && group && m[g].rm_so >= 0)
        snprintf(group, cap, "%.*s", (int)(m[g].rm_eo - m[g].rm_so), name + m[g].rm_so);
    regfree(&re);
    return hit;
}

// ---------------------------------------------------------------------------
// which modules: PEFT's check_target_module_exists and get_pattern_key

// The layer index PEFT finds in `name` for layers_to_transform, or -1.
static long layer_index(const cJSON *config, const char *name, const char *path, GptError *err, int *failed) {
    const cJSON *lp = cJSON_GetObjectItemCaseSensitive(config, "layers_pattern");
    char digits[32] = "";
    int hit = 0;
    if (is_empty(lp)) {
        hit = matches("^.*\\.[^.]*\\.([0-9]+)\\.", "", "", name, digits, sizeof digits, path, "layers_pattern", err);
    } else {
        for (const cJSON *p = cJSON_IsArray(lp) ? lp->child : lp; p && !hit; p = cJSON_IsArray(lp) ? p->next : NULL) {
            hit = matches("^.*\\.(", p->valuestring, ")\\.([0-9]+)\\.", name, digits, sizeof digits, path,
                          "layers_pattern", err);
            if (hit < 0) break;
        }
    }
    if (hit < 0) *failed = 1;
    return hit > 0 && strlen(digits) < 10 ? atol(digits) : -1;
}

// Whether the adapter targets module `name` (a name of GPT2LMHeadModel):
// 1, 0, or -1 with err set.
static int targets(const LoraAdapter *a, const char *name, GptError *err) {
    static const char *const ALL_LINEAR[] = {"c_attn", "c_proj", "c_fc"};
    const char *path = a->config_path;
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(a->config, "target_modules");
    int all_linear = cJSON_IsString(t) && !strcmp(t->valuestring, "all-linear");
    if (cJSON_IsString(t) && !all_linear)
        return matches("^(", t->valuestring, ")$", name, NULL, 0, path, "target_modules", err);
    // a list: an entry equal to the name, or the end of the name after a dot
    const char *defaults[] = {"c_attn"};
    const char *const *list = all_linear ? ALL_LINEAR : defaults;
    size_t n = all_linear ? 3 : 1;
    const char *items[MAX_TARGETS];
    if (cJSON_IsArray(t)) {
        n = 0;
        for (const cJSON *e = t->child; e && n < MAX_TARGETS; e = e->next) items[n++] = e->valuestring;
        list = items;
    }
    int suffix = 0;
    for (size_t i = 0; i < n; i++) {
        if (!strcmp(name, list[i])) return 1;
        size_t ln = strlen(name), lt = strlen(list[i]);
        if (ln > lt && name[ln - lt - 1] == '.' && !strcmp(name + ln - lt, list[i])) suffix = 1;
    }
    if (!suffix) return 0;
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(a->config, "layers_to_transform");
    if (!lt || cJSON_IsNull(lt) || (cJSON_IsArray(lt) && !lt->child)) return 1;
    int failed = 0;
    long layer = layer_index(a->config, name, path, err, &failed);
    if (failed) return -1;
    if (layer < 0) return 0;
    if (cJSON_IsNumber(lt)) return lt->valuedouble == (double)layer;
    for (const cJSON *e = lt->child; e; e = e->next)
        if (e->valuedouble == (double)layer) return 1;
    return 0;
}

// The value of the first key of pattern `field` (rank_pattern,
// alpha_pattern) that matches the end of name after a dot, or all of it;
// *found 0 when none. 0, or -1 with err set.
static int pattern(const LoraAdapter *a, const char *field, const char *name, double *out, int *found, GptError *err) {
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(a->config, field);
    *found = 0;
    for (const cJSON *e = cJSON_IsObject(p) ? p->child : NULL; e; e = e->next) {
        int hit = matches("^(.*\\.)?(", e->string, ")$", name, NULL, 0, a->config_path, field, err);
        if (hit < 0) return -1;
        if (hit) {
            *out = e->valuedouble, *found = 1;
            return 0;
        }
    }
    return 0;
}

// ---------------------------------------------------------------------------
// adapter_model.safetensors

// Reads the tensors' names: "base_model.model." + module + ".lora_A.weight"
// or ".lora_B.weight", 2-D each.
static int read_tensors(LoraAdapter *a, GptError *err) {
    const char *path = a->st_path;
    cJSON *hdr;
    size_t data_size;
    if (safetensors_header(a->map.data, a->map.size, path, &hdr, &a->data, &data_size, err) != 0) return -1;
    int rc = -1;
    size_t n = (size_t)cJSON_GetArraySize(hdr);
    a->modules = calloc(n ? n : 1, sizeof *a->modules);
    if (!a->modules) {
        gpt_error(err, "%s: out of memory", path);
        goto done;
    }
    int prefixed = -1;
    for (const cJSON *e = hdr->child; e; e = e->next) {
        const char *key = e->string;
        if (!strcmp(key, "__metadata__")) continue;
        size_t len = strlen(key), tail = sizeof ".lora_A.weight" - 1;
        int is_a = len > tail && !strcmp(key + len - tail, ".lora_A.weight");
        int is_b = len > tail && !strcmp(key + len - tail, ".lora_B.weight");
        if (strncmp(key, TENSOR_PREFIX, sizeof TENSOR_PREFIX - 1) || (!is_a && !is_b)) {
            gpt_error(err,
                      "%s: tensor %.120s is not a LoRA weight (base_model.model.MODULE.lora_A.weight or "
                      "lora_B.weight)%s",
                      path, key,
                      strstr(key, "lora_embedding")   ? ": LoRA on embeddings is not merged by gpt"
                      : strstr(key, "lora_magnitude") ? ": DoRA is not merged by gpt"
                      : strstr(key, ".bias")          ? ": trained biases are not merged by gpt"
                                                      : "");
            goto done;
        }
        const char *module = key + sizeof TENSOR_PREFIX - 1;
        size_t mlen = (size_t)(key + len - tail - module);
        if (mlen >= sizeof a->modules->module) {
            gpt_error(err, "%s: tensor %.120s: module name too long", path, key);
            goto done;
        }
        int pre = !strncmp(module, MODEL_PREFIX, sizeof MODEL_PREFIX - 1);
        if (prefixed >= 0 && pre != prefixed) {
            gpt_error(err, "%s: tensor %.120s: some names have \"transformer.\" and some not", path, key);
            goto done;
        }
        prefixed = pre;
        Module *m = NULL;
        for (size_t i = 0; i < a->n_modules && !m; i++)
            if (strlen(a->modules[i].module) == mlen && !strncmp(a->modules[i].module, module, mlen))
                m = &a->modules[i];
        if (!m) {
            m = &a->modules[a->n_modules++];
            snprintf(m->module, sizeof m->module, "%.*s", (int)mlen, module);
        }
        SafetensorsEntry *t = is_a ? &m->a : &m->b;
        if ((is_a ? m->has_a : m->has_b)) {
            gpt_error(err, "%s: tensor %.120s appears twice", path, key);
            goto done;
        }
        if (safetensors_entry(e, data_size, path, t, err) != 0) goto done;
        if (t->ndim != 2) {
            gpt_error(err, "%s: tensor %.120s has %d dimensions, not 2", path, key, t->ndim);
            goto done;
        }
        if (is_a) m->has_a = 1;
        else m->has_b = 1;
    }
    if (!a->n_modules) {
        gpt_error(err, "%s: holds no LoRA tensors", path);
        goto done;
    }
    a->prefixed = prefixed;
    rc = 0;
done:
    cJSON_Delete(hdr);
    return rc;
}

// ---------------------------------------------------------------------------
// llama.cpp's GGUF LoRA file

// llama.cpp's names of a layer's four matrices, in MATRICES' order.
static const char *const GGUF_MATRICES[4] = {"attn_qkv", "attn_output", "ffn_up", "ffn_down"};

// The layer and the matrix (an index of GGUF_MATRICES) of "blk.N.KIND.weight",
// or -1 (N without a leading zero, below 2^20).
static int gguf_module(const char *name, long *layer) {
    if (strncmp(name, "blk.", 4) || name[4] < '0' || name[4] > '9' || (name[4] == '0' && name[5] != '.')) return -1;
    char *end;
    *layer = strtol(name + 4, &end, 10);
    if (*end != '.' || *layer >= 1L << 20) return -1;
    for (int k = 0; k < 4; k++) {
        size_t n = strlen(GGUF_MATRICES[k]);
        if (!strncmp(end + 1, GGUF_MATRICES[k], n) && !strcmp(end + 1 + n, ".weight")) return k;
    }
    return -1;
}

// The tensors of a GGUF adapter: "blk.N.KIND.weight.lora_a" (ne [in, r])
// and ".lora_b" (ne [r, out]), into modules named "blk.N.KIND.weight".
static int read_gguf(LoraAdapter *a, GptError *err) {
    const char *path = a->st_path;
    float alpha;
    GgufLoraTensor *t;
    size_t n;
    if (gguf_lora_read(a->map.data, a->map.size, path, &alpha, &a->data, &t, &n, err) != 0) return -1;
    a->alpha = alpha;
    int rc = -1;
    a->modules = calloc(n ? n : 1, sizeof *a->modules);
    if (!a->modules) {
        gpt_error(err, "%s: out of memory", path);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        const char *key = t[i].name;
        size_t len = strlen(key), tail = sizeof ".lora_a" - 1;
        int is_a = len > tail && !strcmp(key + len - tail, ".lora_a");
        int is_b = len > tail && !strcmp(key + len - tail, ".lora_b");
        char module[64];
        snprintf(module, sizeof module, "%.*s", (int)(len - ((is_a || is_b) ? tail : 0)), key);
        long layer;
        if ((!is_a && !is_b) || gguf_module(module, &layer) < 0) {
            gpt_error(err,
                      "%s: tensor %s is not a LoRA matrix gpt applies (blk.N.attn_qkv, attn_output, ffn_up or "
                      "ffn_down .weight.lora_a or .lora_b)%s",
                      path, key,
                      !strncmp(key, "token_embd.", 11) || !strncmp(key, "output.", 7)
                          ? ": LoRA on the embeddings is not merged by gpt"
                      : strstr(key, "_norm.") ? ": an adapter's norms are not read by gpt"
                                              : "");
            goto done;
        }
        Module *m = NULL;
        for (size_t j = 0; j < a->n_modules && !m; j++)
            if (!strcmp(a->modules[j].module, module)) m = &a->modules[j];
        if (!m) snprintf((m = &a->modules[a->n_modules++])->module, sizeof m->module, "%s", module);
        if (is_a ? m->has_a : m->has_b) {
            gpt_error(err, "%s: tensor %s appears twice", path, key);
            goto done;
        }
        SafetensorsEntry *e = is_a ? &m->a : &m->b;
        // as a row-major (rows, values per row) matrix, PEFT's shapes: A (r, in), B (out, r)
        *e = (SafetensorsEntry){.dtype = t[i].dtype, .ndim = 2, .dims = {t[i].ne[1], t[i].ne[0]}, .begin = t[i].begin};
        if (is_a) m->has_a = 1;
        else m->has_b = 1;
    }
    if (!a->n_modules) {
        gpt_error(err, "%s: holds no LoRA tensors", path);
        goto done;
    }
    rc = 0;
done:
    free(t);
    return rc;
}

// ---------------------------------------------------------------------------
// opening

static void adapter_close(LoraAdapter *a) {
    if (!a) return;
    free(a->config_path);
    free(a->st_path);
    cJSON_Delete(a->config);
    file_unmap(&a->map);
    free(a->modules);
    free(a);
}

// The adapter's two files: a directory's, or a .safetensors file and the
// config beside it. A pickle is refused by name.
static int locate(LoraAdapter *a, const char *path, GptError *err) {
    int dir = path_is_dir(path);
    if (!dir && !path_exists(path)) return gpt_error(err, "%s: no such adapter (a PEFT LoRA directory)", path);
    char *bin = dir ? path_join(path, "adapter_model.bin") : NULL;
    a->st_path = dir ? path_join(path, "adapter_model.safetensors") : path_join(path, NULL);
    a->config_path = dir ? path_join(path, "adapter_config.json") : path_sibling(path, "adapter_config.json");
    int rc = 0;
    size_t len = strlen(path);
    if (!a->st_path || !a->config_path || (dir && !bin)) rc = gpt_error(err, "%s: out of memory", path);
    else if ((dir && !path_exists(a->st_path) && path_exists(bin)) ||
             (!dir && len >= 4 && !strcmp(path + len - 4, ".bin")))
        rc = gpt_error(err,
                       "%s: adapter_model.bin is a PyTorch pickle, which gpt does not read: save the adapter as "
                       "adapter_model.safetensors (PEFT's default)",
                       path);
    else if (!path_exists(a->config_path)) rc = gpt_error(err, "%s: not a PEFT adapter: no %s", path, a->config_path);
    else if (!path_exists(a->st_path))
        rc = gpt_error(err, "%s: no adapter_model.safetensors beside adapter_config.json", path);
    free(bin);
    return rc;
}

// Whether path is a file that begins as a GGUF file does.
static int is_gguf(const char *path) {
    char magic[4] = {0};
    FILE *f = path_is_dir(path) ? NULL : fopen(path, "rb");
    if (!f) return 0;
    size_t n = fread(magic, 1, 4, f);
    fclose(f);
    return n == 4 && !memcmp(magic, "GGUF", 4);
}

static int adapter_open(LoraAdapter **out, const LoraRequest *r, GptError *err) {
    LoraAdapter *a = calloc(1, sizeof *a);
    if (!a) return gpt_error(err, "%s: out of memory", r->path);
    a->scale = r->scale;
    if (is_gguf(r->path)) {
        a->gguf = 1;
        if (!(a->st_path = path_join(r->path, NULL))) {
            gpt_error(err, "%s: out of memory", r->path);
            goto fail;
        }
        if (file_map(a->st_path, &a->map, err) != 0 || read_gguf(a, err) != 0) goto fail;
        *out = a;
        return 0;
    }
    char *text = NULL;
    size_t len;
    if (locate(a, r->path, err) != 0 || file_read_all(a->config_path, &text, &len, err) != 0) goto fail;
    a->config = cJSON_ParseWithLength(text, len);
    free(text);
    if (!a->config || !cJSON_IsObject(a->config)) {
        gpt_error(err, "%s: not a JSON object", a->config_path);
        goto fail;
    }
    if (check_config(a, err) != 0 || file_map(a->st_path, &a->map, err) != 0 || read_tensors(a, err) != 0) goto fail;
    *out = a;
    return 0;
fail:
    adapter_close(a);
    return -1;
}

int lora_set_open(LoraSet *s, const LoraRequest *r, size_t n, GptError *err) {
    memset(s, 0, sizeof *s);
    s->a = calloc(n ? n : 1, sizeof *s->a);
    if (!s->a) return gpt_error(err, "out of memory opening adapters");
    for (; s->n < n; s->n++)
        if (adapter_open(&s->a[s->n], &r[s->n], err) != 0) {
            lora_set_close(s);
            return -1;
        }
    return 0;
}

void lora_set_close(LoraSet *s) {
    if (!s) return;
    for (size_t i = 0; i < s->n; i++) adapter_close(s->a[i]);
    free(s->a);
    free(s->deltas);
    memset(s, 0, sizeof *s);
}

// ---------------------------------------------------------------------------
// the changes to one base

// A layer's four matrices, as named inside a layer.
static const char *const MATRICES[4] = {"attn.c_attn", "attn.c_proj", "mlp.c_fc", "mlp.c_proj"};
// GPT2LMHeadModel's other modules (torch's named_modules), which PEFT
// would refuse to adapt or gpt does not: outside the layers, and inside.
static const char *const OUTER[] = {"wte", "wpe", "drop", "h", "ln_f"};
static const char *const INNER[] = {"",      ".ln_1", ".attn",    ".attn.attn_dropout", ".attn.resid_dropout",
                                    ".ln_2", ".mlp",  ".mlp.act", ".mlp.dropout"};

// A module that the adapter targets but gpt cannot change: refused.
static int untargetable(const LoraAdapter *a, const char *name, GptError *err) {
    int t = targets(a, name, err);
    if (t > 0)
        return gpt_error(err,
                         "%s: target_modules selects %s, which is not one of a layer's matrices (c_attn, "
                         "c_proj, c_fc): gpt merges LoRA into those only",
                         a->config_path, name);
    return t;
}

// The changes of adapter a to a base of c, appended to s->deltas.
static int adapter_deltas(LoraSet *s, LoraAdapter *a, const GPT2Config *c, GptError *err) {
    const char *pre = a->prefixed ? MODEL_PREFIX : "";
    char name[128];
    if (a->prefixed && (untargetable(a, "transformer", err) || untargetable(a, "lm_head", err))) return -1;
    for (size_t i = 0; i < sizeof OUTER / sizeof *OUTER; i++) {
        snprintf(name, sizeof name, "%s%s", pre, OUTER[i]);
        if (untargetable(a, name, err)) return -1;
    }
    for (size_t i = 0; i < a->n_modules; i++) a->modules[i].used = 0;
    int any = 0;
    for (int l = 0; l < c->n_layer; l++) {
        for (size_t i = 0; i < sizeof INNER / sizeof *INNER; i++) {
            snprintf(name, sizeof name, "%sh.%d%s", pre, l, INNER[i]);
            if (untargetable(a, name, err)) return -1;
        }
        for (int k = 0; k < 4; k++) {
            snprintf(name, sizeof name, "%sh.%d.%s", pre, l, MATRICES[k]);
            int t = targets(a, name, err);
            if (t < 0) return -1;
            if (!t) continue;
            any = 1;
            Module *m = NULL;
            for (size_t i = 0; i < a->n_modules && !m; i++)
                if (!strcmp(a->modules[i].module, name)) m = &a->modules[i];
            if (!m || !m->has_a || !m->has_b)
                return gpt_error(err, "%s: tensor base_model.model.%s.%s is missing (target_modules selects %s)",
                                 a->st_path, name, m && m->has_a ? "lora_B.weight" : "lora_A.weight", name);
            double r = (double)a->r, alpha = a->alpha;
            int found;
            if (pattern(a, "rank_pattern", name, &r, &found, err) != 0) return -1;
            if (pattern(a, "alpha_pattern", name, &alpha, &found, err) != 0) return -1;
            if ((double)m->a.dims[0] != r || (double)m->b.dims[1] != r)
                return gpt_error(err,
                                 "%s: %s has rank %zu (lora_A [%zu,%zu], lora_B [%zu,%zu]); adapter_config.json "
                                 "says %.0f",
                                 a->st_path, name, m->a.dims[0], m->a.dims[0], m->a.dims[1], m->b.dims[0], m->b.dims[1],
                                 r);
            MatrixDelta *d = &s->deltas[s->n_deltas++];
            memset(d, 0, sizeof *d);
            snprintf(d->name, sizeof d->name, "h.%d.%s.weight", l, MATRICES[k]);
            d->source = a->st_path;
            // PEFT's scaling: alpha / r, or alpha / sqrt(r) (rsLoRA)
            d->scale = a->scale * (a->rslora ? alpha / sqrt(r) : alpha / r);
            d->r = (size_t)r;
            d->a_dims[0] = m->a.dims[0], d->a_dims[1] = m->a.dims[1];
            d->b_dims[0] = m->b.dims[0], d->b_dims[1] = m->b.dims[1];
            d->a_dtype = m->a.dtype, d->b_dtype = m->b.dtype;
            d->a = a->data + m->a.begin, d->b = a->data + m->b.begin;
            m->used = 1;
        }
    }
    for (size_t i = 0; i < a->n_modules; i++)
        if (!a->modules[i].used)
            return gpt_error(err,
                             "%s: tensors of %s, which target_modules does not select in this base model (%d "
                             "layers)",
                             a->st_path, a->modules[i].module, c->n_layer);
    if (!any) return gpt_error(err, "%s: target_modules selects no matrix of the base model", a->config_path);
    return 0;
}

// The changes of GGUF adapter a to a base of c, appended to s->deltas:
// every pair of the file, at llama.cpp's scale alpha / r (the request's
// scale alone when alpha is 0, as llama.cpp reads it).
static int gguf_deltas(LoraSet *s, LoraAdapter *a, const GPT2Config *c, GptError *err) {
    const char *path = a->st_path;
    for (size_t i = 0; i < a->n_modules; i++) {
        const Module *m = &a->modules[i];
        long layer;
        gguf_module(m->module, &layer);
        if (layer >= c->n_layer)
            return gpt_error(err, "%s: tensor %s.lora_a: the base model has %d layers", path, m->module, c->n_layer);
        if (!m->has_a || !m->has_b)
            return gpt_error(err, "%s: tensor %s.lora_%c is missing", path, m->module, m->has_a ? 'b' : 'a');
    }
    for (int l = 0; l < c->n_layer; l++)
        for (int k = 0; k < 4; k++) {
            char name[64];
            snprintf(name, sizeof name, "blk.%d.%s.weight", l, GGUF_MATRICES[k]);
            const Module *m = NULL;
            for (size_t i = 0; i < a->n_modules && !m; i++)
                if (!strcmp(a->modules[i].module, name)) m = &a->modules[i];
            if (!m) continue;
            MatrixDelta *d = &s->deltas[s->n_deltas++];
            memset(d, 0, sizeof *d);
            snprintf(d->name, sizeof d->name, "h.%d.%s.weight", l, MATRICES[k]);
            long unused;
            size_t io[2];  // the matrix's (in, out)
            gpt2_tensor_shape(c, (size_t)gpt2_tensor_index(c, d->name, &unused), io);
            size_t r = m->a.dims[0];
            // ggml's ne: lora_a [in, r], lora_b [r, out]
            if (m->a.dims[1] != io[0] || m->b.dims[0] != io[1] || m->b.dims[1] != r || r == 0)
                return gpt_error(err,
                                 "%s: tensors %s.lora_a ne [%zu,%zu] and .lora_b ne [%zu,%zu] do not fit the base "
                                 "model's matrix ne [%zu,%zu]: they must be [%zu,r] and [r,%zu]",
                                 path, name, m->a.dims[1], m->a.dims[0], m->b.dims[1], m->b.dims[0], io[0], io[1],
                                 io[0], io[1]);
            d->source = path;
            d->scale = a->scale * (a->alpha != 0 ? a->alpha / (double)r : 1.0);
            d->r = r;
            d->a_dims[0] = r, d->a_dims[1] = io[0];
            d->b_dims[0] = io[1], d->b_dims[1] = r;
            d->a_dtype = m->a.dtype, d->b_dtype = m->b.dtype;
            d->a = a->data + m->a.begin, d->b = a->data + m->b.begin;
        }
    return 0;
}

int lora_set_deltas(void *ctx, const GPT2Config *c, const MatrixDelta **deltas, size_t *n, GptError *err) {
    LoraSet *s = ctx;
    free(s->deltas);
    s->n_deltas = 0;
    s->deltas = calloc((size_t)c->n_layer * 4 * (s->n ? s->n : 1), sizeof *s->deltas);
    if (!s->deltas) return gpt_error(err, "out of memory for the adapters' changes");
    for (size_t i = 0; i < s->n; i++)
        if ((s->a[i]->gguf ? gguf_deltas(s, s->a[i], c, err) : adapter_deltas(s, s->a[i], c, err)) != 0) return -1;
    *deltas = s->deltas;
    *n = s->n_deltas;
    return 0;
}

// ---------------------------------------------------------------------------
// run time

// value i of a tensor of dtype dt, widened exactly
static float widen(const void *p, DType dt, size_t i) {
    const unsigned char *b = p;
    if (dt == DTYPE_F32) {
        float f;
        memcpy(&f, b + 4 * i, 4);
        return f;
    }
    uint16_t h = (uint16_t)(b[2 * i] | b[2 * i + 1] << 8);
    return dt == DTYPE_F16 ? f16_to_f32(h) : bf16_to_f32(h);
}

int lora_weights_load(LoraWeights *w, const LoraRequest *r, const GPT2Config *c, GptError *err) {
    memset(w, 0, sizeof *w);
    LoraSet set;
    if (lora_set_open(&set, r, 1, err) != 0) return -1;
    const MatrixDelta *d;
    size_t n;
    int rc = -1;
    if (lora_set_deltas(&set, c, &d, &n, err) != 0) goto done;
    w->n_layer = (size_t)c->n_layer;
    if (!(w->m = calloc(w->n_layer * 4, sizeof *w->m))) {
        gpt_error(err, "%s: out of memory", r->path);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        int l, k = -1;
        char kind[32];
        if (sscanf(d[i].name, "h.%d.%31[a-z_.]", &l, kind) != 2) continue;  // lora_set_deltas names them so
        for (int j = 0; j < 4; j++)
            if (!strncmp(kind, MATRICES[j], strlen(MATRICES[j])) && !strcmp(kind + strlen(MATRICES[j]), ".weight"))
                k = j;
        long unused;
        size_t io[2];  // (in, out)
        gpt2_tensor_shape(c, (size_t)gpt2_tensor_index(c, d[i].name, &unused), io);
        if (k < 0 || d[i].a_dims[1] != io[0] || d[i].b_dims[0] != io[1]) {
            gpt_error(err, "%s: the change to %s has A [%zu,%zu] and B [%zu,%zu]; the base model implies [r,%zu] "
                           "and [%zu,r]", d[i].source, d[i].name, d[i].a_dims[0], d[i].a_dims[1], d[i].b_dims[0],
                      d[i].b_dims[1], io[0], io[1]);
            goto done;
        }
        LoraMatrix *m = &w->m[(size_t)l * 4 + (size_t)k];
        size_t R = d[i].r, in = io[0], out = io[1];
        m->r = R;
        m->in = in, m->out = out;
        m->scale = d[i].scale;
        m->a = malloc(R * in * sizeof *m->a);
        m->bt = malloc(R * out * sizeof *m->bt);
        if (!m->a || !m->bt) {
            gpt_error(err, "%s: out of memory", r->path);
            goto done;
        }
        for (size_t j = 0; j < R * in; j++) m->a[j] = widen(d[i].a, d[i].a_dtype, j);
        for (size_t o = 0; o < out; o++)
            for (size_t j = 0; j < R; j++) m->bt[j * out + o] = widen(d[i].b, d[i].b_dtype, o * R + j);
        w->bytes += R * (in + out) * sizeof(float);
    }
    // the salt: a hash (FNV-1a) of every scale and value, never 0
    uint64_t h = 0xCBF29CE484222325ull;
    for (size_t i = 0; i < w->n_layer * 4; i++) {
        const LoraMatrix *m = &w->m[i];
        uint64_t v;
        memcpy(&v, &m->scale, 8);
        h = (h ^ v ^ i) * 0x100000001B3ull;
        for (size_t j = 0; j < m->r * (m->in + m->out); j++) {
            uint32_t u;
            memcpy(&u, j < m->r * m->in ? &m->a[j] : &m->bt[j - m->r * m->in], 4);
            h = (h ^ u) * 0x100000001B3ull;
        }
    }
    w->salt = h ? h : 1;
    rc = 0;
done:
    lora_set_close(&set);
    if (rc != 0) lora_weights_free(w);
    return rc;
}

void lora_weights_free(LoraWeights *w) {
    if (!w) return;
    for (size_t i = 0; w->m && i < w->n_layer * 4; i++) {
        free(w->m[i].a);
        free(w->m[i].bt);
    }
    free(w->m);
    memset(w, 0, sizeof *w);
}
