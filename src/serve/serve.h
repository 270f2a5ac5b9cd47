/*
 * serve.h - what the files of `gpt serve` share.
 *
 *   serve.c       run_serve: the options, the model, the listening socket,
 *                 the threads, and the shutdown on SIGINT/SIGTERM
 *   requests.c    a request's life (new, submit, cancel, unref, free) and the
 *                 one thread that owns the Engine: it takes the requests the
 *                 HTTP threads enqueue and drives their sequences through
 *                 the library's scheduler (scheduler.h), as --batch does
 *   http.c        libmicrohttpd's side: the routes, the request bodies, the
 *                 responses (JSON, server-sent events), the log line
 *   api.c         the endpoints' JSON: a completion body read into an ApiRequest,
 *                 a finished ApiRequest written as OpenAI's response
 *   ollama.c      Ollama's API (under /api/): its bodies as the OpenAI bodies they
 *                 mean (api.c reads them), the answers in Ollama's shapes
 *   tools.c       function tools on the chat endpoint: the calls' JSON Schema, and
 *                 the call found back in an answer's text
 *   responses.c   OpenAI's Responses API (/v1/responses): its bodies as the chat
 *                 bodies they mean, the answers and stream events in its shapes
 *
 * Threads. One scheduler thread owns the Engine, its KV pool and the thread
 * pool: nothing else touches them. libmicrohttpd runs a few threads
 * (HTTP_THREADS), each polling its share of the connections: it parses and
 * checks a request, tokenizes it (under Server.tok_lock: a Tokenizer
 * encodes on one thread at a time), enqueues an ApiRequest and parks the connection
 * (suspends it, and goes on with the others) until the scheduler has news
 * for the ApiRequest and resumes it (http_resume); then it writes the answer, or
 * the stream's new events. No thread is started or woken for a request but
 * these two. While a connection is parked, libmicrohttpd does not watch its
 * socket: the main thread looks every half second for a client that went
 * away (http_deadlines). Everything the sides share (the inbox, each ApiRequest's
 * text and state, the counters) is guarded by Server.lock; the scheduler
 * sleeps on Server.wake when it has nothing to do. No thread spins.
 */
#ifndef GPT_SERVE_H
#define GPT_SERVE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "front/chat.h"
#include "front/front.h"
#include "embed.h"
#include "engine.h"

typedef struct cJSON cJSON;

typedef enum { REQUEST_COMPLETION, REQUEST_SCORE, REQUEST_EMBED } RequestKind;

// One sequence of a completion request: choice `index` of its response.
typedef struct {
    // set before the request is enqueued, then read-only
    const int32_t *ids;      // its prompt (the ApiRequest's)
    size_t n_ids;
    size_t prompt;           // which of the request's prompts
    GenParams params;        // seed: the request's seed + index
    // the scheduler's alone
    Sequence seq;
    int running;             // admitted: it has its blocks
    // shared, under Server.lock
    char *text;              // the completion so far: whole UTF-8 characters
    size_t text_len, text_cap;
    int32_t *tokens;         // the generated ids so far
    size_t n_tokens, tokens_cap;
    TokenLogprob *lp;        // with "logprobs": lp[i] is the log-probability of token lp_from + i of the
    size_t n_lp, lp_cap;     // prompt and generated ids together (lp_from: 1 with "echo", else the
    size_t lp_from;          // prompt's length; the Sequence's)
    const char *finish;      // "stop", "length", "interrupted", "error"; NULL while running
    const char *stop_reason; // gpt's own (stop_reason_name, engine.h) when it stopped; NULL: finish's
    size_t seq_tokens;       // the positions its KV cache held when it stopped (--json's stats.seq_tokens)
    double t_first, t_last;  // the scheduler's: when its first and last tokens came (now_seconds)
    size_t cached_tokens;    // of its prompt, the tokens shared from earlier KV blocks (once admitted)
    // the HTTP thread's alone: what a stream has sent
    size_t sent_text, sent_tokens;
    int sent_echo, sent_finish;
} ApiChoice;

