/*
 * test_schema.c - the JSON Schema and regex converters (src/grammar/schema.c,
 * regex.c) against references:
 *   - tests/fixtures/schema_cases.jsonl: the JSON Schema Test Suite's draft 7
 *     cases for the supported keywords and our own (format, prefixItems,
 *     integer ranges, $defs), with python3-jsonschema's verdicts under the
 *     stated rules (make_schema_cases.py): each schema's grammar accepts
 *     exactly the texts marked valid; a schema outside the subset is refused
 *     naming the keyword;
 *   - tests/fixtures/regex_cases.jsonl: each expression's grammar accepts
 *     exactly the strings Python's re.fullmatch(RE, s, re.ASCII) matches;
 *   - the masks (mask_check.h) at every prefix of every text, one masker
 *     per grammar, against feeding each token's bytes to a matcher;
 *   - the error messages and the bounds, each naming the keyword, the JSON
 *     pointer or the byte offset.
 * A grammar's language is decided by tests/gbnf_match.py (a plain matcher
 * independent of the grammar engine), run once with python3 over all cases;
 * and the engine itself (grammar.h: grammar_compile, grammar_match) must
 * give the reference's verdict on every text too.
 */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/grow.h"
#include "check.h"
#include "grammar/grammar.h"
#include "grammar/regex.h"
#include "grammar/schema.h"
#include "mask_check.h"

typedef struct {
    char src[160];
    char *expect;  // the 0/1 string a line of gbnf_match.py must print
} Query;

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 1 << 16, n = 0;
    char *s = malloc(cap);
    size_t k;
    while (s && (k = fread(s + n, 1, cap - n - 1, f)) > 0) {
        n += k;
        if (n + 1 == cap) s = realloc(s, cap *= 2);
    }
    fclose(f);
    if (s) s[n] = '\0';
    return s;
}

// one query line {"grammar": g, "texts": texts} to f
static void put_query(FILE *f, const char *g, const cJSON *texts) {
    cJSON *q = cJSON_CreateObject();
    cJSON_AddStringToObject(q, "grammar", g);
    cJSON_AddItemToObject(q, "texts", cJSON_Duplicate(texts, 1));
    char *line = cJSON_PrintUnformatted(q);
    fprintf(f, "%s\n", line);
    cJSON_free(line);
    cJSON_Delete(q);
}

// The engine's verdicts on texts for the grammar g: CHECKed against
// expect (the reference's 0/1 string). Returns the texts checked.
// masks along every text (mask_check.h), over one vocabulary
static MaskVocab mask_vocab_;
static size_t mask_states;

static size_t engine_check(const char *src, const char *g, const cJSON *texts, const char *expect) {
    GptError err = {{0}};
    Grammar *gr = grammar_compile(g, strlen(g), NULL, &err);
    CHECK(gr != NULL, "%s: the engine refuses the grammar: %s", src, err.msg);
    if (!gr) return 0;
    // one masker for all the texts: its cache carries from text to text
    GrammarVocab *v = grammar_vocab_new(mask_vocab_.tb, mask_vocab_.tl, mask_vocab_.V, &err);
    GrammarMasker *mk = v ? grammar_masker_new(gr, v, mask_vocab_.eos, NULL, &err) : NULL;
    CHECK(mk != NULL, "%s: masker: %s", src, err.msg);
    size_t i = 0;
    for (const cJSON *t = texts->child; t && expect[i]; t = t->next, i++) {
        int m = grammar_match(gr, t->valuestring, strlen(t->valuestring), &err);
        CHECK(m == expect[i] - '0', "%s: text %zu (%s): the engine says %d, the reference %c", src, i, t->valuestring,
              m, expect[i]);
        if (mk) mask_states += masks_along(mk, gr, &mask_vocab_, t->valuestring, strlen(t->valuestring), src);
    }
    grammar_masker_free(mk);
    grammar_vocab_free(v);
    grammar_free(gr);
    return i;
}

