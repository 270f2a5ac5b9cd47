/*
 * http.c - gpt serve's HTTP side, on libmicrohttpd (HTTP_THREADS threads,
 * each polling its share of the connections; libmicrohttpd parses every
 * request, we never read HTTP ourselves). For each request:
 *
 *   1. the body is gathered up to --max-body (a longer one is a 413: at
 *      once when its Content-Length says so, the body never read; else
 *      once it has come, kept nowhere);
 *   2. the API key, when there is one, is checked in constant time (every
 *      route but /health, which load balancers ask, and the page at /,
 *      which asks for the key itself);
 *   3. the route answers: GET /, /health, /metrics, /v1/models, /api/version,
 *      /api/tags, /api/ps at once; POST /tokenize, /detokenize,
 *      /apply-template and /api/show at once (tokenizing under the
 *      tokenizer's lock); Ollama's model management (/api/pull, ...) a 501
 *      whatever the method; POST /v1/completions, /v1/chat/completions,
 *      /v1/responses, /v1/score, /v1/embeddings, /api/generate, /api/chat and /api/embed become an ApiRequest for the
 *      scheduler, and the connection is parked (suspended: its thread goes
 *      on with the others) until the engine thread has news (Server.news, http_resume);
 *      then it answers: the whole JSON once the request is done, or the
 *      server-sent events (under /api/: Ollama's NDJSON lines) of the new
 *      text, and parks again till the next.
 *      A client that goes away while parked cancels its ApiRequest
 *      (http_deadlines);
 *   4. one JSON line (on stderr, or --log's file) says what was asked and answered.
 *
 * CORS (--cors-origin): a request whose Origin is allowed gets
 * Access-Control-Allow-Origin (and Vary: Origin) on every answer, errors
 * and streams included; a preflight (OPTIONS) from it gets 204 with the
 * methods, the headers it asked for (bounded) and a Max-Age, and needs no
 * key (the request that follows does). Another origin gets no CORS header,
 * and 403 for an OPTIONS; an OPTIONS with no Origin is a 405.
 *
 * A request must arrive whole (headers and body) within --timeout seconds
 * of its connection's start or of the end of the request before it on the
 * connection: libmicrohttpd's timeout counts idle time alone, which a
 * client sending a byte a second never reaches (http_deadlines).
 *
 * Errors are OpenAI's {"error": {"message", "type", "param", "code"}} (under
 * /api/, Ollama's {"error": "message"}): 400
 * for a bad body (the command's rules and messages), 401, 404, 405, 413, and
 * 503 with Retry-After when the queue is full or the server is shutting down.
 */
#define _GNU_SOURCE  // POLLRDHUP
#include <cJSON.h>
#include <dlfcn.h>
#include <microhttpd.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/grow.h"
#include "serve.h"
#include "base/utf8.h"

// libmicrohttpd is opened when gpt serve starts (http_load), not linked:
// it brings GnuTLS, whose loading costs every run of gpt ~8 ms of CPU
// (an empty C program linked with -lgnutls: 11 ms of task-clock against
// 3), which only the server needs. The table is written once, under
// pthread_once, and only read after: the process's one copy of the
// library, as the dynamic linker's own tables are.
// The functions http.c calls, each named once: the table's fields and the
// symbols looked up.
#define MHD_FUNCTIONS(X)                                                                           \
    X(add_response_header) X(create_response_from_buffer) X(lookup_connection_value_n)             \
    X(lookup_connection_value) X(get_connection_info) X(suspend_connection) X(stop_daemon)         \
    X(start_daemon) X(resume_connection) X(quiesce_daemon) X(queue_response) X(destroy_response)   \
    X(create_response_from_callback)
#define MHD_FIELD(name) __typeof__(MHD_##name) *name;
static struct {
    MHD_FUNCTIONS(MHD_FIELD)
    char error[256];
    int ok;
} mhd;
#undef MHD_FIELD
static pthread_once_t mhd_once = PTHREAD_ONCE_INIT;

static const char MHD_LIBRARY[] = "libmicrohttpd.so.12";  // Debian's soname of the API microhttpd.h declares

static void mhd_open(void) {
    void *h = dlopen(MHD_LIBRARY, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        snprintf(mhd.error, sizeof mhd.error, "cannot load libmicrohttpd (%s): %s", MHD_LIBRARY, why ? why : "not found");
        return;
    }
    // dlsym returns void *: POSIX guarantees it converts to a function pointer
#define MHD_SYMBOL(name) {(void **)&mhd.name, "MHD_" #name},
    struct {
        void **slot;
        const char *name;
    } syms[] = {MHD_FUNCTIONS(MHD_SYMBOL)};
#undef MHD_SYMBOL
    for (size_t i = 0; i < sizeof syms / sizeof *syms; i++)
        if (!(*syms[i].slot = dlsym(h, syms[i].name))) {
            snprintf(mhd.error, sizeof mhd.error, "%s lacks %s", MHD_LIBRARY, syms[i].name);
            return;  // the handle stays open: nothing of it is used
        }
    mhd.ok = 1;
}

int http_load(GptError *err) {
    pthread_once(&mhd_once, mhd_open);
    return mhd.ok ? 0 : gpt_error(err, "%s", mhd.error);
}

int http_quiesce(struct MHD_Daemon *d) { return mhd.quiesce_daemon(d); }

