/*
 * serve.c - `gpt serve`: the model behind an OpenAI-compatible HTTP API.
 * run_serve reads as the pipeline: options, the listening socket (a port in
 * use is an error before the model loads) served by libmicrohttpd's threads
 * at once (503 "loading" until the model is ready), the model and the
 * engine, the scheduler thread, the ready line, then a wait for SIGINT or
 * SIGTERM and the shutdown:
 *
 *   1. stop accepting (new connections are refused, new requests on open
 *      ones get 503, /health says 503 "draining");
 *   2. let the running and queued requests finish for --grace seconds (a
 *      second signal cuts it short);
 *   3. end those still running with finish_reason "interrupted" and the
 *      text they have, close every connection, free everything, exit 0.
 *
 * SIGINT and SIGTERM are blocked in every thread and taken by the main
 * thread alone with sigwait, so no handler runs inside the engine.
 */
#define _GNU_SOURCE  // sigtimedwait, getaddrinfo's flags
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/fileio.h"
#include "base/threads.h"
#include "model/kvcache.h"
#include "run_serve.h"
#include "serve.h"

// The prompt tokens one step reads beside the decodes.
enum { PREFILL_CHUNK = 128 };

// --help, with the shared options' lines (help_from_template)
static const char *serve_usage =
    "usage: gpt serve [options]      the model behind an OpenAI-compatible HTTP API\n"
    "@shared model tokenizer dtype q8-act lora kv-type threads tune\n"
    "  -q, --quiet             no notes on stderr (the demo model's line, the ready line,\n"
    "                          the shutdown's); errors, warnings and the request lines still\n"
    "      --host ADDR         the address to listen on (default 127.0.0.1)\n"
    "      --port N            the port (default 8080; 0 picks a free one, which the ready\n"
    "                          line names)\n"
    "      --port-file FILE    when ready, write the port and a newline to FILE (whole, in\n"
    "                          one rename; removed at shutdown), for a script (default: none)\n"
    "@shared parallel kv-budget\n"
    "      --api-key KEY       requests must send Authorization: Bearer KEY, all but GET /\n"
    "                          and /health (default: $GPT_API_KEY; without either, no key)\n"
    "      --cors-origin ORIGIN\n"
    "                          pages from ORIGIN (scheme://host[:port]) may call the API\n"
    "                          from a browser; repeatable; * for any, only without a key\n"
    "                          (default: none)\n"
    "      --max-body SIZE     the largest request body (default 1M)\n"
    "      --max-tokens N      the most max_tokens a request may ask for (default 4096)\n"
    "      --max-connections N connections at once (default 256)\n"
    "      --queue N           requests waiting beyond the running ones (default 64)\n"
    "      --timeout SECONDS   a connection idle this long, or a request not whole after\n"
    "                          this long, is closed (default 30)\n"
    "      --grace SECONDS     on SIGINT or SIGTERM, how long running requests may finish\n"
    "                          (default 10)\n"
    "      --log FILE          the request log, a JSON line per request: appended to FILE;\n"
    "                          - for stdout, off for none (default: stderr)\n"
    "      --chat-template T   how /v1/chat/completions turns messages into a prompt: gpt2\n"
    "                          (each message then <|endoftext|>; the default), transcript\n"
    "                          (User: ...\\nAssistant:), chatml, or a template file (JSON;\n"
    "                          docs/chat.md)\n"
    "      --pooling P         how /v1/embeddings and /api/embed make a text's vector from\n"
    "                          its tokens' final hidden states: mean (their average; the\n"
    "                          default) or last (the last token's, the one that saw the\n"
    "                          whole text)\n"
    "  -h, --help              this help\n"
    "Endpoints: GET / (a page to try the model), /health, /v1/models, /v1/models/ID,\n"
    "/tokenizer_info, /metrics; POST /v1/completions, /v1/chat/completions, /v1/responses\n"
    "(OpenAI's Responses API, stateless: chat's answer), /v1/score, /v1/embeddings,\n"
    "/tokenize, /detokenize, /apply-template. Ollama's API: GET /api/version, /api/tags,\n"
    "/api/ps; POST /api/show, /api/generate (the prompt continued as it is), /api/chat,\n"
    "/api/embed (docs/serving.md: what is mapped, what refused). A request with a seed gets exactly what\n"
    "gpt -p PROMPT -s SEED gives (a chat: gpt --chat-template T with its messages;\n"
    "docs/chat.md); a choice's finish_reason is OpenAI's, its stop_reason gpt's own (eos,\n"
    "stop, grammar: \"stop\"; length, context: \"length\"). The output matches a request's\n"
    "response_format (json_object, json_schema), grammar, json_schema or regex, as the\n"
    "gpt options of those names (docs/json-schema.md). Prints\n"
    "\"gpt: serving MODEL on http://HOST:PORT\" on stderr when ready (not with -q), and\n"
    "one JSON line per request (--log). Exit codes: 0 after SIGINT/SIGTERM, 1 runtime\n"
    "error (a port in use, a --log file that cannot be opened), 2 usage error.\n";

