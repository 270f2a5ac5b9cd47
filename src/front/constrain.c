/*
 * constrain.c - the four ways a front-end may constrain a run's output,
 * compiled to one Grammar (src/grammar/grammar.h): GBNF text (--grammar,
 * "grammar"), a JSON Schema (--json-schema, "json_schema", response_format
 * json_schema; src/grammar/schema.h), any JSON object (--json-object,
 * response_format json_object) and a regular expression (--regex, "regex";
 * src/grammar/regex.h). The command, --batch --jsonl and gpt serve all
 * compile here, with the same bounds and messages.
 *
 * Every form may come from anyone (a server's request body), so every
 * bound of the translators and of grammar_compile holds (schema.h,
 * regex.h, GrammarLimits), and the mask cache of each grammar is held to
 * CONSTRAINT_CACHE_BYTES (a server's 16 sequences of different grammars
 * and the 4 it keeps idle, sequence.c's GrammarShare: 320 MiB).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front.h"
#include "grammar/regex.h"
#include "grammar/schema.h"

enum { CONSTRAINT_CACHE_BYTES = 16u << 20 };

// err's message without the translator's own prefix ("json-schema: "),
// which the caller's `what` replaces.
static const char *without_prefix(const char *msg, const char *prefix) {
    size_t n = strlen(prefix);
    return strncmp(msg, prefix, n) ? msg : msg + n;
}

Grammar *constraint_compile(ConstraintKind kind, const char *text, size_t len, const char *what, GptError *err) {
    GptError e = {{0}};
    char *gbnf = NULL;
    const char *src = text;
    size_t src_len = len;
    if (kind == CONSTRAINT_JSON_SCHEMA) {
        if (!(gbnf = schema_to_gbnf(text, len, &e)))
            return gpt_error(err, "%s: %s", what, without_prefix(e.msg, "json-schema: ")), NULL;
    } else if (kind == CONSTRAINT_JSON_OBJECT) {
        if (!(gbnf = schema_json_object_gbnf(&e))) return gpt_error(err, "%s: %s", what, e.msg), NULL;
    } else if (kind == CONSTRAINT_REGEX) {
        // regex_to_gbnf's, with the caller's name in its messages
        GText t = {0};
        gtext_puts(&t, "root ::= ");
        if (regex_emit(&t, text, len, 0, what, err) != 0) {
            gtext_free(&t);
            return NULL;
        }
        gtext_puts(&t, "\n");
        if (t.failed) {
            gtext_free(&t);
            return gpt_error(err, "%s: out of memory", what), NULL;
        }
        gbnf = t.s;
    }
    if (gbnf) {
        src = gbnf;
        src_len = strlen(gbnf);
    }
    GrammarLimits lim = grammar_limits_default();
    lim.max_cache_bytes = CONSTRAINT_CACHE_BYTES;
    Grammar *g = grammar_compile(src, src_len, &lim, &e);
    free(gbnf);
    if (!g) {
        // a translated form's grammar is ours, not the user's: its LINE:COL
        // would point nowhere they can see, so only the bound is named
        if (kind == CONSTRAINT_GRAMMAR) gpt_error(err, "%s: %s", what, e.msg);
        else gpt_error(err, "%s: its grammar: %s", what, without_prefix(e.msg, "grammar: "));
    }
    return g;
}