void http_stop(struct MHD_Daemon *d) { mhd.stop_daemon(d); }

// The longest Origin kept: longer ones are allowed by no --cors-origin.
enum { ORIGIN_CAP = 256 };

// One request on a connection (libmicrohttpd's con_cls).
typedef struct {
    double t0;
    char method[16], path[256];
    int path_cut;       // the URL was longer than path holds
    char origin[ORIGIN_CAP];  // the Access-Control-Allow-Origin of its answers: its Origin, or "*"
    int cors;           // 1: its origin is allowed (--cors-origin), -1: it has another, 0: none
    char *body;
    size_t len, cap;
    int too_large;
    int status;         // what was answered
    ApiRequest *request;   // a completion or score request, held until the HTTP request ends
    int stream;
} Conn;

// The threads of libmicrohttpd: parsing, tokenizing and answering are
// short next to a step; a second thread keeps a long body's parse from
// holding up every other answer.
enum { HTTP_THREADS = 2 };

// A streamed answer: the reader libmicrohttpd calls for more of it.
typedef struct {
    Server *s;
    ApiRequest *request;   // one reference of its own
    struct MHD_Connection *conn;  // parked on the request between events
    char id[40];
    long created;
    char *buf;          // events not yet handed over
    size_t len, pos, cap;
    int ended;          // "data: [DONE]" is in buf
} Stream;

// The send buffer of a connection, in bytes (the kernel doubles it).
enum { SEND_BUFFER = 64 * 1024 };

// A connection (libmicrohttpd's socket context), listed in Server.arrivals
// while it is open, under Server.lock. While a request is arriving it has
// --timeout seconds from `since` to arrive whole.
typedef struct Arrival {
    int fd;
    double since;       // when the connection opened, or its last request ended
    int arriving;       // a request is on its way (or the next one may come)
    ApiRequest *request;   // what its current request asked, while held (its connection may be parked on it)
    struct Arrival *prev, *next;
} Arrival;

// ----------------------------------------------------------------------------
// answers

// /v1/models/ID: the id (non-empty), else NULL.
static const char *model_id(const char *path) {
    static const char prefix[] = "/v1/models/";
    return !strncmp(path, prefix, sizeof prefix - 1) && path[sizeof prefix - 1] ? path + sizeof prefix - 1 : NULL;
}

// The paths that take GET (and HEAD), and those that take POST.
// (Ollama's model management, ollama_route's OLLAMA_MANAGE, takes any method.)
static int get_path(const char *p) {
    return !strcmp(p, "/") || !strcmp(p, "/health") || !strcmp(p, "/metrics") || !strcmp(p, "/v1/models") ||
           !strcmp(p, "/tokenizer_info") || model_id(p) || !strcmp(p, "/api/version") || !strcmp(p, "/api/tags") ||
           !strcmp(p, "/api/ps");
}
static int post_path(const char *p) {
    return !strcmp(p, "/v1/completions") || !strcmp(p, "/v1/chat/completions") || !strcmp(p, "/v1/responses") ||
           !strcmp(p, "/v1/score") || !strcmp(p, "/tokenize") || !strcmp(p, "/detokenize") ||
           !strcmp(p, "/apply-template") || !strcmp(p, "/api/show") || !strcmp(p, "/api/generate") ||
           !strcmp(p, "/api/chat") || !strcmp(p, "/v1/embeddings") || !strcmp(p, "/api/embed");
}

static void count_status(Server *s, int status) {
    Metrics *m = &s->metrics;
    for (int i = 0; i < N_STATUS; i++) {
        if (m->status[i] == 0) m->status[i] = status;
        if (m->status[i] == status) {
            m->requests[i]++;
            return;
        }
    }
}

// ----------------------------------------------------------------------------
// CORS

// A preflight's Access-Control-Request-Headers: at most this many bytes and names.
enum { CORS_HEADERS_MAX = 1024, CORS_NAMES_MAX = 64 };
// How long a browser may keep a preflight's answer, in seconds.
#define CORS_MAX_AGE "600"

// What --cors-origin allows of origin (as the browser sends it: exact
// bytes): the Access-Control-Allow-Origin to answer ("*" when any origin
// may call), or NULL.
static const char *origin_allowed(const Server *s, const char *origin) {
    const char *allowed = NULL;
    for (size_t i = 0; i < s->limits.n_cors_origins; i++) {
        if (!strcmp(s->limits.cors_origins[i], "*")) return "*";
        if (!strcmp(s->limits.cors_origins[i], origin)) allowed = origin;
    }
    return allowed;
}

// The request's Origin into k: k->cors 1 when it is allowed, -1 when not, 0 without one.
static void read_origin(Server *s, struct MHD_Connection *c, Conn *k) {
    const char *o;
    size_t n;
    if (mhd.lookup_connection_value_n(c, MHD_HEADER_KIND, "Origin", 6, &o, &n) != MHD_YES || !o) return;
    k->cors = -1;
    // one with a NUL byte is not the origin its first bytes name
    const char *allowed = strlen(o) == n && n < sizeof k->origin ? origin_allowed(s, o) : NULL;
    if (!allowed) return;
    snprintf(k->origin, sizeof k->origin, "%s", allowed);
    k->cors = 1;
}

