/*
 * schema.h - a JSON Schema -> GBNF text (llama.cpp's dialect, as grammar.h
 * reads it) whose language is the schema's instances written compactly:
 * no whitespace anywhere, as Python's json.dumps(x, separators=(",", ":"),
 * ensure_ascii=False) writes them (strings: " \ and control characters
 * escaped as \" \\ \b \t \n \f \r or \u00xx, every other character as
 * itself; object keys in the order of "properties").
 *
 * The subset (docs/json-schema.md has it with the reasons):
 *   type (a name or a list), properties, required, additionalProperties
 *   (default false: only the declared keys), items, prefixItems,
 *   minItems/maxItems, enum, const, minLength/maxLength, pattern (regex.h),
 *   minimum/maximum/exclusiveMinimum/exclusiveMaximum for "integer" only
 *   (a bound on "number" is refused), anyOf, oneOf (compiled as anyOf),
 *   $ref to a local JSON pointer ("#", "#/$defs/NAME"), format date, time,
 *   date-time, uuid; annotations ($schema, $id, $comment, title,
 *   description, default, examples, deprecated, readOnly, writeOnly) and
 *   $defs/definitions are read past. Any other keyword is refused with its
 *   JSON pointer: "json-schema: #/properties/tags: uniqueItems is not
 *   supported".
 *
 * Numbers: "number" and "integer" have at most SCHEMA_DIGITS digits before
 * the exponent, and "number" at most SCHEMA_EXP_DIGITS in it, so that each
 * parses as a finite double and a run ends its number within a few tokens
 * (an integer with a bound on one side only: the other's bound is
 * +-SCHEMA_INT_LIMIT).
 *
 * Bounds (gpt serve compiles schemas from anyone): SCHEMA_MAX_BYTES of
 * schema text, SCHEMA_MAX_DEPTH nested subschemas, GRAMMAR_MAX_REPEAT for
 * every count (maxLength, maxItems, regex {m,n}), integer bounds within
 * +-SCHEMA_MAX_INT, GRAMMAR_MAX_TEXT bytes of grammar; each has its error.
 */
#ifndef GPT_SCHEMA_H
#define GPT_SCHEMA_H

#include <stddef.h>

#include "base/error.h"

#define SCHEMA_MAX_BYTES (256u << 10)
#define SCHEMA_MAX_DEPTH 64
#define SCHEMA_MAX_INT 1000000000000000LL  // 10^15: integer bounds, exact in a double
#define SCHEMA_DIGITS 17                    // a double's significant decimal digits
#define SCHEMA_EXP_DIGITS 2                 // 10^17 * 10^99 is well within a double's range
#define SCHEMA_INT_LIMIT 99999999999999999LL  // the largest integer of SCHEMA_DIGITS digits

// The GBNF grammar (rule `root` first) for the schema text json[0..n).
// Returns malloc'd text, or NULL with one line in err naming the keyword
// and its JSON pointer.
char *schema_to_gbnf(const char *json, size_t n, GptError *err);

// The same for "any JSON object" (--json-object, response_format
// json_object), written compactly.
char *schema_json_object_gbnf(GptError *err);

#endif