// A listening socket for host:port. Its fd, or -1 after reporting.
// *port_out gets the port it has (--port 0 asks the kernel for one).
static int listen_on(const char *host, long port, int *port_out, int *ipv6, int *loopback) {
    char service[16];
    snprintf(service, sizeof service, "%ld", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        runtime_error("serve", "--host %s: %s", host, gai_strerror(rc));
        return -1;
    }
    int fd = -1, saved = 0;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
        fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) {
            *ipv6 = a->ai_family == AF_INET6;
            break;
        }
        saved = errno;
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0) {
        runtime_error("serve", "%s:%ld: %s", host, port, strerror(saved));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    getsockname(fd, (struct sockaddr *)&ss, &len);
    if (ss.ss_family == AF_INET6) {
        const struct sockaddr_in6 *v6 = (const struct sockaddr_in6 *)&ss;
        *port_out = ntohs(v6->sin6_port);
        *loopback = IN6_IS_ADDR_LOOPBACK(&v6->sin6_addr);
    } else {
        const struct sockaddr_in *v4 = (const struct sockaddr_in *)&ss;
        *port_out = ntohs(v4->sin_port);
        *loopback = (ntohl(v4->sin_addr.s_addr) >> 24) == 127;
    }
    return fd;
}

// The file's name alone, as the responses name the model.
static const char *base_name(const char *path) {
    size_t n = strlen(path);
    while (n > 1 && path[n - 1] == '/') n--;  // a directory given with its slash
    const char *slash = NULL;
    for (size_t i = 0; i + 1 < n; i++)
        if (path[i] == '/') slash = path + i;
    return slash ? slash + 1 : path;
}

// ----------------------------------------------------------------------------
// the options

// What gpt serve's options say.
typedef struct {
    SharedOptions shared;  // the model's: -m, --tokenizer, --dtype, --q8-act, --kv-type, -t, --tune, -q, --parallel, --kv-budget
    ServeLimits lim;       // the server's: --parallel and --kv-type from shared, the rest its own
    const char *host;
    long port;
    const char *log;       // --log as given, or NULL
    const char *chat_template;  // --chat-template NAME|FILE (default gpt2)
    const char *port_file;      // --port-file FILE, or NULL
    Pooling pooling;            // --pooling mean|last (default mean)
} ServeOptions;

// getopt_long codes of gpt serve's own long-only options (the shared ones
// are front.h's OPT_*)
enum {
    O_HOST = 256, O_PORT, O_API_KEY, O_CORS_ORIGIN, O_MAX_BODY, O_MAX_TOKENS, O_MAX_CONNECTIONS, O_QUEUE, O_TIMEOUT, O_GRACE, O_LOG,
    O_CHAT_TEMPLATE, O_PORT_FILE, O_POOLING,
    O_COUNT  // one past the last
};
_Static_assert((int)O_COUNT <= (int)OPT_SHARED, "gpt serve's option codes run into the shared ones");

