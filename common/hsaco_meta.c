/* hsaco_meta.c -- the one reader of an AMDGPU HSA code object (hsaco_meta.h):
 * its ELF header, its metadata note, its symbols, and the check of a
 * kernel's metadata against how the runtime launches it.
 *
 * Layout knowledge comes from the ELF gABI and LLVM's AMDGPUUsage ("ELF
 * Code Object", "Code Object V4/V5 Metadata"): an ELF64 shared object
 * whose note (an SHT_NOTE section, else a PT_NOTE segment) with owner
 * "AMDGPU" and type NT_AMDGPU_METADATA (32) holds a MessagePack map:
 * amdhsa.target, and amdhsa.kernels, one map a kernel with an .args array
 * of maps.  Every read goes through bounds-checked helpers over (pointer,
 * length); offsets are 64-bit and every sum is checked before it is used,
 * so a truncated or hostile file gives a message, never a read outside it.
 * MessagePack nesting is bounded (MP_MAX_DEPTH) and every item takes at
 * least one byte, so each walk ends within the note's length.
 *
 * The arch limits dsv4_hsaco_launch_agrees holds a kernel to are ARCHS
 * below, each with its source.
 */
#include "hsaco_meta.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "dsv4_abi.h"

#define EM_AMDGPU 224
#define ELFOSABI_AMDGPU_HSA 64
#define ET_DYN 3
#define PT_NOTE 4
#define SHT_SYMTAB 2
#define SHT_STRTAB 3
#define SHT_NOTE 7
#define SHT_DYNSYM 11
#define NT_AMDGPU_METADATA 32
#define EF_AMDGPU_MACH 0xffu
#define MP_MAX_DEPTH 32

typedef struct {
  const unsigned char *p;
  size_t n;
} span;

/* Is [off, off+size) inside a buffer of n bytes (no overflow)? */
static int in_range(size_t n, uint64_t off, uint64_t size) { return off <= (uint64_t)n && size <= (uint64_t)n - off; }

/* Little-endian unsigned of `bytes` bytes at off; 0 when out of range. */
static int rd_le(const span *b, uint64_t off, int bytes, uint64_t *v)
{
  if (!in_range(b->n, off, (uint64_t)bytes))
    return 0;
  *v = 0;
  for (int k = bytes - 1; k >= 0; k--)
    *v = (*v << 8) | b->p[off + (uint64_t)k];
  return 1;
}

