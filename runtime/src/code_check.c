/* code_check.c -- the code a bundle hands to a driver, held to its format
 * before any driver sees it (bundle.c calls these when a bundle is opened).
 *
 * The CRC of a bundle guards against accidents only: a crafted file can
 * carry any bytes with a right checksum, and a driver's compiler may abort
 * the whole process on bytes it does not expect (PoCL's LLVM asked for
 * 30 GB and aborted on one flipped bit of a SPIR 1.2 module: an attribute
 * group's parameter index of 4294967287).  The runtime has no LLVM, so it
 * walks the bytes itself:
 *
 *   - LLVM bitcode (the LLVM Bitcode File Format document): the optional
 *     wrapper header and the 'BC' 0xC0DE magic; then the bitstream: every
 *     block entered, its length word and abbreviation width, each record
 *     read by its abbreviation or unabbreviated, every abbreviation
 *     definition (encodings, widths, an array's element, a blob last),
 *     BLOCKINFO's SETBID and the abbreviations it gives other blocks, each
 *     abbreviation id defined in its block, a block ending exactly where
 *     its length word says, nothing past the end of the stream; and on the
 *     values the LLVM reader allocates by, sane bounds (rec_bounds below).
 *   - SPIR-V: the header (magic, version, id bound, schema 0), and every
 *     instruction's word count inside the module.
 *
 * What passes is well formed, not proven harmless: a driver may still
 * fail, or abort, on a module that passes (dsv4rt.h says so). */
#include "code_check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- LLVM bitcode ---- */

#define BC_MAX_DEPTH 16       /* nested blocks (LLVM's modules nest 4 deep) */
#define BC_MAX_BLOCK_ID 63    /* LLVM's block ids stay below 32 */
#define BC_MAX_ABBREVS 2048   /* abbreviations in a module */
#define BC_MAX_OPS 8192       /* their operands, together */
#define BC_MAX_ABBREV_OPS 64  /* operands of one abbreviation */
#define BC_MAX_LOCAL 512      /* abbreviations in scope in one block */
#define BC_VALS 4             /* a record's leading values kept for rec_bounds (the code first) */

enum { ENC_LITERAL = 0, ENC_FIXED = 1, ENC_VBR = 2, ENC_ARRAY = 3, ENC_CHAR6 = 4, ENC_BLOB = 5 };

typedef struct {
  uint8_t enc;
  uint64_t val; /* a literal's value, a fixed or VBR field's width */
} bc_op;

typedef struct {
  uint16_t first, n; /* operands ops[first, first + n) */
  int16_t owner;     /* BLOCKINFO: the block id it is given to; -1: a block's own */
} bc_abbrev;

typedef struct {
  const uint8_t *p;
  uint64_t bits, at; /* the stream's length and the reading position, in bits */
  bc_op ops[BC_MAX_OPS];
  bc_abbrev ab[BC_MAX_ABBREVS];
  int nops, nab;
  int modules;
  char *why;
  size_t why_len;
} bc;

static int bc_bad(bc *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int bc_bad(bc *s, const char *fmt, ...)
{
  char m[256];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m, sizeof m, fmt, ap);
  va_end(ap);
  snprintf(s->why, s->why_len, "LLVM bitcode: %s (at bit %llu)", m, (unsigned long long)s->at);
  return 1;
}

/* A fixed-width field of w <= 64 bits, ending at or before bit end. */
static int rd(bc *s, unsigned w, uint64_t end, uint64_t *v)
{
  if (end - s->at < w)
    return bc_bad(s, "a %u-bit field passes the end of its block", w);
  uint64_t x = 0;
  for (unsigned i = 0; i < w; i++, s->at++)
    x |= (uint64_t)((s->p[s->at >> 3] >> (s->at & 7)) & 1) << i;
  *v = x;
  return 0;
}

/* A VBR field of w-bit chunks (2 <= w <= 32), its value inside 64 bits. */
static int vbr(bc *s, unsigned w, uint64_t end, uint64_t *v)
{
  uint64_t x = 0, c;
  for (unsigned shift = 0;; shift += w - 1) {
    if (rd(s, w, end, &c))
      return 1;
    uint64_t piece = c & ((1ull << (w - 1)) - 1);
    if (piece && (shift >= 64 || (shift && piece >> (64 - shift))))
      return bc_bad(s, "a VBR%u value wider than 64 bits", w);
    if (piece)
      x |= piece << shift;
    if (!(c >> (w - 1)))
      break;
  }
  *v = x;
  return 0;
}

