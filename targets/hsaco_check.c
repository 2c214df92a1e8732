/* hsaco_check.c -- static validation of an AMDGPU HSA code object.
 *
 * Layout knowledge comes from the ELF gABI and LLVM's AMDGPUUsage ("Code
 * Object V4/V5 Metadata"): the metadata is a MessagePack map in a note with
 * owner "AMDGPU" and type NT_AMDGPU_METADATA.  EF_AMDGPU_MACH values are
 * those of llvm/BinaryFormat/ELF.h in LLVM 19.  All reads go through
 * bounds-checked helpers over (pointer, length); offsets are 64-bit and
 * every sum is checked against the buffer before it is used.
 */
#include "hsaco_check.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define EM_AMDGPU 224
#define ELFOSABI_AMDGPU_HSA 64
#define ET_DYN 3
#define PT_NOTE 4
#define SHT_SYMTAB 2
#define SHT_STRTAB 3
#define SHT_NOTE 7
#define SHT_DYNSYM 11
#define STT_OBJECT 1
#define STT_FUNC 2
#define NT_AMDGPU_METADATA 32
#define EF_AMDGPU_MACH 0xffu
#define KERNEL_DESCRIPTOR_SIZE 64
#define MP_MAX_DEPTH 32

typedef struct {
  const unsigned char *p;
  size_t n;
} span;

/* Is [off, off+size) inside a buffer of n bytes (no overflow)? */
static int in_range(size_t n, uint64_t off, uint64_t size) {
  return off <= (uint64_t)n && size <= (uint64_t)n - off;
}

/* Little-endian unsigned of `bytes` bytes at off; 0 when out of range. */
static int rd_le(const span *b, uint64_t off, int bytes, uint64_t *v) {
  int k;
  if (!in_range(b->n, off, (uint64_t)bytes)) return 0;
  *v = 0;
  for (k = bytes - 1; k >= 0; k--) *v = (*v << 8) | b->p[off + (uint64_t)k];
  return 1;
}

/* Format a one-line message into err and return 1 (the failure code). */
static int fail(char *err, size_t errlen, const char *fmt, ...) {
  va_list ap;
  if (err && errlen > 0) {
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
  }
  return 1;
}

/* Processor names and EF_AMDGPU_MACH_* values (LLVM 19 ELF.h). */
static const struct {
  const char *name;
  unsigned mach;
} MACHS[] = {
    {"gfx600", 0x20},  {"gfx601", 0x21},  {"gfx700", 0x22},
    {"gfx701", 0x23},  {"gfx702", 0x24},  {"gfx703", 0x25},
    {"gfx704", 0x26},  {"gfx801", 0x28},  {"gfx802", 0x29},
    {"gfx803", 0x2a},  {"gfx810", 0x2b},  {"gfx900", 0x2c},
    {"gfx902", 0x2d},  {"gfx904", 0x2e},  {"gfx906", 0x2f},
    {"gfx908", 0x30},  {"gfx909", 0x31},  {"gfx90c", 0x32},
    {"gfx1010", 0x33}, {"gfx1011", 0x34}, {"gfx1012", 0x35},
    {"gfx1030", 0x36}, {"gfx1031", 0x37}, {"gfx1032", 0x38},
    {"gfx1033", 0x39}, {"gfx602", 0x3a},  {"gfx705", 0x3b},
    {"gfx805", 0x3c},  {"gfx1035", 0x3d}, {"gfx1034", 0x3e},
    {"gfx90a", 0x3f},  {"gfx940", 0x40},  {"gfx1100", 0x41},
    {"gfx1013", 0x42}, {"gfx1150", 0x43}, {"gfx1103", 0x44},
    {"gfx1036", 0x45}, {"gfx1101", 0x46}, {"gfx1102", 0x47},
    {"gfx1200", 0x48}, {"gfx1151", 0x4a}, {"gfx941", 0x4b},
    {"gfx942", 0x4c},  {"gfx1201", 0x4e}, {"gfx9-generic", 0x51},
    {"gfx10-1-generic", 0x52}, {"gfx10-3-generic", 0x53},
    {"gfx11-generic", 0x54},   {"gfx1152", 0x55},
    {"gfx12-generic", 0x59},
};

