/*
 * tokenizer_build.h - a Tokenizer built step by step, for the code that
 * reads its sources: tokenizer_from_tables (tokenizer.c) and the file
 * readers (tokenizer_files.c). Internal to the library.
 *
 *   1. tokenizer_new_vocab: the vocabulary, every token's string and bytes
 *   2. tokenizer_alloc_merges, then tokenizer_add_merge for each rank in
 *      order; a reader that names a merge's tokens by their strings first
 *      builds the string table (tokenizer_index_strings) for
 *      tokenizer_string_id
 *   3. tokenizer_finish: drops what only the readers need
 *
 * After a failed step, tokenizer_free the Tokenizer; `src` names the source
 * (a file, "tokenizer tables") in errors. tokenizer_add_merge's error names
 * no place: its caller puts the place ("merges.txt:17") before it, which
 * keeps formatting off the path of 50,000 good merges.
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
// The table from token strings to ids (the first id of a string that
// occurs twice). 0, or -1 with err set (out of memory).
int tokenizer_index_strings(Tokenizer *t, const char *src, GptError *err);
// The id of the token whose vocab.json string is s[0..len), or -1 (also
// before tokenizer_index_strings and after tokenizer_finish).
int32_t tokenizer_string_id(const Tokenizer *t, const char *s, size_t len);
// Step 2: room for n_merges merges. 0, or -1 with err set.
int tokenizer_alloc_merges(Tokenizer *t, size_t n_merges, const char *src, GptError *err);
// Merge `rank` joins token ids left and right, whose bytes together must be
// a token. 0, or -1 with err set (no place named: the caller adds it).
int tokenizer_add_merge(Tokenizer *t, size_t rank, int32_t left, int32_t right, GptError *err);
// Step 3: frees the string table. Cannot fail.
void tokenizer_finish(Tokenizer *t);

// tokenizer_load_files, with plain_json != 0 reading vocab.json through
// cJSON even when its common form could be read directly (tokenizer_files.c),
// so that a test can compare the two.
Tokenizer *tokenizer_load_files_with(const char *vocab_json, const char *merges_txt, int plain_json,
                                     GptError *err);

#endif