static void run_cases(void) {
    char qpath[] = "/tmp/gpt_test_schema_q_XXXXXX";
    int fd = mkstemp(qpath);
    CHECK(fd >= 0, "mkstemp");
    if (fd < 0) return;
    FILE *qf = fdopen(fd, "w");
    Query *qs = NULL;
    size_t nq = 0, cap = 0;
    int refused = 0;
    size_t engine_texts = 0;

    char *data = read_all("tests/fixtures/schema_cases.jsonl");
    CHECK(data != NULL, "tests/fixtures/schema_cases.jsonl: cannot read (run from the repository root)");
    for (char *line = data, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        cJSON *c = cJSON_Parse(line);
        if (!c) continue;
        const char *src = cJSON_GetObjectItem(c, "src")->valuestring;
        const cJSON *refuse = cJSON_GetObjectItem(c, "refuse");
        char *schema = cJSON_PrintUnformatted(cJSON_GetObjectItem(c, "schema"));
        GptError err = {{0}};
        char *g = schema_to_gbnf(schema, strlen(schema), &err);
        if (cJSON_IsString(refuse)) {
            CHECK(g == NULL, "%s: compiled, but %s is outside the subset", src, refuse->valuestring);
            if (!g) {
                char want[80];
                snprintf(want, sizeof want, "%s", refuse->valuestring);
                CHECK(strstr(err.msg, want) && strncmp(err.msg, "json-schema: #", 14) == 0,
                      "%s: the error does not name %s: %s", src, want, err.msg);
                refused++;
            }
        } else {
            CHECK(g != NULL, "%s: refused: %s", src, err.msg);
            if (g) {
                if (grow_array(&qs, &cap, nq + 1, sizeof *qs)) abort();
                snprintf(qs[nq].src, sizeof qs[nq].src, "schema %s", src);
                qs[nq].expect = strdup(cJSON_GetObjectItem(c, "accept")->valuestring);
                engine_texts += engine_check(src, g, cJSON_GetObjectItem(c, "texts"), qs[nq].expect);
                nq++;
                put_query(qf, g, cJSON_GetObjectItem(c, "texts"));
            }
        }
        free(g);
        cJSON_free(schema);
        cJSON_Delete(c);
    }
    free(data);

    data = read_all("tests/fixtures/regex_cases.jsonl");
    CHECK(data != NULL, "tests/fixtures/regex_cases.jsonl: cannot read");
    for (char *line = data, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        cJSON *c = cJSON_Parse(line);
        if (!c) continue;
        const char *re = cJSON_GetObjectItem(c, "re")->valuestring;
        GptError err = {{0}};
        char *g = regex_to_gbnf(re, strlen(re), &err);
        CHECK(g != NULL, "regex %s: refused: %s", re, err.msg);
        if (g) {
            if (grow_array(&qs, &cap, nq + 1, sizeof *qs)) abort();
            snprintf(qs[nq].src, sizeof qs[nq].src, "regex %s", re);
            qs[nq].expect = strdup(cJSON_GetObjectItem(c, "match")->valuestring);
            engine_texts += engine_check(re, g, cJSON_GetObjectItem(c, "texts"), qs[nq].expect);
            nq++;
            put_query(qf, g, cJSON_GetObjectItem(c, "texts"));
        }
        free(g);
        cJSON_Delete(c);
    }
    free(data);
    fclose(qf);

    char cmd[256];
    snprintf(cmd, sizeof cmd, "python3 tests/gbnf_match.py < %s", qpath);
    int have_python = check_tool("python3 -c pass", "python3");
    FILE *p = have_python ? popen(cmd, "r") : NULL;
    CHECK(p != NULL || !have_python, "cannot run %s", cmd);
    size_t texts = 0;
    char *buf = NULL;
    size_t bcap = 0;
    for (size_t i = 0; p && i < nq; i++) {
        ssize_t k = getline(&buf, &bcap, p);
        CHECK(k > 0, "gbnf_match.py: no answer for %s", qs[i].src);
        if (k <= 0) break;
        if (buf[k - 1] == '\n') buf[--k] = '\0';
        CHECK(strcmp(buf, qs[i].expect) == 0, "%s: the grammar accepts %s, the reference %s", qs[i].src, buf,
              qs[i].expect);
        texts += strlen(qs[i].expect);
    }
    if (p) CHECK(pclose(p) == 0, "gbnf_match.py failed");
    free(buf);
    for (size_t i = 0; i < nq; i++) free(qs[i].expect);
    free(qs);
    unlink(qpath);
    printf("test_schema: %zu grammars checked on %zu texts (the engine on %zu, its masks in %zu states), %d schemas "
           "refused as expected\n", nq, texts, engine_texts, mask_states, refused);
}

