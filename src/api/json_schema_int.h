/* json_schema_int.h: what the JSON schema converter's files share.
 * json_schema_gbnf.c walks the schema and owns the grammar text's helpers;
 * json_schema_pattern.c writes a string's "pattern" and json_schema_range.c
 * an integer's bounds, each as the body of one rule. Private to those three:
 * the api layer's interface is json_schema_gbnf.h. The walk's state (the
 * rules written so far, the $ref table) stays in json_schema_gbnf.c: the
 * rule builders need only an error, a nesting depth and a buffer. */
#ifndef HEARTH_API_JSON_SCHEMA_INT_H
#define HEARTH_API_JSON_SCHEMA_INT_H

#include "base/buf.h"
#include "base/err.h"

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* Schema nesting, $ref chains and pattern groups together: past it,
 * HEARTH_ELIMIT. */
enum { MAX_DEPTH = 64 };
/* The bound of every buffer a rule body is built in. */
#define BODY_MAX ((size_t)4 << 20)

/* Sets err to HEARTH_EINVAL, "json_schema: <what>: <node as compact JSON,
 * cut at 200 bytes>", and returns HEARTH_EINVAL. */
int hearth_json_schema_refuse(hearth_err *err, const cJSON *node, const char *what);

/* Appends a GBNF literal matching the bytes s[0..n) exactly ('"' and '\\'
 * escaped, control bytes and DEL as \xHH). 0 or b's error. */
int hearth_gbnf_literal(hearth_buf *b, const char *s, size_t n);
/* Appends code point cp as it is written inside a GBNF character class:
 * ASCII letters and digits as they are, anything else as \xHH, \uHHHH or
 * \UHHHHHHHH. 0 or b's error. */
int hearth_gbnf_class_char(hearth_buf *b, uint32_t cp);

/* Appends to body the rule body of a string whose value matches s's
 * "pattern" (an anchored regular expression), matched as JSON writes the
 * string; it refers to the rule "space", which the caller writes. depth:
 * the nesting s sits at (the pattern's groups count on from there against
 * MAX_DEPTH). HEARTH_EINVAL with err naming what is not translated and its
 * offset; HEARTH_ELIMIT, HEARTH_ENOMEM. s is borrowed. */
int hearth_json_schema_pattern_rule(const cJSON *s, int depth, hearth_buf *body, hearth_err *err);

/* Appends to body the rule body of an integer within s's minimum /
 * maximum / exclusiveMinimum / exclusiveMaximum (canonical decimals of at
 * most 16 digits, then "space", which the caller writes). HEARTH_EINVAL
 * with err naming the part for a bound that is not a number or bounds that
 * no such integer meets; b's error otherwise. s is borrowed. */
int hearth_json_schema_int_rule(const cJSON *s, hearth_buf *body, hearth_err *err);

#endif