/* EF_AMDGPU_MACH value of the processor part of gpu (before any ':'), or
 * -1 when unknown. */
static int gpu_mach(const char *gpu) {
  size_t k, base = strcspn(gpu, ":");
  for (k = 0; k < sizeof MACHS / sizeof MACHS[0]; k++) {
    if (strlen(MACHS[k].name) == base && memcmp(MACHS[k].name, gpu, base) == 0)
      return (int)MACHS[k].mach;
  }
  return -1;
}

/* Processor name for a mach value, for messages. */
static const char *mach_name(unsigned mach) {
  size_t k;
  for (k = 0; k < sizeof MACHS / sizeof MACHS[0]; k++)
    if (MACHS[k].mach == mach) return MACHS[k].name;
  return "unknown";
}

/* ---- MessagePack reader (bounded; no allocation) ---- */

enum { MP_NIL, MP_BOOL, MP_UINT, MP_INT, MP_FLOAT, MP_STR, MP_BIN, MP_EXT,
       MP_ARRAY, MP_MAP };

typedef struct {
  span b;
  uint64_t i; /* next byte */
} mp_reader;

typedef struct {
  int type;                /* MP_* */
  uint64_t u;              /* MP_UINT value, MP_BOOL 0/1 */
  int64_t s;               /* MP_INT value */
  const unsigned char *str; /* MP_STR/MP_BIN/MP_EXT payload */
  uint64_t len;            /* payload length, or element count (array/map) */
} mp_item;

/* Read a big-endian unsigned of `bytes` bytes (MessagePack is big-endian). */
static int mp_be(mp_reader *m, int bytes, uint64_t *v) {
  int k;
  if (!in_range(m->b.n, m->i, (uint64_t)bytes)) return 0;
  *v = 0;
  for (k = 0; k < bytes; k++) *v = (*v << 8) | m->b.p[m->i + (uint64_t)k];
  m->i += (uint64_t)bytes;
  return 1;
}

/* Consume a payload of len bytes (string, binary, extension). */
static int mp_payload(mp_reader *m, uint64_t len, mp_item *it) {
  if (!in_range(m->b.n, m->i, len)) return 0;
  it->str = m->b.p + m->i;
  it->len = len;
  m->i += len;
  return 1;
}

/* Read one item header; scalars and byte payloads are consumed whole, for
 * arrays and maps only the header (it->len holds the element count). */