static int align32(bc *s, uint64_t end)
{
  uint64_t to = (s->at + 31) & ~(uint64_t)31;
  if (to > end)
    return bc_bad(s, "32-bit alignment passes the end of its block");
  s->at = to;
  return 0;
}

/* DEFINE_ABBREV: an abbreviation of block `owner` (-1: the current
 * block's own), added to s->ab. */
static int define_abbrev(bc *s, uint64_t end, int owner)
{
  uint64_t n = 0, v = 0;
  if (vbr(s, 5, end, &n))
    return 1;
  if (n < 1 || n > BC_MAX_ABBREV_OPS)
    return bc_bad(s, "an abbreviation of %llu operands (1 to %d)", (unsigned long long)n, BC_MAX_ABBREV_OPS);
  if (s->nab >= BC_MAX_ABBREVS || s->nops + (int)n > BC_MAX_OPS)
    return bc_bad(s, "more than %d abbreviations or %d abbreviation operands", BC_MAX_ABBREVS, BC_MAX_OPS);
  bc_op *o = s->ops + s->nops;
  for (uint64_t i = 0; i < n; i++) {
    if (rd(s, 1, end, &v))
      return 1;
    if (v) { /* a literal */
      o[i].enc = ENC_LITERAL;
      if (vbr(s, 8, end, &o[i].val))
        return 1;
    } else {
      if (rd(s, 3, end, &v))
        return 1;
      if (v < ENC_FIXED || v > ENC_BLOB)
        return bc_bad(s, "abbreviation operand encoding %llu (1 to 5)", (unsigned long long)v);
      o[i].enc = (uint8_t)v, o[i].val = 0;
      if (v == ENC_FIXED || v == ENC_VBR) {
        if (vbr(s, 5, end, &o[i].val))
          return 1;
        if (o[i].val > 32 || (v == ENC_VBR && o[i].val == 1))
          return bc_bad(s, "a %s field of %llu bits (%s to 32)", v == ENC_FIXED ? "fixed" : "VBR",
                        (unsigned long long)o[i].val, v == ENC_FIXED ? "0" : "2");
        if (o[i].val == 0) /* read as the literal 0 */
          o[i].enc = ENC_LITERAL;
      }
    }
    if (i == 0 && (o[i].enc == ENC_ARRAY || o[i].enc == ENC_BLOB))
      return bc_bad(s, "an abbreviation starting with an array or a blob");
    if (o[i].enc == ENC_ARRAY && i != n - 2)
      return bc_bad(s, "an array that is not an abbreviation's second-to-last operand");
    if (o[i].enc == ENC_BLOB && i != n - 1)
      return bc_bad(s, "a blob that is not an abbreviation's last operand");
    if (i > 0 && o[i - 1].enc == ENC_ARRAY && o[i].enc != ENC_FIXED && o[i].enc != ENC_VBR && o[i].enc != ENC_CHAR6)
      return bc_bad(s, "an array whose elements are not fixed, VBR or char6 fields");
  }
  s->ab[s->nab++] = (bc_abbrev){(uint16_t)s->nops, (uint16_t)n, (int16_t)owner};
  s->nops += (int)n;
  return 0;
}

/* Sane bounds on the record values the LLVM reader allocates or builds
 * by (each a count or index that a flipped bit makes huge): block id,
 * record code, which value (1 = the first after the code), its most. */
static const struct {
  uint32_t block, code, at;
  uint64_t max; /* 0: the stream's length in bits (each counted thing takes at least a bit) */
  const char *what;
} bounds[] = {
    {10, 3, 2, 4096,
     "attribute group's parameter index"},          /* PARAMATTR_GROUP ENTRY [id, index, ...]; ~0u: the function */
    {17, 1, 1, 0, "type table's entry count"},      /* TYPE NUMENTRY */
    {17, 7, 1, 1024, "integer type's width"},       /* TYPE INTEGER */
    {17, 11, 1, 1ull << 32, "array type's length"}, /* TYPE ARRAY [n, type] */
    {17, 12, 1, 4096, "vector type's length"},      /* TYPE VECTOR [n, type] */
    {12, 1, 1, 0, "function's basic block count"},  /* FUNCTION DECLAREBLOCKS */
    {15, 35, 1, 0, "metadata string count"},        /* METADATA STRINGS [count, offset] blob */
};