// gpt serve's own options; src/front/model_options.c adds the shared ones.
static const struct option SERVE_OPTIONS[] = {{"help", no_argument, 0, 'h'},
                                              {"host", required_argument, 0, O_HOST},
                                              {"port", required_argument, 0, O_PORT},
                                              {"api-key", required_argument, 0, O_API_KEY},
                                              {"cors-origin", required_argument, 0, O_CORS_ORIGIN},
                                              {"max-body", required_argument, 0, O_MAX_BODY},
                                              {"max-tokens", required_argument, 0, O_MAX_TOKENS},
                                              {"max-connections", required_argument, 0, O_MAX_CONNECTIONS},
                                              {"queue", required_argument, 0, O_QUEUE},
                                              {"timeout", required_argument, 0, O_TIMEOUT},
                                              {"grace", required_argument, 0, O_GRACE},
                                              {"log", required_argument, 0, O_LOG},
                                              {"chat-template", required_argument, 0, O_CHAT_TEMPLATE},
                                              {"port-file", required_argument, 0, O_PORT_FILE},
                                              {"pooling", required_argument, 0, O_POOLING},
                                              {0, 0, 0, 0}};

// A whole number in [lo, hi] for an option: 0, or -1.
static int option_count(const char *v, long lo, long hi, long *out) {
    long x;
    if (parse_long(v, &x) != 0 || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

// An origin as a browser's Origin header writes it: scheme://host[:port],
// no path, printable ASCII with no space; or "*". 0, or -1 with why.
static int check_origin(const char *o, const char **why) {
    const char *sep = strstr(o, "://");
    *why = NULL;
    if (!strcmp(o, "*")) return 0;
    if (strlen(o) >= 256) *why = "longer than 255 bytes";
    for (const char *p = o; !*why && *p; p++)
        if (*p <= ' ' || *p >= 127) *why = "a space or a byte that is not printable ASCII";
    if (!*why && (!sep || sep == o)) *why = "not scheme://host[:port]";
    for (const char *p = o; !*why && p < sep; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || strchr("+-.", *p)))
            *why = "the scheme is not lower-case letters, digits, + - or . (browsers send it so)";
    if (!*why && !sep[3]) *why = "no host";
    if (!*why && strchr(sep + 3, '/')) *why = "an origin has no path, not even a last /";
    return *why ? -1 : 0;
}

// gpt serve's own option c with value o: 0, or the usage error's code.
static int serve_option(ServeOptions *so, int c, const char *o) {
    ServeLimits *lim = &so->lim;
    long v;
    switch (c) {
    case O_HOST: so->host = o; break;
    case O_CHAT_TEMPLATE: so->chat_template = o; break;
    case O_PORT:
        if (option_count(o, 0, 65535, &so->port)) return usage_error("serve", "--port %s: must be an integer in [0, 65535]", o);
        break;
    case O_API_KEY:
        if (!*o) return usage_error("serve", "--api-key: an empty key would let anyone in");
        lim->api_key = o;
        break;
    case O_CORS_ORIGIN: {
        const char *why;
        if (check_origin(o, &why) != 0) return usage_error("serve", "--cors-origin %s: %s", o, why);
        if (lim->n_cors_origins == MAX_CORS_ORIGINS)
            return usage_error("serve", "--cors-origin %s: more than %d origins", o, MAX_CORS_ORIGINS);
        lim->cors_origins[lim->n_cors_origins++] = o;
        break;
    }
    case O_MAX_BODY:
        if (parse_size(o, &lim->max_body) != 0 || lim->max_body == 0 || lim->max_body > (1u << 30))
            return usage_error("serve", "--max-body %s: must be a size from 1 to 1G", o);
        break;
    case O_MAX_TOKENS:
        if (option_count(o, 1, 1000000000, &v)) return usage_error("serve", "--max-tokens %s: must be an integer in [1, 10^9]", o);
        lim->max_tokens = (size_t)v;
        break;
    case O_MAX_CONNECTIONS:
        if (option_count(o, 1, 65536, &v)) return usage_error("serve", "--max-connections %s: must be an integer in [1, 65536]", o);
        lim->max_connections = (size_t)v;
        break;
    case O_QUEUE:
        if (option_count(o, 0, 1000000, &v)) return usage_error("serve", "--queue %s: must be an integer in [0, 10^6]", o);
        lim->queue = (size_t)v;
        break;
    case O_LOG:
        if (!*o) return usage_error("serve", "--log: a file name, - (stdout) or off");
        so->log = o;
        break;
    case O_POOLING:
        if (pooling_from_name(o, &so->pooling) != 0) return usage_error("serve", "--pooling %s: must be mean or last", o);
        break;
    case O_PORT_FILE:
        if (!*o) return usage_error("serve", "--port-file: a file name");
        so->port_file = o;
        break;
    case O_TIMEOUT: case O_GRACE:
        if (option_count(o, c == O_GRACE ? 0 : 1, 86400, &v))
            return usage_error("serve", "%s %s: must be a whole number of seconds in [%d, 86400]",
                               c == O_GRACE ? "--grace" : "--timeout", o, c == O_GRACE ? 0 : 1);
        if (c == O_GRACE) lim->grace = (unsigned)v;
        else lim->timeout = (unsigned)v;
        break;
    }
    return 0;
}

// argv into *so. Returns 0, or the exit code to leave with: EXIT_USAGE
// after the usage error, EXIT_OK after --help. *done says whether to leave.
static int parse_serve_options(int argc, char **argv, ServeOptions *so, int *done) {
    OptionParser p;
    static const int repeatable[] = {O_CORS_ORIGIN, 0};
    options_begin(&p, "serve", SERVE_OPTIONS, repeatable);
    *so = (ServeOptions){.lim = {.parallel = 16, .queue = 64, .max_body = 1 << 20, .max_tokens = 4096,
                                 .max_connections = 256, .timeout = 30, .grace = 10, .kv_dtype = DTYPE_F32,
                                 .log_fd = STDERR_FILENO},
                         .host = "127.0.0.1", .port = 8080, .chat_template = "gpt2", .pooling = POOLING_MEAN};
    const char *env_key = getenv("GPT_API_KEY");
    so->lim.api_key = env_key && *env_key ? env_key : NULL;
    *done = 1;
    for (int c, rc; (c = options_next(&p, argc, argv)) != -1;) {
        if (c == OPTION_FAILED) return EXIT_USAGE;
        if (c == 'h') {
            char *help = help_from_template(serve_usage, 0);
            int ok = help && fputs(help, stdout) != EOF && fflush(stdout) == 0;
            if (!ok) runtime_error(NULL, "%s", help ? strerror(errno) : "out of memory");
            free(help);
            return ok ? EXIT_OK : EXIT_RUNTIME;
        }
        if ((rc = serve_option(so, c, p.value)) != 0) return rc;
    }
    // an API key in a page any site may run is anyone's
    for (size_t i = 0; i < so->lim.n_cors_origins; i++)
        if (!strcmp(so->lim.cors_origins[i], "*") && so->lim.api_key)
            return usage_error("serve", "--cors-origin '*': not with an API key (--api-key or $GPT_API_KEY): any "
                                        "web page could use it; name the origins instead");
    so->shared = p.shared;
    so->lim.parallel = (size_t)p.shared.parallel;
    so->lim.kv_dtype = p.shared.kv_dtype;
    *done = 0;
    return 0;
}

// ----------------------------------------------------------------------------
// the steps of run_serve

// Waits for SIGINT or SIGTERM for at most `seconds` (< 0: for ever); 1 if
// one came.
static int wait_signal(const sigset_t *set, double seconds) {
    if (seconds < 0) {
        int sig;
        return sigwait(set, &sig) == 0;
    }
    struct timespec t = {(time_t)seconds, (long)((seconds - (double)(time_t)seconds) * 1e9)};
    return sigtimedwait(set, NULL, &t) > 0;
}

// SIGINT and SIGTERM into *signals, blocked in this thread and so in every
// thread started from here on (the pool's, the scheduler's,
// libmicrohttpd's inherit the mask), to be taken by sigwait. One ignored
// when gpt started stays ignored. SIGPIPE is ignored.
static void block_signals(sigset_t *signals) {
    sigemptyset(signals);
    for (int sig = SIGINT; sig; sig = sig == SIGINT ? SIGTERM : 0) {
        struct sigaction old;
        if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaddset(signals, sig);
    }
    pthread_sigmask(SIG_BLOCK, signals, NULL);
    signal(SIGPIPE, SIG_IGN);
}

// A server with its locks, nothing running; NULL when out of memory.
static Server *server_new(const ServeLimits *lim) {
    Server *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->limits = *lim;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->tok_lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->idle, NULL);
    return s;
}