// schema -> an error that contains each of want (NULL-terminated)
static void expect_error(const char *schema, const char *want) {
    GptError err = {{0}};
    char *g = schema_to_gbnf(schema, strlen(schema), &err);
    CHECK(g == NULL, "%s: compiled", schema);
    free(g);
    if (!g) CHECK(strstr(err.msg, want) != NULL, "%s: error \"%s\" lacks \"%s\"", schema, err.msg, want);
}

static void expect_regex_error(const char *re, const char *want) {
    GptError err = {{0}};
    char *g = regex_to_gbnf(re, strlen(re), &err);
    CHECK(g == NULL, "regex %s: compiled", re);
    free(g);
    if (!g) CHECK(strstr(err.msg, want) != NULL, "regex %s: error \"%s\" lacks \"%s\"", re, err.msg, want);
}

static void errors(void) {
    expect_error("{\"type\":\"array\",\"uniqueItems\":true}", "json-schema: #: uniqueItems is not supported");
    expect_error("{\"properties\":{\"a/b\":{\"not\":{}}}}", "json-schema: #/properties/a~1b: not is not supported");
    expect_error("{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"array\",\"items\":{\"type\":\"number\",\"minimum\":0}}}}",
                 "#/properties/x/items: minimum on numbers is not supported");
    expect_error("{\"anyOf\":[{\"type\":\"string\"},{\"patternProperties\":{}}]}", "#/anyOf/1: patternProperties is not supported");
    expect_error("{\"type\":\"strin\"}", "#: type: must be one of");
    expect_error("{\"type\":\"string\",\"maxLength\":100000}", "maxLength: 100000 is above the bound of 1024");
    expect_error("{\"type\":\"integer\",\"minimum\":1e300}", "minimum: 1.0000000000000001e+300 is beyond the bound");
    expect_error("{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}", "minimum above maximum");
    expect_error("{\"$ref\":\"#/$defs/nope\"}", "#: $ref: \"#/$defs/nope\" is not a local JSON pointer");
    expect_error("{\"$ref\":\"http://x/y\"}", "$ref: \"http://x/y\" is not a local");
    // one line: a newline in the schema's string is written \n (fuzz_schema found it raw)
    expect_error("{\"$ref\":\"a\\nb\"}", "$ref: \"a\\nb\" is not a local");
    expect_error("{\"$defs\":{\"a\":{\"$ref\":\"#/$defs/b\"},\"b\":{\"$ref\":\"#/$defs/a\"}},\"$ref\":\"#/$defs/a\"}",
                 "refers to itself through $ref alone");
    expect_error("{\"$defs\":{\"a\":{\"type\":\"wrong\"}},\"$ref\":\"#/$defs/a\"}", "json-schema: #/$defs/a: type");
    expect_error("{\"type\":\"string\",\"pattern\":\"(?=a)\"}", "json-schema: #/pattern: at byte 0: only ( ) and (?: )");
    expect_error("{\"type\":\"string\",\"format\":\"email\"}", "format \"email\" is not supported");
    expect_error("{\"required\":[\"a\"]}", "required: \"a\" is not in properties");
    expect_error("{\"enum\":[1],\"minLength\":1}", "enum beside minLength is not supported");
    expect_error("{\"type\":\"string\",\"pattern\":\"^a+$\",\"maxLength\":4}",
                 "json-schema: #: pattern beside minLength/maxLength is not supported: bound the length in the pattern");
    expect_error("{\"type\":\"string\",\"format\":\"date\",\"pattern\":\"^2\"}", "#: format beside pattern is not supported");
    expect_error("{\"enum\":[\"a\"],\"type\":\"integer\"}", "enum: no value of the type allowed");
    expect_error("false", "json-schema: #: the schema false allows no value here");
    expect_error("{\"type\":", "json-schema: not JSON");
    expect_error("{} x", "text after the schema");
    expect_error("\"\xff\"", "not valid UTF-8");
    expect_error("{\"items\":[{}]}", "items: an array of schemas (draft 7 tuples) is not supported");
    // depth: 65 nested items
    char deep[1024] = "";
    for (int i = 0; i < SCHEMA_MAX_DEPTH + 1; i++) strcat(deep, "{\"items\":");
    strcat(deep, "{}");
    for (int i = 0; i < SCHEMA_MAX_DEPTH + 1; i++) strcat(deep, "}");
    expect_error(deep, "subschemas nested deeper than 64");
    // size
    size_t big = SCHEMA_MAX_BYTES + 10;
    char *s = malloc(big + 1);
    memset(s, ' ', big);
    s[0] = '{', s[big - 1] = '}', s[big] = '\0';
    expect_error(s, "above the bound of 262144");
    free(s);
    // a grammar past 1 MiB from a schema under the size bound: integer
    // ranges of 15 digits (about 70 bytes of schema, 1.5 KB of grammar each)
    GText t = {0};
    gtext_puts(&t, "{\"anyOf\":[");
    for (int i = 0; i < 2000; i++)
        gtext_printf(&t, "%s{\"type\":\"integer\",\"minimum\":1%014d,\"maximum\":9%014d}", i ? "," : "", 23456789 + i,
                     87654321 + i);
    gtext_puts(&t, "]}");
    GptError err = {{0}};
    char *g = schema_to_gbnf(t.s, t.n, &err);
    CHECK(g == NULL && strstr(err.msg, "its grammar exceeds the bound of 1 MiB"), "big enum: %s", err.msg);
    free(g);
    gtext_free(&t);

    expect_regex_error("a(b", "--regex: at byte 1: ( without its )");
    expect_regex_error("ab)", "--regex: at byte 2: ) without its (");
    expect_regex_error("(a)\\1", "backreference \\1 is not supported");
    expect_regex_error("a{2,1}", "{m,n} with n below m");
    expect_regex_error("a{0,100000}", "a count above 1024");
    expect_regex_error("((a{1000}){1000})", "unroll to more than 65536");
    expect_regex_error("a**", "a quantifier after a quantifier");
    // X* with X nullable: a grammar with left recursion before (fuzz_schema found it)
    expect_regex_error("(a|)+", "at byte 4: an unbounded repetition of a group that can match the empty string");
    expect_regex_error("x(?:a*b?){2,}", "at byte 9: an unbounded repetition");
    expect_regex_error("((a|)(|b))*", "an unbounded repetition");
    expect_regex_error("*a", "follows nothing");
    expect_regex_error("a^b", "at byte 1: ^ is supported only as the first character");
    expect_regex_error("\\bx", "word boundary");
    expect_regex_error("[]a]", "a ] first in a class");
    expect_regex_error("[z-a]", "range out of order");
    expect_regex_error("[^\\x00-\\U0010FFFF]", "the class matches no character");
    expect_regex_error("x{", "a { that is not {m}");
    expect_regex_error("\\ud800", "not a character UTF-8 can hold");
    char deepre[200] = "";
    for (int i = 0; i < REGEX_MAX_DEPTH + 1; i++) strcat(deepre, "(");
    expect_regex_error(deepre, "groups nested deeper than 64");
    char *longre = malloc(REGEX_MAX_BYTES + 2);
    memset(longre, 'a', REGEX_MAX_BYTES + 1);
    longre[REGEX_MAX_BYTES + 1] = '\0';
    expect_regex_error(longre, "above the bound of 4096");
    free(longre);
}

int main(void) {
    mask_vocab_ = mask_vocab();
    errors();
    run_cases();
    mask_vocab_free(&mask_vocab_);
    return check_exit("test_schema");
}
