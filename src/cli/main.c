/*
 * main.c - the gpt command: read the options, hand them to the mode.
 *
 *   gpt [-m MODEL] [-p PROMPT] [options]      generate, streamed to stdout
 *   gpt --score [-m MODEL] [-p TEXT]          log-probability of a text
 *   gpt --tokenize / --detokenize             text <-> token ids
 *   gpt --apply-template [--chat-template T]  a conversation's prompt
 *   gpt chat [options]                        a conversation, turn by turn
 *   gpt embed [options]                       a vector per text (and hidden states)
 *   gpt convert SRC OUT.bin / gpt inspect FILE / gpt tune
 *   gpt serve [options]                       the HTTP server (src/serve/)
 */
#include <string.h>

#include "serve/run_serve.h"
#include "cli.h"

int main(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "convert")) return run_convert(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "inspect")) return run_inspect(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "serve")) return run_serve(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "tune")) return run_tune(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "chat")) return run_chat(argc - 1, argv + 1);
    if (argc >= 2 && !strcmp(argv[1], "embed")) return run_embed(argc - 1, argv + 1);
    Options o;
    int done = 0;
    int rc = parse_options(argc, argv, &o, &done);
    if (done) return rc;
    note_greedy_ignores(&o);
    switch (o.mode) {
    case MODE_TOKENIZE:
    case MODE_DETOKENIZE: return run_tokenize(&o);
    case MODE_BATCH: return run_batch(&o);
    case MODE_APPLY_TEMPLATE: return run_apply_template(&o);
    default: return run_model(&o);
    }
}