// The model, its KV pool and the engine: EXIT_OK, or the exit code after
// reporting.
static int start_engine(Server *s, const ServeOptions *so) {
    const ServeLimits *lim = &so->lim;
    int rc = session_open_model(&s->session, &so->shared.model);
    if (rc != EXIT_OK) return rc;
    const GPT2Config *cfg = &s->session.model.config;
    const ModelOptions *mo = &so->shared.model;
    for (size_t i = 0; i < mo->n_lora; i++) {
        if (!mo->lora[i].name) continue;
        GptError e = {{0}};
        ServeAdapter *a = &s->adapters[s->n_adapters];
        if (lora_weights_load(&a->w, &mo->lora[i], cfg, &e) != 0) return report_error(&e);
        a->name = mo->lora[i].name;
        s->n_adapters++;
    }
    size_t block_bytes = kvcache_bytes_per_token(cfg, lim->kv_dtype) * KV_BLOCK;
    s->kv_blocks = kv_blocks_for_budget(cfg, lim->kv_dtype, so->shared.kv_budget, lim->parallel);
    if (s->kv_blocks == 0)
        return usage_error("serve", "--kv-budget %s: less than one block of this model's KV cache (%d positions, %zu bytes)",
                           so->shared.kv_budget_arg, KV_BLOCK, block_bytes);
    note_kv_budget(so->shared.model.quiet, so->shared.kv_budget_arg, so->shared.kv_budget, s->kv_blocks, block_bytes);
    // prompts in chunks of 128 tokens beside the decodes, as --batch's
    // default --prefill-chunk; as many rows with logits for the prompts'
    // log-probabilities ("echo" with "logprobs"); a finished answer's blocks
    // stay shareable, so a chat client's next turn, which sends the answer
    // back in its prompt, computes only its new messages
    EngineConfig ec = {.max_seqs = lim->parallel, .max_step_tokens = lim->parallel + PREFILL_CHUNK,
                       .kv_dtype = lim->kv_dtype, .kv_blocks = s->kv_blocks, .share_prefixes = 1, .share_outputs = 1,
                       .pool = s->session.pool, .plan = &s->session.plan, .prompt_logit_rows = PREFILL_CHUNK};
    GptError err = {{0}};
    if (engine_init(&s->engine, &s->session.model, s->session.tok, &ec, &err) != 0) return report_error(&err);
    s->engine_up = 1;
    s->engine_bytes = engine_buffer_bytes(&s->engine);
    // the trie for requests with a grammar: made once, read by every sequence
    s->grammar_vocab = sequence_grammar_vocab(s->session.tok, (size_t)cfg->vocab_size, &err);
    if (!s->grammar_vocab) return report_error(&err);
    return EXIT_OK;
}