static int mp_next(mp_reader *m, mp_item *it) {
  uint64_t v;
  unsigned c;
  memset(it, 0, sizeof *it);
  if (!in_range(m->b.n, m->i, 1)) return 0;
  c = m->b.p[m->i++];
  if (c <= 0x7f) { it->type = MP_UINT; it->u = c; return 1; }
  if (c >= 0xe0) { it->type = MP_INT; it->s = (int64_t)c - 256; return 1; }
  if (c >= 0x80 && c <= 0x8f) { it->type = MP_MAP; it->len = c & 0xf; return 1; }
  if (c >= 0x90 && c <= 0x9f) { it->type = MP_ARRAY; it->len = c & 0xf; return 1; }
  if (c >= 0xa0 && c <= 0xbf) { it->type = MP_STR; return mp_payload(m, c & 0x1f, it); }
  switch (c) {
    case 0xc0: it->type = MP_NIL; return 1;
    case 0xc2: case 0xc3: it->type = MP_BOOL; it->u = c & 1; return 1;
    case 0xc4: case 0xc5: case 0xc6:
      it->type = MP_BIN;
      return mp_be(m, 1 << (c - 0xc4), &v) && mp_payload(m, v, it);
    case 0xc7: case 0xc8: case 0xc9:
      it->type = MP_EXT; /* length, then a type byte, then the payload */
      return mp_be(m, 1 << (c - 0xc7), &v) && mp_be(m, 1, &it->u) &&
             mp_payload(m, v, it);
    case 0xca: it->type = MP_FLOAT; return mp_be(m, 4, &v);
    case 0xcb: it->type = MP_FLOAT; return mp_be(m, 8, &v);
    case 0xcc: case 0xcd: case 0xce: case 0xcf:
      it->type = MP_UINT;
      return mp_be(m, 1 << (c - 0xcc), &it->u);
    case 0xd0: case 0xd1: case 0xd2: case 0xd3: {
      int bytes = 1 << (c - 0xd0);
      if (!mp_be(m, bytes, &v)) return 0;
      it->type = MP_INT;
      if (bytes < 8 && (v >> (bytes * 8 - 1)) & 1) v |= ~((UINT64_C(1) << (bytes * 8)) - 1);
      it->s = (int64_t)v;
      return 1;
    }
    case 0xd4: case 0xd5: case 0xd6: case 0xd7: case 0xd8:
      it->type = MP_EXT;
      return mp_be(m, 1, &it->u) && mp_payload(m, (uint64_t)1 << (c - 0xd4), it);
    case 0xd9: case 0xda: case 0xdb:
      it->type = MP_STR;
      return mp_be(m, 1 << (c - 0xd9), &v) && mp_payload(m, v, it);
    case 0xdc: case 0xdd:
      it->type = MP_ARRAY;
      return mp_be(m, 2 << (c - 0xdc), &it->len);
    case 0xde: case 0xdf:
      it->type = MP_MAP;
      return mp_be(m, 2 << (c - 0xde), &it->len);
    default:
      return 0; /* 0xc1 is never used */
  }
}

static int mp_skip(mp_reader *m, int depth);

/* Skip the children of an item whose header was just read. */
static int mp_skip_rest(mp_reader *m, const mp_item *it, int depth) {
  uint64_t k, n;
  if (it->type != MP_ARRAY && it->type != MP_MAP) return 1;
  if (depth >= MP_MAX_DEPTH) return 0;
  n = it->type == MP_MAP ? it->len * 2 : it->len; /* len < 2^32: no overflow */
  for (k = 0; k < n; k++) /* each child takes >= 1 byte, so this ends */
    if (!mp_skip(m, depth + 1)) return 0;
  return 1;
}

/* Skip one complete item (header and children). */
static int mp_skip(mp_reader *m, int depth) {
  mp_item it;
  return mp_next(m, &it) && mp_skip_rest(m, &it, depth);
}

/* Is it a string equal to the NUL-terminated s? */
static int mp_str_is(const mp_item *it, const char *s) {
  size_t n = strlen(s);
  return it->type == MP_STR && it->len == n && memcmp(it->str, s, n) == 0;
}

/* What one amdhsa.kernels entry says about itself. */
typedef struct {
  mp_item name, symbol;
  int have_name, have_symbol;
  int have_kernarg, have_group, have_maxwg;
} kernel_md;

/* Parse one amdhsa.kernels entry (a map) into md. */
static int parse_kernel_md(mp_reader *m, kernel_md *md) {
  mp_item e, k, v;
  uint64_t j;
  memset(md, 0, sizeof *md);
  if (!mp_next(m, &e) || e.type != MP_MAP) return 0;
  for (j = 0; j < e.len; j++) {
    if (!mp_next(m, &k) || !mp_skip_rest(m, &k, 2)) return 0;
    if (!mp_next(m, &v)) return 0;
    if (mp_str_is(&k, ".name") && v.type == MP_STR) {
      md->name = v;
      md->have_name = 1;
    } else if (mp_str_is(&k, ".symbol") && v.type == MP_STR) {
      md->symbol = v;
      md->have_symbol = 1;
    } else if (v.type == MP_UINT || v.type == MP_INT) {
      if (mp_str_is(&k, ".kernarg_segment_size")) md->have_kernarg = 1;
      if (mp_str_is(&k, ".group_segment_fixed_size")) md->have_group = 1;
      if (mp_str_is(&k, ".max_flat_workgroup_size")) md->have_maxwg = 1;
    }
    if (!mp_skip_rest(m, &v, 2)) return 0;
  }
  return 1;
}

