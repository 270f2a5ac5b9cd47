/*
 * fuzz_schema.c - the converters to GBNF (src/grammar/schema.h, regex.h)
 * and the grammar compiler behind them, on any input:
 *   "re:" REGEX      regex_to_gbnf(REGEX) (what --regex runs);
 *   anything else    schema_to_gbnf (what --json-schema and a request's
 *                    json_schema run): the JSON Schema text up to the first
 *                    NUL byte; the bytes after it are an instance.
 *
 * Checked:
 *   - a refusal has a message of one line;
 *   - the GBNF a converter writes compiles (grammar_compile with its
 *     default bounds, as gpt compiles it): a syntax error, an undefined
 *     rule or left recursion in it is the converter's bug; only a bound
 *     ("grammar: ...") or a language with no string may stop it;
 *   - a schema's grammar accepts only JSON: an instance it matches parses
 *     with cJSON as one value with nothing after it (the compact writing
 *     schema.h promises has no white space).
 */
#include <cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_common.h"
#include "grammar/grammar.h"
#include "grammar/regex.h"
#include "grammar/schema.h"

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    // --json-object's grammar must compile and take an object
    GptError err = {{0}};
    char *text = schema_json_object_gbnf(&err);
    if (!text) fuzz_fail("schema_json_object_gbnf: %s", err.msg);
    Grammar *g = grammar_compile(text, strlen(text), NULL, &err);
    if (!g) fuzz_fail("--json-object's grammar: %s", err.msg);
    // as json.dumps(x, separators=(",", ":"), ensure_ascii=False) writes it
    static const char obj[] = "{\"a\":[1,-2.5,true,null,\"\xC3\xA9\\n\"],\"b\":{}}";
    if (grammar_match(g, obj, strlen(obj), &err) != 1) fuzz_fail("--json-object's grammar refuses %s", obj);
    grammar_free(g);
    free(text);
    return 0;
}

static void check_message(const char *what, const GptError *err) {
    if (!err->msg[0] || strchr(err->msg, '\n')) fuzz_fail("%s refused with the message \"%s\"", what, err->msg);
}

// Compiles what a converter wrote; NULL when a bound stopped it.
static Grammar *compile(const char *what, const char *text) {
    GptError err = {{0}};
    Grammar *g = grammar_compile(text, strlen(text), NULL, &err);
    if (g) return g;
    check_message(what, &err);
    if (!strncmp(err.msg, "grammar: ", 9) || strstr(err.msg, "matches no string")) return NULL;
    fuzz_fail("%s wrote a grammar that does not compile: %s\n%.2000s", what, err.msg, text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    GptError err = {{0}};
    if (size >= 3 && !memcmp(data, "re:", 3)) {
        char *text = regex_to_gbnf((const char *)data + 3, size - 3, &err);
        if (!text) {
            check_message("regex_to_gbnf", &err);
            return 0;
        }
        grammar_free(compile("regex_to_gbnf", text));
        free(text);
        return 0;
    }
    const uint8_t *nul = memchr(data, 0, size);
    size_t schema_len = nul ? (size_t)(nul - data) : size;
    char *text = schema_to_gbnf((const char *)data, schema_len, &err);
    if (!text) {
        check_message("schema_to_gbnf", &err);
        return 0;
    }
    Grammar *g = compile("schema_to_gbnf", text);
    if (g && nul) {
        const char *inst = (const char *)nul + 1;
        size_t n = size - schema_len - 1;
        if (grammar_match(g, inst, n, &err) == 1) {
            const char *end = NULL;
            cJSON *v = memchr(inst, 0, n) ? NULL : cJSON_ParseWithLengthOpts(inst, n, &end, 0);
            if (!v || end != inst + n)
                fuzz_fail("the schema's grammar accepts \"%.*s\", which is not one JSON value", (int)n, inst);
            cJSON_Delete(v);
        }
    }
    grammar_free(g);
    free(text);
    return 0;
}