// Requests are answered from now on (no more 503 "loading"); the ready
// line (not with -q) names the address.
static void announce_ready(Server *s, const ServeOptions *so, int ipv6, int port) {
    pthread_mutex_lock(&s->lock);
    s->model_name = base_name(s->session.model_path);
    struct stat st;  // Ollama's /api/tags lists the file's size and time
    if (stat(s->session.model_path, &st) == 0) s->model_bytes = (size_t)st.st_size, s->model_mtime = st.st_mtime;
    s->started = (long)time(NULL);
    s->next_id = draw_seed();
    s->ready = 1;
    pthread_mutex_unlock(&s->lock);
    note(so->shared.model.quiet, "serving %s on http://%s%s%s:%d", s->model_name, ipv6 ? "[" : "", so->host,
         ipv6 ? "]" : "", port);
}

static size_t in_flight(Server *s) {
    pthread_mutex_lock(&s->lock);
    size_t n = s->in_flight;
    pthread_mutex_unlock(&s->lock);
    return n;
}

// Shutdown 1: no new connections, no new requests.
static void stop_accepting(Server *s, struct MHD_Daemon *d, int quiet) {
    pthread_mutex_lock(&s->lock);
    s->draining = 1;
    size_t left = s->in_flight;
    pthread_mutex_unlock(&s->lock);
    int listen_fd = http_quiesce(d);
    if (listen_fd >= 0) close(listen_fd);
    note_of("serve", quiet, "stopping: %zu requests running or queued, %u s to finish", left, s->limits.grace);
}

