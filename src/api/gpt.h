/*
 * gpt.h - gpt's public C API: GPT-2 from a program, with the bits of the
 * gpt command. Installed as <gpt.h>; link with `pkg-config --cflags --libs
 * gpt` (libgpt.so). docs/library.md says the same by task.
 *
 *     gpt_model *m;  gpt_settings *s = gpt_settings_new();  gpt_result *r;
 *     gpt_model_open("models/demo.bin", NULL, &m, &err);
 *     gpt_settings_set(s, "seed", "2", &err);
 *     gpt_generate(m, "And it came to pass", s, on_token, NULL, &r, &err);
 *     puts(gpt_result_text(r, NULL));
 *     gpt_result_free(r);  gpt_settings_free(s);  gpt_model_close(m);
 *
 * Errors are values: every call that can fail returns a gpt_status (GPT_OK,
 * 0, or one of the codes below) and fills the gpt_err its caller passes
 * last (NULL: the code alone) with the same code and one line naming what
 * was wrong ("temperature must be a number >= 0", "models/x.bin: No such
 * file or directory"). Nothing here prints, exits or raises a signal; a NULL
 * handle or argument is GPT_ERR_ARGUMENT, never a crash.
 *
 * Threads:
 *   - a gpt_model is read-only once open: any number of threads may call
 *     every call taking it (gpt_tokenize, gpt_generate, gpt_chat,
 *     gpt_score, gpt_choose, ...) on one model at once (tokenizing takes a
 *     lock of the model's). One call at a time runs on the model's threads
 *     (gpt_model_options.n_threads), and a gpt_batch holds them while it
 *     lives; a call that starts while they are taken runs on its calling
 *     thread alone. The bits are the same either way. gpt_model_close only
 *     when no call on the model runs and no batch of it is left.
 *   - a gpt_settings, a gpt_result and a gpt_batch belong to one thread at
 *     a time; a gpt_settings may be used by many generations one after
 *     another (they do not change it), and one handed to a call must not be
 *     changed or freed until that call returns (a batch's: until
 *     gpt_batch_run returns).
 *   - a token callback runs on the thread that made the call.
 *
 * Ownership: every handle is the caller's, freed by its own call
 * (gpt_model_close, gpt_settings_free, gpt_result_free, gpt_batch_free; each
 * NULL-safe). A buffer a call returns through an out-parameter
 * (gpt_tokenize's ids, gpt_detokenize's text, gpt_chat_render's text,
 * gpt_score's ids and log-probabilities) is the caller's, freed with
 * gpt_free. A pointer a gpt_result_* accessor returns is the result's, valid
 * until gpt_result_free; a batch's results are the batch's, valid until
 * gpt_batch_free. The text a token callback gets is valid during the call
 * only. Strings passed in are copied where they are kept.
 *
 * Versions: gpt_version() is gpt's version ("0.1.0"); GPT_ABI_VERSION is the
 * version of this interface, the number in the library's soname
 * (libgpt.so.0): it changes when a call, a struct or a code of this header
 * changes incompatibly. gpt_abi_version() is the library's, to compare.
 */
#ifndef GPT_H
#define GPT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define GPT_ABI_VERSION 0

#if defined(__GNUC__)
#define GPT_API __attribute__((visibility("default")))
#else
#define GPT_API
#endif

// The codes of gpt_status, gpt_err.code.
typedef enum {
    GPT_OK = 0,
    GPT_ERR_ARGUMENT = 1,  // a NULL handle or argument, a bad option of gpt_model_options
    GPT_ERR_SETTING = 2,   // gpt_settings_set: an unknown name, a value that is not JSON or out of its range;
                           // gpt_generate: settings that do not go together (keep without context_shift)
    GPT_ERR_MODEL = 3,     // the model or its tokenizer could not be opened or read
    GPT_ERR_INPUT = 4,     // a prompt too long for the context, a token id outside the vocabulary
    GPT_ERR_MEMORY = 5,    // out of memory
    GPT_ERR_RUNTIME = 6,   // the model gave no usable numbers (a damaged weight), a thread would not start
} gpt_status;

typedef struct {
    int code;           // a gpt_status
    char message[512];  // one line, "" with GPT_OK
} gpt_err;

typedef struct gpt_model gpt_model;
typedef struct gpt_settings gpt_settings;
typedef struct gpt_result gpt_result;