typedef struct ApiRequest {
    RequestKind kind;
    // set before the request is enqueued, then read-only
    ApiChoice *completions;
    size_t n_completions;
    int32_t **prompt_ids;    // (n_prompts) each prompt's tokens
    size_t *prompt_lens;
    char **echo;             // (n_prompts) each prompt's text for "echo", or NULL
    size_t n_prompts;
    Grammar *grammar;        // the output's grammar ("grammar", "json_schema", "regex",
                             // "response_format"), shared by its completions; or NULL
    const char *grammar_field;  // the field that gave it (a literal)
    char **stop_strings;     // the request's stop strings (copies), shared by its completions
    size_t n_stops;
    uint64_t seed;           // the first choice's
    size_t stride;           // REQUEST_SCORE: as --stride (0: the text must fit the context)
    size_t n, best_of;       // choices per prompt answered, completions per prompt computed (best_of >= n:
                             // the n of the highest mean log-probability per token are answered)
    int show_logprobs;       // the client asked for "logprobs" (best_of computes them to rank)
    int include_usage;       // a stream's stream_options.include_usage: a last chunk with the usage
    int chat;                // /v1/chat/completions: answered in the chat shapes
    int ollama;              // /api/generate, /api/chat: answered in Ollama's shapes (ollama.c)
    char **tool_names;       // a chat's functions (tools.c): each answer is a call of one of them, or
    size_t n_tools;          // (0) text
    const char *adapter;     // the adapter's name (Server's) when one was picked, or NULL
    cJSON *responses;        // /v1/responses: the fields its answer repeats, and answered in the Responses
                             // shapes (responses.c); NULL for the others
    // shared, under Server.lock
    struct MHD_Connection *parked;  // the request's connection, suspended until there is news; or NULL
    int refs;                // the HTTP side and the scheduler: the last one frees
    int cancelled;           // the client went away: dropped at the next step
    size_t finished;         // completions with a finish reason
    int done;                // every choice finished (or the score is ready)
    int status;              // 200, or the HTTP status of a failure found by the scheduler
    char *error;             // its message
    const char *error_param; // the field at fault (a literal), or NULL
    double *logprobs;        // REQUEST_SCORE: (n_ids - 1)
    size_t windows;
    float *embeddings;       // REQUEST_EMBED: (n_prompts, C), each prompt's pooled vector (embed.h)
    size_t embedded;         // REQUEST_EMBED, the engine thread's: inputs done
    int normalize;           // REQUEST_EMBED: unit length ("normalize", default true)
    int base64;              // REQUEST_EMBED: "encoding_format": "base64"
    double arrived;          // when it was submitted (now_seconds), for the latency histograms
    struct ApiRequest *next;    // the inbox
    size_t live;             // the scheduler's: completions it still holds
    size_t events;           // a Responses stream's events so far, its next sequence_number (the HTTP
                             // thread's alone)
} ApiRequest;

// Limits and settings, from the options.
enum { MAX_CORS_ORIGINS = 32 };
typedef struct {
    size_t parallel;         // sequences decoded together
    size_t queue;            // requests waiting beyond those running
    size_t max_body;         // bytes of a request body
    size_t max_tokens;       // the most max_tokens a request may ask for
    size_t max_connections;
    unsigned timeout;        // seconds a connection may idle
    unsigned grace;          // seconds running requests may finish after SIGINT/SIGTERM
    const char *api_key;     // NULL: none
    int log_fd;              // --log: the request lines' file (2: stderr, the default), or -1 (off)
    const char *cors_origins[MAX_CORS_ORIGINS];  // --cors-origin: origins whose pages may call ("*": any)
    size_t n_cors_origins;
    DType kv_dtype;
} ServeLimits;

// A Prometheus histogram: counts[i] of the values <= its bound i (and
// above bound i - 1), counts[N_BUCKETS] of those above the last; not yet
// cumulative (metrics_text adds them up).
enum { N_BUCKETS = 16 };
typedef struct {
    uint64_t counts[N_BUCKETS + 1];
    double sum;
    uint64_t count;
} Histogram;
// The latency histograms: their names and buckets' upper bounds (requests.c,
// which observes them; api.c prints them).
enum { H_FIRST_TOKEN, H_INTER_TOKEN, H_REQUEST, H_QUEUE, N_HISTOGRAMS };
typedef struct {
    const char *name, *help;
    double le[N_BUCKETS];
} HistogramSpec;
extern const HistogramSpec LATENCY_HISTOGRAMS[N_HISTOGRAMS];
// Adds v to the histogram h of Metrics (under Server.lock).
void histogram_observe(Histogram *hist, int h, double v);

