/*
 * tokenizer_build.h - a Tokenizer built step by step, for the code that
 * reads its sources: tokenizer_from_tables (tokenizer.c) and the file
 * readers (tokenizer_files.c). Internal to the library.
 *
 *   1. tokenizer_new_vocab: the vocabulary, every token's string and bytes
 *   2. tokenizer_alloc_merges, then tokenizer_add_merge for each rank in
 *      order (tokenizer_string_id finds a merge's tokens by their strings)
 *   3. tokenizer_build_pairs: the pair table BPE runs on
 *
 * After a failed step, tokenizer_free the Tokenizer; `src` or `where`
 * name the source (a file, "tokenizer tables", "merges.txt:17") in errors.
 */
#ifndef GPT_TOKENIZER_BUILD_H
#define GPT_TOKENIZER_BUILD_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"
#include "model/tokenizer.h"

// Step 1: a Tokenizer of n_vocab tokens, strings[id] in vocab.json's form
// (copied). NULL with err set: a missing string, a byte with no token, out
// of memory.
Tokenizer *tokenizer_new_vocab(const char *src, size_t n_vocab, const char *const *strings, GptError *err);
// The id of the token whose vocab.json string is s[0..len), or -1.
int32_t tokenizer_string_id(const Tokenizer *t, const char *s, size_t len);
// Step 2: room for n_merges merges. 0, or -1 with err set.
int tokenizer_alloc_merges(Tokenizer *t, size_t n_merges, const char *src, GptError *err);
// Merge `rank` joins token ids left and right, whose bytes together must be
// a token. 0, or -1 with err naming `where`.
int tokenizer_add_merge(Tokenizer *t, size_t rank, int32_t left, int32_t right, const char *where,
                        GptError *err);
// Step 3: the pair table, from every merge. 0, or -1 with err set.
int tokenizer_build_pairs(Tokenizer *t, const char *src, GptError *err);

#endif
