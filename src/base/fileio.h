/*
 * fileio.h - reading, mapping and writing files, with errors that name the
 * path.
 *
 * Two ways in: file_read_all() copies a whole (small) file into a malloc'd,
 * NUL-terminated buffer (JSON, merges.txt); file_map() maps a (large) file
 * read-only, for weights. One way out: a NewFile, written under no name and
 * given its name only when complete. None of them interprets the bytes.
 */
#ifndef GPT_FILEIO_H
#define GPT_FILEIO_H

#include <stddef.h>
#include <stdio.h>
#include <sys/types.h>  // mode_t

#include "base/error.h"

// Reads all of `path` into *data (malloc'd, one extra NUL byte appended, not
// counted in *len). The caller frees *data. Returns 0, or -1 with err set.
int file_read_all(const char *path, char **data, size_t *len, GptError *err);

// The same for an open stream (stdin): reads to its end, the first short
// read (a terminal's one Ctrl-D ends it). `name` is what the error message
// calls it.
int file_read_stream(FILE *f, const char *name, char **data, size_t *len, GptError *err);

typedef struct FilePrefetch FilePrefetch;
typedef struct {
    const unsigned char *data;  // read-only mapping, NULL when empty/closed
    size_t size;                // bytes mapped (the file's length)
    FilePrefetch *prefetch;     // the thread of file_prefetch, NULL when none
} MappedFile;

// Maps `path` read-only. An empty file maps to {NULL, 0}. Returns 0 or -1.
// Built with -DGPT_FUZZ (tests/fuzz/), it reads the file into a heap buffer
// of exactly its size instead, so that AddressSanitizer sees a read past the
// end; file_unmap frees it and file_release does nothing.
int file_map(const char *path, MappedFile *out, GptError *err);
// Tells the kernel that bytes [offset, offset + len) of the mapping will not
// be read again soon, so their pages leave this process's memory (they stay
// in the page cache, and a later read brings them back). Used after copying
// weights out of a mapping, so the file and its copy are not both resident.
void file_release(const MappedFile *f, size_t offset, size_t len);
// Brings the whole mapping into this process's page tables from a thread
// of its own, while the caller goes on (builds a tokenizer, reads a prompt),
// so that the first pass over the weights does not pay for it: every page
// is populated (MADV_POPULATE_READ) and then read once, one byte a page (on
// a virtual machine with shadow page tables the hypervisor fills its entry
// at a page's first read, which populating does not do). The pages are
// those the first forward step reads anyway; only call it for a mapping
// read whole. Advice only: if the thread cannot start, nothing happens.
// At most one prefetch per mapping (a second call does nothing);
// file_unmap stops it (within one 2 MiB chunk) and joins it.
void file_prefetch(MappedFile *f);
// Unmaps; NULL-safe and idempotent (leaves {NULL, 0}).
void file_unmap(MappedFile *f);

// dir + "/" + name (one slash between them), malloc'd (the caller frees); with name NULL, a copy of
// dir. NULL when out of memory.
char *path_join(const char *dir, const char *name);
// The directory part of path: "a/b.bin" gives "a", "b.bin" gives ".",
// "/b.bin" gives "/". malloc'd, or NULL.
char *path_dirname(const char *path);
// The path of `name` in the directory that holds `file`: "a/b.bin" and "c"
// give "a/c", "b.bin" gives "./c", "/b.bin" gives "/c". malloc'd, or NULL.
char *path_sibling(const char *file, const char *name);

// 1 if path is an existing directory, 0 otherwise.
int path_is_dir(const char *path);
// 1 if path exists (any kind), 0 otherwise.
int path_exists(const char *path);

// A file being written so that nothing half-written ever has its name OUT:
// anonymous (O_TMPFILE: it has no name until it is complete, and vanishes
// if the process dies), or, where the file system has no O_TMPFILE, a named
// temporary beside OUT, removed on any failure.
//
//     NewFile nf;
//     if (newfile_open(&nf, out, 0644, err)) fail;
//     write all of it to nf.fd, fsync it;  on any error: newfile_abort(&nf)
//     if (newfile_commit(&nf, out, replace, err)) fail;
typedef struct {
    int fd;     // the file to write (the caller may hand it to a FILE and
                // back, as long as nf.fd is an open descriptor of it, or -1)
    char *tmp;  // the temporary's name, when it has one
} NewFile;

// Opens a new file with `mode` in the directory of out_path. 0, or -1 with
// err naming out_path (nf then holds nothing).
int newfile_open(NewFile *nf, const char *out_path, mode_t mode, GptError *err);
// Closes the file and removes its temporary name: nothing is left.
// Idempotent.
void newfile_abort(NewFile *nf);
// Gives the complete file out_path's name: a new name only (link: it fails
// if out_path appeared meanwhile), or, with replace, over an existing
// out_path in one rename. Closes the file either way. 0, or -1 with err set
// (then out_path is as it was).
int newfile_commit(NewFile *nf, const char *out_path, int replace, GptError *err);

#endif
