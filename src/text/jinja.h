/* jinja.h: a sandboxed interpreter of the Jinja2 subset that Hugging Face
 * chat templates use (llama-server's --jinja).
 *
 * Renders what transformers renders, byte for byte: jinja2 with
 * trim_blocks and lstrip_blocks, ImmutableSandboxedEnvironment, the
 * loopcontrols extension, the globals raise_exception(msg) and
 * strftime_now(fmt), and transformers' tojson (json.dumps with
 * ensure_ascii=False). The deliberate differences from jinja2 are listed in
 * jinja_eval.c's opening comment.
 *
 * Templates come from GGUF files, which are untrusted: parsing and rendering
 * never crash, hang or grow without bound; every limit is an error naming it. */
#ifndef HEARTH_TEXT_JINJA_H
#define HEARTH_TEXT_JINJA_H

#include "base/buf.h"
#include "base/err.h"

#include <stddef.h>
#include <stdint.h>

typedef struct hearth_jinja hearth_jinja; /* a parsed template: immutable, shareable across threads */

/* Parses src[0..len) (not NUL-terminated). HEARTH_EINVAL with err naming
 * line:col ("jinja: 3:14: expected 'endif', got 'endfor'") for a syntax
 * error or an unsupported construct (include, extends, an unknown filter or
 * test, ...); HEARTH_ENOMEM; HEARTH_ELIMIT for nesting past
 * HEARTH_JINJA_MAX_DEPTH. *out is NULL on error. */
int hearth_jinja_parse(const char *src, size_t len, hearth_jinja **out, hearth_err *err);

/* Renders with the variables of context_json (a JSON object's text: its keys
 * become the template's globals), appending to out. Errors:
 *   HEARTH_EINVAL  a runtime error, the message "jinja: LINE:COL: what"; for
 *                  raise_exception(msg) the message is "jinja: LINE:COL: " + msg
 *                  verbatim; also for a context_json that is not a JSON object.
 *   HEARTH_ELIMIT  out->max reached, or the step, depth or memory limit hit.
 *   HEARTH_ENOMEM  an allocation failed.
 * On error out is left as it was (truncated back to its entry length).
 * Thread-safe: nothing in t is written. */
int hearth_jinja_render(const hearth_jinja *t, const char *context_json, hearth_buf *out, hearth_err *err);

/* The limits of one render. hearth_jinja_render uses the defaults below. */
typedef struct hearth_jinja_limits {
    uint64_t max_steps; /* evaluation steps: nodes evaluated, loop iterations, items built */
    int max_depth;      /* nesting of macro calls and expressions being evaluated */
    size_t max_mem;     /* bytes of values the render may allocate */
} hearth_jinja_limits;
#define HEARTH_JINJA_MAX_STEPS 10000000u
#define HEARTH_JINJA_MAX_DEPTH 256
#define HEARTH_JINJA_MAX_MEM ((size_t)256 << 20)

/* hearth_jinja_render with explicit limits (lim NULL: the defaults). */
int hearth_jinja_render_ex(const hearth_jinja *t, const char *context_json, const hearth_jinja_limits *lim,
                           hearth_buf *out, hearth_err *err);

/* Frees t; NULL is a no-op. */
void hearth_jinja_free(hearth_jinja *t);

#endif