// Queues r with the status, and the CORS headers when k's origin is allowed.
static enum MHD_Result queue(struct MHD_Connection *c, Conn *k, int status, struct MHD_Response *r) {
    if (k->cors > 0) {
        mhd.add_response_header(r, "Access-Control-Allow-Origin", k->origin);
        if (strcmp(k->origin, "*")) mhd.add_response_header(r, "Vary", "Origin");  // the answer depends on it
    }
    k->status = status;
    enum MHD_Result rc = mhd.queue_response(c, (unsigned)status, r);
    mhd.destroy_response(r);
    return rc;
}

// A header name: one or more of RFC 9110's token characters.
static int tchar(int ch) {
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           (ch && strchr("!#$%&'*+-.^_`|~", ch));
}

// The Access-Control-Allow-Headers of a preflight that asked for `asked`
// (NULL: nothing; n bytes): Authorization, Content-Type and each name
// asked for (lower-cased, once each), into out (cap bytes). 0, or -1 with
// why (200 bytes) when asked is too long, has too many names or one that is
// not a header name.
static int allow_headers(const char *asked, size_t n_asked, char *out, size_t cap, char *why) {
    size_t len = (size_t)snprintf(out, cap, "Authorization, Content-Type");
    if (!asked) return 0;
    if (strlen(asked) != n_asked) {
        snprintf(why, 200, "Access-Control-Request-Headers: a NUL byte at byte %zu", strlen(asked));
        return -1;
    }
    if (strlen(asked) > CORS_HEADERS_MAX) {
        snprintf(why, 200, "Access-Control-Request-Headers is %zu bytes; gpt takes at most %d", strlen(asked),
                 CORS_HEADERS_MAX);
        return -1;
    }
    size_t names = 0;
    for (const char *p = asked; *p;) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        const char *start = p;
        while (tchar((unsigned char)*p)) p++;
        size_t n = (size_t)(p - start);
        while (*p == ' ' || *p == '\t') p++;
        if (*p && *p != ',') {
            snprintf(why, 200, "Access-Control-Request-Headers: byte %ld is not part of a header name (0x%02x)",
                     (long)(p - asked), (unsigned char)*p);
            return -1;
        }
        if (!n) continue;
        if (++names > CORS_NAMES_MAX) {
            snprintf(why, 200, "Access-Control-Request-Headers names more than %d headers", CORS_NAMES_MAX);
            return -1;
        }
        char name[CORS_HEADERS_MAX + 1];
        for (size_t i = 0; i < n; i++) name[i] = (char)(start[i] >= 'A' && start[i] <= 'Z' ? start[i] + 32 : start[i]);
        name[n] = '\0';
        if (!strcmp(name, "authorization") || !strcmp(name, "content-type")) continue;
        // once each (out is lower-case but for the two above)
        char with[CORS_HEADERS_MAX + 4];
        snprintf(with, sizeof with, ", %s,", name);
        out[len] = ',';
        out[len + 1] = '\0';
        int seen = strstr(out, with) != NULL;
        out[len] = '\0';
        if (seen || len + n + 3 > cap) continue;  // (cap is never short: see answer_preflight)
        len += (size_t)snprintf(out + len, cap - len, ", %s", name);
    }
    return 0;
}

// Queues body (malloc'd; NULL: out of memory) with the status. Frees body.
static enum MHD_Result answer(struct MHD_Connection *c, Conn *k, int status, char *body, const char *type) {
    static const char oom[] = "{\"error\":{\"message\":\"out of memory\",\"type\":\"server_error\",\"param\":null,"
                              "\"code\":null}}";
    struct MHD_Response *r;
    if (body) {
        r = mhd.create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE);
    } else {
        status = 500;
        type = "application/json";
        r = mhd.create_response_from_buffer(sizeof oom - 1, (void *)oom, MHD_RESPMEM_PERSISTENT);
    }
    if (!r) {
        free(body);
        return MHD_NO;
    }
    mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
    if (status == 503) mhd.add_response_header(r, MHD_HTTP_HEADER_RETRY_AFTER, "1");
    if (status == 405) mhd.add_response_header(r, MHD_HTTP_HEADER_ALLOW, get_path(k->path) ? "GET, HEAD" : "POST");
    return queue(c, k, status, r);
}

static enum MHD_Result answer_json(struct MHD_Connection *c, Conn *k, int status, char *json) {
    return answer(c, k, status, json, "application/json");
}

// OpenAI's error object, or under /api/ Ollama's {"error": MESSAGE}.
static enum MHD_Result answer_error(struct MHD_Connection *c, Conn *k, int status, const char *msg,
                                    const char *param) {
    return answer_json(c, k, status, ollama_path(k->path) ? ollama_error_json(msg) : error_json(status, msg, param));
}