// Shutdown 2, the grace: until nothing runs, the time is up, or a second
// signal comes.
static void wait_grace(Server *s, const sigset_t *signals) {
    double deadline = now_seconds() + s->limits.grace;
    for (;;) {
        size_t left = in_flight(s);
        double now = now_seconds();
        if (!left || now >= deadline) break;
        // a tenth of a second at a time: the main thread has nothing else to do
        if (wait_signal(signals, deadline - now < 0.1 ? deadline - now : 0.1)) break;
        http_deadlines(s);
    }
}

// Shutdown 3: what is left ends now, with the text it has; every answer is
// written to its end (a client that stopped reading has --timeout
// seconds), then the connections may close.
static void finish_now(Server *s, int quiet) {
    pthread_mutex_lock(&s->lock);
    if (s->in_flight) note_of("serve", quiet, "the grace is over: %zu requests end now", s->in_flight);
    s->hard_stop = 1;
    pthread_cond_signal(&s->wake);
    while (s->in_flight) pthread_cond_wait(&s->idle, &s->lock);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += s->limits.timeout;
    while (s->answering && pthread_cond_timedwait(&s->idle, &s->lock, &until) == 0) {
    }
    pthread_mutex_unlock(&s->lock);
}

// Serves until SIGINT or SIGTERM, then shuts down in the three steps.
static void serve_until_signal(Server *s, struct MHD_Daemon *d, const sigset_t *signals, int quiet) {
    while (!wait_signal(signals, 0.5)) http_deadlines(s);
    stop_accepting(s, d, quiet);
    wait_grace(s, signals);
    finish_now(s, quiet);
}

// Stops whatever runs (libmicrohttpd's threads, the scheduler when
// scheduler is not NULL) and frees everything; fd, when >= 0, is closed.
static void server_free(Server *s, struct MHD_Daemon *d, pthread_t *scheduler, int fd) {
    if (d) http_stop(d);  // waits for every connection's thread
    if (scheduler) {
        pthread_mutex_lock(&s->lock);
        s->stopping = 1;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        pthread_join(*scheduler, NULL);
    }
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->tok_lock);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->idle);
    if (fd >= 0) close(fd);
    if (s->engine_up) engine_free(&s->engine);
    grammar_vocab_free(s->grammar_vocab);
    session_close(&s->session);
    for (size_t i = 0; i < s->n_adapters; i++) lora_weights_free(&s->adapters[i].w);
    chat_template_free(&s->chat_template);
    free(s);
}

// --port-file: the file is opened with no name before the model loads (a
// directory that cannot take it is an error then, exit 1), and named once
// the server answers requests, whole: a script that sees the name reads the
// port and a newline, never part of them. 0, or -1 after reporting.
static int port_file_open(const char *path, NewFile *nf) {
    GptError err = {{0}};
    nf->fd = -1, nf->tmp = NULL;
    if (!path) return 0;
    if (newfile_open(nf, path, 0644, &err) == 0) return 0;
    runtime_error("serve", "--port-file %s", err.msg);
    return -1;
}

