/* jinja_str.h: string helpers shared by jinja_methods.c and jinja_filters.c. */
#ifndef HEARTH_TEXT_JINJA_STR_H
#define HEARTH_TEXT_JINJA_STR_H

#include "text/jinja_int.h"

/* the code point at p[*i] (a bad byte reads as itself), advancing *i */
int32_t js_next(const char *p, size_t n, size_t *i);
void js_put(jx *J, jsb *b, int32_t cp);
int32_t js_upper(int32_t cp);
int32_t js_lower(int32_t cp);
bool js_is_alnum(int32_t cp);
/* mode 0 lower, 1 upper, 2 capitalize, 3 str.title */
jv js_case(jx *J, jv s, int mode);
/* which: 1 left, 2 right, 3 both; chars a JV_STR, or anything else for whitespace */
jv js_strip(jv s, jv chars, int which);
jv js_replace(jx *J, const jnode *at, jv s, jv old, jv nw, int64_t count);
jv js_splitlines(jx *J, jv s);

#endif
