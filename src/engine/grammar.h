/* grammar.h: llama.cpp's GBNF grammars, for constrained sampling.
 *
 * A grammar is parsed once per request (hearth_grammar_parse) into an
 * immutable set of rules; a matcher (one per sequence) then tracks which
 * texts can still follow what was generated. The scheduler asks it, for a
 * sampled token's text, whether that text can extend the accepted prefix,
 * masks the vocabulary when it cannot, and feeds it every token kept.
 *
 * The language is llama.cpp's GBNF: `name ::= alternatives` rules (one per
 * line; inside parentheses and after `|` a rule may span lines), sequences,
 * `|` alternation, "quoted literals" and [character classes] ([^...]
 * negated, a-z ranges) with the escapes \x.. \u.... \U........ \t \r \n \\
 * \" \[ \] \-, `.` for any character, ( groups ), the postfix operators `*`,
 * `+`, `?` and `{m}`, `{m,}`, `{m,n}`, `#` comments, and a required `root`
 * rule where matching starts. Characters are Unicode code points; texts
 * are UTF-8, and a token may end inside a character (the matcher keeps the
 * partial character and checks that some allowed character starts so). */
#ifndef HEARTH_ENGINE_GRAMMAR_H
#define HEARTH_ENGINE_GRAMMAR_H

#include "base/err.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The longest grammar text accepted, and the most elements its rules may
 * expand to (a {m,n} repetition copies its item): bounds on a client's input. */
#define HEARTH_GRAMMAR_MAX_TEXT ((size_t)1 << 20)
#define HEARTH_GRAMMAR_MAX_ELEMS (1 << 20)

typedef struct hearth_grammar hearth_grammar;

/* Parses text[0..n) (need not be NUL-terminated). NULL on failure, with err
 * saying what and where: HEARTH_EINVAL "grammar: line L, column C: expecting
 * '::='" and the like, an undefined rule, no root rule, a left-recursive
 * rule; HEARTH_ELIMIT past the bounds above; HEARTH_ENOMEM. The result is
 * immutable: any thread may read it, matchers borrow it. */
hearth_grammar *hearth_grammar_parse(const char *text, size_t n, hearth_err *err);
/* NULL is a no-op. */
void hearth_grammar_free(hearth_grammar *g);
/* The text it was parsed from (NUL-terminated; a NUL inside it ends what a
 * C string shows), valid until freed. */
const char *hearth_grammar_text(const hearth_grammar *g);
/* Rules after parsing (generated ones for groups and repetitions included). */
int hearth_grammar_n_rules(const hearth_grammar *g);

typedef struct hearth_grammar_matcher hearth_grammar_matcher;

/* A matcher at the start of g's root rule; g is borrowed for its life. NULL
 * when out of memory (err says so). Used by one thread at a time. */
hearth_grammar_matcher *hearth_grammar_matcher_new(const hearth_grammar *g, hearth_err *err);
/* NULL is a no-op. */
void hearth_grammar_matcher_free(hearth_grammar_matcher *m);

/* Whether the accepted text can be followed by text[0..n): every whole
 * character of it is allowed in turn, and a character it leaves incomplete
 * can still become an allowed one. Empty text, a NUL byte first and
 * malformed UTF-8 are never allowed (llama.cpp's rule for empty pieces).
 * Does not change the matcher. */
bool hearth_grammar_matcher_allows(hearth_grammar_matcher *m, const char *text, size_t n);
/* Accepts text[0..n): 0, or HEARTH_EINVAL when it is not allowed (the
 * matcher is then unchanged). */
int hearth_grammar_matcher_accept(hearth_grammar_matcher *m, const char *text, size_t n);
/* Whether the accepted text is a whole sentence of the grammar (an end of
 * generation may be sampled now). */
bool hearth_grammar_matcher_complete(const hearth_grammar_matcher *m);
/* Whether the matcher ran out of its work budget (a grammar whose parses
 * multiply past what one token or one vocabulary mask may cost: see
 * grammar_match.c): it then refuses every text for good. */
bool hearth_grammar_matcher_spent(const hearth_grammar_matcher *m);
/* Between these, allows calls share one budget (a vocabulary mask's) instead
 * of each having its own. */
void hearth_grammar_matcher_mask_begin(hearth_grammar_matcher *m);
void hearth_grammar_matcher_mask_end(hearth_grammar_matcher *m);

/* The text of every token of a vocabulary as the grammar sees it (llama.cpp
 * matches token_to_piece with special tokens rendered): token i is
 * bytes[off[i] .. off[i+1]). Built by whoever has the tokenizer; immutable
 * after, shared by every request on the model. */
typedef struct hearth_token_texts {
    int32_t n;
    uint32_t *off;        /* (n + 1) */
    char *bytes;
} hearth_token_texts;

/* Whether the token may come next: an end of generation (is_end) only when
 * the text so far is complete, any other token when its text is allowed (an
 * empty text never is). */
bool hearth_grammar_token_allowed(hearth_grammar_matcher *m, const hearth_token_texts *t, int32_t id, bool is_end);
/* allowed[i] for every token of t (end ids as is_end says); returns how many
 * are allowed, or -1 when the matcher ran out of its budget on the way
 * (hearth_grammar_matcher_spent). */
int32_t hearth_grammar_mask(hearth_grammar_matcher *m, const hearth_token_texts *t, const int32_t *end_ids, int n_end,
                            uint8_t *allowed);
/* Accepts a token that is not an end id: 0, or HEARTH_EINVAL when its
 * text is not allowed (the matcher is unchanged then). */
int hearth_grammar_accept_token(hearth_grammar_matcher *m, const hearth_token_texts *t, int32_t id);

#endif
