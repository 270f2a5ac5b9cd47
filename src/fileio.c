/* fileio.c - see fileio.h. */
#define _DEFAULT_SOURCE  // madvise
#include "fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

int file_read_stream(FILE *f, const char *name, char **data, size_t *len, GptError *err) {
    *data = NULL;
    *len = 0;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    if (!buf) return gpt_error(err, "%s: out of memory", name);
    for (;;) {
        if (n + 1 >= cap) {
            char *bigger = realloc(buf, cap * 2);
            if (!bigger) {
                free(buf);
                return gpt_error(err, "%s: out of memory", name);
            }
            buf = bigger;
            cap *= 2;
        }
        errno = 0;
        size_t got = fread(buf + n, 1, cap - 1 - n, f);
        n += got;
        if (got == 0) break;
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

void file_unmap(MappedFile *f) {
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