// The page at / (page.html, in the binary). Its policy lets it run its own
// inline script and style and talk to this server, and load nothing from
// anywhere else.
static enum MHD_Result answer_page(struct MHD_Connection *c, Conn *k) {
    struct MHD_Response *r =
        mhd.create_response_from_buffer(serve_page_html_len, (void *)serve_page_html, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
    mhd.add_response_header(r, "Content-Security-Policy",
                            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                            "connect-src 'self'; img-src data:; base-uri 'none'; form-action 'none'; "
                            "frame-ancestors 'none'");
    mhd.add_response_header(r, "X-Content-Type-Options", "nosniff");
    mhd.add_response_header(r, "Referrer-Policy", "no-referrer");
    mhd.add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    return queue(c, k, 200, r);
}

// A preflight (OPTIONS) from an allowed origin: 204, what may follow.
static enum MHD_Result answer_preflight(struct MHD_Connection *c, Conn *k) {
    char headers[CORS_HEADERS_MAX + 256], why[200];  // 64 names: 2 bytes more each, and the first two
    static const char name[] = "Access-Control-Request-Headers";
    const char *asked = NULL;
    size_t n = 0;
    mhd.lookup_connection_value_n(c, MHD_HEADER_KIND, name, sizeof name - 1, &asked, &n);
    if (allow_headers(asked, n, headers, sizeof headers, why) != 0) return answer_error(c, k, 400, why, NULL);
    struct MHD_Response *r = mhd.create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    mhd.add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, OPTIONS");
    mhd.add_response_header(r, "Access-Control-Allow-Headers", headers);
    mhd.add_response_header(r, "Access-Control-Max-Age", CORS_MAX_AGE);
    return queue(c, k, 204, r);
}

// ----------------------------------------------------------------------------
// waiting for the scheduler

static int client_socket(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = mhd.get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    return ci ? ci->connect_fd : -1;
}

static Arrival *arrival_of(struct MHD_Connection *c) {
    const union MHD_ConnectionInfo *ci = mhd.get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

// Parks c on req until the scheduler has news for it: libmicrohttpd stops
// serving c (and goes on with the others) until http_resume. Under the
// lock, so that the news cannot come between the look at req and the park.
static void park(ApiRequest *req, struct MHD_Connection *c) {
    req->parked = c;
    mhd.suspend_connection(c);
}

static void http_resume(ApiRequest *req) {
    if (!req->parked) return;
    mhd.resume_connection(req->parked);
    req->parked = NULL;
}

static void completion_id(Server *s, const ApiRequest *req, char *id, size_t cap) {
    pthread_mutex_lock(&s->lock);
    uint64_t n = s->next_id++;
    pthread_mutex_unlock(&s->lock);
    snprintf(id, cap, "%s%016llx", req->responses ? "resp_" : req->chat ? "chatcmpl-" : "cmpl-", (unsigned long long)n);
}

// ----------------------------------------------------------------------------
// streaming

static int stream_put(Stream *st, const char *a, const char *b, const char *c) {
    size_t n = strlen(a) + strlen(b) + strlen(c);
    if (grow_array(&st->buf, &st->cap, st->len + n + 1, 1) != 0) return -1;
    st->len += (size_t)sprintf(st->buf + st->len, "%s%s%s", a, b, c);
    return 0;
}

// libmicrohttpd asks for more of the stream: the events ready, else
// nothing (0) with the connection parked till the scheduler's next news.
static ssize_t stream_read(void *cls, uint64_t pos, char *out, size_t max) {
    Stream *st = cls;
    Server *s = st->s;
    ApiRequest *req = st->request;
    (void)pos;
    for (;;) {
        if (st->pos < st->len) {
            size_t n = st->len - st->pos < max ? st->len - st->pos : max;
            memcpy(out, st->buf + st->pos, n);
            st->pos += n;
            return (ssize_t)n;
        }
        if (st->ended) return MHD_CONTENT_READER_END_OF_STREAM;
        st->len = st->pos = 0;
        int all = 1, bad = 0;
        pthread_mutex_lock(&s->lock);
        if (req->cancelled) {  // the client went away (http_deadlines)
            pthread_mutex_unlock(&s->lock);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        // server-sent events, or Ollama's NDJSON: one object a line; the
        // Responses events come whole, with their names (and a failure as
        // one of them)
        const char *head = req->ollama || req->responses ? "" : "data: ";
        const char *tail = req->ollama ? "\n" : req->responses ? "" : "\n\n";
        for (size_t k = 0; k < req->n_completions && !bad; k++) {
            int finished;
            char *chunk = req->ollama      ? ollama_chunk(s, req, k, &finished)
                          : req->responses ? responses_chunk(s, req, st->id, st->created, &finished)
                                           : completion_chunk(s, req, k, st->id, st->created, &finished);
            if (chunk) bad = stream_put(st, head, chunk, tail);
            free(chunk);
            all &= finished;
        }
        const char *why = req->error ? req->error : "failed";
        char *error = all && req->status != 200 && !req->responses
                          ? req->ollama ? ollama_error_json(why) : error_json(req->status, why, req->error_param)
                          : NULL;
        // a failed request's stream ends with its error, as OpenAI's: no usage after it
        int with_usage = all && req->include_usage && req->status == 200;
        char *usage = with_usage ? usage_chunk(s, req, st->id, st->created) : NULL;
        if (with_usage && !usage) bad = 1;
        if (!all && !bad && !st->len) {  // nothing new yet
            park(req, st->conn);
            pthread_mutex_unlock(&s->lock);
            return 0;
        }
        pthread_mutex_unlock(&s->lock);
        if (error) bad |= stream_put(st, head, error, tail);
        if (usage && !bad) bad |= stream_put(st, "data: ", usage, "\n\n");  // the last before [DONE]
        free(error);
        free(usage);
        if (bad) {
            api_request_cancel(s, req);
            return MHD_CONTENT_READER_END_WITH_ERROR;
        }
        if (all) {
            // the Responses stream ends with its response.completed: no [DONE]
            if (stream_put(st, req->ollama || req->responses ? "" : "data: [DONE]\n\n", "", "") != 0)
                return MHD_CONTENT_READER_END_WITH_ERROR;
            st->ended = 1;
            continue;
        }
    }
}

static void stream_free(void *cls) {
    Stream *st = cls;
    api_request_unref(st->s, st->request);
    free(st->buf);
    free(st);
}

static enum MHD_Result answer_stream(Server *s, struct MHD_Connection *c, Conn *k, ApiRequest *req) {
    Stream *st = calloc(1, sizeof *st);
    if (!st) {
        api_request_cancel(s, req);
        return answer_error(c, k, 500, "out of memory", NULL);
    }
    st->s = s;
    st->request = req;
    st->conn = c;
    st->created = (long)time(NULL);
    completion_id(s, req, st->id, sizeof st->id);
    pthread_mutex_lock(&s->lock);
    req->refs++;  // the stream's own
    pthread_mutex_unlock(&s->lock);
    struct MHD_Response *r = mhd.create_response_from_callback(MHD_SIZE_UNKNOWN, 16 * 1024, stream_read, st, stream_free);
    if (!r) {
        stream_free(st);
        api_request_cancel(s, req);
        return MHD_NO;
    }
    mhd.add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                            req->ollama ? "application/x-ndjson" : "text/event-stream");
    mhd.add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-cache");
    return queue(c, k, 200, r);
}

// ----------------------------------------------------------------------------
// the routes

// The request k on c answers request req: counted until its answer is all sent,
// so that a shutdown closes no connection in the middle of one.
static void hold(Server *s, struct MHD_Connection *c, Conn *k, ApiRequest *req) {
    k->request = req;
    Arrival *a = arrival_of(c);
    pthread_mutex_lock(&s->lock);
    s->answering++;
    if (a) a->request = req;
    pthread_mutex_unlock(&s->lock);
}

// A parsed request: when parsing failed (status, msg, param), answers
// that; else queues req for the scheduler and holds it for k, or, when the
// queue is full or the server drains, frees it and answers 503. 0 queued,
// or -1 with the answer in *refused. Frees msg.
static int submit(Server *s, struct MHD_Connection *c, Conn *k, int status, char *msg, const char *param, ApiRequest *req,
                  enum MHD_Result *refused) {
    if (status) {
        *refused = answer_error(c, k, status, msg ? msg : "out of memory", param);
        free(msg);
        return -1;
    }
    if (api_request_submit(s, req) != 0) {
        api_request_free(req);
        *refused = answer_error(c, k, 503, s->draining ? "the server is shutting down"
                                                       : "too many requests waiting: try again shortly", NULL);
        return -1;
    }
    hold(s, c, k, req);
    return 0;
}

// A finished request that failed: its error answered, 1; or 0 when it did not.
static int answer_failed_request(Server *s, struct MHD_Connection *c, Conn *k, const ApiRequest *req, enum MHD_Result *rc) {
    pthread_mutex_lock(&s->lock);
    int status = req->status;
    char *why = status != 200 && req->error ? strdup(req->error) : NULL;
    const char *param = req->error_param;
    pthread_mutex_unlock(&s->lock);
    if (status == 200) return 0;
    *rc = answer_error(c, k, status, why ? why : "failed", param);
    free(why);
    return 1;
}

// The answer of k's request (a completion that does not stream, or a score)
// once it is done; till then c is parked on it, and libmicrohttpd calls
// on_request again when the scheduler resumes it.
static enum MHD_Result answer_when_done(Server *s, struct MHD_Connection *c, Conn *k) {
    ApiRequest *req = k->request;
    pthread_mutex_lock(&s->lock);
    int done = req->done, gone = req->cancelled;
    if (!done && !gone) park(req, c);
    pthread_mutex_unlock(&s->lock);
    if (gone) return MHD_NO;  // the client went away: nobody to answer
    if (!done) return MHD_YES;
    enum MHD_Result rc;
    if (answer_failed_request(s, c, k, req, &rc)) return rc;
    if (req->kind == REQUEST_SCORE) return answer_json(c, k, 200, score_response(s, req));  // the scheduler wrote its last
    if (req->kind == REQUEST_EMBED) return answer_json(c, k, 200, embed_response(s, req));
    char id[40];
    completion_id(s, req, id, sizeof id);
    pthread_mutex_lock(&s->lock);
    char *body = req->ollama      ? ollama_response(s, req)
                 : req->responses ? responses_response(s, req, id, (long)time(NULL))
                                  : completion_response(s, req, id, (long)time(NULL));
    pthread_mutex_unlock(&s->lock);
    return answer_json(c, k, 200, body);
}

// The readers of the bodies POST /v1/completions, /v1/chat/completions and /v1/responses take.
typedef int BodyReader(Server *s, const char *body, size_t len, ApiRequest **out, int *stream, char **msg, char *param);

// POST /v1/completions, /v1/chat/completions or /v1/responses: the body read by `read`.
static enum MHD_Result post_completions(Server *s, struct MHD_Connection *c, Conn *k, BodyReader *read) {
    ApiRequest *req;
    char *msg = NULL;
    char param[PARAM_CAP];
    int stream;
    int status = read(s, k->body ? k->body : "", k->len, &req, &stream, &msg, param);
    enum MHD_Result refused;
    if (submit(s, c, k, status, msg, param, req, &refused) != 0) return refused;
    k->stream = stream;
    if (stream) return answer_stream(s, c, k, req);
    return answer_when_done(s, c, k);
}

// POST /api/generate, or (chat) /api/chat.
static enum MHD_Result post_ollama(Server *s, struct MHD_Connection *c, Conn *k, int chat) {
    ApiRequest *req;
    char *msg = NULL, *load;
    char param[PARAM_CAP];
    int stream;
    int status = ollama_request(s, chat, k->body ? k->body : "", k->len, &req, &stream, &load, &msg, param);
    if (!status && load) return answer_json(c, k, 200, load);
    enum MHD_Result refused;
    if (submit(s, c, k, status, msg, param, req, &refused) != 0) return refused;
    k->stream = stream;
    if (stream) return answer_stream(s, c, k, req);
    return answer_when_done(s, c, k);
}

static enum MHD_Result post_score(Server *s, struct MHD_Connection *c, Conn *k) {
    ApiRequest *req;
    char *msg = NULL;
    char param[PARAM_CAP];
    int status = score_request(s, k->body ? k->body : "", k->len, &req, &msg, param);
    enum MHD_Result refused;
    if (submit(s, c, k, status, msg, param, req, &refused) != 0) return refused;
    return answer_when_done(s, c, k);
}

// POST /v1/embeddings, or (ollama) /api/embed.
static enum MHD_Result post_embed(Server *s, struct MHD_Connection *c, Conn *k, int ollama) {
    ApiRequest *req;
    char *msg = NULL;
    char param[PARAM_CAP];
    int status = embed_request(s, ollama, k->body ? k->body : "", k->len, &req, &msg, param);
    enum MHD_Result refused;
    if (submit(s, c, k, status, msg, param, req, &refused) != 0) return refused;
    return answer_when_done(s, c, k);
}

// The key, compared in constant time: every byte of the key is looked at
// whatever the guess, so the time says nothing of how much of it was right.
static int key_matches(const char *given, const char *key) {
    size_t a = strlen(given), b = strlen(key);
    unsigned char d = a != b;
    for (size_t i = 0; i < b; i++) d |= (unsigned char)(key[i] ^ (i < a ? given[i] : 0));
    return d == 0;
}

static int authorized(Server *s, struct MHD_Connection *c) {
    if (!s->limits.api_key) return 1;
    const char *h = mhd.lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7)) return 0;
    return key_matches(h + 7, s->limits.api_key);
}

