/*
 * tokenizer.h - text <-> token ids with GPT-2's byte-level BPE, identical to
 * OpenAI's tiktoken "gpt2" encoding.
 *
 * Encoding: the text is split into pieces by GPT-2's pre-tokenizer pattern
 *   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 * (implemented by hand over code points, categories from utf8proc), and each
 * piece's bytes are merged pairwise, lowest rank first. Any byte string is
 * valid input: bytes that are not well-formed UTF-8 are treated as single
 * "other" (punctuation-like) characters, so decode(encode(b)) == b for all b.
 *
 * Decoding: tokenizer_decode() gives the exact bytes; TokenStream turns ids
 * into printable UTF-8 one token at a time (see below).
 *
 * The file readers (tokenizer_load*) are in tokenizer_files.c, the rest in
 * tokenizer.c. Not here: reading the model file (modelbin.c rebuilds us
 * with tokenizer_from_tables), printing, sampling.
 *
 * Threads: a Tokenizer carries a piece cache and scratch buffers, so
 * tokenizer_encode() takes a non-const pointer; use one Tokenizer per thread
 * for encoding. The const functions may be called concurrently.
 */
#ifndef GPT_TOKENIZER_H
#define GPT_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "base/error.h"

typedef struct Tokenizer Tokenizer;

// Loads a tokenizer. `path` is either a directory holding vocab.json +
// merges.txt (preferred) or tokenizer.json, or a tokenizer.json file itself.
// Returns a new Tokenizer (free with tokenizer_free), or NULL with err set.
Tokenizer *tokenizer_load(const char *path, GptError *err);

// Loads from OpenAI/Hugging Face vocab.json (token string -> id) and
// merges.txt (one "left right" pair per line, ranked by order, after an
// optional "#version" line). NULL with err set on any malformed entry.
Tokenizer *tokenizer_load_files(const char *vocab_json, const char *merges_txt, GptError *err);

// Loads a Hugging Face tokenizer.json (model.vocab, model.merges; a merge may
// be "a b" or ["a", "b"]). NULL with err set.
Tokenizer *tokenizer_load_json(const char *tokenizer_json, GptError *err);

// Builds a tokenizer from tables: token_strings[id] is the vocab.json form of
// token id (e.g. "\u0120the", i.e. "Ġthe"), merge_pairs[rank] = {left id,
// right id}. All inputs are copied. The vocabulary must hold a token for each
// of the 256 bytes; each merge's concatenation must itself be a token.
Tokenizer *tokenizer_from_tables(size_t n_vocab, const char *const *token_strings,
                                 size_t n_merges, const int32_t (*merge_pairs)[2],
                                 GptError *err);

// NULL-safe.
void tokenizer_free(Tokenizer *t);

size_t tokenizer_vocab_size(const Tokenizer *t);
// The vocab.json form of token `id`; NULL for an id outside the vocabulary.
// Owned by the tokenizer.
const char *tokenizer_token_string(const Tokenizer *t, int32_t id);
size_t tokenizer_n_merges(const Tokenizer *t);
// The merge of rank `rank` (< tokenizer_n_merges); -1/-1 if out of range.
void tokenizer_merge_pair(const Tokenizer *t, size_t rank, int32_t *left_id, int32_t *right_id);
// Id of "<|endoftext|>", -1 if the vocabulary has none.
int32_t tokenizer_eot_id(const Tokenizer *t);
// The raw bytes of token `id` (not NUL-terminated; *len set); NULL for an id
// outside the vocabulary. Owned by the tokenizer.
const unsigned char *tokenizer_token_bytes(const Tokenizer *t, int32_t id, size_t *len);
// The longest token, in bytes.
size_t tokenizer_max_token_bytes(const Tokenizer *t);

// Encodes text[0..len) (any bytes, NUL included). With allow_special == 0 the
// text is all ordinary text (tiktoken's encode_ordinary); otherwise each
// literal "<|endoftext|>" becomes tokenizer_eot_id() (tiktoken's
// encode(text, allowed_special="all")). On success *ids is malloc'd (caller
// frees; non-NULL even for n_ids == 0) and 0 is returned; on failure (out of
// memory, or a text of 4 GiB or more) -1 with err set and *ids NULL.
// Scratch space grows to the longest piece seen and is kept until
// tokenizer_free.
int tokenizer_encode(Tokenizer *t, const char *text, size_t len, int allow_special,
                     int32_t **ids, size_t *n_ids, GptError *err);

// Decodes ids to the exact bytes they stand for (which need not be valid
// UTF-8). *out is malloc'd and NUL-terminated (the NUL not counted in
// *out_len); caller frees. -1 with err naming the index and the id if one is
// outside the vocabulary.
int tokenizer_decode(const Tokenizer *t, const int32_t *ids, size_t n,
                     char **out, size_t *out_len, GptError *err);

/*
 * Streaming decoder, for printing tokens as they are generated. A token may
 * end in the middle of a UTF-8 character; the stream holds such an
 * incomplete sequence (at most 3 bytes) until the next token completes it.
 * Bytes that can never become a valid character are written as U+FFFD
 * straight away (one per maximal invalid subpart, as Python's
 * bytes.decode("utf-8", "replace") does), so output never stalls; flush()
 * writes a held incomplete sequence as one U+FFFD.
 *
 *     TokenStream ts;
 *     token_stream_init(&ts);
 *     for each id:  if (token_stream_push(&ts, tok, id, &s, &n, &err)) fail;
 *                   fwrite(s, 1, n, stdout);
 *     token_stream_flush(&ts, &s, &n);  fwrite(s, 1, n, stdout);
 *     token_stream_free(&ts);
 *
 * The returned pointer is into the stream's own buffer and stays valid until
 * the next call on the stream. The concatenated output is always valid UTF-8.
 */
typedef struct {
    unsigned char pending[4];  // a valid but incomplete UTF-8 prefix
    size_t n_pending;          // 0..3
    char *buf;                 // output buffer, grown as needed (owned)
    size_t cap;
} TokenStream;

// Cannot fail; allocates nothing.
void token_stream_init(TokenStream *s);
// Feeds one token. *out/*out_len: the bytes now complete (possibly 0).
// -1 with err set for an id outside the vocabulary (the stream is unchanged)
// or out of memory.
int token_stream_push(TokenStream *s, const Tokenizer *t, int32_t id,
                      const char **out, size_t *out_len, GptError *err);
// Feeds raw bytes (what push does after looking the token up).
int token_stream_push_bytes(TokenStream *s, const unsigned char *bytes, size_t len,
                            const char **out, size_t *out_len, GptError *err);
// Ends the stream: a held incomplete sequence comes out as U+FFFD. The stream
// is then empty and may be reused. Cannot fail.
void token_stream_flush(TokenStream *s, const char **out, size_t *out_len);
// Frees the buffer; NULL-safe and idempotent.
void token_stream_free(TokenStream *s);

#endif