static int rec_bounds(bc *s, uint32_t block, const uint64_t *v, uint64_t n)
{
  for (size_t k = 0; k < sizeof bounds / sizeof *bounds; k++) {
    if (bounds[k].block != block || bounds[k].code != v[0] || bounds[k].at >= n)
      continue;
    uint64_t x = v[bounds[k].at], max = bounds[k].max ? bounds[k].max : s->bits;
    if (block == 10 && x == 0xFFFFFFFFu)
      continue;
    if (x > max)
      return bc_bad(s, "the %s is %llu, more than %llu", bounds[k].what, (unsigned long long)x,
                    (unsigned long long)max);
  }
  return 0;
}

/* One record by abbreviation a; its leading values into v[BC_VALS], their count into *n. */
static int abbrev_record(bc *s, const bc_abbrev *a, uint64_t end, uint64_t *v, uint64_t *n)
{
  *n = 0;
  for (int i = 0; i < a->n; i++) {
    const bc_op *o = &s->ops[a->first + i];
    uint64_t x = 0, cnt = 0;
    switch (o->enc) {
    case ENC_LITERAL: x = o->val; break;
    case ENC_FIXED:
      if (rd(s, (unsigned)o->val, end, &x))
        return 1;
      break;
    case ENC_VBR:
      if (vbr(s, (unsigned)o->val, end, &x))
        return 1;
      break;
    case ENC_CHAR6:
      if (rd(s, 6, end, &x))
        return 1;
      break;
    case ENC_ARRAY: {
      const bc_op *e = o + 1; /* its element (define_abbrev checked one follows) */
      unsigned min = e->enc == ENC_CHAR6 ? 6 : (unsigned)e->val;
      if (vbr(s, 6, end, &cnt))
        return 1;
      if (cnt > (end - s->at) / min)
        return bc_bad(s, "an array of %llu elements, more than its block holds", (unsigned long long)cnt);
      for (uint64_t k = 0; k < cnt; k++) {
        int r = e->enc == ENC_VBR ? vbr(s, (unsigned)e->val, end, &x) : rd(s, min, end, &x);
        if (r)
          return 1;
        if (*n < BC_VALS)
          v[*n] = x;
        (*n)++;
      }
      i++; /* the element operand is read */
      continue;
    }
    case ENC_BLOB:
      if (vbr(s, 6, end, &cnt) || align32(s, end))
        return 1;
      if (cnt > (end - s->at) / 8)
        return bc_bad(s, "a blob of %llu bytes, more than its block holds", (unsigned long long)cnt);
      s->at += cnt * 8;
      if (align32(s, end))
        return 1;
      continue;
    }
    if (*n < BC_VALS)
      v[*n] = x;
    (*n)++;
  }
  return 0;
}

static int unabbrev_record(bc *s, uint64_t end, uint64_t *v, uint64_t *n)
{
  uint64_t ops = 0, x = 0;
  if (vbr(s, 6, end, &v[0]) || vbr(s, 6, end, &ops))
    return 1;
  if (ops > (end - s->at) / 6)
    return bc_bad(s, "a record of %llu operands, more than its block holds", (unsigned long long)ops);
  *n = 1;
  for (uint64_t k = 0; k < ops; k++) {
    if (vbr(s, 6, end, &x))
      return 1;
    if (*n < BC_VALS)
      v[*n] = x;
    (*n)++;
  }
  return 0;
}

static int block(bc *s, int id, unsigned width, uint64_t end, int depth);