// Prometheus counters, under Server.lock.
enum { N_STATUS = 10 };
typedef struct {
    int status[N_STATUS];                // the statuses seen ...
    uint64_t requests[N_STATUS];         // ... and how many of each
    uint64_t prompt_tokens, generated_tokens, cancelled, prefix_reused;
    double busy_seconds;                 // the scheduler's time in engine steps
    size_t running, queued;              // sequences now, kept by the scheduler hooks under the lock: an ended one has left both before its client can have the answer
    size_t kv_blocks_used, kv_blocks;    // of the pool
    size_t kv_blocks_touched;            // of the pool, ever used: they have taken memory
    GrammarShareStats grammar;           // the engine's maskers (grammar_share_stats)
    // seconds: from a completion request's arrival to each choice's first
    // token; between a choice's tokens; from its arrival to its end; each
    // choice's wait from the arrival to a place in the steps
    Histogram latency[N_HISTOGRAMS];
} Metrics;

// An adapter gpt serve applies at run time (--lora NAME=PATH), beside the
// shared base weights: the requests whose "model" or "lora" names it run
// with it.
typedef struct {
    const char *name;  // argv's
    LoraWeights w;
} ServeAdapter;

typedef struct Server {
    Session session;
    ServeAdapter adapters[LORA_MAX];  // read-only once serving
    size_t n_adapters;
    ChatTemplate chat_template;  // --chat-template: how /v1/chat/completions renders messages
    const char *model_name;  // as the responses name it: the file's name
    size_t model_bytes;      // the file's size and modification time (Ollama's /api/tags)
    time_t model_mtime;
    ServeLimits limits;
    Pooling pooling;         // --pooling: how /v1/embeddings and /api/embed pool a text's hidden states
    size_t kv_blocks;        // the pool's blocks
    size_t engine_bytes;     // the engine's step buffers (engine_buffer_bytes)
    GrammarVocab *grammar_vocab;  // the tokens' trie, for requests with a grammar (read-only)
    Engine engine;           // the scheduler's alone
    int engine_up;
    pthread_mutex_t tok_lock;  // tokenizer_encode: one thread at a time
    pthread_mutex_t lock;      // everything below, and the Requests' shared fields
    pthread_cond_t wake;       // the scheduler: a request came, or it must stop
    pthread_cond_t idle;       // the main thread: in_flight or answering went down
    ApiRequest *inbox, *inbox_tail;
    size_t in_flight;          // requests accepted and not yet finished
    size_t answering;          // HTTP requests whose answer is not all sent
    int ready;                 // the model and the engine are up (till then: 503 "loading")
    int draining;              // SIGINT/SIGTERM: new requests get 503
    int hard_stop;             // the grace ran out: finish everything now
    int stopping;              // the scheduler exits when it has nothing
    uint64_t next_id;          // of the responses' "id": cmpl-HEX (chatcmpl-HEX), from a random start
    long started;              // when the model was loaded (time(NULL))
    Metrics metrics;
    struct Arrival *arrivals;  // http.c's: the open connections, for their requests' deadline
    // The HTTP side's callback, registered by http_start: the engine thread
    // has news for req (text, a finish). Under the lock.
    void (*news)(ApiRequest *req);
} Server;

// requests.c
// The engine thread's loop (pthread_create's start routine).
void *scheduler_main(void *server);
// A request of n_prompts prompts, refs 2 (the HTTP side and the engine thread),
// status 200, for api.c to fill. NULL when out of memory.
ApiRequest *api_request_new(size_t n_prompts);
// Enqueues req (its refs include the engine thread's). 0, or -1 when the queue is
// full or the server is draining (then nothing was enqueued).
int api_request_submit(Server *s, ApiRequest *req);
// The client of req went away: the scheduler drops it at its next step.
void api_request_cancel(Server *s, ApiRequest *req);
void api_request_cancel_locked(Server *s, ApiRequest *req);  // the same, under Server.lock
// Drops one reference; the last frees the request. Takes Server.lock.
void api_request_unref(Server *s, ApiRequest *req);
void api_request_free(ApiRequest *req);

// api.c: the endpoints' JSON. Each parser returns 0, or the HTTP status of
// the error with *msg (malloc'd) and param (PARAM_CAP bytes: the field at
// fault, or "") set.
enum { PARAM_CAP = 64 };
// root as one line of JSON text (malloc'd), root deleted; NULL when out of
// memory (or root NULL).
char *json_text(cJSON *root);
int completion_request(Server *s, const char *body, size_t len, ApiRequest **out, int *stream, char **msg,
                   char *param);