// A GET or HEAD once route has checked the method, the key and that the
// model is loaded (/ and /health route answers itself, before the key).
static enum MHD_Result route_get(Server *s, struct MHD_Connection *c, Conn *k) {
    const char *p = k->path;
    if (ollama_route(p) == OLLAMA_VERSION) return answer_json(c, k, 200, ollama_version_response());
    if (ollama_route(p) == OLLAMA_TAGS || ollama_route(p) == OLLAMA_PS)
        return answer_json(c, k, 200, ollama_models_response(s, ollama_route(p) == OLLAMA_PS));
    if (!strcmp(p, "/metrics")) return answer(c, k, 200, metrics_text(s), "text/plain; version=0.0.4");
    if (!strcmp(p, "/tokenizer_info")) return answer_json(c, k, 200, tokenizer_info_response(s));
    if (model_id(p)) {
        int status;
        if (k->path_cut) return answer_error(c, k, 404, "The model id is longer than any gpt serves", "model");
        char *body = model_response(s, model_id(p), &status);
        return answer_json(c, k, status, body);
    }
    return answer_json(c, k, 200, models_response(s));
}

static enum MHD_Result route(Server *s, struct MHD_Connection *c, Conn *k) {
    const char *p = k->path;
    // HEAD is GET without the body (libmicrohttpd leaves it out)
    int get = !strcmp(k->method, "GET") || !strcmp(k->method, "HEAD"), post = !strcmp(k->method, "POST");
    int known_get = get_path(p), known_post = post_path(p), manage = ollama_route(p) == OLLAMA_MANAGE;
    if (!known_get && !known_post && !manage) return answer_error(c, k, 404, "no such endpoint", NULL);
    // a preflight: from an allowed origin 204 (no key: the browser sends
    // none), from another 403; with no Origin, OPTIONS is a 405 below
    if (!strcmp(k->method, "OPTIONS") && k->cors > 0) return answer_preflight(c, k);
    if (!strcmp(k->method, "OPTIONS") && k->cors < 0)
        return answer_error(c, k, 403, s->limits.n_cors_origins
                                           ? "this origin is not one that --cors-origin allows"
                                           : "cross-origin requests are not allowed (gpt serve --cors-origin allows them)",
                            NULL);
    if (((known_get && !get) || (known_post && !post)) && !manage) {
        char msg[400];
        snprintf(msg, sizeof msg, "%s takes %s, not %s", p, known_get ? "GET or HEAD" : "POST", k->method);
        return answer_error(c, k, 405, msg, NULL);
    }
    pthread_mutex_lock(&s->lock);
    int ready = s->ready, draining = s->draining;
    pthread_mutex_unlock(&s->lock);
    if (!strcmp(p, "/")) return answer_page(c, k);  // no key: the page asks for it, and holds no secret
    if (!strcmp(p, "/health")) {
        if (!ready) return answer_json(c, k, 503, strdup("{\"status\":\"loading\"}"));
        return draining ? answer_json(c, k, 503, strdup("{\"status\":\"draining\"}"))
                        : answer_json(c, k, 200, strdup("{\"status\":\"ok\"}"));
    }
    if (!authorized(s, c))
        return answer_error(c, k, 401, "a missing or wrong API key (send Authorization: Bearer KEY)", NULL);
    if (k->too_large) {
        char msg[128];
        snprintf(msg, sizeof msg, "the body is larger than the server's --max-body (%zu bytes)", s->limits.max_body);
        return answer_error(c, k, 413, msg, NULL);
    }
    if (!ready) return answer_error(c, k, 503, "the model is loading", NULL);
    if (manage) {
        char msg[512];
        snprintf(msg, sizeof msg,
                 "%s: gpt does not manage models: gpt serve serves the one it was started with "
                 "(gpt serve -m FILE), and pulls, creates, copies, pushes and deletes none",
                 p);
        return answer_error(c, k, 501, msg, NULL);
    }
    if (get) return route_get(s, c, k);
    if (draining) return answer_error(c, k, 503, "the server is shutting down", NULL);
    if (!strcmp(p, "/v1/completions")) return post_completions(s, c, k, completion_request);
    if (!strcmp(p, "/v1/chat/completions")) return post_completions(s, c, k, chat_request);
    if (!strcmp(p, "/v1/responses")) return post_completions(s, c, k, responses_request);
    if (!strcmp(p, "/v1/score")) return post_score(s, c, k);
    if (!strcmp(p, "/v1/embeddings") || ollama_route(p) == OLLAMA_EMBED)
        return post_embed(s, c, k, ollama_route(p) == OLLAMA_EMBED);
    if (ollama_route(p) == OLLAMA_GENERATE || ollama_route(p) == OLLAMA_CHAT)
        return post_ollama(s, c, k, ollama_route(p) == OLLAMA_CHAT);
    int status;
    char *msg = NULL, *body;
    char param[PARAM_CAP] = "";
    if (ollama_route(p) == OLLAMA_SHOW) body = ollama_show_response(s, k->body ? k->body : "", k->len, &status, &msg);
    else if (!strcmp(p, "/tokenize")) body = tokenize_response(s, k->body ? k->body : "", k->len, &status, &msg, param);
    else if (!strcmp(p, "/apply-template"))
        body = apply_template_response(s, k->body ? k->body : "", k->len, &status, &msg, param);
    else body = detokenize_response(s, k->body ? k->body : "", k->len, &status, &msg, param);
    if (body) return answer_json(c, k, 200, body);
    enum MHD_Result rc = answer_error(c, k, status, msg ? msg : "out of memory", param);
    free(msg);
    return rc;
}