static int port_file_commit(const char *path, NewFile *nf, int port) {
    GptError err = {{0}};
    if (!path) return 0;
    char line[16];
    int n = snprintf(line, sizeof line, "%d\n", port);
    if (write(nf->fd, line, (size_t)n) != n) {
        runtime_error("serve", "--port-file %s: %s", path, strerror(errno));
        newfile_abort(nf);
        return -1;
    }
    if (newfile_commit(nf, path, 1, &err) == 0) return 0;
    runtime_error("serve", "--port-file %s", err.msg);
    return -1;
}

// --log FILE (appended to), - (stdout) or off: so->lim.log_fd. 0, or -1
// with the message written.
static int open_log(ServeOptions *so) {
    if (so->log && strcmp(so->log, "-") && strcmp(so->log, "off")) {
        so->lim.log_fd = open(so->log, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
        if (so->lim.log_fd < 0) {
            runtime_error("serve", "--log %s: %s", so->log, strerror(errno));
            return -1;
        }
    } else if (so->log) {
        so->lim.log_fd = strcmp(so->log, "off") ? STDOUT_FILENO : -1;
    }
    return 0;
}

int run_serve(int argc, char **argv) {
    ServeOptions so;
    int done, rc = parse_serve_options(argc, argv, &so, &done);
    if (done) return rc;
    int quiet = so.shared.model.quiet;
    sigset_t signals;
    block_signals(&signals);

    // the log's file, before anything else can fail on its account
    if (open_log(&so) != 0) return EXIT_RUNTIME;
    int log_fd = so.lim.log_fd > STDERR_FILENO ? so.lim.log_fd : -1;  // ours to close
    ChatTemplate chat;
    GptError err = {{0}};
    if (http_load(&err) != 0) {
        runtime_error("serve", "%s", err.msg);
        if (log_fd >= 0) close(log_fd);
        return EXIT_RUNTIME;
    }
    if (chat_template_open(so.chat_template, &chat, &err) != 0) {
        runtime_error("serve", "--chat-template %s: %s", so.chat_template, err.msg);
        if (log_fd >= 0) close(log_fd);
        return EXIT_RUNTIME;
    }
    int bound_port = 0, ipv6 = 0, loopback = 0;
    NewFile port_file;
    int fd = -1;
    if (port_file_open(so.port_file, &port_file) == 0) fd = listen_on(so.host, so.port, &bound_port, &ipv6, &loopback);
    if (fd < 0) {
        newfile_abort(&port_file);
        if (log_fd >= 0) close(log_fd);
        chat_template_free(&chat);
        return EXIT_RUNTIME;
    }
    if (!loopback && !so.lim.api_key)
        warning("serve", "listening on %s without --api-key: anyone who can reach this port can use the model",
                so.host);
    Server *s = server_new(&so.lim);
    if (s) s->chat_template = chat;  // the server's from now on
    if (s) s->pooling = so.pooling;
    else chat_template_free(&chat);
    if (!s) {
        close(fd);
        newfile_abort(&port_file);
        if (log_fd >= 0) close(log_fd);
        runtime_error("serve", "out of memory");
        return EXIT_RUNTIME;
    }
    pthread_t scheduler;
    int scheduler_up = 0;
    // served from now on: 503 ("loading") until the model is ready
    struct MHD_Daemon *d = http_start(s, fd, ipv6);
    if (d) fd = -1;  // libmicrohttpd's now
    rc = d ? start_engine(s, &so) : EXIT_RUNTIME;
    if (rc == EXIT_OK && thread_start(&scheduler, scheduler_main, s) != 0) {
        runtime_error("serve", "cannot start the scheduler thread");
        rc = EXIT_RUNTIME;
    }
    if (rc == EXIT_OK) {
        scheduler_up = 1;
        announce_ready(s, &so, ipv6, bound_port);
        if (port_file_commit(so.port_file, &port_file, bound_port) == 0) {
            serve_until_signal(s, d, &signals, quiet);
            if (so.port_file) unlink(so.port_file);  // no server answers at that port now
        } else {
            rc = EXIT_RUNTIME;
        }
    }
    newfile_abort(&port_file);
    server_free(s, d, scheduler_up ? &scheduler : NULL, fd);
    if (log_fd >= 0) close(log_fd);
    return rc;
}
