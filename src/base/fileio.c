/* fileio.c - see fileio.h. */
#define _GNU_SOURCE  // madvise, O_TMPFILE, linkat
#include "base/fileio.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/grow.h"
#include "base/threads.h"

int file_read_stream(FILE *f, const char *name, char **data, size_t *len, GptError *err) {
    *data = NULL;
    *len = 0;
    size_t cap = 0, n = 0;
    char *buf = NULL;
    for (;;) {
        // room for one more byte and the NUL; 64 KiB to start with
        if (grow_array(&buf, &cap, n + 2 > 1 << 16 ? n + 2 : 1 << 16, 1) != 0) {
            free(buf);
            return gpt_error(err, "%s: out of memory", name);
        }
        errno = 0;
        size_t want = cap - 1 - n, got = fread(buf + n, 1, want, f);
        n += got;
        // A short read is the end of the input (or an error): another read
        // would wait for more, as a terminal's does after its Ctrl-D.
        if (got < want) break;
    }
    if (ferror(f)) {
        int e = errno;
        free(buf);
        return gpt_error(err, "%s: %s", name, e ? strerror(e) : "read error");
    }
    buf[n] = '\0';
    *data = buf;
    *len = n;
    return 0;
}

int file_read_all(const char *path, char **data, size_t *len, GptError *err) {
    *data = NULL;
    *len = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return gpt_error(err, "%s: %s", path, strerror(errno));
    int rc = file_read_stream(f, path, data, len, err);
    fclose(f);
    return rc;
}

