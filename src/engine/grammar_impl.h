/* grammar_impl.h: the compiled form of a grammar, shared by the parser
 * (grammar_parse.c) and the matcher (grammar_match.c); private to them.
 *
 * Every rule is a run of elements in one flat array: its alternatives in
 * order, each a sequence of elements closed by GE_ALT (another alternative
 * follows) or GE_END (the rule's last). An element is a rule reference or a
 * character set (ranges of code points, possibly negated); a literal is a
 * sequence of one-character sets, and groups and repetitions were turned
 * into generated rules by the parser, so the matcher knows only these four
 * kinds. */
#ifndef HEARTH_ENGINE_GRAMMAR_IMPL_H
#define HEARTH_ENGINE_GRAMMAR_IMPL_H

#include "engine/grammar.h"

enum { GE_END, GE_ALT, GE_REF, GE_CHARS };

typedef struct hearth_gelem {
    uint8_t type;     /* GE_* */
    uint8_t negated;  /* GE_CHARS: matches what the ranges do not ('.' is a negated empty set) */
    uint32_t a;       /* GE_REF: the rule; GE_CHARS: the first range in ranges[] */
    uint32_t b;       /* GE_CHARS: how many ranges */
} hearth_gelem;

struct hearth_grammar {
    hearth_gelem *el;       /* (n_el) every rule's elements */
    uint32_t n_el;
    uint32_t *rule_start;   /* (n_rules) the first element of each rule */
    uint32_t n_rules;
    uint32_t *ranges;       /* (2 * n_ranges) lo, hi pairs, inclusive */
    uint32_t n_ranges;
    uint32_t root;
    char *text;             /* the source, NUL-terminated (what generation_settings shows) */
};

static inline bool hearth_gelem_is_end(const hearth_gelem *e) { return e->type == GE_END || e->type == GE_ALT; }

#endif
