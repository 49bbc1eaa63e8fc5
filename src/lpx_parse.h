/* The PTX front end's internal interface: tokens from the lexer, shared by
 * the parser (lpx_parse.c) and the lexer (lpx_lex.c). Never seen by Lua. */
#ifndef LPX_PARSE_H
#define LPX_PARSE_H
#include "lpx_internal.h"

/* Token kinds. A WORD is an identifier, directive (.reg), register (%r1),
 * dotted opcode (ld.global.f32) or @@DWARF; PUNCT is one character. */
enum { LPX_TK_EOF = 0, LPX_TK_WORD, LPX_TK_NUM, LPX_TK_STR, LPX_TK_PUNCT };

/* One token (8 bytes: big inputs have millions): its text is
 * src[off, off+len); its leading trivia runs from the end of the token
 * before it (or 0) to off. */
typedef struct lpx_tok {
  uint32_t off;
  uint32_t len : 27;   /* a longer token is a lexical error */
  uint32_t kind : 4;
  uint32_t nl : 1;     /* the leading trivia holds a line break */
} lpx_tok;

#define LPX_TOK_MAXLEN ((1u << 27) - 1)

/* Start of token k's leading trivia. */
static inline uint32_t lpx_tok_pre(const lpx_tok *t, size_t k)
{
  return k ? t[k - 1].off + t[k - 1].len : 0;
}

typedef struct lpx_toks {
  lpx_tok *v;
  size_t n, cap;
} lpx_toks;

/* Split src into tokens (the last one is EOF, carrying the trailing trivia).
 * On a lexical error, fail with "file:line:col: ..." and return -1. */
int lpx_lex_all(lpx_ctx *ctx, const char *src, size_t len, const char *file, lpx_toks *out);

/* Called by lpx_parse_streamed with the module so far: after each
 * top-level statement (open NULL), it must be done with every item and
 * function in it; inside a long function body (open: that function, its
 * header tokens and body items so far complete), with those items, which
 * the parser then drops (the function's closing call comes as its top
 * item, with the items after them). */
typedef void (*lpx_parse_hook)(lpx_module *m, const lpx_func *open, void *arg);

/* lpx_parse, handing each top-level statement to hook as it is parsed and
 * then dropping it (lpx_parse.c). */
lpx_module *lpx_parse_streamed(lpx_ctx *ctx, const char *text, size_t len, const char *filename, lpx_parse_hook hook,
                               void *arg);

/* The 1-based line and column of byte offset off in src. */
void lpx_lex_position(const char *src, size_t off, int *line, int *col);

#endif
