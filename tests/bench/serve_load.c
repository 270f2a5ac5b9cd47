/*
 * serve_load.c - a load generator for gpt serve (tests/bench/serve.sh).
 *
 *   serve_load PORT CLIENTS FILE [keep-alive]
 *
 * FILE holds one request body (JSON) a line. CLIENTS threads each take the
 * next line not yet taken, POST it to 127.0.0.1:PORT/v1/completions on a
 * connection of its own (HTTP/1.0: the answer ends when the server closes
 * it), read the whole answer, and take the next, until every line is sent.
 * With keep-alive, each client keeps one connection for all its requests
 * (HTTP/1.1; an answer ends at its Content-Length, so streamed requests
 * are not for this mode): the time of a request without the connection's.
 * For each answer it keeps the time from connecting to the last byte, the
 * time to the first event of a streamed answer ("data: ", the first token's
 * text), the tokens generated (usage.completion_tokens, or the events'
 * tokens added up) and the response's id. Prints one line:
 *
 *   requests=N ok=N distinct_ids=N wall=S tokens=T tok_s=R p50=S p99=S ttft_p50=S ttft_p99=S
 *
 * (seconds; ttft_* are 0 when no answer was streamed; tok_s is the tokens
 * over the wall from the first connection to the last answer). Exit 1 on a
 * usage or set-up error; a failed request is counted, not fatal.
 */
#include <arpa/inet.h>
#include <cJSON.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base/clock.h"

enum { MAX_CLIENTS = 1024 };

typedef struct {
    double latency, ttft;  // seconds; ttft < 0: not streamed
    long tokens;
    int ok;
    char id[48];
} Result;

typedef struct {
    int port;
    int keep_alive;
    char **bodies;
    size_t n;
    size_t next;  // the next line to send, under lock
    pthread_mutex_t lock;
    Result *results;
} Load;

// The whole answer of one request on a new connection into *out (malloc'd,
// NUL-terminated); *first_event: when the first "data: " arrived (0: none).
// 0, or -1 when the connection or the exchange failed.
static int connect_to(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return -1;
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

// The whole answer (headers and body) ends here: with keep-alive at its
// Content-Length, else when the server closes the connection.
static int answer_complete(const char *buf, size_t got, int keep_alive) {
    if (!keep_alive) return 0;
    const char *end = strstr(buf, "\r\n\r\n");
    const char *cl = strstr(buf, "Content-Length: ");
    if (!end || !cl || cl > end) return 0;
    return got >= (size_t)(end + 4 - buf) + strtoul(cl + 16, NULL, 10);
}

// One request on *fd (with keep-alive: the connection of earlier ones,
// opened when *fd < 0, closed on failure), its whole answer into *out.
static int exchange(int port, int *fd_io, int keep_alive, const char *body, char **out, size_t *len,
                    double *first_event) {
    *out = NULL;
    *len = 0;
    *first_event = 0;
    int fd = keep_alive && *fd_io >= 0 ? *fd_io : connect_to(port);
    if (fd < 0) return -1;
    size_t n = strlen(body);
    char head[256];
    int h = snprintf(head, sizeof head,
                     "POST /v1/completions HTTP/1.%d\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                     "Content-Length: %zu\r\n\r\n", keep_alive, n);
    size_t cap = 4096, got = 0;
    char *buf = malloc(cap);
    int rc = buf && send(fd, head, (size_t)h, MSG_NOSIGNAL) == h &&
                     send(fd, body, n, MSG_NOSIGNAL) == (ssize_t)n ? 0 : -1;
    while (rc == 0) {
        if (cap - got < 2048) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                rc = -1;
                break;
            }
            buf = bigger;
            cap *= 2;
        }
        ssize_t r = recv(fd, buf + got, cap - got - 1, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) rc = -1;
        if (r <= 0) break;
        got += (size_t)r;
        buf[got] = '\0';
        if (!*first_event && strstr(buf, "\ndata: ")) *first_event = now_seconds();
        if (answer_complete(buf, got, keep_alive)) break;
    }
    if (keep_alive && rc == 0 && answer_complete(buf, got, 1)) {
        *fd_io = fd;
    } else {
        close(fd);
        *fd_io = -1;
        if (keep_alive) rc = -1;
    }
    if (rc != 0) {
        free(buf);
        return -1;
    }
    buf[got] = '\0';
    *out = buf;
    *len = got;
    return 0;
}

// Reads an answer: 200, and its tokens and id.
static void read_answer(const char *answer, Result *r) {
    const char *body = strstr(answer, "\r\n\r\n");
    if (strncmp(answer, "HTTP/1.", 7) || strncmp(answer + 8, " 200 ", 5) || !body) return;
    body += 4;
    if (!strstr(answer, "text/event-stream")) {
        cJSON *o = cJSON_Parse(body);
        const cJSON *tokens = cJSON_GetObjectItem(cJSON_GetObjectItem(o, "usage"), "completion_tokens");
        const cJSON *id = cJSON_GetObjectItem(o, "id");
        if (cJSON_IsNumber(tokens) && cJSON_IsString(id)) {
            r->tokens = (long)tokens->valuedouble;
            snprintf(r->id, sizeof r->id, "%s", id->valuestring);
            r->ok = 1;
        }
        cJSON_Delete(o);
        return;
    }
    int done = 0;
    for (const char *p = body; (p = strstr(p, "data: ")); ) {
        p += 6;
        const char *end = strstr(p, "\n\n");
        if (!end) break;
        if (!strncmp(p, "[DONE]", 6)) {
            done = 1;
            break;
        }
        cJSON *o = cJSON_ParseWithLength(p, (size_t)(end - p));
        const cJSON *c = cJSON_GetArrayItem(cJSON_GetObjectItem(o, "choices"), 0);
        const cJSON *id = cJSON_GetObjectItem(o, "id");
        r->tokens += cJSON_GetArraySize(cJSON_GetObjectItem(c, "tokens"));
        if (cJSON_IsString(id)) snprintf(r->id, sizeof r->id, "%s", id->valuestring);
        cJSON_Delete(o);
        p = end;
    }
    r->ok = done && r->id[0];
}

