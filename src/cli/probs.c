/*
 * probs.c - log-probabilities as the command writes them: --per-token's
 * lines and the results of multiple choice (--choice, a --jsonl line's
 * "choices"). OpenAI's legacy `logprobs` object, which gpt serve writes
 * too, is src/front/json.c's.
 *
 * The numbers come from the engine (engine.h, logprobs.h): each token's
 * log-probability under the model's own distribution at its position, the
 * log-softmax of the raw logits, and the most likely tokens there.
 */
#include <cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

// A token's bytes, escaped as --per-token writes them.
static int print_token(const Tokenizer *tok, int32_t id) {
    size_t len;
    const unsigned char *b = tokenizer_token_bytes(tok, id, &len);
    return print_escaped(b ? b : (const unsigned char *)"", b ? len : 0);
}

int print_token_logprob(const Tokenizer *tok, int32_t id, const TokenLogprob *t) {
    if (print_token(tok, id) != 0) return -1;
    if (!t) return out_printf("\t-\n");
    if (out_printf("\t%.6f", t->logprob) != 0) return -1;
    for (size_t k = 0; k < t->n_top; k++)
        if (out_printf("\t") != 0 || print_token(tok, t->top_ids[k]) != 0 ||
            out_printf("\t%.6f", t->top_logprobs[k]) != 0)
            return -1;
    return out_printf("\n");
}

// ----------------------------------------------------------------------------
// multiple choice

void candidate_measure(const Tokenizer *tok, Candidate *c) {
    c->sum = 0.0;
    c->bytes = 0;
    size_t count = c->n - c->first;
    for (size_t i = 0; i < count; i++) {
        size_t len;
        c->sum += c->lp[i].logprob;
        if (tokenizer_token_bytes(tok, c->ids[c->first + i], &len)) c->bytes += len;
    }
    c->mean = c->sum / (double)count;
    c->mean_per_byte = c->bytes ? c->sum / (double)c->bytes : c->sum;
}

// Whether choice a ranks before b: the larger sum (key 0) or mean per byte
// (key 1), equal ones by index.
static int ranks_before(const Candidate *c, size_t a, size_t b, int per_byte) {
    double x = per_byte ? c[a].mean_per_byte : c[a].sum, y = per_byte ? c[b].mean_per_byte : c[b].sum;
    return x > y || (x == y && a < b);
}

size_t candidate_best(const Candidate *c, size_t n, int per_byte) {
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (ranks_before(c, i, best, per_byte)) best = i;
    return best;
}

void add_candidates_json(cJSON *root, const Candidate *c, size_t n) {
    size_t *order = malloc(n * sizeof *order);
    cJSON *list = cJSON_CreateArray(), *ranking = cJSON_CreateArray();
    for (size_t i = 0; order && i < n; i++) {
        // insertion by rank: at most MAX_CHOICES of them
        size_t at = i;
        for (; at > 0 && ranks_before(c, i, order[at - 1], 0); at--) order[at] = order[at - 1];
        order[at] = i;
    }
    for (size_t i = 0; i < n; i++) {
        cJSON *o = cJSON_CreateObject();
        size_t count = c[i].n - c[i].first;
        cJSON_AddNumberToObject(o, "index", (double)i);
        cJSON_AddStringToObject(o, "text", c[i].text);
        cJSON_AddItemToObject(o, "tokens", ids_json(c[i].ids + c[i].first, count));
        cJSON *lp = cJSON_CreateArray();
        for (size_t k = 0; k < count; k++) cJSON_AddItemToArray(lp, exact_json(c[i].lp[k].logprob));
        cJSON_AddItemToObject(o, "logprobs", lp);
        cJSON_AddItemToObject(o, "sum", exact_json(c[i].sum));
        cJSON_AddItemToObject(o, "mean", exact_json(c[i].mean));
        cJSON_AddNumberToObject(o, "bytes", (double)c[i].bytes);
        cJSON_AddItemToObject(o, "mean_per_byte", exact_json(c[i].mean_per_byte));
        cJSON_AddNumberToObject(o, "context_tokens", (double)c[i].first);
        cJSON_AddItemToArray(list, o);
        if (order) cJSON_AddItemToArray(ranking, cJSON_CreateNumber((double)order[i]));
    }
    free(order);
    cJSON_AddItemToObject(root, "choices", list);
    cJSON_AddItemToObject(root, "ranking", ranking);
    cJSON_AddNumberToObject(root, "best", (double)candidate_best(c, n, 0));
    cJSON_AddNumberToObject(root, "best_per_byte", (double)candidate_best(c, n, 1));
}
