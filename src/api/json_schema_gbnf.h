/* json_schema_gbnf.h: a JSON schema as a GBNF grammar (llama-server's
 * json_schema, and response_format's schemas), for constrained sampling.
 * Private to the api layer. */
#ifndef HEARTH_API_JSON_SCHEMA_GBNF_H
#define HEARTH_API_JSON_SCHEMA_GBNF_H

#include "base/buf.h"
#include "base/err.h"

#include <cjson/cJSON.h>

/* Appends to out a grammar (root rule "root") whose sentences are the JSON
 * documents schema allows, written as llama.cpp's converter writes them
 * (optional spaces and newlines between tokens, properties in the schema's
 * order, required ones first). The subset: type (a name or a list of
 * them), properties / required / additionalProperties (extra keys are
 * never a declared name), allOf (merged into one object as llama.cpp
 * merges it), items (a schema, or a list: a tuple), prefixItems, minItems
 * / maxItems, enum, const, anyOf, oneOf, $ref to "#/..." paths
 * (#/definitions, #/$defs; recursive ones too), minLength / maxLength and
 * pattern (an anchored regular expression: see json_schema_pattern.c) of
 * strings, format "uuid", minimum / maximum / exclusiveMinimum /
 * exclusiveMaximum of integers (on "number" they are not checked, as in
 * llama.cpp). An empty schema is any JSON object, as in llama.cpp.
 * HEARTH_EINVAL with err naming the part for a schema that is not an
 * object, an unknown type, a $ref that leads nowhere or comes back to
 * itself before anything is matched (a left-recursive grammar), bounds that no
 * integer meets, an allOf whose components declare one property twice, and
 * a pattern hearth does not translate (unanchored, lookarounds,
 * back-references, ...: the message names it and its offset): refused,
 * not ignored (the keywords llama.cpp ignores, hearth ignores too: the
 * list is in json_schema_gbnf.c). HEARTH_ELIMIT past out's bound or a
 * nesting of more than 64 levels. schema is borrowed. */
int hearth_json_schema_to_gbnf(const cJSON *schema, hearth_buf *out, hearth_err *err);
/* The same with the schema's rule named name instead of "root", for a
 * grammar that puts the document inside more text (tool_calls.c: hermes's
 * <tool_call> tags); the caller writes "root". Names the converter makes
 * are "r<N>" and the JSON primitives' ("space", "string", "value", ...). */
int hearth_json_schema_to_gbnf_rule(const cJSON *schema, const char *name, hearth_buf *out, hearth_err *err);

#endif