// ----------------------------------------------------------------------------
// connections and requests

static void on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                          enum MHD_ConnectionNotificationCode code) {
    Server *s = cls;
    Arrival *a = *socket_context;
    pthread_mutex_lock(&s->lock);
    if (code == MHD_CONNECTION_NOTIFY_STARTED && !a && (a = calloc(1, sizeof *a))) {
        a->fd = client_socket(c);
        // a bounded send buffer: a client that stops reading fills it soon,
        // and --timeout finds it (the kernel's would grow to megabytes)
        int bytes = SEND_BUFFER;
        if (a->fd >= 0) setsockopt(a->fd, SOL_SOCKET, SO_SNDBUF, &bytes, sizeof bytes);
        a->since = now_seconds();
        a->arriving = 1;
        a->next = s->arrivals;
        if (s->arrivals) s->arrivals->prev = a;
        s->arrivals = a;
        *socket_context = a;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED && a) {
        // before libmicrohttpd closes the socket: its fd is never shut once reused
        if (a->prev) a->prev->next = a->next;
        else s->arrivals = a->next;
        if (a->next) a->next->prev = a->prev;
        free(a);
        *socket_context = NULL;
    }
    pthread_mutex_unlock(&s->lock);
}

// The request on c has arrived whole (arrived 1), or ended (0: the next
// may come, in --timeout seconds from now).
static void arrived(Server *s, struct MHD_Connection *c, int whole) {
    Arrival *a = arrival_of(c);
    if (!a) return;
    pthread_mutex_lock(&s->lock);
    a->arriving = !whole;
    a->since = now_seconds();
    pthread_mutex_unlock(&s->lock);
}