/* Does md's .symbol equal md's .name followed by ".kd"? */
static int symbol_is_name_kd(const kernel_md *md) {
  return md->symbol.len == md->name.len + 3 &&
         memcmp(md->symbol.str, md->name.str, (size_t)md->name.len) == 0 &&
         memcmp(md->symbol.str + md->name.len, ".kd", 3) == 0;
}

/* Print at most 64 bytes of a metadata string safely into a message. */
static int shown_len(const mp_item *it) {
  return it->len > 64 ? 64 : (int)it->len;
}

/* Check the metadata map: target string, kernel entries, named kernels. */
static int check_metadata(const unsigned char *desc, uint64_t dlen,
                          const char *gpu, const char *const *kernels,
                          int nkernels, char *err, size_t errlen) {
  static const char prefix[] = "amdgcn-amd-amdhsa--";
  mp_reader m, km;
  mp_item top, k, v, target;
  uint64_t j, nk = 0;
  int have_target = 0, have_kernels = 0, i;
  size_t plen = sizeof prefix - 1, glen = strlen(gpu);

  m.b.p = desc;
  m.b.n = (size_t)dlen;
  m.i = 0;
  memset(&target, 0, sizeof target);
  km = m;
  if (!mp_next(&m, &top) || top.type != MP_MAP)
    return fail(err, errlen, "hsaco: metadata note is not a MessagePack map");
  for (j = 0; j < top.len; j++) {
    if (!mp_next(&m, &k) || !mp_skip_rest(&m, &k, 1))
      return fail(err, errlen, "hsaco: malformed MessagePack metadata");
    if (mp_str_is(&k, "amdhsa.target")) {
      if (!mp_next(&m, &v) || v.type != MP_STR)
        return fail(err, errlen, "hsaco: amdhsa.target is not a string");
      target = v;
      have_target = 1;
    } else if (mp_str_is(&k, "amdhsa.kernels")) {
      km = m;
      if (!mp_next(&m, &v) || v.type != MP_ARRAY)
        return fail(err, errlen, "hsaco: amdhsa.kernels is not an array");
      nk = v.len;
      have_kernels = 1;
      if (!mp_skip_rest(&m, &v, 1))
        return fail(err, errlen, "hsaco: malformed MessagePack metadata");
    } else if (!mp_skip(&m, 1)) {
      return fail(err, errlen, "hsaco: malformed MessagePack metadata");
    }
  }
  if (!have_target) return fail(err, errlen, "hsaco: metadata has no amdhsa.target");
  if (target.len < plen + glen || memcmp(target.str, prefix, plen) != 0 ||
      memcmp(target.str + plen, gpu, glen) != 0 ||
      (target.len > plen + glen && target.str[plen + glen] != ':'))
    return fail(err, errlen, "hsaco: amdhsa.target is '%.*s', expected '%s%s'",
                shown_len(&target), (const char *)target.str, prefix, gpu);
  if (!have_kernels) return fail(err, errlen, "hsaco: metadata has no amdhsa.kernels");

  /* Every entry must be complete and consistent. */
  m = km;
  if (!mp_next(&m, &v)) return fail(err, errlen, "hsaco: malformed metadata");
  for (j = 0; j < nk; j++) {
    kernel_md md;
    if (!parse_kernel_md(&m, &md))
      return fail(err, errlen, "hsaco: amdhsa.kernels entry %u is malformed",
                  (unsigned)j);
    if (!md.have_name || !md.have_symbol)
      return fail(err, errlen, "hsaco: amdhsa.kernels entry %u lacks .name or .symbol",
                  (unsigned)j);
    if (!symbol_is_name_kd(&md))
      return fail(err, errlen, "hsaco: kernel '%.*s' has .symbol '%.*s', expected '%.*s.kd'",
                  shown_len(&md.name), (const char *)md.name.str,
                  shown_len(&md.symbol), (const char *)md.symbol.str,
                  shown_len(&md.name), (const char *)md.name.str);
    if (!md.have_kernarg || !md.have_group || !md.have_maxwg)
      return fail(err, errlen,
                  "hsaco: kernel '%.*s' lacks %s in its metadata",
                  shown_len(&md.name), (const char *)md.name.str,
                  !md.have_kernarg ? ".kernarg_segment_size"
                  : !md.have_group ? ".group_segment_fixed_size"
                                   : ".max_flat_workgroup_size");
  }

  /* Every named kernel must have an entry. */
  for (i = 0; i < nkernels; i++) {
    int found = 0;
    m = km;
    if (!mp_next(&m, &v)) return fail(err, errlen, "hsaco: malformed metadata");
    for (j = 0; j < nk && !found; j++) {
      kernel_md md;
      if (!parse_kernel_md(&m, &md))
        return fail(err, errlen, "hsaco: malformed metadata");
      found = mp_str_is(&md.name, kernels[i]);
    }
    if (!found)
      return fail(err, errlen, "hsaco: kernel '%s' is not in amdhsa.kernels",
                  kernels[i]);
  }
  return 0;
}