static int fail(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Format a one-line message into err (when there is room) and return 1. */
static int fail(char *err, size_t errlen, const char *fmt, ...)
{
  if (err && errlen > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return 1;
}

/* ---- ELF ---- */

typedef struct {
  span b;
  uint64_t shoff, phoff;
  unsigned shnum, phnum, shentsize, phentsize;
  unsigned mach, abi_version;
} elf_file;

typedef struct {
  uint32_t type, link;
  uint64_t off, size, align, entsize;
} shdr;

/* The ELF header of an AMDGPU HSA code object v4/v5 into f, its header
 * tables held inside the file. */
static int elf_open(const unsigned char *elf, size_t len, elf_file *f, char *err, size_t errlen)
{
  uint64_t v = 0;
  if (!elf || len < 64)
    return fail(err, errlen, "hsaco: %lu bytes is too small for an ELF64 header", (unsigned long)len);
  memset(f, 0, sizeof *f);
  f->b.p = elf;
  f->b.n = len;
  if (memcmp(elf, "\177ELF", 4) != 0)
    return fail(err, errlen, "hsaco: not an ELF file (bad magic)");
  if (elf[4] != 2)
    return fail(err, errlen, "hsaco: not ELFCLASS64");
  if (elf[5] != 1)
    return fail(err, errlen, "hsaco: not little-endian");
  if (elf[6] != 1)
    return fail(err, errlen, "hsaco: bad ELF ident version %u", elf[6]);
  if (elf[7] != ELFOSABI_AMDGPU_HSA)
    return fail(err, errlen, "hsaco: OS ABI %u is not ELFOSABI_AMDGPU_HSA (64)", elf[7]);
  if (elf[8] != 2 && elf[8] != 3)
    return fail(err, errlen, "hsaco: ABI version %u is not code object v4 (2) or v5 (3)", elf[8]);
  f->abi_version = elf[8];
  rd_le(&f->b, 16, 2, &v);
  if (v != ET_DYN)
    return fail(err, errlen, "hsaco: e_type %u is not ET_DYN", (unsigned)v);
  rd_le(&f->b, 18, 2, &v);
  if (v != EM_AMDGPU)
    return fail(err, errlen, "hsaco: e_machine %u is not EM_AMDGPU (224)", (unsigned)v);
  rd_le(&f->b, 20, 4, &v);
  if (v != 1)
    return fail(err, errlen, "hsaco: e_version %u is not 1", (unsigned)v);
  rd_le(&f->b, 48, 4, &v);
  f->mach = (unsigned)(v & EF_AMDGPU_MACH);
  rd_le(&f->b, 32, 8, &f->phoff);
  rd_le(&f->b, 40, 8, &f->shoff);
  rd_le(&f->b, 54, 2, &v);
  f->phentsize = (unsigned)v;
  rd_le(&f->b, 56, 2, &v);
  f->phnum = (unsigned)v;
  rd_le(&f->b, 58, 2, &v);
  f->shentsize = (unsigned)v;
  rd_le(&f->b, 60, 2, &v);
  f->shnum = (unsigned)v;
  if (f->phnum > 0 && (f->phentsize < 56 || !in_range(len, f->phoff, (uint64_t)f->phnum * f->phentsize)))
    return fail(err, errlen, "hsaco: program header table out of range");
  if (f->shnum == 0)
    return fail(err, errlen, "hsaco: no section headers");
  if (f->shentsize < 64 || !in_range(len, f->shoff, (uint64_t)f->shnum * f->shentsize))
    return fail(err, errlen, "hsaco: section header table out of range");
  return 0;
}

/* Section header i (the table's bounds were checked by elf_open). */
static int get_shdr(const elf_file *f, unsigned i, shdr *sh)
{
  uint64_t base = f->shoff + (uint64_t)i * f->shentsize, v;
  if (!rd_le(&f->b, base + 4, 4, &v))
    return 0;
  sh->type = (uint32_t)v;
  if (!rd_le(&f->b, base + 24, 8, &sh->off) || !rd_le(&f->b, base + 32, 8, &sh->size))
    return 0;
  if (!rd_le(&f->b, base + 40, 4, &v))
    return 0;
  sh->link = (uint32_t)v;
  return rd_le(&f->b, base + 48, 8, &sh->align) && rd_le(&f->b, base + 56, 8, &sh->entsize);
}

/* The AMDGPU metadata note among the notes in [off, off+size): 1 found
 * (desc, dlen set), 0 not there, -1 malformed. */
static int find_note(const span *b, uint64_t off, uint64_t size, uint64_t align, span *desc)
{
  uint64_t p = off, end, a = align == 8 ? 8 : 4;
  if (!in_range(b->n, off, size))
    return -1;
  end = off + size;
  while (end - p >= 12) {
    uint64_t namesz, descsz, type, name_off, desc_off, next;
    if (!rd_le(b, p, 4, &namesz) || !rd_le(b, p + 4, 4, &descsz) || !rd_le(b, p + 8, 4, &type))
      return -1;
    name_off = p + 12;
    desc_off = name_off + ((namesz + a - 1) & ~(a - 1));
    next = desc_off + ((descsz + a - 1) & ~(a - 1));
    if (namesz > end - name_off || desc_off > end || descsz > end - desc_off)
      return -1;
    if (type == NT_AMDGPU_METADATA && (namesz == 7 || namesz == 6) && memcmp(b->p + name_off, "AMDGPU", namesz) == 0) {
      desc->p = b->p + desc_off;
      desc->n = (size_t)descsz;
      return 1;
    }
    if (next >= end)
      break;
    p = next;
  }
  return 0;
}

/* The metadata note, through SHT_NOTE sections, else PT_NOTE segments:
 * 1 found, 0 absent, -1 malformed. */
static int locate_metadata(const elf_file *f, span *desc)
{
  for (unsigned i = 0; i < f->shnum; i++) {
    shdr sh;
    if (!get_shdr(f, i, &sh))
      return -1;
    int r = sh.type == SHT_NOTE ? find_note(&f->b, sh.off, sh.size, sh.align, desc) : 0;
    if (r != 0)
      return r;
  }
  for (unsigned i = 0; i < f->phnum; i++) {
    uint64_t base = f->phoff + (uint64_t)i * f->phentsize, type, off, sz, al;
    if (!rd_le(&f->b, base, 4, &type) || !rd_le(&f->b, base + 8, 8, &off) || !rd_le(&f->b, base + 32, 8, &sz) ||
        !rd_le(&f->b, base + 48, 8, &al))
      return -1;
    int r = type == PT_NOTE ? find_note(&f->b, off, sz, al, desc) : 0;
    if (r != 0)
      return r;
  }
  return 0;
}

/* Does the NUL-terminated string at offset `name` of the string table at
 * [stroff, stroff+strsz) equal want followed by suffix? */
static int strtab_eq(const span *b, uint64_t stroff, uint64_t strsz, uint64_t name, const char *want,
                     const char *suffix)
{
  size_t wl = strlen(want), sl = strlen(suffix);
  if (name >= strsz || (uint64_t)wl + sl + 1 > strsz - name)
    return 0;
  const unsigned char *s = b->p + stroff + name;
  return memcmp(s, want, wl) == 0 && memcmp(s + wl, suffix, sl) == 0 && s[wl + sl] == '\0';
}

/* See hsaco_meta.h. */
int dsv4_hsaco_symbol(const unsigned char *elf, size_t len, const char *name, const char *suffix, unsigned stt,
                      uint64_t size)
{
  elf_file f;
  if (!name || !suffix || elf_open(elf, len, &f, NULL, 0))
    return -1;
  for (unsigned i = 0; i < f.shnum; i++) {
    shdr sh, st;
    if (!get_shdr(&f, i, &sh))
      return -1;
    if (sh.type != SHT_SYMTAB && sh.type != SHT_DYNSYM)
      continue;
    if (sh.entsize != 24 || !in_range(len, sh.off, sh.size) || sh.link >= f.shnum || !get_shdr(&f, sh.link, &st) ||
        st.type != SHT_STRTAB || !in_range(len, st.off, st.size))
      return -1;
    for (uint64_t k = 0; k < sh.size / 24; k++) {
      uint64_t e = sh.off + k * 24, nm, info, shndx, sz;
      if (!rd_le(&f.b, e, 4, &nm) || !rd_le(&f.b, e + 4, 1, &info) || !rd_le(&f.b, e + 6, 2, &shndx) ||
          !rd_le(&f.b, e + 16, 8, &sz))
        return -1;
      if ((info & 0xf) == stt && shndx != 0 && (!size || sz == size) &&
          strtab_eq(&f.b, st.off, st.size, nm, name, suffix))
        return 1;
    }
  }
  return 0;
}

/* ---- MessagePack (bounded; no allocation) ---- */

enum { MP_NIL, MP_BOOL, MP_UINT, MP_INT, MP_FLOAT, MP_STR, MP_BIN, MP_EXT, MP_ARRAY, MP_MAP };

typedef struct {
  span b;
  uint64_t i; /* the next byte */
} mp_reader;

typedef struct {
  int type;                 /* MP_* */
  uint64_t u;               /* MP_UINT's value, MP_BOOL's 0/1, MP_EXT's type */
  int64_t s;                /* MP_INT's value */
  const unsigned char *str; /* MP_STR, MP_BIN, MP_EXT: the payload */
  uint64_t len;             /* the payload's bytes, or an array's or map's element count */
} mp_item;

/* A big-endian unsigned of `bytes` bytes (MessagePack is big-endian). */
static int mp_be(mp_reader *m, int bytes, uint64_t *v)
{
  if (!in_range(m->b.n, m->i, (uint64_t)bytes))
    return 0;
  *v = 0;
  for (int k = 0; k < bytes; k++)
    *v = (*v << 8) | m->b.p[m->i + (uint64_t)k];
  m->i += (uint64_t)bytes;
  return 1;
}

/* Consume a payload of len bytes (a string, binary or extension). */
static int mp_payload(mp_reader *m, uint64_t len, mp_item *it)
{
  if (!in_range(m->b.n, m->i, len))
    return 0;
  it->str = m->b.p + m->i;
  it->len = len;
  m->i += len;
  return 1;
}

/* A signed integer of `bytes` bytes. */
static int mp_signed(mp_reader *m, int bytes, mp_item *it)
{
  uint64_t v;
  if (!mp_be(m, bytes, &v))
    return 0;
  if (bytes < 8 && (v >> (bytes * 8 - 1)) & 1)
    v |= ~((UINT64_C(1) << (bytes * 8)) - 1);
  it->type = MP_INT;
  it->s = (int64_t)v;
  return 1;
}

/* One item's header: scalars and payloads are consumed whole, arrays and
 * maps only their header (it->len: the element count). */
static int mp_next(mp_reader *m, mp_item *it)
{
  uint64_t v;
  memset(it, 0, sizeof *it);
  if (!in_range(m->b.n, m->i, 1))
    return 0;
  unsigned c = m->b.p[m->i++];
  if (c <= 0x7f || c >= 0xe0) {
    it->type = c <= 0x7f ? MP_UINT : MP_INT;
    it->u = c;
    it->s = (int64_t)c - (c >= 0xe0 ? 256 : 0);
    return 1;
  }
  if (c <= 0x9f) {
    it->type = c <= 0x8f ? MP_MAP : MP_ARRAY;
    it->len = c & 0xf;
    return 1;
  }
  if (c <= 0xbf) {
    it->type = MP_STR;
    return mp_payload(m, c & 0x1f, it);
  }
  switch (c) {
  case 0xc0:
    it->type = MP_NIL;
    return 1;
  case 0xc2:
  case 0xc3:
    it->type = MP_BOOL;
    it->u = c & 1;
    return 1;
  case 0xc4:
  case 0xc5:
  case 0xc6:
    it->type = MP_BIN;
    return mp_be(m, 1 << (c - 0xc4), &v) && mp_payload(m, v, it);
  case 0xc7:
  case 0xc8:
  case 0xc9: /* a length, a type byte, the payload */
    it->type = MP_EXT;
    return mp_be(m, 1 << (c - 0xc7), &v) && mp_be(m, 1, &it->u) && mp_payload(m, v, it);
  case 0xca:
  case 0xcb:
    it->type = MP_FLOAT;
    return mp_be(m, c == 0xca ? 4 : 8, &v);
  case 0xcc:
  case 0xcd:
  case 0xce:
  case 0xcf:
    it->type = MP_UINT;
    return mp_be(m, 1 << (c - 0xcc), &it->u);
  case 0xd0:
  case 0xd1:
  case 0xd2:
  case 0xd3:
    return mp_signed(m, 1 << (c - 0xd0), it);
  case 0xd4:
  case 0xd5:
  case 0xd6:
  case 0xd7:
  case 0xd8:
    it->type = MP_EXT;
    return mp_be(m, 1, &it->u) && mp_payload(m, (uint64_t)1 << (c - 0xd4), it);
  case 0xd9:
  case 0xda:
  case 0xdb:
    it->type = MP_STR;
    return mp_be(m, 1 << (c - 0xd9), &v) && mp_payload(m, v, it);
  case 0xdc:
  case 0xdd:
    it->type = MP_ARRAY;
    return mp_be(m, 2 << (c - 0xdc), &it->len);
  case 0xde:
  case 0xdf:
    it->type = MP_MAP;
    return mp_be(m, 2 << (c - 0xde), &it->len);
  default:
    return 0; /* 0xc1 is never used */
  }
}

static int mp_skip(mp_reader *m, int depth);

/* Skip the elements of an item whose header was just read. */
static int mp_skip_rest(mp_reader *m, const mp_item *it, int depth)
{
  if (it->type != MP_ARRAY && it->type != MP_MAP)
    return 1;
  if (depth >= MP_MAX_DEPTH)
    return 0;
  uint64_t n = it->type == MP_MAP ? it->len * 2 : it->len; /* len < 2^32: no overflow */
  /* each element takes a byte at least, so this ends */
  for (uint64_t k = 0; k < n; k++)
    if (!mp_skip(m, depth + 1))
      return 0;
  return 1;
}

/* Skip one whole item. */
static int mp_skip(mp_reader *m, int depth)
{
  mp_item it;
  return mp_next(m, &it) && mp_skip_rest(m, &it, depth);
}

/* Is it a string equal to the NUL-terminated s? */
static int mp_str_is(const mp_item *it, const char *s)
{
  size_t n = strlen(s);
  return it->type == MP_STR && it->len == n && memcmp(it->str, s, n) == 0;
}

/* An unsigned integer below 2^32 (either encoding), into *v. */
static int mp_u32(const mp_item *it, uint32_t *v)
{
  if (it->type == MP_UINT && it->u <= UINT32_MAX)
    *v = (uint32_t)it->u;
  else if (it->type == MP_INT && it->s >= 0 && it->s <= (int64_t)UINT32_MAX)
    *v = (uint32_t)it->s;
  else
    return 0;
  return 1;
}

/* A string item into dst (n bytes), truncated, NUL-terminated. */
static void mp_copy(const mp_item *it, char *dst, size_t n)
{
  size_t k = it->len < n - 1 ? (size_t)it->len : n - 1;
  memcpy(dst, it->str, k);
  dst[k] = '\0';
}

/* At most 64 bytes of a metadata string, for messages. */
static int shown(const mp_item *it) { return it->len > 64 ? 64 : (int)it->len; }

/* ---- the metadata map ---- */

/* The map's top level: amdhsa.target, and a reader at amdhsa.kernels'
 * first entry. */
typedef struct {
  mp_item target;
  mp_reader kernels;
  uint64_t nkernels;
} md_top;

/* The code object's header and the map's top level. */
static int read_top(const unsigned char *elf, size_t len, elf_file *f, md_top *t, char *err, size_t errlen)
{
  span desc;
  mp_item top, k, v;
  int have_target = 0, have_kernels = 0;
  if (elf_open(elf, len, f, err, errlen))
    return 1;
  int r = locate_metadata(f, &desc);
  if (r < 0)
    return fail(err, errlen, "hsaco: malformed note section or segment");
  if (r == 0)
    return fail(err, errlen, "hsaco: no AMDGPU NT_AMDGPU_METADATA note");
  mp_reader m = {desc, 0};
  memset(t, 0, sizeof *t);
  if (!mp_next(&m, &top) || top.type != MP_MAP)
    return fail(err, errlen, "hsaco: metadata note is not a MessagePack map");
  for (uint64_t j = 0; j < top.len; j++) {
    if (!mp_next(&m, &k) || !mp_skip_rest(&m, &k, 1))
      return fail(err, errlen, "hsaco: malformed MessagePack metadata");
    int is_target = mp_str_is(&k, "amdhsa.target"), is_kernels = mp_str_is(&k, "amdhsa.kernels");
    if ((is_target && have_target) || (is_kernels && have_kernels))
      return fail(err, errlen, "hsaco: metadata has %s twice", is_target ? "amdhsa.target" : "amdhsa.kernels");
    if (!mp_next(&m, &v))
      return fail(err, errlen, "hsaco: malformed MessagePack metadata");
    if (is_target) {
      if (v.type != MP_STR)
        return fail(err, errlen, "hsaco: amdhsa.target is not a string");
      t->target = v;
      have_target = 1;
    } else if (is_kernels) {
      if (v.type != MP_ARRAY)
        return fail(err, errlen, "hsaco: amdhsa.kernels is not an array");
      t->nkernels = v.len;
      t->kernels = m;
      have_kernels = 1;
    }
    if (!mp_skip_rest(&m, &v, 1))
      return fail(err, errlen, "hsaco: malformed MessagePack metadata");
  }
  if (!have_target)
    return fail(err, errlen, "hsaco: metadata has no amdhsa.target");
  if (!have_kernels)
    return fail(err, errlen, "hsaco: metadata has no amdhsa.kernels");
  return 0;
}

/* See hsaco_meta.h. */
int dsv4_hsaco_object_read(const unsigned char *elf, size_t len, dsv4_hsaco_object *out, char *err, size_t errlen)
{
  elf_file f;
  md_top t;
  if (err && errlen > 0)
    err[0] = '\0';
  memset(out, 0, sizeof *out);
  if (read_top(elf, len, &f, &t, err, errlen))
    return 1;
  if (t.target.len >= sizeof out->target)
    return fail(err, errlen, "hsaco: amdhsa.target '%.*s...' is longer than %d bytes", shown(&t.target),
                (const char *)t.target.str, (int)sizeof out->target - 1);
  if (t.nkernels > INT32_MAX)
    return fail(err, errlen, "hsaco: amdhsa.kernels has %llu entries", (unsigned long long)t.nkernels);
  mp_copy(&t.target, out->target, sizeof out->target);
  out->mach = f.mach;
  out->abi_version = f.abi_version;
  out->nkernels = (int)t.nkernels;
  return 0;
}

/* The kernel fields read as unsigned integers, and whether AMDGPUUsage
 * makes each required (.agpr_count: only where the arch has AGPRs). */
static const struct {
  const char *key;
  size_t off;
  int required;
} UFIELDS[] = {
    {".kernarg_segment_size", offsetof(dsv4_hsaco_kernel, kernarg_size), 1},
    {".kernarg_segment_align", offsetof(dsv4_hsaco_kernel, kernarg_align), 1},
    {".group_segment_fixed_size", offsetof(dsv4_hsaco_kernel, group_segment), 1},
    {".private_segment_fixed_size", offsetof(dsv4_hsaco_kernel, private_segment), 1},
    {".max_flat_workgroup_size", offsetof(dsv4_hsaco_kernel, max_flat_workgroup), 1},
    {".wavefront_size", offsetof(dsv4_hsaco_kernel, wavefront), 1},
    {".sgpr_count", offsetof(dsv4_hsaco_kernel, sgprs), 1},
    {".vgpr_count", offsetof(dsv4_hsaco_kernel, vgprs), 1},
    {".agpr_count", offsetof(dsv4_hsaco_kernel, agprs), 0},
};
enum { NUFIELDS = sizeof UFIELDS / sizeof UFIELDS[0], K_NAME = NUFIELDS, K_SYMBOL, K_ARGS };

/* Which kernel key k is: a UFIELDS row, K_NAME, K_SYMBOL, K_ARGS; -1 others. */
static int kernel_key(const mp_item *k)
{
  for (int r = 0; r < NUFIELDS; r++)
    if (mp_str_is(k, UFIELDS[r].key))
      return r;
  return mp_str_is(k, ".name") ? K_NAME : mp_str_is(k, ".symbol") ? K_SYMBOL : mp_str_is(k, ".args") ? K_ARGS : -1;
}

/* An entry's .name, the entry skipped: 1, or 0 when the entry is not a
 * well-formed map (name->type stays MP_NIL where it has no string .name). */
static int entry_name(mp_reader *m, mp_item *name)
{
  mp_item e, k, v;
  memset(name, 0, sizeof *name);
  if (!mp_next(m, &e) || e.type != MP_MAP)
    return 0;
  for (uint64_t j = 0; j < e.len; j++) {
    if (!mp_next(m, &k) || !mp_skip_rest(m, &k, 2) || !mp_next(m, &v))
      return 0;
    if (mp_str_is(&k, ".name") && v.type == MP_STR)
      *name = v;
    if (!mp_skip_rest(m, &v, 2))
      return 0;
  }
  return 1;
}

/* An argument's .value_kind as the launch needs it. */
static int arg_kind(const mp_item *v)
{
  if (mp_str_is(v, "global_buffer"))
    return DSV4_HSACO_ARG_GLOBAL;
  if (mp_str_is(v, "by_value"))
    return DSV4_HSACO_ARG_VALUE;
  return v->len >= 7 && memcmp(v->str, "hidden_", 7) == 0 ? DSV4_HSACO_ARG_HIDDEN : DSV4_HSACO_ARG_OTHER;
}

/* Argument i (a map at m) of kernel kn into a. */
static int read_arg(mp_reader *m, const char *kn, int i, dsv4_hsaco_arg *a, char *err, size_t errlen)
{
  static const char *const keys[3] = {".offset", ".size", ".value_kind"};
  mp_item e, k, v;
  unsigned seen = 0;
  if (!mp_next(m, &e) || e.type != MP_MAP)
    return fail(err, errlen, "hsaco: kernel '%s': argument %d is not a map", kn, i);
  for (uint64_t j = 0; j < e.len; j++) {
    if (!mp_next(m, &k) || !mp_skip_rest(m, &k, 4) || !mp_next(m, &v))
      return fail(err, errlen, "hsaco: kernel '%s': argument %d is malformed", kn, i);
    int key = mp_str_is(&k, keys[0]) ? 0 : mp_str_is(&k, keys[1]) ? 1 : mp_str_is(&k, keys[2]) ? 2 : -1;
    if (key >= 0 && seen & 1u << key)
      return fail(err, errlen, "hsaco: kernel '%s': argument %d has %s twice", kn, i, keys[key]);
    if (key >= 0)
      seen |= 1u << key;
    if ((key == 0 && !mp_u32(&v, &a->offset)) || (key == 1 && !mp_u32(&v, &a->size)))
      return fail(err, errlen, "hsaco: kernel '%s': argument %d's %s is not an unsigned 32-bit integer", kn, i,
                  keys[key]);
    if (key == 2 && v.type != MP_STR)
      return fail(err, errlen, "hsaco: kernel '%s': argument %d's .value_kind is not a string", kn, i);
    if (key == 2) {
      mp_copy(&v, a->value_kind, sizeof a->value_kind);
      a->kind = arg_kind(&v);
    }
    if (!mp_skip_rest(m, &v, 4))
      return fail(err, errlen, "hsaco: kernel '%s': argument %d is malformed", kn, i);
  }
  for (int key = 0; key < 3; key++)
    if (!(seen & 1u << key))
      return fail(err, errlen, "hsaco: kernel '%s': argument %d lacks %s", kn, i, keys[key]);
  return 0;
}

/* The .args array (its header just read as v) of kernel kn into out. */
static int read_args(mp_reader *m, const mp_item *v, const char *kn, dsv4_hsaco_kernel *out, char *err, size_t errlen)
{
  if (v->type != MP_ARRAY)
    return fail(err, errlen, "hsaco: kernel '%s': .args is not an array", kn);
  if (v->len > DSV4_HSACO_MAX_ARGS)
    return fail(err, errlen, "hsaco: kernel '%s' has %llu arguments, more than the %d read", kn,
                (unsigned long long)v->len, DSV4_HSACO_MAX_ARGS);
  out->nargs = (int)v->len;
  for (int i = 0; i < out->nargs; i++)
    if (read_arg(m, kn, i, &out->args[i], err, errlen))
      return 1;
  return 0;
}

/* What an entry must hold once read whole (hsaco_meta.h). */
static int entry_complete(const dsv4_hsaco_kernel *out, unsigned seen, const mp_item *name, const mp_item *symbol,
                          char *err, size_t errlen)
{
  const char *kn = out->name;
  if (!(seen & 1u << K_SYMBOL))
    return fail(err, errlen, "hsaco: kernel '%s' lacks .symbol in its metadata", kn);
  if (symbol->len != name->len + 3 || memcmp(symbol->str, name->str, (size_t)name->len) != 0 ||
      memcmp(symbol->str + name->len, ".kd", 3) != 0)
    return fail(err, errlen, "hsaco: kernel '%s' has .symbol '%.*s', expected '%s.kd'", kn, shown(symbol),
                (const char *)symbol->str, kn);
  for (int r = 0; r < NUFIELDS; r++)
    if (UFIELDS[r].required && !(seen & 1u << r))
      return fail(err, errlen, "hsaco: kernel '%s' lacks %s in its metadata", kn, UFIELDS[r].key);
  if (out->kernarg_align == 0 || (out->kernarg_align & (out->kernarg_align - 1)))
    return fail(err, errlen, "hsaco: kernel '%s': .kernarg_segment_align %u is not a power of two", kn,
                out->kernarg_align);
  for (int i = 0; i < out->nargs; i++) {
    const dsv4_hsaco_arg *a = &out->args[i];
    if ((uint64_t)a->offset + a->size > out->kernarg_size)
      return fail(err, errlen,
                  "hsaco: kernel '%s': argument %d (%s) at offset %u of %u bytes ends past .kernarg_segment_size %u",
                  kn, i, a->value_kind, a->offset, a->size, out->kernarg_size);
  }
  return 0;
}

/* One amdhsa.kernels entry (a map at m) into out. */
static int entry_read(mp_reader *m, dsv4_hsaco_kernel *out, char *err, size_t errlen)
{
  mp_item e, k, v, name, symbol;
  mp_reader scan = *m;
  unsigned seen = 0;
  memset(out, 0, sizeof *out);
  memset(&symbol, 0, sizeof symbol);
  if (!entry_name(&scan, &name))
    return fail(err, errlen, "hsaco: an amdhsa.kernels entry is malformed");
  if (name.type != MP_STR)
    return fail(err, errlen, "hsaco: an amdhsa.kernels entry lacks .name");
  mp_copy(&name, out->name, sizeof out->name); /* first, for the messages below */
  const char *kn = out->name;
  if (!mp_next(m, &e) || e.type != MP_MAP)
    return fail(err, errlen, "hsaco: kernel '%s': its metadata is malformed", kn);
  for (uint64_t j = 0; j < e.len; j++) {
    if (!mp_next(m, &k) || !mp_skip_rest(m, &k, 2) || !mp_next(m, &v))
      return fail(err, errlen, "hsaco: kernel '%s': its metadata is malformed", kn);
    int key = kernel_key(&k);
    if (key >= 0 && seen & 1u << key)
      return fail(err, errlen, "hsaco: kernel '%s': its metadata has %.*s twice", kn, shown(&k), (const char *)k.str);
    if (key >= 0)
      seen |= 1u << key;
    if (key == K_ARGS) {
      if (read_args(m, &v, kn, out, err, errlen))
        return 1;
      continue; /* read_args took the elements */
    }
    if (key == K_SYMBOL && v.type != MP_STR)
      return fail(err, errlen, "hsaco: kernel '%s': .symbol is not a string", kn);
    if (key == K_SYMBOL)
      symbol = v;
    if (key >= 0 && key < NUFIELDS && !mp_u32(&v, (uint32_t *)((char *)out + UFIELDS[key].off)))
      return fail(err, errlen, "hsaco: kernel '%s': %s is not an unsigned 32-bit integer", kn, UFIELDS[key].key);
    if (!mp_skip_rest(m, &v, 2))
      return fail(err, errlen, "hsaco: kernel '%s': its metadata is malformed", kn);
  }
  return entry_complete(out, seen, &name, &symbol, err, errlen);
}

/* The entry named name (or, name NULL, entry index) into out. */
static int find_kernel(const unsigned char *elf, size_t len, const char *name, int index, dsv4_hsaco_kernel *out,
                       char *err, size_t errlen)
{
  elf_file f;
  md_top t;
  if (err && errlen > 0)
    err[0] = '\0';
  if (!out)
    return fail(err, errlen, "hsaco: nowhere to put the metadata");
  memset(out, 0, sizeof *out);
  if (name && !*name)
    return fail(err, errlen, "hsaco: no kernel named");
  if (read_top(elf, len, &f, &t, err, errlen))
    return 1;
  mp_reader m = t.kernels;
  for (uint64_t j = 0; j < t.nkernels; j++) {
    mp_reader at = m;
    mp_item nm;
    if (!entry_name(&m, &nm))
      return fail(err, errlen, "hsaco: amdhsa.kernels entry %llu is malformed", (unsigned long long)j);
    if (name ? mp_str_is(&nm, name) : j == (uint64_t)index)
      return entry_read(&at, out, err, errlen);
  }
  if (name)
    return fail(err, errlen, "hsaco: kernel '%s' is not in amdhsa.kernels", name);
  return fail(err, errlen, "hsaco: amdhsa.kernels has no entry %d (%llu entries)", index,
              (unsigned long long)t.nkernels);
}

/* See hsaco_meta.h. */
int dsv4_hsaco_kernel_meta(const unsigned char *elf, size_t len, const char *name, dsv4_hsaco_kernel *out, char *err,
                           size_t errlen)
{
  if (!name)
    return fail(err, errlen, "hsaco: no kernel named");
  return find_kernel(elf, len, name, 0, out, err, errlen);
}

/* See hsaco_meta.h. */
int dsv4_hsaco_kernel_at(const unsigned char *elf, size_t len, int i, dsv4_hsaco_kernel *out, char *err, size_t errlen)
{
  if (i < 0)
    return fail(err, errlen, "hsaco: amdhsa.kernels has no entry %d", i);
  return find_kernel(elf, len, NULL, i, out, err, errlen);
}

/* See hsaco_meta.h. */
uint32_t dsv4_hsaco_explicit_bytes(const dsv4_hsaco_kernel *m)
{
  uint64_t end = 0;
  for (int i = 0; i < m->nargs && m->args[i].kind != DSV4_HSACO_ARG_HIDDEN; i++)
    if ((uint64_t)m->args[i].offset + m->args[i].size > end)
      end = (uint64_t)m->args[i].offset + m->args[i].size;
  return end > UINT32_MAX ? UINT32_MAX : (uint32_t)end;
}

/* ---- the launch check ---- */

/* What a work-group may use on an arch.  Sources: LLVM 19's AMDGPU back end
 * (llvm/lib/Target/AMDGPU/Utils/AMDGPUBaseInfo.cpp, the processor table of
 * llvm/docs/AMDGPUUsage.rst) and AMD's CDNA2 (gfx90a) and CDNA3 (gfx942)
 * ISA guides; where llc-19 could say it, it was asked (docs/design.md).
 *   wave      64   AMDGPUUsage: gfx90a and gfx942 run wave64 only (no
 *                  wavefrontsize32 feature on GFX9)
 *   simds      4   getEUsPerCU: a GFX9 CU holds four SIMDs; a work-group's
 *                  waves are spread over them, ceil(waves / 4) on some one
 *   max_wg  1024   the largest flat work-group (AMDGPUUsage's
 *                  amdgpu-flat-work-group-size; targets/caps.c)
 *   lds    65536   a work-group's LDS (AMDGPU.td's 64 KiB local memory for
 *                  these; llc-19 refuses 65540 bytes for either: "local
 *                  memory (65540) exceeds limit (65536)")
 *   vgpr_file 512  getTotalNumVGPRs with FeatureGFX90AInsts: VGPRs and
 *                  AGPRs share one file of 512 registers a lane of a SIMD
 *   vgpr_each 256  at most 256 of each kind (the CDNA2 ISA guide, section
 *                  3.6.4, as LLVM commit b761137 quotes it)
 *   granule    8   getVGPRAllocGranule with FeatureGFX90AInsts
 *   sgprs    108   getAddressableNumSGPRs: 102 on GFX8-9, plus at most 6
 *                  that getNumExtraSGPRs adds (VCC, FLAT_SCRATCH,
 *                  XNACK_MASK), which .sgpr_count holds (llc-19 for gfx942:
 *                  a kernel that uses s101 has .sgpr_count 108, one that
 *                  uses s102 is refused).  The SIMD's 800 SGPRs hold 4
 *                  waves of that in granules of 16: never the bound here.
 * On these two .vgpr_count is already the unified file's count, AGPRs
 * included: AMDGPUBaseInfo's getTotalNumVGPRs gives alignup(arch VGPRs, 4)
 * + AGPRs, which the metadata writer stores (llc-19 for gfx90a and gfx942:
 * 9 VGPRs and 32 AGPRs give .vgpr_count 44, .agpr_count 32), so a wave
 * takes alignup(.vgpr_count, granule) registers of the file. */
typedef struct {
  const char *name;
  uint32_t wave, simds, max_wg, lds, vgpr_file, vgpr_each, granule, sgprs;
} arch_limits;

static const arch_limits ARCHS[] = {
    {"gfx90a", 64, 4, 1024, 65536, 512, 256, 8, 108},
    {"gfx942", 64, 4, 1024, 65536, 512, 256, 8, 108},
};

/* The limits of the processor part of gpu (before any ':'); NULL unknown. */
static const arch_limits *arch_of(const char *gpu)
{
  size_t base = strcspn(gpu, ":");
  for (size_t k = 0; k < sizeof ARCHS / sizeof ARCHS[0]; k++)
    if (strlen(ARCHS[k].name) == base && memcmp(ARCHS[k].name, gpu, base) == 0)
      return &ARCHS[k];
  return NULL;
}

/* How a dsv4_arg_kind is passed: its metadata kind and size; 0 for a
 * number that is no kind. */
static int kind_layout(unsigned kind, int *hk, uint32_t *size, const char **name)
{
  switch (kind) {
  case DSV4_ARG_PTR:
  case DSV4_ARG_IN:
    *hk = DSV4_HSACO_ARG_GLOBAL, *size = 8, *name = kind == DSV4_ARG_PTR ? "PTR" : "IN";
    return 1;
  case DSV4_ARG_I32:
  case DSV4_ARG_F32:
    *hk = DSV4_HSACO_ARG_VALUE, *size = 4, *name = kind == DSV4_ARG_I32 ? "I32" : "F32";
    return 1;
  case DSV4_ARG_I64:
    *hk = DSV4_HSACO_ARG_VALUE, *size = 8, *name = "I64";
    return 1;
  default:
    return 0;
  }
}

static const char *hk_name(int hk) { return hk == DSV4_HSACO_ARG_GLOBAL ? "global_buffer" : "by_value"; }

/* The explicit arguments against kinds[0..nargs), and what follows them. */
static int args_agree(const dsv4_hsaco_kernel *m, const uint8_t *kinds, int nargs, char *err, size_t errlen)
{
  uint64_t end = 0;
  for (int i = 0; i < nargs; i++) {
    int hk;
    uint32_t size;
    const char *kname;
    if (!kind_layout(kinds[i], &hk, &size, &kname))
      return fail(err, errlen, "kernel '%s': argument %d has kind %u, which is no dsv4_arg_kind", m->name, i, kinds[i]);
    uint64_t at = (end + size - 1) / size * size; /* its natural alignment */
    if (i >= m->nargs)
      return fail(err, errlen, "kernel '%s': the code object has %d arguments, the launch passes %d", m->name, m->nargs,
                  nargs);
    const dsv4_hsaco_arg *a = &m->args[i];
    if (a->kind != hk || a->size != size || a->offset != at)
      return fail(err, errlen,
                  "kernel '%s': argument %d is %s of %u bytes at offset %u in the code object; the launch passes "
                  "%s (%s of %u bytes) at offset %llu",
                  m->name, i, a->value_kind, a->size, a->offset, kname, hk_name(hk), size, (unsigned long long)at);
    end = at + size;
  }
  for (int i = nargs; i < m->nargs; i++) {
    const dsv4_hsaco_arg *a = &m->args[i];
    if (a->kind != DSV4_HSACO_ARG_HIDDEN)
      return fail(err, errlen,
                  "kernel '%s': argument %d of the code object (%s) follows the launch's %d explicit arguments "
                  "and is not a hidden one",
                  m->name, i, a->value_kind, nargs);
    if (a->offset < end)
      return fail(err, errlen,
                  "kernel '%s': hidden argument %d (%s) at offset %u overlaps the explicit ones (%llu bytes)", m->name,
                  i, a->value_kind, a->offset, (unsigned long long)end);
  }
  for (int i = 0; i < m->nargs; i++)
    if ((uint64_t)m->args[i].offset + m->args[i].size > m->kernarg_size)
      return fail(err, errlen, "kernel '%s': argument %d (%s) ends past .kernarg_segment_size %u", m->name, i,
                  m->args[i].value_kind, m->kernarg_size);
  return 0;
}

/* The registers a work-group of `threads` needs on each SIMD against the
 * file (see ARCHS). */
static int regs_fit(const dsv4_hsaco_kernel *m, const arch_limits *l, uint32_t threads, char *err, size_t errlen)
{
  if (m->agprs > m->vgprs)
    return fail(err, errlen, "kernel '%s': .agpr_count %u is more than .vgpr_count %u, which holds them on %s", m->name,
                m->agprs, m->vgprs, l->name);
  if (m->agprs > l->vgpr_each || m->vgprs - m->agprs > l->vgpr_each)
    return fail(err, errlen, "kernel '%s': %u VGPRs and %u AGPRs (.vgpr_count %u): %s addresses at most %u of each",
                m->name, m->vgprs - m->agprs, m->agprs, m->vgprs, l->name, l->vgpr_each);
  uint32_t waves = (threads + l->wave - 1) / l->wave, per_simd = (waves + l->simds - 1) / l->simds;
  uint32_t per_wave = (m->vgprs + l->granule - 1) / l->granule * l->granule;
  if ((uint64_t)per_simd * per_wave > l->vgpr_file)
    return fail(err, errlen,
                "kernel '%s': %u threads put %u waves on a SIMD, each taking %u registers (.vgpr_count %u in "
                "granules of %u): more than the %u a SIMD lane of %s has",
                m->name, threads, per_simd, per_wave, m->vgprs, l->granule, l->vgpr_file, l->name);
  if (m->sgprs > l->sgprs)
    return fail(err, errlen, "kernel '%s': .sgpr_count %u is more than the %u SGPRs a wave of %s has", m->name,
                m->sgprs, l->sgprs, l->name);
  return 0;
}

/* See hsaco_meta.h. */
int dsv4_hsaco_launch_agrees(const dsv4_hsaco_kernel *m, const char *gpu, const uint8_t *kinds, int nargs,
                             uint32_t threads, uint32_t dyn_shared, char *err, size_t errlen)
{
  if (err && errlen > 0)
    err[0] = '\0';
  if (!m)
    return fail(err, errlen, "hsaco: no kernel metadata");
  const arch_limits *l = gpu ? arch_of(gpu) : NULL;
  if (!l)
    return fail(err, errlen, "kernel '%s': unknown gpu '%s' (the launch check knows gfx90a and gfx942)", m->name,
                gpu ? gpu : "");
  if (nargs < 0 || nargs > DSV4_HSACO_MAX_ARGS || (nargs > 0 && !kinds) || m->nargs < 0 ||
      m->nargs > DSV4_HSACO_MAX_ARGS)
    return fail(err, errlen, "kernel '%s': %d arguments in the launch, %d in the metadata: out of range", m->name,
                nargs, m->nargs);
  if (m->wavefront != l->wave)
    return fail(err, errlen, "kernel '%s': .wavefront_size is %u, %s runs waves of %u", m->name, m->wavefront, l->name,
                l->wave);
  if (args_agree(m, kinds, nargs, err, errlen))
    return 1;
  if (threads < 1 || threads > l->max_wg || threads > m->max_flat_workgroup)
    return fail(err, errlen,
                "kernel '%s': the launch record's %u threads a work-group are not within .max_flat_workgroup_size "
                "%u (%s: at most %u)",
                m->name, threads, m->max_flat_workgroup, l->name, l->max_wg);
  if ((uint64_t)m->group_segment + dyn_shared > l->lds)
    return fail(err, errlen,
                "kernel '%s': %u bytes of static LDS (.group_segment_fixed_size) and the launch record's %u dynamic "
                "are more than the %u a work-group of %s has",
                m->name, m->group_segment, dyn_shared, l->lds, l->name);
  return regs_fit(m, l, threads, err, errlen);
}