/* ENTER_SUBBLOCK (its abbreviation id read): the block, to its end. */
static int sub_block(bc *s, uint64_t end, int depth)
{
  uint64_t id = 0, width = 0, words = 0;
  if (vbr(s, 8, end, &id) || vbr(s, 4, end, &width) || align32(s, end) || rd(s, 32, end, &words))
    return 1;
  if (id > BC_MAX_BLOCK_ID)
    return bc_bad(s, "block id %llu (at most %d)", (unsigned long long)id, BC_MAX_BLOCK_ID);
  if (width < 1 || width > 32)
    return bc_bad(s, "block %llu's abbreviation width %llu (1 to 32)", (unsigned long long)id,
                  (unsigned long long)width);
  if (words > (end - s->at) / 32)
    return bc_bad(s, "block %llu's length of %llu words passes the end of %s", (unsigned long long)id,
                  (unsigned long long)words, depth ? "the block around it" : "the stream");
  if (depth + 1 > BC_MAX_DEPTH)
    return bc_bad(s, "blocks nested more than %d deep", BC_MAX_DEPTH);
  if (id == 8 && depth == 0)
    s->modules++;
  return block(s, (int)id, (unsigned)width, s->at + words * 32, depth + 1);
}

/* The items of block `id` (BLOCKINFO is id 0) up to its END_BLOCK, which
 * must end it at bit `end`.  depth 0: the stream's top level, where only
 * blocks may be. */
static int block(bc *s, int id, unsigned width, uint64_t end, int depth)
{
  uint16_t local[BC_MAX_LOCAL]; /* the abbreviations in scope: BLOCKINFO's for this id, then its own */
  int nlocal = 0, setbid = -1;
  for (int k = 0; id > 0 && k < s->nab; k++)
    if (s->ab[k].owner == id) {
      if (nlocal == BC_MAX_LOCAL)
        return bc_bad(s, "more than %d abbreviations in block %d", BC_MAX_LOCAL, id);
      local[nlocal++] = (uint16_t)k;
    }
  for (;;) {
    uint64_t a, v[BC_VALS] = {0}, n = 0;
    if (depth == 0 && s->at == end)
      return 0;
    if (rd(s, width, end, &a))
      return 1;
    if (depth == 0 && a != 1)
      return bc_bad(s, "abbreviation id %llu at the top level, where only blocks may be", (unsigned long long)a);
    if (a == 0) { /* END_BLOCK */
      if (align32(s, end))
        return 1;
      if (s->at != end)
        return bc_bad(s, "block %d ends %llu bits before its length word says", id,
                      (unsigned long long)(end - s->at));
      return 0;
    }
    if (a == 1) {
      if (id == 0)
        return bc_bad(s, "a block inside BLOCKINFO");
      if (sub_block(s, end, depth))
        return 1;
      continue;
    }
    if (a == 2) {
      if (id == 0 && setbid < 0)
        return bc_bad(s, "an abbreviation in BLOCKINFO before its SETBID");
      if (id != 0 && nlocal == BC_MAX_LOCAL)
        return bc_bad(s, "more than %d abbreviations in block %d", BC_MAX_LOCAL, id);
      if (define_abbrev(s, end, id == 0 ? setbid : -1))
        return 1;
      if (id != 0)
        local[nlocal++] = (uint16_t)(s->nab - 1);
      continue;
    }
    if (a == 3) {
      if (unabbrev_record(s, end, v, &n))
        return 1;
    } else {
      if (a - 4 >= (uint64_t)nlocal)
        return bc_bad(s, "abbreviation id %llu in block %d, which defines %d", (unsigned long long)a, id, nlocal);
      if (abbrev_record(s, &s->ab[local[a - 4]], end, v, &n))
        return 1;
      if (n == 0)
        return bc_bad(s, "a record with no code");
    }
    if (id == 0 && v[0] == 1) { /* BLOCKINFO SETBID [id] */
      if (n < 2 || v[1] < 1 || v[1] > BC_MAX_BLOCK_ID)
        return bc_bad(s, "BLOCKINFO SETBID of block %llu (1 to %d)", (unsigned long long)(n < 2 ? 0 : v[1]),
                      BC_MAX_BLOCK_ID);
      setbid = (int)v[1];
    }
    if (rec_bounds(s, (uint32_t)id, v, n))
      return 1;
  }
}

/* The module at p (n bytes): the wrapper, the magic, one module block
 * among the top-level blocks. */
