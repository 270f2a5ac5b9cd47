/*
 * test_grammar.c - the GBNF compiler and matcher (src/grammar/grammar.h):
 * strings in and out of small languages whose membership is plain by
 * construction, the compile errors with their line:column, the bounds, and
 * the masker's trie walk against feeding every token's bytes to a copy of
 * the matcher one by one (the definition of the mask).
 */
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "mask_check.h"
#include "model/tokenizer.h"
#include "grammar/grammar.h"
#include "sampler.h"

static Grammar *compile(const char *text) {
    GptError err = {{0}};
    Grammar *g = grammar_compile(text, strlen(text), NULL, &err);
    CHECK(g != NULL, "compile %s: %s", text, err.msg);
    return g;
}

static void match(const char *text, const char *s, int want) {
    Grammar *g = compile(text);
    if (!g) return;
    GptError err = {{0}};
    int got = grammar_match(g, s, strlen(s), &err);
    CHECK(got == want, "grammar %s on \"%s\": want %d got %d (%s)", text, s, want, got, err.msg);
    grammar_free(g);
}

static void error_is(const char *text, const char *want) {
    GptError err = {{0}};
    Grammar *g = grammar_compile(text, strlen(text), NULL, &err);
    CHECK(g == NULL && strstr(err.msg, want) != NULL, "grammar %s: want error containing \"%s\", got \"%s\"",
          text, want, err.msg);
    grammar_free(g);
}

// The masker's mask against the definition: token t allowed iff a copy of
// the matcher reads all of t's bytes; eos iff the matcher can end.
static void mask_vs_feed(const char *text, const char *prefix, const uint8_t *const *tb, const size_t *tl,
                         size_t V, int32_t eos) {
    GptError err = {{0}};
    Grammar *g = compile(text);
    if (!g) return;
    GrammarVocab *v = grammar_vocab_new(tb, tl, V, &err);
    GrammarMasker *mk = grammar_masker_new(g, v, eos, NULL, &err);
    GrammarMatcher *m = grammar_matcher_new(g, &err);
    CHECK(v && mk && m, "setup: %s", err.msg);
    CHECK(grammar_matcher_feed(m, (const uint8_t *)prefix, strlen(prefix), &err) == 0, "prefix %s: %s", prefix,
          err.msg);
    uint64_t *mask = calloc(GRAMMAR_MASK_WORDS(V), sizeof *mask);
    uint64_t computed = 0;
    for (int round = 0; round < 2; round++) {  // computed, then from the cache
        long n = grammar_masker_fill(mk, m, mask, &err);
        if (round == 0) computed = grammar_masker_stats(mk).computed;
        long want_n = 0;
        int bad = 0;
        for (size_t t = 0; t < V; t++) {
            int want;
            if ((int32_t)t == eos) {
                want = grammar_matcher_can_end(m);
            } else {
                GrammarMatcher *c = grammar_matcher_copy(m, &err);
                want = tl[t] > 0 && grammar_matcher_feed(c, tb[t], tl[t], &err) == 0;
                grammar_matcher_free(c);
            }
            int got = (int)(mask[t >> 6] >> (t & 63)) & 1;
            want_n += want;
            if (got != want && bad++ < 3)
                CHECK(0, "grammar %s after \"%s\": token %zu (%.*s) want %d got %d", text, prefix, t, (int)tl[t],
                      (const char *)tb[t], want, got);
        }
        CHECK(n == want_n && !bad, "grammar %s after \"%s\": %ld allowed, want %ld", text, prefix, n, want_n);
    }
    GrammarMaskerStats st = grammar_masker_stats(mk);
    CHECK(st.fills == 2 && computed > 0 && st.cached > 0, "cache: %llu fills, %llu computed in the first, %llu cached",
          (unsigned long long)st.fills, (unsigned long long)computed, (unsigned long long)st.cached);
    free(mask);
    grammar_matcher_free(m);
    grammar_masker_free(mk);
    grammar_vocab_free(v);
    grammar_free(g);
}