void http_deadlines(Server *s) {
    double now = now_seconds();
    pthread_mutex_lock(&s->lock);
    for (Arrival *a = s->arrivals; a; a = a->next) {
        // a parked connection whose client went away (libmicrohttpd does
        // not watch it): its request is dropped at the next step
        if (a->request && a->request->parked && a->fd >= 0) {
            struct pollfd p = {.fd = a->fd, .events = POLLRDHUP};
            if (poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)))
                api_request_cancel_locked(s, a->request);
        }
        if (!a->arriving || now - a->since < (double)s->limits.timeout || a->fd < 0) continue;
        // libmicrohttpd reads the end of the stream and closes the connection
        shutdown(a->fd, SHUT_RDWR);
        a->arriving = 0;
    }
    pthread_mutex_unlock(&s->lock);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls) {
    Server *s = cls;
    Conn *k = *con_cls;
    (void)version;
    if (!k) {  // the headers are here; the body comes in the next calls
        if (!(k = calloc(1, sizeof *k))) return MHD_NO;
        k->t0 = now_seconds();
        snprintf(k->method, sizeof k->method, "%s", method);
        k->path_cut = snprintf(k->path, sizeof k->path, "%s", url) >= (int)sizeof k->path;
        read_origin(s, c, k);
        *con_cls = k;
        const char *cl = mhd.lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        size_t declared;
        if (cl && parse_size(cl, &declared) == 0 && declared > s->limits.max_body) {
            k->too_large = 1;
            return route(s, c, k);  // at once: no 100 Continue, the body is never read
        }
        return MHD_YES;
    }
    if (k->status) {  // answered already (a declared body too large): nothing more
        *upload_size = 0;
        return MHD_YES;
    }
    if (k->request) return answer_when_done(s, c, k);  // resumed: the scheduler has news
    if (*upload_size) {
        // a body of no declared length that grows too large is read to its
        // end (within --timeout) and kept nowhere: libmicrohttpd takes an
        // answer only before the body or after it
        if (!k->too_large && k->len + *upload_size > s->limits.max_body) {
            k->too_large = 1;
            free(k->body);
            k->body = NULL;
            k->len = k->cap = 0;
        }
        if (!k->too_large) {
            if (grow_array(&k->body, &k->cap, k->len + *upload_size + 1, 1) != 0) return MHD_NO;
            memcpy(k->body + k->len, upload, *upload_size);
            k->len += *upload_size;
            k->body[k->len] = '\0';
        }
        *upload_size = 0;
        return MHD_YES;
    }
    arrived(s, c, 1);
    return route(s, c, k);
}

