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
#include <getopt.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "base/clock.h"
#include "model/kvcache.h"
#include "serve.h"

// The prompt tokens one step reads beside the decodes.
enum { PREFILL_CHUNK = 128 };

static const char *serve_usage =
    "usage: gpt serve [options]      the model behind an OpenAI-compatible HTTP API\n"
    "  -m, --model PATH        the model, as gpt's -m (default: $GPT_MODEL, else gpt's search;\n"
    "                          with no GPT-2, the demo model)\n"
    "      --tokenizer PATH    directory with vocab.json + merges.txt, or a tokenizer.json\n"
    "      --dtype T           convert the weight matrices at load: f32, f16, bf16, q8, q6,\n"
    "                          q4 or q4-pure (default: as the file stores them)\n"
    "      --kv-type T         KV-cache elements: f32 (default) or f16\n"
    "  -t, --threads N         threads of the model (default: the number of cores)\n"
    "      --host ADDR         the address to listen on (default 127.0.0.1)\n"
    "      --port N            the port (default 8080; 0 picks a free one, which the ready\n"
    "                          line names)\n"
    "      --parallel N        sequences decoded together (default 16)\n"
    "      --kv-budget SIZE    KV-cache memory for all of them, K/M/G suffixes, in whole blocks\n"
    "                          (default 1G, or twice what --parallel full contexts take if\n"
    "                          that is less)\n"
    "      --api-key KEY       requests must send Authorization: Bearer KEY (default:\n"
    "                          $GPT_API_KEY; without either, no key)\n"
    "      --max-body SIZE     the largest request body (default 1M)\n"
    "      --max-tokens N      the most max_tokens a request may ask for (default 4096)\n"
    "      --max-connections N connections at once (default 256)\n"
    "      --queue N           requests waiting beyond the running ones (default 64)\n"
    "      --timeout SECONDS   a connection idle this long, or a request not whole after\n"
    "                          this long, is closed (default 30)\n"
    "      --grace SECONDS     on SIGINT or SIGTERM, how long running requests may finish\n"
    "                          (default 10)\n"
    "  -h, --help              this help\n"
    "Endpoints: POST /v1/completions, /v1/score, /tokenize, /detokenize; GET /v1/models,\n"
    "/health, /metrics. A request with a seed gets exactly what gpt -p PROMPT -s SEED gives.\n"
    "Prints \"gpt: serving MODEL on http://HOST:PORT\" on stderr when ready, and one JSON\n"
    "line per request. Exit codes: 0 after SIGINT/SIGTERM, 1 runtime error (a port in use),\n"
    "2 usage error.\n";