/* ---- ELF ---- */

typedef struct {
  uint32_t type, link;
  uint64_t off, size, align, entsize;
} shdr;

typedef struct {
  span b;
  uint64_t shoff, phoff;
  unsigned shnum, phnum, shentsize, phentsize;
} elf_file;

/* Read section header i (bounds of the table were checked by the caller). */
static int get_shdr(const elf_file *f, unsigned i, shdr *sh) {
  uint64_t base = f->shoff + (uint64_t)i * f->shentsize, v;
  if (!rd_le(&f->b, base + 4, 4, &v)) return 0;
  sh->type = (uint32_t)v;
  if (!rd_le(&f->b, base + 24, 8, &sh->off)) return 0;
  if (!rd_le(&f->b, base + 32, 8, &sh->size)) return 0;
  if (!rd_le(&f->b, base + 40, 4, &v)) return 0;
  sh->link = (uint32_t)v;
  if (!rd_le(&f->b, base + 48, 8, &sh->align)) return 0;
  return rd_le(&f->b, base + 56, 8, &sh->entsize);
}

/* Search the notes in [off, off+size) for the AMDGPU metadata note.
 * Returns 1 found (desc/dlen set), 0 not there, -1 malformed. */
static int find_note(const span *b, uint64_t off, uint64_t size,
                     uint64_t align, const unsigned char **desc,
                     uint64_t *dlen) {
  uint64_t p = off, end, a = align == 8 ? 8 : 4;
  if (!in_range(b->n, off, size)) return -1;
  end = off + size;
  while (end - p >= 12) {
    uint64_t namesz, descsz, type, name_off, desc_off, next;
    if (!rd_le(b, p, 4, &namesz) || !rd_le(b, p + 4, 4, &descsz) ||
        !rd_le(b, p + 8, 4, &type))
      return -1;
    name_off = p + 12;
    desc_off = name_off + ((namesz + a - 1) & ~(a - 1));
    next = desc_off + ((descsz + a - 1) & ~(a - 1));
    if (namesz > end - name_off || desc_off > end || descsz > end - desc_off)
      return -1;
    if (type == NT_AMDGPU_METADATA &&
        ((namesz == 7 && memcmp(b->p + name_off, "AMDGPU", 7) == 0) ||
         (namesz == 6 && memcmp(b->p + name_off, "AMDGPU", 6) == 0))) {
      *desc = b->p + desc_off;
      *dlen = descsz;
      return 1;
    }
    if (next >= end) break;
    p = next;
  }
  return 0;
}

/* Locate the metadata note through SHT_NOTE sections, else PT_NOTE
 * segments.  Returns 1 found, 0 absent, -1 malformed. */
