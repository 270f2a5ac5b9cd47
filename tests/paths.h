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

#endif