// A request ends: its log line, its status counted, its request let go (a
// request not done yet lost its client: cancelled).
static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe) {
    Server *s = cls;
    Conn *k = *con_cls;
    arrived(s, c, 0);
    if (!k) return;
    *con_cls = NULL;
    size_t prompt_tokens = 0, completion_tokens = 0;
    int done = 1;
    pthread_mutex_lock(&s->lock);
    if (k->request) {
        ApiRequest *req = k->request;
        for (size_t p = 0; p < req->n_prompts; p++) prompt_tokens += req->prompt_lens[p];
        for (size_t i = 0; i < req->n_completions; i++) completion_tokens += req->completions[i].n_tokens;
        done = req->done;
    }
    int status = k->status ? k->status : 499;  // 499: the client went away before an answer (nginx's)
    count_status(s, status);
    if (k->request && !--s->answering) pthread_cond_broadcast(&s->idle);
    Arrival *a = arrival_of(c);
    if (a) a->request = NULL;
    pthread_mutex_unlock(&s->lock);
    if (k->request) {
        if (!done) api_request_cancel(s, k->request);
        api_request_unref(s, k->request);
    }
    cJSON *l = cJSON_CreateObject();
    char when[32];
    time_t t = time(NULL);
    struct tm tm;
    strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&t, &tm));
    cJSON_AddStringToObject(l, "time", when);
    char *path = utf8_replace_invalid((const unsigned char *)k->path, strlen(k->path), NULL);  // as the client sent it
    cJSON_AddStringToObject(l, "method", k->method);
    cJSON_AddStringToObject(l, "path", path ? path : "");
    free(path);
    cJSON_AddNumberToObject(l, "status", status);
    cJSON_AddNumberToObject(l, "seconds", now_seconds() - k->t0);
    if (k->request) {
        cJSON_AddNumberToObject(l, "prompt_tokens", (double)prompt_tokens);
        cJSON_AddNumberToObject(l, "completion_tokens", (double)completion_tokens);
        cJSON_AddBoolToObject(l, "stream", k->stream);
    }
    cJSON_AddBoolToObject(l, "completed", toe == MHD_REQUEST_TERMINATED_COMPLETED_OK);
    char *line = cJSON_PrintUnformatted(l);
    size_t n = line ? strlen(line) : 0;
    if (line && s->limits.log_fd >= 0) {
        line[n] = '\n';  // over cJSON's NUL: one write of one line, so lines of two threads do not mix
        if (write(s->limits.log_fd, line, n + 1) < 0) {
            // a full disk or a closed pipe costs the log, never an answer
        }
    }
    free(line);
    cJSON_Delete(l);
    free(k->body);
    free(k);
}

struct MHD_Daemon *http_start(Server *s, int fd, int ipv6) {
    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO | MHD_ALLOW_SUSPEND_RESUME;
    s->news = http_resume;
    if (ipv6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d =
        mhd.start_daemon(flags, 0, NULL, NULL, on_request, s, MHD_OPTION_LISTEN_SOCKET, fd,
                         MHD_OPTION_THREAD_POOL_SIZE, (unsigned)HTTP_THREADS,
                         MHD_OPTION_CONNECTION_LIMIT, (unsigned)s->limits.max_connections,
                         MHD_OPTION_CONNECTION_TIMEOUT, s->limits.timeout, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
                         s, MHD_OPTION_NOTIFY_CONNECTION, on_connection, s, MHD_OPTION_END);
    if (!d) runtime_error("serve", "libmicrohttpd could not start");
    return d;
}