static int locate_metadata(const elf_file *f, const unsigned char **desc,
                           uint64_t *dlen) {
  unsigned i;
  int r;
  for (i = 0; i < f->shnum; i++) {
    shdr sh;
    if (!get_shdr(f, i, &sh)) return -1;
    if (sh.type != SHT_NOTE) continue;
    r = find_note(&f->b, sh.off, sh.size, sh.align, desc, dlen);
    if (r != 0) return r;
  }
  for (i = 0; i < f->phnum; i++) {
    uint64_t base = f->phoff + (uint64_t)i * f->phentsize, type, off, sz, al;
    if (!rd_le(&f->b, base, 4, &type) || !rd_le(&f->b, base + 8, 8, &off) ||
        !rd_le(&f->b, base + 32, 8, &sz) || !rd_le(&f->b, base + 48, 8, &al))
      return -1;
    if (type != PT_NOTE) continue;
    r = find_note(&f->b, off, sz, al, desc, dlen);
    if (r != 0) return r;
  }
  return 0;
}

/* Does the NUL-terminated string at strtab offset `name` (inside a string
 * table of strsz bytes at stroff) equal want, optionally followed by
 * suffix? */
static int strtab_eq(const span *b, uint64_t stroff, uint64_t strsz,
                     uint64_t name, const char *want, const char *suffix) {
  size_t wl = strlen(want), sl = strlen(suffix);
  uint64_t need = (uint64_t)wl + sl + 1;
  const unsigned char *s;
  if (name >= strsz || need > strsz - name) return 0;
  s = b->p + stroff + name;
  return memcmp(s, want, wl) == 0 && memcmp(s + wl, suffix, sl) == 0 &&
         s[wl + sl] == '\0';
}

/* Find a defined symbol want+suffix of type stt in any symbol table; when
 * need_size is nonzero its st_size must equal it.  Returns 1 found, 0 not,
 * -1 when a symbol table is malformed. */
static int find_symbol(const elf_file *f, const char *want,
                       const char *suffix, unsigned stt, uint64_t need_size) {
  unsigned i;
  for (i = 0; i < f->shnum; i++) {
    shdr sh, st;
    uint64_t k, count;
    if (!get_shdr(f, i, &sh)) return -1;
    if (sh.type != SHT_SYMTAB && sh.type != SHT_DYNSYM) continue;
    if (sh.entsize != 24 || !in_range(f->b.n, sh.off, sh.size) ||
        sh.link >= f->shnum || !get_shdr(f, sh.link, &st) ||
        st.type != SHT_STRTAB || !in_range(f->b.n, st.off, st.size))
      return -1;
    count = sh.size / 24;
    for (k = 0; k < count; k++) {
      uint64_t e = sh.off + k * 24, name, info, shndx, size;
      if (!rd_le(&f->b, e, 4, &name) || !rd_le(&f->b, e + 4, 1, &info) ||
          !rd_le(&f->b, e + 6, 2, &shndx) || !rd_le(&f->b, e + 16, 8, &size))
        return -1;
      if ((info & 0xf) != stt || shndx == 0) continue;
      if (need_size && size != need_size) continue;
      if (strtab_eq(&f->b, st.off, st.size, name, want, suffix)) return 1;
    }
  }
  return 0;
}