GPT_API const char *gpt_version(void);
GPT_API int gpt_abi_version(void);
// The name of a code: "ok", "argument", "setting", "model", "input", "memory", "runtime".
GPT_API const char *gpt_status_name(int code);
// Frees a buffer a call returned (NULL-safe).
GPT_API void gpt_free(void *p);

// ----------------------------------------------------------------------------
// the model

// An adapter merged into the weights at load, as gpt --lora PATH:SCALE
// merges it: a PEFT LoRA directory (or its adapter_model.safetensors) or a
// llama.cpp GGUF LoRA file, its change times scale (docs/models.md,
// "Adapters").
typedef struct {
    const char *path;
    double scale;  // 1: the adapter as trained; 0.5 half its change, -1 its opposite
} gpt_lora;

// How a model is opened; gpt's options of the same names. Fill it with
// gpt_model_options_default() and change what differs.
typedef struct {
    const char *dtype;      // --dtype: "f32", "f16", "bf16", "q8", "q6", "q4", "q4-pure"; NULL as stored
    int n_threads;          // -t: the threads of a generation; 0: one per core
    const char *kv_type;    // --kv-type: "f32" (NULL) or "f16"
    const char *tokenizer;  // --tokenizer: a directory or tokenizer.json; NULL: the model's, else beside it
    const char *tune;       // --tune: "on", "off", "force"; NULL: $GPT_TUNE, else "on" (speed only)
    const gpt_lora *lora;   // --lora: (n_lora) adapters merged at load, in order (their changes add); read
                            // during gpt_model_open only
    size_t n_lora;          // 0 to 16
} gpt_model_options;

GPT_API gpt_model_options gpt_model_options_default(void);
// Opens the model at path: anything gpt -m takes (model.bin, a Hugging Face
// directory, a .safetensors file, an llm.c checkpoint, a GGUF file), with
// options (NULL: the defaults). *out is the new model, or NULL on failure.
GPT_API int gpt_model_open(const char *path, const gpt_model_options *options, gpt_model **out, gpt_err *err);
GPT_API void gpt_model_close(gpt_model *m);  // NULL-safe
// The model's context (positions) and vocabulary (token ids 0 .. n - 1); 0 for NULL.
GPT_API size_t gpt_model_context(const gpt_model *m);
GPT_API size_t gpt_model_vocab(const gpt_model *m);

// text[0..len) as token ids (GPT-2's byte-level BPE; "<|endoftext|>" in the
// text is ordinary text): *ids (gpt_free) and *n.
GPT_API int gpt_tokenize(gpt_model *m, const char *text, size_t len, int32_t **ids, size_t *n, gpt_err *err);
// The exact bytes of ids[0..n): *text (gpt_free; NUL-terminated, the NUL not
// counted in *len, which may be NULL). The bytes need not be UTF-8.
GPT_API int gpt_detokenize(gpt_model *m, const int32_t *ids, size_t n, char **text, size_t *len, gpt_err *err);

// ----------------------------------------------------------------------------
// settings: the generation settings of gpt's one table (docs/usage.md), by
// their JSON names, each value as JSON text, as a gpt serve body gives it:
//   max_tokens 16, temperature 0.7, top_k 40, top_p 0.9, min_p 0.05,
//   repeat_penalty 1.1, presence_penalty 0.5, frequency_penalty 0.5,
//   logit_bias {"50256": -100}, seed 2 (or "18446744073709551615"),
//   grammar "root ::= ...", json_schema {...}, regex "[0-9]+",
//   response_format {"type": "json_object"}, stop "\n" or ["a", "b"],
//   ignore_eos true, context_shift true, keep 4, echo true, logprobs 5
// The defaults are the command's: 256 tokens, temperature 1, a seed drawn
// at random (gpt_result_seed says which).

GPT_API gpt_settings *gpt_settings_new(void);  // NULL when out of memory
GPT_API void gpt_settings_free(gpt_settings *s);  // NULL-safe
// Sets name to json_value: GPT_ERR_SETTING with the table's message naming
// the field when the name is no setting or the value is not good for it
// (the settings keep their earlier value). A grammar, json_schema, regex or
// response_format is compiled here; a second one is refused.
GPT_API int gpt_settings_set(gpt_settings *s, const char *name, const char *json_value, gpt_err *err);

