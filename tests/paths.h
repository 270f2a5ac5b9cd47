/*
 * paths.h - where the tests find the checkpoints that
 * tests/make_checkpoints.sh generates ($CKPT_DIR, default build/ckpt), and
 * file names in a directory. Header-only.
 */
#ifndef GPT_TEST_PATHS_H
#define GPT_TEST_PATHS_H

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <string.h>

// dir/name, in one of 8 buffers used in turn (so up to 8 such paths can be
// arguments of one call).
static inline const char *path_in(const char *dir, const char *name) {
    static char buf[8][2048];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", dir, name);
    return buf[k];
}

// $CKPT_DIR (default build/ckpt) as an absolute path, since some tests run
// commands from another directory.
static inline const char *ckpt_dir(void) {
    static char dir[1536];
    const char *d = getenv("CKPT_DIR");
    char cwd[1024];
    d = d && *d ? d : "build/ckpt";
    if (d[0] == '/' || !getcwd(cwd, sizeof cwd)) snprintf(dir, sizeof dir, "%s", d);
    else snprintf(dir, sizeof dir, "%s/%s", cwd, d);
    return dir;
}

// A checkpoint (or any file) in ckpt_dir(): like path_in, with buffers of
// its own, so that it never overwrites a path_in result still in use.
static inline const char *ckpt(const char *name) {
    static char buf[8][2048];
    static int k;
    k = (k + 1) % 8;
    snprintf(buf[k], sizeof buf[k], "%s/%s", ckpt_dir(), name);
    return buf[k];
}

// A fresh scratch directory /tmp/gpt-NAME-XXXXXX for a test's files, in dir
// (cap bytes): 0, or -1 after saying why on stderr.
static inline int scratch_dir_make(char *dir, size_t cap, const char *name) {
    snprintf(dir, cap, "/tmp/gpt-%s-XXXXXX", name);
    if (mkdtemp(dir)) return 0;
    perror("mkdtemp");
    return -1;
}

// Removes the scratch directory and all in it (read-only parts too).
static inline void scratch_dir_remove(const char *dir) {
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "chmod -R u+w '%s' 2>/dev/null; rm -rf '%s'", dir, dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

#endif