/* See hsaco_check.h. */
int dsv4_hsaco_check(const unsigned char *elf, size_t len, const char *gpu,
                     const char *const *kernels, int nkernels, char *err,
                     size_t errlen) {
  elf_file f;
  uint64_t v, flags;
  const unsigned char *desc = NULL;
  uint64_t dlen = 0;
  int mach, r, i;

  if (err && errlen > 0) err[0] = '\0';
  if (!gpu || !*gpu) return fail(err, errlen, "hsaco: no gpu named");
  if (nkernels < 0 || (nkernels > 0 && !kernels))
    return fail(err, errlen, "hsaco: bad kernel list");
  for (i = 0; i < nkernels; i++)
    if (!kernels[i] || !*kernels[i])
      return fail(err, errlen, "hsaco: kernel name %d is empty", i);
  mach = gpu_mach(gpu);
  if (mach < 0) return fail(err, errlen, "hsaco: unknown gpu '%s'", gpu);
  if (!elf || len < 64)
    return fail(err, errlen, "hsaco: %lu bytes is too small for an ELF64 header",
                (unsigned long)len);
  f.b.p = elf;
  f.b.n = len;
  if (memcmp(elf, "\x7f" "ELF", 4) != 0)
    return fail(err, errlen, "hsaco: not an ELF file (bad magic)");
  if (elf[4] != 2) return fail(err, errlen, "hsaco: not ELFCLASS64");
  if (elf[5] != 1) return fail(err, errlen, "hsaco: not little-endian");
  if (elf[6] != 1) return fail(err, errlen, "hsaco: bad ELF ident version %u", elf[6]);
  if (elf[7] != ELFOSABI_AMDGPU_HSA)
    return fail(err, errlen, "hsaco: OS ABI %u is not ELFOSABI_AMDGPU_HSA (64)", elf[7]);
  if (elf[8] != 2 && elf[8] != 3)
    return fail(err, errlen,
                "hsaco: ABI version %u is not code object v4 (2) or v5 (3)", elf[8]);
  rd_le(&f.b, 16, 2, &v);
  if (v != ET_DYN) return fail(err, errlen, "hsaco: e_type %u is not ET_DYN", (unsigned)v);
  rd_le(&f.b, 18, 2, &v);
  if (v != EM_AMDGPU)
    return fail(err, errlen, "hsaco: e_machine %u is not EM_AMDGPU (224)", (unsigned)v);
  rd_le(&f.b, 20, 4, &v);
  if (v != 1) return fail(err, errlen, "hsaco: e_version %u is not 1", (unsigned)v);
  rd_le(&f.b, 48, 4, &flags);
  if ((flags & EF_AMDGPU_MACH) != (unsigned)mach)
    return fail(err, errlen,
                "hsaco: e_flags processor 0x%02x (%s) does not match %s (0x%02x)",
                (unsigned)(flags & EF_AMDGPU_MACH),
                mach_name((unsigned)(flags & EF_AMDGPU_MACH)), gpu, (unsigned)mach);

  rd_le(&f.b, 32, 8, &f.phoff);
  rd_le(&f.b, 40, 8, &f.shoff);
  rd_le(&f.b, 54, 2, &v);
  f.phentsize = (unsigned)v;
  rd_le(&f.b, 56, 2, &v);
  f.phnum = (unsigned)v;
  rd_le(&f.b, 58, 2, &v);
  f.shentsize = (unsigned)v;
  rd_le(&f.b, 60, 2, &v);
  f.shnum = (unsigned)v;
  if (f.phnum > 0 && (f.phentsize < 56 ||
                      !in_range(len, f.phoff, (uint64_t)f.phnum * f.phentsize)))
    return fail(err, errlen, "hsaco: program header table out of range");
  if (f.shnum == 0) return fail(err, errlen, "hsaco: no section headers");
  if (f.shentsize < 64 || !in_range(len, f.shoff, (uint64_t)f.shnum * f.shentsize))
    return fail(err, errlen, "hsaco: section header table out of range");

  r = locate_metadata(&f, &desc, &dlen);
  if (r < 0) return fail(err, errlen, "hsaco: malformed note section or segment");
  if (r == 0) return fail(err, errlen, "hsaco: no AMDGPU NT_AMDGPU_METADATA note");
  if (check_metadata(desc, dlen, gpu, kernels, nkernels, err, errlen)) return 1;

  for (i = 0; i < nkernels; i++) {
    r = find_symbol(&f, kernels[i], ".kd", STT_OBJECT, KERNEL_DESCRIPTOR_SIZE);
    if (r < 0) return fail(err, errlen, "hsaco: malformed symbol table");
    if (r == 0)
      return fail(err, errlen,
                  "hsaco: no defined %d-byte STT_OBJECT symbol '%s.kd'",
                  KERNEL_DESCRIPTOR_SIZE, kernels[i]);
    r = find_symbol(&f, kernels[i], "", STT_FUNC, 0);
    if (r < 0) return fail(err, errlen, "hsaco: malformed symbol table");
    if (r == 0)
      return fail(err, errlen, "hsaco: no defined STT_FUNC symbol '%s'", kernels[i]);
  }
  return 0;
}
