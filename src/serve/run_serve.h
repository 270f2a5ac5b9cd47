/*
 * run_serve.h - the one entry of gpt serve that the command calls: its
 * main hands `gpt serve ...` here (src/cli/main.c). The only header of
 * serve/ that cli/ includes (tests/check_modules.py allows this one).
 */
#ifndef GPT_RUN_SERVE_H
#define GPT_RUN_SERVE_H

// gpt serve, argv from the subcommand's name on; an exit code (docs/usage.md)
int run_serve(int argc, char **argv);

#endif