static int bitcode(bc *s, const uint8_t *p, uint64_t n)
{
  static const uint8_t magic[4] = {'B', 'C', 0xC0, 0xDE};
  uint32_t w[5];
  if (n >= 20 && (memcpy(w, p, 20), w[0] == 0x0B17C0DEu)) { /* the wrapper: magic, version, offset, size, cpu */
    if (w[1] != 0 || w[2] < 20 || w[2] > n || w[3] > n - w[2])
      return bc_bad(s, "wrapper header version %u, offset %u, size %u in a module of %llu bytes", w[1], w[2], w[3],
                    (unsigned long long)n);
    p += w[2], n = w[3];
  }
  if (n < 8 || n % 4 || memcmp(p, magic, 4))
    return bc_bad(s, "no 'BC' 0xC0DE magic, or a length of %llu bytes that is not a multiple of 4 past it",
                  (unsigned long long)n);
  if (n > (UINT64_MAX >> 4))
    return bc_bad(s, "a module of %llu bytes", (unsigned long long)n);
  s->p = p, s->bits = n * 8, s->at = 32;
  if (block(s, -1, 2, s->bits, 0))
    return 1;
  if (s->modules != 1)
    return bc_bad(s, "%d module blocks (one expected)", s->modules);
  return 0;
}

int rt_bitcode_check(const uint8_t *p, uint64_t n, char *why, size_t why_len)
{
  bc *s = calloc(1, sizeof *s); /* 140 KB: off the stack */
  if (!s)
    return snprintf(why, why_len, "LLVM bitcode: out of host memory to check it"), 1;
  s->why = why, s->why_len = why_len;
  int r = bitcode(s, p, n);
  free(s);
  return r;
}

/* ---- SPIR-V ---- */

int rt_spirv_check(const uint8_t *p, uint64_t n, char *why, size_t why_len)
{
  uint32_t h[5];
  if (n < 20 || n % 4)
    return snprintf(why, why_len, "SPIR-V: %llu bytes, not a 5-word header and whole words",
                    (unsigned long long)n), 1;
  memcpy(h, p, sizeof h);
  if (h[0] != 0x07230203u)
    return snprintf(why, why_len, "SPIR-V: magic 0x%08x, not 0x07230203 (little-endian)", h[0]), 1;
  uint32_t major = h[1] >> 16 & 0xff, minor = h[1] >> 8 & 0xff;
  if ((h[1] & 0xff0000ffu) || major != 1 || minor > 6)
    return snprintf(why, why_len, "SPIR-V: version word 0x%08x is not a version 1.0 to 1.6", h[1]), 1;
  uint64_t words = n / 4;
  if (h[3] < 1 || h[3] > 4 * words) /* a driver sizes its id tables by it; an id takes an instruction's word */
    return snprintf(why, why_len, "SPIR-V: id bound %u is outside [1, %llu] (4 ids a word of the module)", h[3],
                    (unsigned long long)(4 * words)), 1;
  if (h[4])
    return snprintf(why, why_len, "SPIR-V: schema word %u, not 0", h[4]), 1;
  for (uint64_t at = 5; at < words;) {
    uint32_t ins;
    memcpy(&ins, p + at * 4, 4);
    uint32_t len = ins >> 16, op = ins & 0xffff;
    if (len == 0 || len > words - at)
      return snprintf(why, why_len, "SPIR-V: instruction at word %llu (opcode %u) has word count %u, %s",
                      (unsigned long long)at, op, len, len ? "past the end of the module" : "not at least 1"), 1;
    if (at == 5 && op != 17) /* OpCapability: a module begins with its capabilities */
      return snprintf(why, why_len, "SPIR-V: the first instruction is opcode %u, not OpCapability", op), 1;
    at += len;
  }
  return 0;
}

/* OpExecutionMode (opcode 16): entry point, mode, literals; SubgroupSize
 * is mode 35 with the size as its one literal. */
uint32_t rt_spirv_subgroup_size(const uint8_t *p, uint64_t n)
{
  uint64_t words = n / 4;
  uint32_t size = 0;
  for (uint64_t at = 5; at < words;) {
    uint32_t w[4] = {0};
    memcpy(w, p + at * 4, 4);
    uint32_t len = w[0] >> 16, op = w[0] & 0xffff;
    if (len == 0 || len > words - at)
      return size; /* not a module rt_spirv_check passed: nothing more to read */
    if (op == 16 && len == 4) {
      memcpy(w, p + at * 4, 16);
      if (w[2] == 35 && w[3] > size)
        size = w[3];
    }
    at += len;
  }
  return size;
}