int file_map(const char *path, MappedFile *out, GptError *err) {
    out->data = NULL;
    out->size = 0;
    out->prefetch = NULL;
    int fd = open(path, O_RDONLY);
    if (fd < 0) return gpt_error(err, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        close(fd);
        return gpt_error(err, "%s: %s", path, strerror(errno));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return gpt_error(err, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return 0;
    }
#ifdef GPT_FUZZ
    // The fuzz build (tests/fuzz/): a heap copy of exactly the file's size,
    // page-aligned as a mapping is, so that AddressSanitizer reports any read
    // past the end of the file (in a mapping it would land in the last
    // page's slack unseen).
    size_t size = (size_t)st.st_size;
    void *p = NULL;
    if (posix_memalign(&p, 4096, size) != 0) {
        close(fd);
        return gpt_error(err, "%s: out of memory", path);
    }
    for (size_t got = 0; got < size;) {
        ssize_t r = read(fd, (char *)p + got, size - got);
        if (r <= 0) {
            int e = r < 0 ? errno : EIO;
            free(p);
            close(fd);
            return gpt_error(err, "%s: read: %s", path, strerror(e));
        }
        got += (size_t)r;
    }
    close(fd);
#else
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (p == MAP_FAILED) return gpt_error(err, "%s: mmap: %s", path, strerror(errno));
#endif
    out->data = p;
    out->size = (size_t)st.st_size;
    return 0;
}

void file_release(const MappedFile *f, size_t offset, size_t len) {
#ifdef GPT_FUZZ
    (void)f, (void)offset, (void)len;  // a heap copy: nothing to give back
#else
    if (!f->data || offset >= f->size) return;
    if (len > f->size - offset) len = f->size - offset;
    // Only whole pages inside the range: a page shared with a neighbour that
    // is still to be read stays.
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    uintptr_t base = (uintptr_t)f->data;
    uintptr_t first = (base + offset + page - 1) / page * page;
    uintptr_t last = (base + offset + len) / page * page;
    if (last > first) (void)madvise((void *)first, last - first, MADV_DONTNEED);
#endif
}

struct FilePrefetch {
    pthread_t thread;
    const volatile unsigned char *data;
    size_t size;
    atomic_int stop;  // set by file_unmap; checked between chunks
};

#ifndef GPT_FUZZ
enum { PREFETCH_CHUNK = 2 << 20 };

static void *prefetch_main(void *arg) {
    FilePrefetch *p = arg;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    unsigned sum = 0;
    for (size_t at = 0; at < p->size && !atomic_load_explicit(&p->stop, memory_order_relaxed); at += PREFETCH_CHUNK) {
        size_t n = p->size - at < PREFETCH_CHUNK ? p->size - at : PREFETCH_CHUNK;
#ifdef MADV_POPULATE_READ
        // the mapping starts on a page and chunks are whole pages
        (void)madvise((void *)(uintptr_t)(p->data + at), n, MADV_POPULATE_READ);
#endif
        for (size_t i = 0; i < n; i += page) sum += p->data[at + i];
    }
    return (void *)(uintptr_t)sum;
}
#endif

void file_prefetch(MappedFile *f) {
#ifdef GPT_FUZZ
    (void)f;  // a heap copy: already read
#else
    if (!f || !f->data || f->prefetch) return;
    FilePrefetch *p = calloc(1, sizeof *p);
    if (!p) return;
    p->data = f->data;
    p->size = f->size;
    atomic_init(&p->stop, 0);
    if (thread_start(&p->thread, prefetch_main, p) != 0) {
        free(p);
        return;
    }
    f->prefetch = p;
#endif
}

void file_unmap(MappedFile *f) {
    if (f && f->prefetch) {
        atomic_store(&f->prefetch->stop, 1);
        pthread_join(f->prefetch->thread, NULL);
        free(f->prefetch);
        f->prefetch = NULL;
    }
#ifdef GPT_FUZZ
    if (f && f->data) free((void *)f->data);
#else
    if (f && f->data) munmap((void *)f->data, f->size);
#endif
    if (f) {
        f->data = NULL;
        f->size = 0;
    }
}

char *path_join(const char *dir, const char *name) {
    size_t d = strlen(dir), n = d + (name ? strlen(name) + 1 : 0) + 1;
    char *p = malloc(n);
    if (!p) return NULL;
    // "/" + "x" is "/x", not "//x"
    if (name) snprintf(p, n, "%s%s%s", dir, d && dir[d - 1] == '/' ? "" : "/", name);
    else memcpy(p, dir, n);
    return p;
}

char *path_dirname(const char *path) {
    const char *slash = strrchr(path, '/');
    if (!slash) return path_join(".", NULL);
    size_t n = slash == path ? 1 : (size_t)(slash - path);  // "/x" -> "/"
    char *dir = malloc(n + 1);
    if (!dir) return NULL;
    memcpy(dir, path, n);
    dir[n] = '\0';
    return dir;
}

char *path_sibling(const char *file, const char *name) {
    char *dir = path_dirname(file);
    char *p = dir ? path_join(dir, name) : NULL;
    free(dir);
    return p;
}

int path_is_dir(const char *path) {
    struct stat st;
    return stat(path, &st) == 0 && S_ISDIR(st.st_mode);
}

int path_exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// ---------------------------------------------------------------------------
// a new file: nothing half-written ever has OUT's name

int newfile_open(NewFile *nf, const char *out_path, mode_t mode, GptError *err) {
    nf->fd = -1;
    nf->tmp = NULL;
    char *dir = path_dirname(out_path);
    if (!dir) return gpt_error(err, "%s: out of memory", out_path);
#ifdef O_TMPFILE
    if (access("/proc/self/fd", X_OK) == 0) nf->fd = open(dir, O_TMPFILE | O_WRONLY | O_CLOEXEC, mode);
#endif
    free(dir);
    if (nf->fd >= 0) return 0;
    size_t plen = strlen(out_path) + 16;
    nf->tmp = malloc(plen);
    if (!nf->tmp) return gpt_error(err, "%s: out of memory", out_path);
    snprintf(nf->tmp, plen, "%s.tmp-XXXXXX", out_path);
    nf->fd = mkstemp(nf->tmp);
    if (nf->fd < 0) {
        gpt_error(err, "%s: cannot create a file beside it: %s", out_path, strerror(errno));
        free(nf->tmp);
        nf->tmp = NULL;
        return -1;
    }
    fchmod(nf->fd, mode);  // mkstemp's 0600 would make a model private to its writer
    return 0;
}

void newfile_abort(NewFile *nf) {
    if (nf->fd >= 0) close(nf->fd);
    if (nf->tmp) unlink(nf->tmp);
    free(nf->tmp);
    nf->fd = -1;
    nf->tmp = NULL;
}

int newfile_commit(NewFile *nf, const char *out_path, int replace, GptError *err) {
    int rc = -1;
    if (!nf->tmp) {
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", nf->fd);
        if (!replace) {
            if (linkat(AT_FDCWD, proc, AT_FDCWD, out_path, AT_SYMLINK_FOLLOW) == 0) rc = 0;
            else gpt_error(err, "%s: %s", out_path, strerror(errno));
        } else {
            // a name of its own first, then over OUT in one rename
            char tmp[4096];
            for (int attempt = 0; attempt < 100 && rc != 0; attempt++) {
                snprintf(tmp, sizeof tmp, "%s.tmp-%d-%d", out_path, (int)getpid(), attempt);
                if (linkat(AT_FDCWD, proc, AT_FDCWD, tmp, AT_SYMLINK_FOLLOW) == 0) rc = 0;
                else if (errno != EEXIST) break;
            }
            if (rc != 0) {
                gpt_error(err, "%s: cannot name the new file: %s", out_path, strerror(errno));
            } else if (rename(tmp, out_path) != 0) {
                gpt_error(err, "%s: %s", out_path, strerror(errno));
                unlink(tmp);
                rc = -1;
            }
        }
    } else if (!replace) {
        if (link(nf->tmp, out_path) == 0) rc = 0;
        else gpt_error(err, "%s: %s", out_path, strerror(errno));
    } else if (rename(nf->tmp, out_path) == 0) {
        free(nf->tmp);  // it has OUT's name now
        nf->tmp = NULL;
        rc = 0;
    } else {
        gpt_error(err, "%s: %s", out_path, strerror(errno));
    }
    newfile_abort(nf);  // closes; removes a temporary name still there
    return rc;
}