// /v1/chat/completions: the messages rendered with the server's chat
// template into one prompt (chat_tokens), the template's stops added to
// the body's; the answers in the chat shapes (ApiRequest.chat).
int chat_request(Server *s, const char *body, size_t len, ApiRequest **out, int *stream, char **msg, char *param);
// The adapter named name (--lora NAME=PATH), or NULL.
const ServeAdapter *serve_adapter(const Server *s, const char *name);
// A request's error: *msg (malloc'd) and param (PARAM_CAP bytes) the field
// p names (NULL: none); returns status.
int api_fail(int status, char **msg, char *param, const char *p, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
// The body as a JSON object: parsed, with nothing after it, no NUL byte.
// NULL with *status, *msg and param set (400).
cJSON *api_body(const char *body, size_t len, int *status, char **msg, char *param);
// A copy of n bytes of p (NUL bytes too), NUL-terminated; NULL when out of memory.
char *copy_text(const char *p, size_t n);
// The model an answer names: the adapter picked, else the base.
const char *answered_model(const Server *s, const ApiRequest *req);
// POST /apply-template: {"messages"} -> {"prompt": the rendered text}, as llama-server's.
char *apply_template_response(Server *s, const char *body, size_t len, int *status, char **msg, char *param);
int score_request(Server *s, const char *body, size_t len, ApiRequest **out, char **msg, char *param);
// The response of a finished completion request (or, with choice != SIZE_MAX,
// one stream chunk: the choice's new text and tokens, and its finish
// reason once it has one); a malloc'd JSON text. Under Server.lock.
char *completion_response(Server *s, const ApiRequest *req, const char *id, long created);
char *completion_chunk(Server *s, ApiRequest *req, size_t choice, const char *id, long created, int *finished);
char *score_response(Server *s, const ApiRequest *req);
char *tokenizer_info_response(Server *s);
char *tokenize_response(Server *s, const char *body, size_t len, int *status, char **msg, char *param);
char *detokenize_response(Server *s, const char *body, size_t len, int *status, char **msg,
                          char *param);
char *models_response(Server *s);
// GET /v1/models/ID: the model's object, or (*status 404) OpenAI's error
// for another id.
char *model_response(Server *s, const char *id, int *status);
// A stream's last chunk before [DONE] with stream_options.include_usage:
// no choices, the request's usage. Under Server.lock.
char *usage_chunk(Server *s, const ApiRequest *req, const char *id, long created);
char *metrics_text(Server *s);  // Prometheus' text format
// {"error": {"message", "type", "param", "code"}}
char *error_json(int status, const char *msg, const char *param);  // param NULL or "": null

// ollama.c: Ollama's API (under /api/) over the same requests. Its errors are
// Ollama's {"error": "MESSAGE"}.
typedef enum {
    OLLAMA_NONE,
    OLLAMA_VERSION,
    OLLAMA_TAGS,
    OLLAMA_PS,
    OLLAMA_SHOW,
    OLLAMA_GENERATE,
    OLLAMA_CHAT,
    OLLAMA_EMBED,
    OLLAMA_MANAGE  // pull, push, create, delete, copy, blobs: refused, whatever the method
} OllamaRoute;
OllamaRoute ollama_route(const char *path);
int ollama_path(const char *path);  // under /api/: answered in Ollama's shapes, errors included
char *ollama_error_json(const char *msg);
char *ollama_version_response(void);
// GET /api/tags (ps 0) and /api/ps (ps 1): the one model served.
char *ollama_models_response(Server *s, int ps);
// POST /api/show {"model"}: the model's details; else NULL with *status and *msg (malloc'd).
char *ollama_show_response(Server *s, const char *body, size_t len, int *status, char **msg);
// POST /api/generate (chat 0) or /api/chat (chat 1): the OpenAI body it
// means, read by completion_request or chat_request (their rules and
// messages, renamed to the Ollama fields); *stream Ollama's (default true).
// 0 with *out (ApiRequest.ollama set), or with *load (malloc'd) the
// answer to give at once (an empty prompt or conversation: Ollama's "load
// the model"); or the status with *msg and param as completion_request's.
int ollama_request(Server *s, int chat, const char *body, size_t len, ApiRequest **out, int *stream, char **load,
                   char **msg, char *param);
// The answer of a finished request, and a stream's next NDJSON line for
// choice k (NULL: nothing new; *finished once its last is out). Under Server.lock.
char *ollama_response(Server *s, const ApiRequest *req);
char *ollama_chunk(Server *s, ApiRequest *req, size_t k, int *finished);

// responses.c: OpenAI's Responses API (POST /v1/responses), stateless.
// The body as the chat body it means, read by chat_request (its rules and
// messages, renamed to the Responses fields); 0 with *out
// (ApiRequest.responses set) and *stream, or the status with *msg and
// param as completion_request's.
int responses_request(Server *s, const char *body, size_t len, ApiRequest **out, int *stream, char **msg, char *param);
// The response object of a finished request, and a stream's next events
// (server-sent events with their names, each with its sequence_number; NULL:
// nothing new; *finished once the last is out, which for a failed request
// is response.failed). id is "resp_" and hex digits. Under Server.lock.
char *responses_response(Server *s, const ApiRequest *req, const char *id, long created);
char *responses_chunk(Server *s, ApiRequest *req, const char *id, long created, int *finished);

// tools.c: function tools on /v1/chat/completions. tools, tool_choice and
// parallel_tool_calls (each NULL when absent) read: 0 with *schema (malloc'd
// JSON Schema text whose instances are {"name":NAME,"arguments":ARGS}
// calls of the functions chosen) and *names (malloc'd, n_names, every
// function's), or both NULL when no tool is to be called (none given, or
// tool_choice "none"); -1 with msg (cap bytes) and *param the field at fault.
int tools_read(const cJSON *tools, const cJSON *choice, const cJSON *parallel, char **schema, char ***names,
               size_t *n_names, char *msg, size_t cap, const char **param);
// The length of the head {"name":"NAME","arguments": that text[0..len)
// starts with (*name the function's), or 0 while it does not have it whole.
size_t tool_call_head(const ApiRequest *req, const char *text, size_t len, const char **name);
// Choice c's call as its text is now: the head's length (0: no name yet)
// and *end, where the arguments that may be sent end (the call's closing
// brace held back; *whole once the finished text is the whole call).
size_t tool_call_args(const ApiRequest *req, const ApiChoice *c, const char **name, size_t *end, int *whole);
// OpenAI's tool call {"id": "call_…", "type": "function", "function":
// {"name", "arguments"}} of choice k of the answer `id`, the arguments'
// text args[0..n); name NULL: the function's arguments alone (a stream's
// later piece); index: with "index": 0 (a stream's delta).
cJSON *tool_call_json(const char *id, size_t k, const char *name, const char *args, size_t n, int index);

// embed.c: POST /v1/embeddings (OpenAI's) and /api/embed (Ollama's, ollama 1):
// the body read into a REQUEST_EMBED (every input tokenized, checked
// against the context); 0, or the status with *msg and param as
// completion_request's. The answer of a finished one (malloc'd JSON).
int embed_request(Server *s, int ollama, const char *body, size_t len, ApiRequest **out, char **msg, char *param);
char *embed_response(Server *s, const ApiRequest *req);

// page.html, the page at /, as the Makefile writes it into page_html.c
extern const unsigned char serve_page_html[];
extern const size_t serve_page_html_len;

// http.c
struct MHD_Daemon;
struct MHD_Connection;
// Opens libmicrohttpd (libmicrohttpd.so.12) the first time: every other
// function here needs it. Thread-safe. 0, or -1 with err set ("cannot load
// libmicrohttpd ...").
int http_load(GptError *err);
// libmicrohttpd's MHD_quiesce_daemon (the listening socket, or -1) and
// MHD_stop_daemon (waits for every connection's thread).
int http_quiesce(struct MHD_Daemon *d);
void http_stop(struct MHD_Daemon *d);
// Starts serving on the listening socket fd (libmicrohttpd's threads), and
// registers s->news: the connection parked on a request with news goes on
// (libmicrohttpd asks for its answer, or the stream's next events). NULL
// after reporting on failure.
struct MHD_Daemon *http_start(Server *s, int fd, int ipv6);
// Closes each connection whose request has taken longer than --timeout
// seconds to arrive whole (headers and body): libmicrohttpd's own timeout
// counts idle time only, which a client sending a byte a second never
// reaches. And cancels the request of each parked connection whose client went
// away. The main thread calls it every half second.
void http_deadlines(Server *s);

#endif