static void *client(void *arg) {
    Load *l = arg;
    int fd = -1;
    for (;;) {
        pthread_mutex_lock(&l->lock);
        size_t i = l->next < l->n ? l->next++ : l->n;
        pthread_mutex_unlock(&l->lock);
        if (i == l->n) {
            if (fd >= 0) close(fd);
            return NULL;
        }
        Result *r = &l->results[i];
        char *answer;
        size_t len;
        double first, t0 = now_seconds();
        int rc = exchange(l->port, &fd, l->keep_alive, l->bodies[i], &answer, &len, &first);
        double t1 = now_seconds();
        r->latency = t1 - t0;
        r->ttft = first ? first - t0 : -1;
        if (rc == 0) read_answer(answer, r);
        free(answer);
    }
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

// The q-quantile (nearest rank) of v[0..n), sorted in place; 0 for none.
static double quantile(double *v, size_t n, double q) {
    if (n == 0) return 0;
    qsort(v, n, sizeof *v, by_value);
    size_t k = (size_t)(q * (double)n + 0.999999);
    return v[k == 0 ? 0 : k > n ? n - 1 : k - 1];
}

static int by_id(const void *a, const void *b) {
    return strcmp(((const Result *)a)->id, ((const Result *)b)->id);
}

// The lines of f (newline removed; empty lines skipped) into *lines.
static int read_lines(FILE *f, char ***lines, size_t *n) {
    size_t cap = 0;
    char *line = NULL;
    size_t line_cap = 0;
    ssize_t len;
    *lines = NULL;
    *n = 0;
    while ((len = getline(&line, &line_cap, f)) >= 0) {
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r')) line[--len] = '\0';
        if (len == 0) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 64;
            char **bigger = realloc(*lines, cap * sizeof **lines);
            if (!bigger) break;
            *lines = bigger;
        }
        if (!((*lines)[*n] = strdup(line))) break;
        (*n)++;
    }
    int failed = ferror(f) || !feof(f);
    free(line);
    return failed ? -1 : 0;
}

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "keep-alive"))) {
        fprintf(stderr, "usage: serve_load PORT CLIENTS FILE [keep-alive] (one request body a line)\n");
        return 1;
    }
    int port = atoi(argv[1]), clients = atoi(argv[2]);
    if (port <= 0 || port > 65535 || clients <= 0 || clients > MAX_CLIENTS) {
        fprintf(stderr, "serve_load: PORT 1..65535 and CLIENTS 1..%d\n", MAX_CLIENTS);
        return 1;
    }
    FILE *f = fopen(argv[3], "r");
    if (!f) {
        fprintf(stderr, "serve_load: %s: %s\n", argv[3], strerror(errno));
        return 1;
    }
    Load l = {.port = port, .keep_alive = argc == 5};
    int rc = read_lines(f, &l.bodies, &l.n);
    fclose(f);
    if (rc != 0 || l.n == 0) {
        fprintf(stderr, "serve_load: %s: %s\n", argv[3], rc ? "cannot read it" : "no request in it");
        for (size_t i = 0; i < l.n; i++) free(l.bodies[i]);
        free(l.bodies);
        return 1;
    }
    l.results = calloc(l.n, sizeof *l.results);
    double *lat = malloc(l.n * sizeof *lat), *ttft = malloc(l.n * sizeof *ttft);
    pthread_t *threads = malloc((size_t)clients * sizeof *threads);
    pthread_mutex_init(&l.lock, NULL);
    int started = 0;
    double t0 = now_seconds();
    if (l.results && lat && ttft && threads) {
        for (; started < clients; started++)
            if (pthread_create(&threads[started], NULL, client, &l) != 0) break;
    }
    for (int i = 0; i < started; i++) pthread_join(threads[i], NULL);
    double wall = now_seconds() - t0;
    if (started < clients) {
        fprintf(stderr, "serve_load: out of memory or threads (%d of %d clients started)\n", started, clients);
        rc = 1;
    } else {
        size_t ok = 0, n_lat = 0, n_ttft = 0, distinct = 0;
        long tokens = 0;
        for (size_t i = 0; i < l.n; i++) {
            const Result *r = &l.results[i];
            if (!r->ok) continue;
            ok++;
            tokens += r->tokens;
            lat[n_lat++] = r->latency;
            if (r->ttft >= 0) ttft[n_ttft++] = r->ttft;
        }
        qsort(l.results, l.n, sizeof *l.results, by_id);
        for (size_t i = 0; i < l.n; i++)
            distinct += l.results[i].ok && (i == 0 || by_id(&l.results[i], &l.results[i - 1]) != 0);
        double p50 = quantile(lat, n_lat, 0.5), p99 = quantile(lat, n_lat, 0.99);
        printf("requests=%zu ok=%zu distinct_ids=%zu wall=%.4f tokens=%ld tok_s=%.1f p50=%.4f p99=%.4f "
               "ttft_p50=%.4f ttft_p99=%.4f\n", l.n, ok, distinct, wall, tokens, (double)tokens / wall, p50, p99,
               quantile(ttft, n_ttft, 0.5), quantile(ttft, n_ttft, 0.99));
    }
    pthread_mutex_destroy(&l.lock);
    for (size_t i = 0; i < l.n; i++) free(l.bodies[i]);
    free(l.bodies);
    free(l.results);
    free(lat);
    free(ttft);
    free(threads);
    return rc;
}