static const char *JSON =
    "root   ::= object\n"
    "value  ::= object | array | string | number | (\"true\" | \"false\" | \"null\") ws\n"
    "object ::=\n"
    "  \"{\" ws (\n"
    "            string \":\" ws value\n"
    "    (\",\" ws string \":\" ws value)*\n"
    "  )? \"}\" ws\n"
    "array  ::=\n"
    "  \"[\" ws (\n"
    "            value\n"
    "    (\",\" ws value)*\n"
    "  )? \"]\" ws\n"
    "string ::=\n"
    "  \"\\\"\" (\n"
    "    [^\"\\\\\\x7F\\x00-\\x1F] |\n"
    "    \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4}) # escapes\n"
    "  )* \"\\\"\" ws\n"
    "number ::= (\"-\"? ([0-9] | [1-9] [0-9]{0,15})) (\".\" [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws\n"
    "ws ::= | \" \" | \"\\n\" [ \\t]{0,20}\n";

int main(void) {
    // sequences, alternatives, groups, repetitions
    match("root ::= \"ab\" | \"c\"", "ab", 1);
    match("root ::= \"ab\" | \"c\"", "c", 1);
    match("root ::= \"ab\" | \"c\"", "abc", 0);
    match("root ::= \"ab\" | \"c\"", "", 0);
    match("root ::= (\"a\" | \"b\")* \"c\"", "ababbc", 1);
    match("root ::= (\"a\" | \"b\")* \"c\"", "abab", 0);
    match("root ::= \"ab\"+", "ababab", 1);
    match("root ::= \"ab\"+", "", 0);
    match("root ::= \"x\"? \"y\"", "y", 1);
    match("root ::= \"x\"? \"y\"", "xy", 1);
    match("root ::= \"x\"? \"y\"", "xxy", 0);
    match("root ::= [a-c]{3}", "abc", 1);
    match("root ::= [a-c]{3}", "ab", 0);
    match("root ::= [a-c]{3}", "abca", 0);
    match("root ::= [a-c]{2,4}", "a", 0);
    match("root ::= [a-c]{2,4}", "aa", 1);
    match("root ::= [a-c]{2,4}", "aaaa", 1);
    match("root ::= [a-c]{2,4}", "aaaaa", 0);
    match("root ::= [a-c]{2,}", "aaaaaaaaaaaa", 1);
    match("root ::= [a-c]{2,}", "a", 0);
    match("root ::= [a-c]{0}", "", 1);
    // rules, recursion on the right, comments, line breaks
    match("# balanced\nroot ::= \"(\" root \")\" | \"\"  # comment\n", "((()))", 1);
    match("root ::= \"(\" root \")\" | \"\"\n", "(()", 0);
    match("root ::= a b\na ::= \"x\"\nb ::= \"y\"\n  | \"z\"\n", "xz", 1);
    // escapes and UTF-8 classes
    match("root ::= \"\\n\\t\\\\\\\"\\x41\\u00e9\"", "\n\t\\\"A\xc3\xa9", 1);
    match("root ::= [^a]", "\xe2\x82\xac", 1);  // U+20AC
    match("root ::= [^a]", "a", 0);
    match("root ::= [^a]", "\xed\xa0\x80", 0);  // a surrogate is never a character
    match("root ::= [^a]", "\xff", 0);
    match("root ::= [\\u0400-\\u04FF]+", "\xd0\x9f\xd1\x80\xd0\xb8", 1);  // Cyrillic
    match("root ::= [\\u0400-\\u04FF]+", "\xd0\x9f" "a", 0);
    match("root ::= [\\U0001F600-\\U0001F64F]", "\xf0\x9f\x98\x80", 1);
    match("root ::= [\\U0001F600-\\U0001F64F]", "\xf0\x9f\x99\x90", 0);  // U+1F650
    match("root ::= .+", "h\xc3\xa9llo \xe4\xb8\x96", 1);
    match("root ::= [\\u0080-\\U0010FFFF]", "\xf4\x8f\xbf\xbf", 1);
    match("root ::= [\\u0080-\\U0010FFFF]", "\x7f", 0);
    // JSON (llama.cpp's json.gbnf, root an object)
    match(JSON, "{\"a\": [1, 2.5, -3e4, true, null, {\"b\": \"x\\u00e9\\n\"}]}", 1);
    match(JSON, "{\"a\": [1, 2.5,]}", 0);
    match(JSON, "{}", 1);
    match(JSON, "{\"a\" 1}", 0);

    // errors with line:column
    error_is("root ::= \"a\" | undefined-rule", "1:16: undefined rule 'undefined-rule'");
    error_is("root ::= \"a\"\nx ::= (\"b\"", "2:11: expected ')'");
    error_is("root ::= \"a", "1:12: expected '\"' to close the string");
    error_is("root ::= [a-", "expected");
    error_is("root ::= \"a\"\nfoo :: \"b\"", "2:5: expected an element, '|' or a line break, got ':'");
    error_is("::= \"b\"", "1:1: expected a rule name, got ':'");
    error_is("root \"b\"", "1:6: expected '::=', got '\"'");
    error_is("root ::= expr\nexpr ::= expr \"+\" \"1\" | \"1\"", "2:1: left recursion: rule 'expr'");
    error_is("root ::= (\"a\"?)*", "left recursion");
    error_is("root ::= a\na ::= \"x\" a", "matches no string");
    error_is("root ::= [^\\x00-\\U0010FFFF]", "matches no string");
    error_is("root ::= \"a\"{0,100001}", "repetition count above 10000");
    error_is("root ::= \"a\"{3,2}", "maximum is below the minimum");
    error_is("r ::= \"a\"", "no rule 'root'");
    error_is("root ::= \"a\"\nroot ::= \"b\"", "2:1: rule 'root' is defined twice (first at 1:1)");
    error_is("root ::= \"\\q\"", "1:12: expected an escape");
    error_is("root ::= [z-a]", "below its start");
    {
        char deep[400] = "root ::= ";
        for (int i = 0; i < 70; i++) strcat(deep, "(");
        strcat(deep, "\"a\"");
        for (int i = 0; i < 70; i++) strcat(deep, ")");
        error_is(deep, "groups nested deeper than 64");
        GrammarLimits lim = grammar_limits_default();
        lim.max_elements = 100;
        GptError err = {{0}};
        const char *big = "root ::= \"a\"{200}";
        CHECK(grammar_compile(big, strlen(big), &lim, &err) == NULL && strstr(err.msg, "more than 100 automaton"),
              "max_elements: %s", err.msg);
    }
    // live stacks bound: an ambiguous grammar under a small bound
    {
        GrammarLimits lim = grammar_limits_default();
        lim.max_stacks = 8;
        GptError err = {{0}};
        const char *amb = "root ::= (\"a\" | \"a\" | \"a\")* (\"a\" | \"a\")*";
        Grammar *g = grammar_compile(amb, strlen(amb), &lim, &err);
        CHECK(g != NULL, "%s", err.msg);
        const char *s = "aaaaaaaaaaaaaaaaaaaaaaaa";
        int r = g ? grammar_match(g, s, strlen(s), &err) : -2;
        CHECK(r == 1 || (r == -1 && strstr(err.msg, "live stacks")), "stacks: %d %s", r, err.msg);
        grammar_free(g);
    }
    // expansion bounds (fuzz_grammar found both): nested optional rules
    // multiply the ways to the same stack ((k + 1)^n; this one 6^40 steps
    // before the bound), and nullable elements in a row recursed once each
    // (10000 of them overflowed the C stack)
    {
        const char *texts[] = {"root ::= (((((\"a\"?)?)?)?)?){40} \"b\"", "root ::= ((\" \"?)?){5000} \"b\""};
        const char *want[] = {"more than 65536 expansion steps", "rules nested more than 4096 deep"};
        for (int i = 0; i < 2; i++) {
            GptError err = {{0}};
            Grammar *g = compile(texts[i]);
            GrammarMatcher *m = g ? grammar_matcher_new(g, &err) : NULL;
            CHECK(g && !m && strstr(err.msg, want[i]), "%s: %s", texts[i], err.msg);
            grammar_matcher_free(m);
            grammar_free(g);
        }
    }
    // can_end / is_done
    {
        Grammar *g = compile("root ::= \"ab\" \"c\"?");
        GptError err;
        GrammarMatcher *m = grammar_matcher_new(g, &err);
        CHECK(!grammar_matcher_can_end(m) && !grammar_matcher_is_done(m), "start");
        grammar_matcher_feed(m, (const uint8_t *)"ab", 2, &err);
        CHECK(grammar_matcher_can_end(m) && !grammar_matcher_is_done(m), "after ab");
        CHECK(grammar_matcher_feed(m, (const uint8_t *)"x", 1, &err) == -1 && strstr(err.msg, "0x78"), "x: %s",
              err.msg);
        CHECK(grammar_matcher_can_end(m), "unchanged after a refused byte");
        grammar_matcher_feed(m, (const uint8_t *)"c", 1, &err);
        CHECK(grammar_matcher_is_done(m), "after abc");
        grammar_matcher_free(m);
        grammar_free(g);
    }

    // masks: a vocabulary of the 256 bytes and multi-byte strings, a few
    // of which straddle grammar elements ("\":" ends a key and starts a value)
    {
        static const char *words[] = {"{\"", "\":", "\": ", "\"}", "ab", "abc", "true", "tr", "ue", " {",
                                      "\xc3\xa9", "\xc3", "12", "1.5", "-", "\",\"", "},", "null}", "a", "}}"};
        size_t nw = sizeof words / sizeof *words, V = 256 + nw + 1;
        const uint8_t **tb = malloc(V * sizeof *tb);
        size_t *tl = malloc(V * sizeof *tl);
        static uint8_t bytes[256];
        for (int i = 0; i < 256; i++) {
            bytes[i] = (uint8_t)i;
            tb[i] = &bytes[i];
            tl[i] = 1;
        }
        for (size_t i = 0; i < nw; i++) {
            tb[256 + i] = (const uint8_t *)words[i];
            tl[256 + i] = strlen(words[i]);
        }
        tb[V - 1] = (const uint8_t *)"";
        tl[V - 1] = 0;
        int32_t eos = (int32_t)(V - 1);
        mask_vs_feed(JSON, "", tb, tl, V, eos);
        mask_vs_feed(JSON, "{", tb, tl, V, eos);
        mask_vs_feed(JSON, "{\"a", tb, tl, V, eos);
        mask_vs_feed(JSON, "{\"a\":", tb, tl, V, eos);
        mask_vs_feed(JSON, "{\"a\": 1", tb, tl, V, eos);
        mask_vs_feed(JSON, "{\"a\": 1}", tb, tl, V, eos);
        mask_vs_feed(JSON, "{\"a\": \"\xc3", tb, tl, V, eos);
        mask_vs_feed("root ::= [^a]+ \"a\"", "", tb, tl, V, eos);
        mask_vs_feed("root ::= \"ab\" \"c\"", "a", tb, tl, V, eos);
        // ragged states: one masker along nested texts, so that a state
        // whose top is another's (a string inside another property, a word
        // at another count, the same value nested deeper) is served from
        // the cache, and its mask must still be its own
        MaskVocab mv = mask_vocab();
        GptError err = {{0}};
        struct {
            const char *grammar, *texts[5];
        } along[] = {
            {JSON,
             {"{\"a\": \"abc\", \"b\": {\"ab\": [\"abc\", {\"c\": \"ab\"}], \"d\": \"\"}, \"e\": [[\"x\"]]}",
              "{\"foo\": [1, \"bar\", {\"foo\": {\"foo\": \"bar\"}}], \"x\": true}", "{\"a\": [[[[\"ab\"]]]]}", NULL}},
            {"root ::= \"[\" (item (\", \" item){0,4})? \"]\"\n"
             "item ::= \"\\\"\" [a-z]{0,5} \"\\\"\" | root\n",
             {"[\"abc\", [\"ab\", [\"abcde\"]], \"a\", \"\"]", "[[[\"abcde\", \"abcde\"]], \"abcde\"]", NULL}},
            {"root ::= [A-Z] [a-z]{1,4} (\" \" [a-z]{1,4}){2,5} \".\"",
             {"The cat ab abcd a.", "Ab aaaa aaaa aaaa aaaa a.", "Abcd ab a.", NULL}},
            {"root ::= (\"a\" | \"ab\")* \"b\" | \"ab\"+ \"abc\"", {"ababab", "abababc", "aabab", NULL}},
            // ragged counted repetitions (grammar_chains.c: chains and runs: a count's key is served
            // from its chain's top or its run's first copy for tokens of at most rho bytes only; the
            // vocabulary's long words cross every count): {0,n} inside a string with escapes and
            // multi-byte characters, {m,n} of a byte, nested counts after mandatory copies, a
            // repeated element that may be empty, copies of two bytes or one, two strings
            {"root ::= \"\\\"\" ( [^\"\\\\\\x00-\\x1f] | \"\\\\\" [\"\\\\n] ){0,16} \"\\\"\" \"}\"?",
             {"\"aaaaaaaaaaaaaaaa\"}", "\"a\\n\xc3\xa9\xc3\xa9" "a\\\"aaaa\"}", "\"\"", "\"aaaaaaaaaaaaaaa\""}},
            {"root ::= \"a\"{3,20} \"\\\"}\"?", {"aaaaaaaaaaaaaaaaaaaa\"}", "aaaaa\"}", "aaaaaaaaaaaaaaaaaaaa", NULL}},
            {"root ::= [A-Z] [a-z]{1,12} (\" \" [a-z]{1,12}){6,9} \".\"",
             {"Abcd ab ab ab ab ab ab.", "Aaaaaaaaaaaa aaaa aaaa aaaa aaaa abcd abcd abcd abcd.", "Ab a a a a a a a a a.",
              "Abababababab ab ab ab abcdefgh ab ab ab."}},
            {"root ::= (\"a\"? \"b\"?){0,6} \".\"", {"ababab.", "aaaaaa.", "bbbbbb.", "."}},
            // one word in contexts that read different bytes after it: a suffix's pops keep only
            // the edges its context reads (grammar_cache.c), so each context has entries of its own
            {"root ::= w \".\" | \"(\" w \")\" | \"[\" w (\",\" w)* \"]\" | w \" \" root\nw ::= [a-z]+\n",
             {"abc.", "(ab)", "[ab,abc,ab]", "ab ab (abc)"}},
            {"root ::= (\"ab\" | \"b\"){4,9} \".\" | \"x\"{2,5}", {"abababab.", "bbbbbbbbb.", "bbbbabab.", "xxxxx"}},
            {"root ::= \"{\\\"a\\\": \\\"\" c{2,10} \"\\\", \\\"b\\\": \\\"\" c{0,30} \"\\\"}\"\n"
             "c ::= [^\"\\\\] | \"\\\\\" [\"\\\\n]\n",
             {"{\"a\": \"ab\", \"b\": \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}", "{\"a\": \"abababab\\n\", \"b\": \"\"}",
              "{\"a\": \"\xc3\xa9\xc3\xa9\", \"b\": \"a\\\"a\\\"a\"}", NULL}},
        };
        size_t states = 0;
        for (size_t i = 0; i < sizeof along / sizeof *along; i++) {
            Grammar *g = compile(along[i].grammar);
            GrammarVocab *v = grammar_vocab_new(mv.tb, mv.tl, mv.V, &err);
            GrammarMasker *mk = g && v ? grammar_masker_new(g, v, mv.eos, NULL, &err) : NULL;
            CHECK(mk != NULL, "masker: %s", err.msg);
            for (int round = 0; mk && round < 2; round++)  // computed, then from the cache
                for (int k = 0; along[i].texts[k]; k++)
                    states += masks_along(mk, g, &mv, along[i].texts[k], strlen(along[i].texts[k]), along[i].grammar);
            grammar_masker_free(mk);
            grammar_vocab_free(v);
            grammar_free(g);
        }
        CHECK(states > 800, "masks along the texts: %zu states", states);

        // The work bound does not depend on what the caches hold: at each
        // prefix, a masker that has served other states before and a new
        // one give the same answer, an error or the same mask, under bounds
        // that refuse some states and not others.
        {
            static const char *const texts[] = {
                "{\"a\": \"abc\", \"b\": {\"ab\": [\"abc\", {\"c\": \"ab\"}], \"d\": \"\"}, \"e\": [[\"x\"]]}",
                "{\"foo\": [1, \"bar\", {\"foo\": {\"foo\": \"bar\"}}], \"x\": true}"};
            Grammar *g = compile(JSON);
            GrammarVocab *v = grammar_vocab_new(mv.tb, mv.tl, mv.V, &err);
            uint64_t *warm_mask = calloc(GRAMMAR_MASK_WORDS(mv.V), sizeof *warm_mask);
            uint64_t *cold_mask = calloc(GRAMMAR_MASK_WORDS(mv.V), sizeof *cold_mask);
            size_t refused = 0, served = 0, differ = 0;
            for (size_t bound = 64; g && v && bound <= (1u << 16); bound *= 2) {
                GrammarLimits lim = grammar_limits_default();
                lim.max_mask_work = bound;
                GrammarMasker *warm = grammar_masker_new(g, v, mv.eos, &lim, &err);
                for (size_t t = 0; warm && t < 2; t++) {
                    GrammarMatcher *m = grammar_matcher_new(g, &err);
                    for (size_t at = 0; m && at <= strlen(texts[t]); at++) {
                        GrammarMasker *cold = grammar_masker_new(g, v, mv.eos, &lim, &err);
                        GptError e1 = {{0}}, e2 = {{0}};
                        long w = grammar_masker_fill(warm, m, warm_mask, &e1);
                        long c = cold ? grammar_masker_fill(cold, m, cold_mask, &e2) : -2;
                        if ((w < 0) != (c < 0) ||
                            (w >= 0 && memcmp(warm_mask, cold_mask, GRAMMAR_MASK_WORDS(mv.V) * 8) != 0)) {
                            if (differ++ < 3)
                                CHECK(0, "bound %zu after \"%.*s\": warm %ld (%s), new %ld (%s)", bound, (int)at,
                                      texts[t], w, e1.msg, c, e2.msg);
                        }
                        refused += w < 0;
                        served += w >= 0;
                        grammar_masker_free(cold);
                        if (at < strlen(texts[t]) && grammar_matcher_feed(m, (const uint8_t *)texts[t] + at, 1, &err))
                            break;
                    }
                    grammar_matcher_free(m);
                }
                grammar_masker_free(warm);
            }
            CHECK(differ == 0 && refused > 20 && served > 20,
                  "the work bound, warm against new maskers: %zu differ, %zu refused, %zu served", differ, refused,
                  served);
            free(warm_mask);
            free(cold_mask);
            grammar_vocab_free(v);
            grammar_free(g);
        }
        mask_vocab_free(&mv);

        // GPT-2's vocabulary (its trie sorted by radix passes): the masks
        // along a nested text against the definition
        Tokenizer *tok = tokenizer_load_files("models/vocab.json", "models/merges.txt", &err);
        CHECK(tok != NULL, "models/vocab.json: %s", err.msg);
        if (tok) {
            MaskVocab gv = {malloc(50257 * sizeof *gv.tb), calloc(50257, sizeof *gv.tl), 50257, 50256};
            for (size_t i = 0; i < gv.V; i++) {
                gv.tb[i] = tokenizer_token_bytes(tok, (int32_t)i, &gv.tl[i]);
                if (!gv.tb[i] || (int32_t)i == gv.eos) gv.tl[i] = 0;
            }
            Grammar *g = compile(JSON);
            GrammarVocab *v = grammar_vocab_new(gv.tb, gv.tl, gv.V, &err);
            GrammarMasker *mk = g && v ? grammar_masker_new(g, v, gv.eos, NULL, &err) : NULL;
            CHECK(mk != NULL, "masker: %s", err.msg);
            const char *text = "{\"a\": [\"x\u00e9\", {\"b\": 1}]}";
            if (mk) CHECK(masks_along(mk, g, &gv, text, strlen(text), "JSON over GPT-2's tokens") == strlen(text) + 1,
                          "masks along the whole text");
            // counted repetitions over GPT-2's tokens, where the keys deepen to hold the
            // count (grammar_chains.c): make bench's regex and maxLength strings, each
            // count's mask from its chain's top for the tokens of at most rho bytes
            static const char *const counted[][2] = {
                {"root ::= [A-Z] [a-z]{1,12} (\" \" [a-z]{1,12}){10,60} \".\"",
                 "Wherefore that they were like the west ministers of worship before all three acts."},
                {"root ::= \"{\\\"title\\\":\\\"\" c{0,40} \"\\\",\\\"name\\\":\\\"\" c{2,30} \"\\\"}\"\n"
                 "c ::= [^\"\\\\\\x00-\\x1f] | \"\\\\\" [\"\\\\bfnrt]\n",
                 "{\"title\":\" Gaal, seize\\n\\\"\u00e9 answerle,0\",\"name\":\"xxxxxxxxxxxx\"}"},
            };
            for (size_t i = 0; i < sizeof counted / sizeof *counted; i++) {
                Grammar *cg = compile(counted[i][0]);
                GrammarMasker *cm = cg && v ? grammar_masker_new(cg, v, gv.eos, NULL, &err) : NULL;
                CHECK(cm != NULL, "masker: %s", err.msg);
                if (cm)
                    CHECK(masks_along(cm, cg, &gv, counted[i][1], strlen(counted[i][1]), counted[i][0]) ==
                              strlen(counted[i][1]) + 1,
                          "masks along the whole text of %s", counted[i][0]);
                grammar_masker_free(cm);
                grammar_free(cg);
            }
            grammar_masker_free(mk);
            grammar_vocab_free(v);
            grammar_free(g);
            free(gv.tb);
            free(gv.tl);
            tokenizer_free(tok);
        }
        free(tb);
        free(tl);
    }
    // the sampler's mask: over many draws and settings, only allowed tokens
    // come out, and the masked distribution is the unmasked one renormalized
    {
        size_t V = 1000;
        float *logits = malloc(V * sizeof *logits), *copy = malloc(V * sizeof *copy);
        uint64_t mask[GRAMMAR_MASK_WORDS(1000)] = {0};
        for (size_t i = 0; i < V; i++) logits[i] = (float)((i * 7919) % 1000) / 100.0f;
        for (size_t i = 3; i < V; i += 97) mask[i >> 6] |= 1ull << (i & 63);
        float temps[] = {0.0f, 0.5f, 1.0f, 2.0f};
        int bad = 0, draws = 0;
        for (int t = 0; t < 4; t++)
            for (int variant = 0; variant < 3; variant++) {
                SamplerParams P = {.temperature = temps[t], .top_p = 1.0f, .repeat_penalty = 1.0f, .seed = 42};
                if (variant == 1) P.top_k = 5;
                if (variant == 2) P.top_p = 0.9f;
                Sampler sp;
                GptError err;
                CHECK(sampler_init(&sp, &P, V, &err) == 0, "%s", err.msg);
                sp.mask = mask;
                for (int k = 0; k < 200; k++) {
                    memcpy(copy, logits, V * sizeof *copy);
                    int32_t id = sampler_sample(&sp, copy, NULL, 0);
                    draws++;
                    if (id < 0 || !((mask[id >> 6] >> (id & 63)) & 1)) bad++;
                }
                sampler_free(&sp);
            }
        CHECK(bad == 0, "%d of %d masked draws outside the mask", bad, draws);
        free(logits);
        free(copy);
    }
    return check_exit("test_grammar");
}