// ----------------------------------------------------------------------------
// generation

// Called after each step of a generation with the text that step completed
// (text[0..len), whole UTF-8 characters, not NUL-terminated, never NULL,
// possibly empty: a character or a possible stop string still incomplete is held
// back) and the token it sampled (-1 for the last call after a stop from
// the callback, which hands over the text held back). Returning nonzero
// stops the generation after this step (stop reason "cancelled"). The
// pieces together are the result's text (less the prompt with echo).
typedef int (*gpt_token_callback)(void *user_data, const char *text, size_t len, int32_t token);

// Why a generation ended.
typedef enum {
    GPT_STOP_EOS = 1,      // sampled <|endoftext|>
    GPT_STOP_LENGTH = 2,   // max_tokens generated
    GPT_STOP_CONTEXT = 3,  // the context is full (and no context_shift)
    GPT_STOP_STRING = 4,   // one of the stop strings (not in the text)
    GPT_STOP_GRAMMAR = 6,  // the grammar is complete and nothing may follow
    GPT_STOP_CANCELLED = 100,  // the callback returned nonzero
} gpt_stop;

// Continues prompt (a NUL-terminated text; "" starts a new document) with
// the settings s (NULL: the defaults), calling callback (may be NULL) after
// each step: exactly the text and tokens of `gpt -m MODEL -p PROMPT` with
// the same settings (-s SEED, -n N, --temp T, ...). *out is the result
// (gpt_result_free), also when the callback stopped it; NULL on failure.
GPT_API int gpt_generate(gpt_model *m, const char *prompt, const gpt_settings *s, gpt_token_callback callback,
                         void *user_data, gpt_result **out, gpt_err *err);

// The same from the prompt's token ids ids[0..n) (n >= 1, each in [0,
// gpt_model_vocab)): a --batch --jsonl line's {"prompt": [ids]}. With echo
// the text starts with the ids' bytes as UTF-8.
GPT_API int gpt_generate_tokens(gpt_model *m, const int32_t *ids, size_t n, const gpt_settings *s,
                                gpt_token_callback callback, void *user_data, gpt_result **out, gpt_err *err);

// ----------------------------------------------------------------------------
// a batch: many requests through the continuous-batching scheduler (that of
// gpt --batch and gpt serve): up to `parallel` sequences decode together,
// prompts that start alike share their computed blocks, and each request's
// result is gpt_generate's with the same prompt and settings, bit for bit.
// A batch is used by one thread at a time; from gpt_batch_new to
// gpt_batch_free it holds the model's threads (when no generation does).
// The settings a request is added with must live until gpt_batch_run
// returns.

typedef struct gpt_batch gpt_batch;

GPT_API int gpt_batch_new(gpt_model *m, size_t parallel, gpt_batch **out, gpt_err *err);
// Adds a request: prompt with s (NULL: the defaults), callback (may be NULL)
// called as gpt_generate calls it; *index (may be NULL) its number, from 0
// in the order added. A bad prompt or setting is refused here.
GPT_API int gpt_batch_add(gpt_batch *b, const char *prompt, const gpt_settings *s, gpt_token_callback callback,
                          void *user_data, size_t *index, gpt_err *err);
// Runs until every request added has ended. A request whose callback
// returns nonzero, or that gpt_batch_cancel names (from a callback, or
// before the run), ends "cancelled"; the others go on.
GPT_API int gpt_batch_run(gpt_batch *b, gpt_err *err);
GPT_API int gpt_batch_cancel(gpt_batch *b, size_t index, gpt_err *err);
// Request index's result once it has ended (the batch's: valid until
// gpt_batch_free), or NULL with err set: its failure, or that it has not ended.
GPT_API const gpt_result *gpt_batch_result(const gpt_batch *b, size_t index, gpt_err *err);
GPT_API void gpt_batch_free(gpt_batch *b);  // NULL-safe

// ----------------------------------------------------------------------------
// chat: a conversation rendered with a chat template (docs/chat.md): a
// built-in by name ("gpt2", the default for NULL; "transcript"; "chatml")
// or a template file's path.

typedef struct {
    const char *role;     // "system", "user" or "assistant"
    const char *content;  // UTF-8 text; a literal <|endoftext|> in it stays text
} gpt_message;