// A listening socket for host:port. Its fd, or -1 after reporting.
// *port_out gets the port it has (--port 0 asks the kernel for one).
static int listen_on(const char *host, long port, int *port_out, int *ipv6, int *loopback) {
    char service[16];
    snprintf(service, sizeof service, "%ld", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res;
    int rc = getaddrinfo(host, service, &hints, &res);
    if (rc != 0) {
        fprintf(stderr, "gpt serve: --host %s: %s\n", host, gai_strerror(rc));
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
        fprintf(stderr, "gpt serve: %s:%ld: %s\n", host, port, strerror(saved));
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

// A whole number in [lo, hi] for an option: 0, or -1.
static int option_count(const char *v, long lo, long hi, long *out) {
    long x;
    if (parse_long(v, &x) != 0 || x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

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

int run_serve(int argc, char **argv) {
    enum {
        O_TOKENIZER = 256, O_DTYPE, O_KV_TYPE, O_HOST, O_PORT, O_PARALLEL, O_KV_BUDGET, O_API_KEY, O_MAX_BODY,
        O_MAX_TOKENS, O_MAX_CONNECTIONS, O_QUEUE, O_TIMEOUT, O_GRACE,
    };
    static const struct option longs[] = {{"help", no_argument, 0, 'h'},
                                          {"model", required_argument, 0, 'm'},
                                          {"tokenizer", required_argument, 0, O_TOKENIZER},
                                          {"dtype", required_argument, 0, O_DTYPE},
                                          {"kv-type", required_argument, 0, O_KV_TYPE},
                                          {"threads", required_argument, 0, 't'},
                                          {"host", required_argument, 0, O_HOST},
                                          {"port", required_argument, 0, O_PORT},
                                          {"parallel", required_argument, 0, O_PARALLEL},
                                          {"kv-budget", required_argument, 0, O_KV_BUDGET},
                                          {"api-key", required_argument, 0, O_API_KEY},
                                          {"max-body", required_argument, 0, O_MAX_BODY},
                                          {"max-tokens", required_argument, 0, O_MAX_TOKENS},
                                          {"max-connections", required_argument, 0, O_MAX_CONNECTIONS},
                                          {"queue", required_argument, 0, O_QUEUE},
                                          {"timeout", required_argument, 0, O_TIMEOUT},
                                          {"grace", required_argument, 0, O_GRACE},
                                          {0, 0, 0, 0}};
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    // the matmul variants measured once per machine, as the command's default ($GPT_TUNE as there)
    ModelOptions mo = {.weights = {.matrix_dtype = -1}, .threads = cores > 0 ? cores : 1,
                       .tune = (int)tune_mode_from_env(TUNE_ON), .version = GPT_VERSION};
    ServeLimits lim = {.parallel = 16, .queue = 64, .max_body = 1 << 20, .max_tokens = 4096,
                       .max_connections = 256, .timeout = 30, .grace = 10, .kv_dtype = DTYPE_F32};
    const char *host = "127.0.0.1", *kv_budget_arg = NULL;
    long port = 8080, v;
    size_t kv_budget = 0;
    const char *env_key = getenv("GPT_API_KEY");
    lim.api_key = env_key && *env_key ? env_key : NULL;
    opterr = 0;
    optind = 0;
    for (int c; (c = getopt_long(argc, argv, ":hm:t:", longs, NULL)) != -1;) {
        const char *arg = argv[optind - 1], *o = optarg;
        int k;
        switch (c) {
        case 'h':
            if (fputs(serve_usage, stdout) == EOF || fflush(stdout) != 0) {
                fprintf(stderr, "gpt: stdout: %s\n", strerror(errno));
                return EXIT_RUNTIME;
            }
            return EXIT_OK;
        case 'm': mo.model_path = o; break;
        case O_TOKENIZER: mo.tokenizer_path = o; break;
        case O_DTYPE:
            if (weight_options_from_name(o, &mo.weights) != 0)
                return usage_error("serve", "--dtype %s: must be " WEIGHT_DTYPE_NAMES, o);
            break;
        case O_KV_TYPE:
            k = dtype_from_name(o);
            if (k != DTYPE_F32 && k != DTYPE_F16) return usage_error("serve", "--kv-type %s: must be f32 or f16", o);
            lim.kv_dtype = (DType)k;
            break;
        case 't':
            if (option_count(o, 1, 1024, &mo.threads)) return usage_error("serve", "-t %s: must be an integer in [1, 1024]", o);
            break;
        case O_HOST: host = o; break;
        case O_PORT:
            if (option_count(o, 0, 65535, &port)) return usage_error("serve", "--port %s: must be an integer in [0, 65535]", o);
            break;
        case O_PARALLEL:
            if (option_count(o, 1, 256, &v)) return usage_error("serve", "--parallel %s: must be an integer in [1, 256]", o);
            lim.parallel = (size_t)v;
            break;
        case O_KV_BUDGET:
            if (parse_size(o, &kv_budget) != 0 || kv_budget == 0)
                return usage_error("serve", "--kv-budget %s: must be a size such as 512M or 2G", o);
            kv_budget_arg = o;
            break;
        case O_API_KEY:
            if (!*o) return usage_error("serve", "--api-key: an empty key would let anyone in");
            lim.api_key = o;
            break;
        case O_MAX_BODY:
            if (parse_size(o, &lim.max_body) != 0 || lim.max_body == 0 || lim.max_body > (1u << 30))
                return usage_error("serve", "--max-body %s: must be a size from 1 to 1G", o);
            break;
        case O_MAX_TOKENS:
            if (option_count(o, 1, 1000000000, &v)) return usage_error("serve", "--max-tokens %s: must be an integer in [1, 10^9]", o);
            lim.max_tokens = (size_t)v;
            break;
        case O_MAX_CONNECTIONS:
            if (option_count(o, 1, 65536, &v)) return usage_error("serve", "--max-connections %s: must be an integer in [1, 65536]", o);
            lim.max_connections = (size_t)v;
            break;
        case O_QUEUE:
            if (option_count(o, 0, 1000000, &v)) return usage_error("serve", "--queue %s: must be an integer in [0, 10^6]", o);
            lim.queue = (size_t)v;
            break;
        case O_TIMEOUT: case O_GRACE:
            if (option_count(o, c == O_GRACE ? 0 : 1, 86400, &v))
                return usage_error("serve", "%s %s: must be a whole number of seconds in [%d, 86400]",
                                   c == O_GRACE ? "--grace" : "--timeout", o, c == O_GRACE ? 0 : 1);
            if (c == O_GRACE) lim.grace = (unsigned)v;
            else lim.timeout = (unsigned)v;
            break;
        case ':': return usage_error("serve", "%s needs a value", arg);
        default: return usage_error("serve", "unknown option '%s'", arg);
        }
    }
    if (optind < argc) return usage_error("serve", "unexpected argument '%s'", argv[optind]);

    // Signals: blocked in every thread from here on (the pool's, the
    // scheduler's, libmicrohttpd's inherit the mask), taken by sigwait
    // below. One ignored when gpt started stays ignored.
    sigset_t signals;
    sigemptyset(&signals);
    for (int sig = SIGINT; sig; sig = sig == SIGINT ? SIGTERM : 0) {
        struct sigaction old;
        if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_IGN) sigaddset(&signals, sig);
    }
    pthread_sigmask(SIG_BLOCK, &signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    int bound_port = 0, ipv6 = 0, loopback = 0;
    int fd = listen_on(host, port, &bound_port, &ipv6, &loopback);
    if (fd < 0) return EXIT_RUNTIME;
    if (!loopback && !lim.api_key)
        fprintf(stderr, "gpt serve: warning: listening on %s without --api-key: anyone who can reach this port can "
                        "use the model\n", host);

    Server *s = calloc(1, sizeof *s);
    if (!s) {
        close(fd);
        fprintf(stderr, "gpt serve: out of memory\n");
        return EXIT_RUNTIME;
    }
    s->limits = lim;
    pthread_mutex_init(&s->lock, NULL);
    pthread_mutex_init(&s->tok_lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    pthread_cond_init(&s->idle, NULL);
    int rc = EXIT_RUNTIME;
    pthread_t scheduler;
    int scheduler_up = 0;
    GptError err = {{0}};
    // served from now on: 503 ("loading") until the model is ready
    struct MHD_Daemon *d = http_start(s, fd, ipv6);
    if (!d) goto done;
    fd = -1;  // libmicrohttpd's now
    rc = session_open_model(&s->session, &mo);
    if (rc != EXIT_OK) goto done;
    rc = EXIT_RUNTIME;
    const GPT2Config *cfg = &s->session.model.config;
    s->kv_blocks = kv_blocks_for_budget(cfg, lim.kv_dtype, kv_budget, lim.parallel);
    if (s->kv_blocks == 0) {
        rc = usage_error("serve", "--kv-budget %s: less than one block of this model's KV cache (%d positions, %zu bytes)",
                         kv_budget_arg, KV_BLOCK, kvcache_bytes_per_token(cfg, lim.kv_dtype) * KV_BLOCK);
        goto done;
    }
    note_kv_budget(0, kv_budget_arg, kv_budget, s->kv_blocks, kvcache_bytes_per_token(cfg, lim.kv_dtype) * KV_BLOCK);
    // prompts in chunks of 128 tokens beside the decodes, as --batch's
    // default --prefill-chunk; as many rows with logits for the prompts'
    // log-probabilities ("echo" with "logprobs")
    EngineConfig ec = {.max_seqs = lim.parallel, .max_step_tokens = lim.parallel + PREFILL_CHUNK,
                       .kv_dtype = lim.kv_dtype, .kv_blocks = s->kv_blocks, .share_prefixes = 1,
                       .pool = s->session.pool, .plan = &s->session.plan, .prompt_logit_rows = PREFILL_CHUNK};
    if (engine_init(&s->engine, &s->session.model, s->session.tok, &ec, &err) != 0) {
        report_error(&err);
        goto done;
    }
    s->engine_up = 1;
    s->engine_bytes = engine_buffer_bytes(&s->engine);
    if (pthread_create(&scheduler, NULL, scheduler_main, s) != 0) {
        fprintf(stderr, "gpt serve: cannot start the scheduler thread\n");
        goto done;
    }
    scheduler_up = 1;
    pthread_mutex_lock(&s->lock);
    s->model_name = base_name(s->session.model_path);
    s->started = (long)time(NULL);
    s->next_id = draw_seed();
    s->ready = 1;
    pthread_mutex_unlock(&s->lock);
    fprintf(stderr, "gpt: serving %s on http://%s%s%s:%d\n", s->model_name, ipv6 ? "[" : "", host, ipv6 ? "]" : "",
            bound_port);

    while (!wait_signal(&signals, 0.5)) http_deadlines(s);
    // 1. no new connections, no new requests
    pthread_mutex_lock(&s->lock);
    s->draining = 1;
    size_t left = s->in_flight;
    pthread_mutex_unlock(&s->lock);
    int listen_fd = MHD_quiesce_daemon(d);
    if (listen_fd >= 0) close(listen_fd);
    fprintf(stderr, "gpt serve: stopping: %zu requests running or queued, %u s to finish\n", left, lim.grace);
    // 2. the grace: until nothing runs, the time is up, or a second signal
    double deadline = now_seconds() + lim.grace;
    for (;;) {
        pthread_mutex_lock(&s->lock);
        left = s->in_flight;
        pthread_mutex_unlock(&s->lock);
        double now = now_seconds();
        if (!left || now >= deadline) break;
        // a tenth of a second at a time: the main thread has nothing else to do
        if (wait_signal(&signals, deadline - now < 0.1 ? deadline - now : 0.1)) break;
        http_deadlines(s);
    }
    // 3. what is left ends now, with the text it has
    pthread_mutex_lock(&s->lock);
    if (s->in_flight) fprintf(stderr, "gpt serve: the grace is over: %zu requests end now\n", s->in_flight);
    s->hard_stop = 1;
    pthread_cond_signal(&s->wake);
    while (s->in_flight) pthread_cond_wait(&s->idle, &s->lock);
    // every answer written to its end (a client that stopped reading has
    // --timeout seconds), then the connections close
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += lim.timeout;
    while (s->answering && pthread_cond_timedwait(&s->idle, &s->lock, &until) == 0) {
    }
    pthread_mutex_unlock(&s->lock);
    rc = EXIT_OK;
done:
    if (d) MHD_stop_daemon(d);  // waits for every connection's thread
    if (scheduler_up) {
        pthread_mutex_lock(&s->lock);
        s->stopping = 1;
        pthread_cond_signal(&s->wake);
        pthread_mutex_unlock(&s->lock);
        pthread_join(scheduler, NULL);
    }
    pthread_mutex_destroy(&s->lock);
    pthread_mutex_destroy(&s->tok_lock);
    pthread_cond_destroy(&s->wake);
    pthread_cond_destroy(&s->idle);
    if (fd >= 0) close(fd);
    if (s->engine_up) engine_free(&s->engine);
    session_close(&s->session);
    free(s);
    return rc;
}
