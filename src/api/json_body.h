/* json_body.h: the one way the JSON APIs read a request body: one JSON
 * object, nothing but whitespace after it, and no string holding a NUL.
 * Private to the api layer; sees no request, so it can be fuzzed. */
#ifndef HEARTH_API_JSON_BODY_H
#define HEARTH_API_JSON_BODY_H

#include <cjson/cJSON.h>
#include <stddef.h>

/* Parses body[0..len) (borrowed; need not be NUL-terminated) as one JSON
 * object. Returns the document, owned by the caller (cJSON_Delete), or NULL
 * with msg (NUL-terminated, cut to msg_size) saying what a 400 should say:
 *   - the body is empty;
 *   - it is not valid JSON (at byte N);
 *   - text follows the JSON value (at byte N: a second value, or junk);
 *   - the value is not an object;
 *   - a string or key holds a NUL ("\u0000", or a raw 0 byte), naming its
 *     field ('messages[1].content') and byte: cJSON's strings are C strings,
 *     so every reader would see the text cut at the NUL.
 * Thread-safe: cJSON's global error pointer is not used. */
cJSON *hearth_json_body_parse(const char *body, size_t len, char *msg, size_t msg_size);

#endif