// The prompt msgs[0..n) render to (gpt --apply-template), with the opening
// of the assistant's turn when add_generation_prompt: *text (gpt_free;
// NUL-terminated), *len (may be NULL) its bytes.
GPT_API int gpt_chat_render(const char *template_name, const gpt_message *msgs, size_t n, int add_generation_prompt,
                            char **text, size_t *len, gpt_err *err);
// The assistant's answer to msgs[0..n): the conversation's tokens generated
// with the settings, the template's stops after the settings' stops: the
// bits of gpt --chat-template and of gpt serve's /v1/chat/completions.
GPT_API int gpt_chat(gpt_model *m, const char *template_name, const gpt_message *msgs, size_t n,
                     const gpt_settings *s, gpt_token_callback callback, void *user_data, gpt_result **out,
                     gpt_err *err);

// ----------------------------------------------------------------------------
// scoring, as gpt --score: the tokens of text[0..len) (with prepend_eos,
// <|endoftext|> first, so that the text's first token is scored too) in *ids,
// *n of them (n >= 1), and in *logprobs the log-probability of each but the
// first given those before it (logprobs[i] is ids[i + 1]'s, n - 1 of them),
// in double; both gpt_free. A text longer than the context needs stride (1 to
// the context: windows every stride tokens, each token scored once, as gpt
// --stride); 0: it must fit.
GPT_API int gpt_score(gpt_model *m, const char *text, size_t len, int prepend_eos, size_t stride, int32_t **ids,
                      double **logprobs, size_t *n, gpt_err *err);

// Embeddings, as gpt embed: the tokens of text[0..len) (1 to the context)
// run alone, their final hidden states (ln_f's output, transformers'
// GPT2Model last_hidden_state) pooled by pooling ("mean", the default when
// NULL, or "last") and, with normalize, scaled to unit length; *out
// (gpt_free) holds *dim floats (the model's d_model), bit for bit gpt
// embed's vector of the same text.
GPT_API int gpt_embed(gpt_model *m, const char *text, size_t len, const char *pooling, int normalize, float **out,
                      size_t *dim, gpt_err *err);

// Multiple choice, as gpt --choice: each of choices[0..n) (1 to 64) scored
// as the continuation of prompt (prompt + choice tokenized as one text; a
// token across the boundary is the choice's), into scores[i] (the caller's
// array of n): the sum of its tokens' log-probabilities, their mean, its
// tokens' bytes and the sum per byte, each bit for bit gpt --choice --json's;
// *best (may be NULL) the index of the largest sum, the lower of equal ones.
typedef struct {
    double sum, mean, mean_per_byte;
    size_t tokens, bytes;
} gpt_choice_score;
GPT_API int gpt_choose(gpt_model *m, const char *prompt, const char *const *choices, size_t n,
                       gpt_choice_score *scores, size_t *best, gpt_err *err);

// ----------------------------------------------------------------------------
// the result

GPT_API void gpt_result_free(gpt_result *r);  // NULL-safe
// The text: the generation's (with echo the prompt first, its invalid UTF-8
// replaced by U+FFFD), NUL-terminated; *len (may be NULL) its bytes.
GPT_API const char *gpt_result_text(const gpt_result *r, size_t *len);
// The generated token ids (with a stop string, the token that carried it
// too), *n of them.
GPT_API const int32_t *gpt_result_tokens(const gpt_result *r, size_t *n);
// The prompt's token ids, *n of them.
GPT_API const int32_t *gpt_result_prompt_tokens(const gpt_result *r, size_t *n);
GPT_API gpt_stop gpt_result_stop(const gpt_result *r);
// "eos", "length", "context", "stop", "grammar" or "cancelled" (gpt --json's stop_reason).
GPT_API const char *gpt_result_stop_reason(const gpt_result *r);
// The seed it sampled with: the one set, or the one drawn.
GPT_API uint64_t gpt_result_seed(const gpt_result *r);
// With logprobs set: OpenAI's legacy completions "logprobs" object as JSON
// text (gpt --json's "logprobs": tokens, token_logprobs, top_logprobs,
// text_offset, token_ids, top_ids); NULL without.
GPT_API const char *gpt_result_logprobs_json(const gpt_result *r);

#ifdef __cplusplus
}
#endif

#endif
