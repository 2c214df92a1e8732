/* test_bundle.c -- the bundle format (dsv4_abi.h) and its reader (rt.c),
 * without a device.
 *
 *   test_bundle SPECS_DIR [BUNDLE...]
 *
 * Builds a bundle in memory with the real writer (compiler/bundle.c) from
 * the kernels of SPECS_DIR/{decode,sparse_decode,indexer,insert}.lua, each
 * target's code a stand-in (the reader never loads code), with two choice
 * records (bundle version 7: a decode's and a logits' winner), and opens it
 * with the real reader on a stub context (rt.h: opening touches no backend).
 * Then, one at a time, each mutation of the table below: a hostile or
 * corrupted header, entry or choice record field (with the checksum made good again where
 * the case means to get past it) must be refused with the status and a
 * message naming the field (and the entry).  Every BUNDLE listed (those the
 * build wrote with dsv4c) must open: the reader takes all the compiler
 * emits; each of its entries, alone, with its launch record's threads or
 * tokens_per_cta changed, must not (check_record_mutants).  Paths that are
 * not bundle files (a FIFO, /dev/zero, a directory, a file shorter than
 * its header says) are refused at once, each in a child process that a
 * blocked or endless read would leave running past its alarm.
 * Exit 0 when every check passed.
 */
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bundle.h"
#include "choice.h"
#include "rt.h"
#include "spec.h"

static int passed, failed;
static dsv4rt_context stub; /* no backend: the reader only writes its message */

/* Record one check. */
static void check(int ok, const char *what, const char *detail)
{
  if (ok)
    passed++;
  else {
    failed++;
    printf("FAIL %s%s%s\n", what, detail && *detail ? ": " : "", detail ? detail : "");
  }
}

/* ---- the base bundle: the real writer over real specs ---- */

static dsv4_plan plans[4];
static dsv4_bundle_item items[DSV4_BUNDLE_MAX_ENTRIES];
static dsv4_artifact arts[DSV4_BUNDLE_MAX_ENTRIES];
static int nitems;

/* A stand-in artifact for item i: code of no NUL byte and of a length that
 * leaves padding after it; for spirv, the smallest well-formed modules the
 * reader's code checks take (runtime/src/code_check.c): SPIR-V of a header,
 * an OpCapability and i % 7 OpNops, and as its SPIR fallback LLVM bitcode
 * of one empty module block; the flags the generator gives the
 * warp-matrix decode on sm_90a. */
static void fake_artifact(int i, const dsv4_kernel *k, dsv4_target_kind t, dsv4_artifact *a)
{
  memset(a, 0, sizeof *a);
  if (t == DSV4_TARGET_SPIRV) {
    uint32_t w[14] = {0x07230203u, 0x00010000u, 0, 1, 0, 2u << 16 | 17, 4}; /* ..., OpCapability Addresses */
    int nw = 7 + i % 7;
    for (int j = 7; j < nw; j++)
      w[j] = 1u << 16; /* OpNop */
    /* 'BC' 0xC0DE; ENTER_SUBBLOCK (abbreviation id 1 of 2 bits), block 8 (VBR8), width 2 (VBR4); a length
     * word of 1; END_BLOCK, aligned */
    static const uint8_t bc[16] = {'B', 'C', 0xC0, 0xDE, 0x21, 0x08, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    a->code_len = (size_t)nw * 4;
    a->code = malloc(a->code_len);
    memcpy(a->code, w, a->code_len);
    a->aux_len = sizeof bc;
    a->aux = malloc(a->aux_len);
    memcpy(a->aux, bc, sizeof bc);
  } else {
    a->code_len = 100 + 13 * (size_t)i;
    a->code = malloc(a->code_len);
    for (size_t j = 0; j < a->code_len; j++)
      a->code[j] = (unsigned char)('a' + (i + j) % 26);
  }
  if (k->op == DSV4_OP_SPARSE_DECODE && k->tile.matrix && !strcmp(k->target[t].arch, "sm_90a"))
    a->flags = DSV4_ENTRY_FIRST_WAITS | DSV4_ENTRY_SECOND_WAITS;
}

/* Every (kernel, target) of the specs, each kernel name once. */
static int load_items(const char *dir)
{
  static const char *const specs[] = {"decode.lua", "sparse_decode.lua", "indexer.lua", "insert.lua"};
  for (int s = 0; s < 4; s++) {
    char path[1024];
    dsv4_diags d;
    memset(&d, 0, sizeof d);
    snprintf(path, sizeof path, "%s/%s", dir, specs[s]);
    if (dsv4_spec_load(path, NULL, &plans[s], &d)) {
      check(0, path, d.n ? d.items[0].msg : "does not load");
      return 1;
    }
    for (int k = 0; k < plans[s].nkernels; k++) {
      const dsv4_kernel *kn = &plans[s].kernels[k];
      int seen = 0;
      for (int j = 0; j < nitems; j++)
        seen |= !strcmp(items[j].kernel->name, kn->name);
      for (int t = 0; t < DSV4_TARGET_COUNT && !seen; t++)
        if (kn->target[t].enabled) {
          fake_artifact(nitems, kn, (dsv4_target_kind)t, &arts[nitems]);
          items[nitems] = (dsv4_bundle_item){kn, (dsv4_target_kind)t, &arts[nitems]};
          nitems++;
        }
    }
  }
  return 0;
}

/* The index of the item of kernel name for target t (-1: none). */
static int item_of(const char *name, int t)
{
  for (int i = 0; i < nitems; i++)
    if (!strcmp(items[i].kernel->name, name) && (int)items[i].target == t)
      return i;
  return -1;
}

/* ---- byte edits ---- */

static void put32(uint8_t *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(uint8_t *p, uint64_t v) { memcpy(p, &v, 8); }
static uint64_t get(const uint8_t *p, int width)
{
  uint64_t v = 0;
  memcpy(&v, p, (size_t)width); /* little-endian host, as the format */
  return v;
}

/* Entry i's bytes in the file. */
static uint8_t *entry_at(uint8_t *b, int i)
{
  return b + DSV4_BUNDLE_HEADER_BYTES + (size_t)i * sizeof(dsv4_bundle_entry);
}

/* Make the checksum good again over the edited bytes. */
static void reseal(uint8_t *b, size_t n)
{
  put32(b + DSV4_BUNDLE_AT_CRC, dsv4_crc32(b + DSV4_BUNDLE_AT_NENTRIES, n - DSV4_BUNDLE_AT_NENTRIES));
}

/* Edits that are not one field (entry e; *n the file's size). */
static void fill_name(uint8_t *b, size_t *n, int e)
{
  memset(entry_at(b, e) + offsetof(dsv4_bundle_entry, name), 'A', 48);
}
static void fill_arch(uint8_t *b, size_t *n, int e)
{
  memset(entry_at(b, e) + offsetof(dsv4_bundle_entry, arch), 'x', 16);
}
static void fill_layout_name(uint8_t *b, size_t *n, int e)
{
  memset(entry_at(b, e) + offsetof(dsv4_bundle_entry, layout.name), 'L', DSV4_LAYOUT_NAME_MAX);
}
static void truncate16(uint8_t *b, size_t *n, int e) { *n -= 16; }
static void shorter_than_header(uint8_t *b, size_t *n, int e) { *n = 20; }
static void flip_count(uint8_t *b, size_t *n, int e) { b[DSV4_BUNDLE_AT_NENTRIES] ^= 1; }
static void flip_crc(uint8_t *b, size_t *n, int e) { b[DSV4_BUNDLE_AT_CRC] ^= 0x40; }
static void flip_code(uint8_t *b, size_t *n, int e)
{
  b[get(entry_at(b, e) + offsetof(dsv4_bundle_entry, code_off), 8) + 5] ^= 1;
}
/* Entry e's SPIR fallback (the stand-in's 16 bytes) made a module block
 * that defines an abbreviation [literal 1, array of the literal 0]: an
 * array of elements of no bits, which a reader dividing by the element's
 * width must refuse first. */
static void literal_array_aux(uint8_t *b, size_t *n, int e)
{
  /* DEFINE_ABBREV (id 2 of 2 bits), 3 operands (VBR5), literal 1, array, literal 0; END_BLOCK: 31 bits */
  static const uint8_t bc[16] = {'B', 'C', 0xC0, 0xDE, 0x21, 0x08, 0, 0, 1, 0, 0, 0, 0x8E, 0x01, 0x16, 0x00};
  memcpy(b + get(entry_at(b, e) + offsetof(dsv4_bundle_entry, aux_off), 8), bc, sizeof bc);
}
/* Entry e's SPIR-V with an id bound of 2^32 - 1. */
static void spirv_bound(uint8_t *b, size_t *n, int e)
{
  put32(b + get(entry_at(b, e) + offsetof(dsv4_bundle_entry, code_off), 8) + 12, 0xFFFFFFFFu);
}

/* The header as version 4 wrote it: count @12, size @16, crc of [32, size) @24. */
static void v4_header(uint8_t *b, size_t *n, int e)
{
  uint32_t count = (uint32_t)get(b + DSV4_BUNDLE_AT_NENTRIES, 4);
  memset(b + 8, 0, 24);
  put32(b + 8, 4), put32(b + 12, count), put64(b + 16, *n);
  put32(b + 24, dsv4_crc32(b + 32, *n - 32));
}
/* An entry count one past what the file holds (the table would pass its end). */
static void count_past_file(uint8_t *b, size_t *n, int e)
{
  put32(b + DSV4_BUNDLE_AT_NENTRIES, (uint32_t)((*n - DSV4_BUNDLE_HEADER_BYTES) / sizeof(dsv4_bundle_entry) + 1));
}
/* A padding byte after entry e's code made nonzero. */
static void dirty_padding(uint8_t *b, size_t *n, int e)
{
  uint8_t *en = entry_at(b, e);
  b[get(en + offsetof(dsv4_bundle_entry, code_off), 8) + get(en + offsetof(dsv4_bundle_entry, code_len), 8)] = 1;
}
/* Sixteen more bytes at the end, the header's size following. */
static void trailing_bytes(uint8_t *b, size_t *n, int e)
{
  memset(b + *n, 0, 16);
  *n += 16;
  put64(b + DSV4_BUNDLE_AT_SIZE, *n);
}
/* A kind past the signature's nargs made nonzero. */
static void arg_past_nargs(uint8_t *b, size_t *n, int e)
{
  uint8_t *en = entry_at(b, e);
  en[offsetof(dsv4_bundle_entry, args) + get(en + offsetof(dsv4_bundle_entry, nargs), 4)] = DSV4_ARG_I32;
}

/* Choice record i's bytes in the file (after the entry table). */
static uint8_t *rec_at(uint8_t *b, int i)
{
  return entry_at(b, (int)get(b + DSV4_BUNDLE_AT_NENTRIES, 4)) + (size_t)i * sizeof(dsv4_bundle_choice);
}
#define RF(f) offsetof(dsv4_bundle_choice, f)
static void rec_fill_device(uint8_t *b, size_t *n, int e)
{
  memset(rec_at(b, 0) + RF(device), 'D', DSV4_CHOICE_DEVICE);
}
static void rec_empty_device(uint8_t *b, size_t *n, int e) { rec_at(b, 0)[RF(device)] = 0; }
static void rec_device_tail(uint8_t *b, size_t *n, int e) { rec_at(b, 0)[RF(device) + DSV4_CHOICE_DEVICE - 1] = 'x'; }
static void rec_entry_past(uint8_t *b, size_t *n, int e)
{
  put32(rec_at(b, 0) + RF(entry), (uint32_t)get(b + DSV4_BUNDLE_AT_NENTRIES, 4));
}
static void rec_entry_huge(uint8_t *b, size_t *n, int e) { put32(rec_at(b, 0) + RF(entry), 0xffffffffu); }
static int item_of(const char *name, int t);
static void rec_entry_other_op(uint8_t *b, size_t *n, int e)
{
  put32(rec_at(b, 0) + RF(entry), (uint32_t)item_of("dequant_gather_v4", DSV4_TARGET_PTX));
}
static void rec_op_unknown(uint8_t *b, size_t *n, int e) { put32(rec_at(b, 0) + RF(op), 99); }
static void rec_ndims(uint8_t *b, size_t *n, int e) { put32(rec_at(b, 0) + RF(ndims), 3); }
static void rec_ndims_huge(uint8_t *b, size_t *n, int e) { put32(rec_at(b, 0) + RF(ndims), 0x80000000u); }
static void rec_dim_negative(uint8_t *b, size_t *n, int e) { put64(rec_at(b, 0) + RF(bucket[0]), (uint64_t)-8); }
static void rec_dim_not_bucket(uint8_t *b, size_t *n, int e) { put64(rec_at(b, 0) + RF(bucket[0]), 3); }
static void rec_dim_past_ndims(uint8_t *b, size_t *n, int e) { put64(rec_at(b, 1) + RF(bucket[3]), 1); }
static void rec_reserved(uint8_t *b, size_t *n, int e) { put32(rec_at(b, 1) + RF(reserved), 1); }
/* A choice record count one past what the file holds after the entries. */
static void records_past_file(uint8_t *b, size_t *n, int e)
{
  size_t table = (size_t)(rec_at(b, 0) - b);
  put32(b + DSV4_BUNDLE_AT_NCHOICES, (uint32_t)((*n - table) / sizeof(dsv4_bundle_choice) + 1));
}

/* Entry e's code moved onto the choice records (16-byte aligned). */
static void code_in_records(uint8_t *b, size_t *n, int e)
{
  put64(entry_at(b, e) + offsetof(dsv4_bundle_entry, code_off), (uint64_t)(rec_at(b, 1) - b));
}

/* ---- the cases ---- */

enum { SET, ADD };                 /* how value is applied to the field */
enum { ANY, NAMED, UNNAMED };      /* the message's entry prefix: none asked, "entry i (name): ", "entry i: " */
#define F(f) offsetof(dsv4_bundle_entry, f), (int)sizeof(((dsv4_bundle_entry *)0)->f)
#define HDR(at, w) (size_t)(at), w
#define NOFIELD 0, 0

typedef struct {
  const char *what;
  const char *kernel; /* the entry of this kernel and target (NULL: the header) */
  int target;
  size_t at;   /* the field: its offset in the entry (or, for the header, the file) */
  int width;   /* its bytes (0: edit does the change) */
  int how;     /* SET or ADD value */
  uint64_t value;
  void (*edit)(uint8_t *b, size_t *n, int e);
  int seal;    /* make the checksum good again after */
  dsv4rt_status want;
  int prefix;  /* ANY, NAMED or UNNAMED */
  const char *msg; /* the message must hold this */
} mutation;

#define FMT DSV4RT_ERR_BUNDLE_FORMAT
#define VER DSV4RT_ERR_BUNDLE_VERSION
#define G "dequant_gather_v4"
#define IN "kv_insert_v4"
#define D "sparse_decode_v4_mma"
#define D32 "sparse_decode_v32_mma"
#define DPT "sparse_decode_fp8_per_tensor_mma"
#define LG "mqa_logits_v4"
#define TK "topk_512"
enum { PTX = DSV4_TARGET_PTX, AMD = DSV4_TARGET_AMDGCN, SPV = DSV4_TARGET_SPIRV };

static const mutation cases[] = {
    /* the header */
    {"bad magic", NULL, 0, HDR(0, 1), SET, 'X', NULL, 0, FMT, ANY, "not a dsv4c bundle"},
    {"shorter than its header", NULL, 0, NOFIELD, SET, 0, shorter_than_header, 0, FMT, ANY, "not a dsv4c bundle"},
    {"a version-4 header", NULL, 0, NOFIELD, SET, 0, v4_header, 0, VER, ANY,
     "bundle version 4; this runtime reads version 9: compile the spec again with a dsv4c of this release"},
    {"version 5 (no launch records)", NULL, 0, HDR(DSV4_BUNDLE_AT_VERSION, 4), SET, 5, NULL, 1, VER, ANY,
     "bundle version 5; this runtime reads version 9: compile the spec again"},
    {"version 6 (no choice records)", NULL, 0, HDR(DSV4_BUNDLE_AT_VERSION, 4), SET, 6, NULL, 1, VER, ANY,
     "bundle version 6; this runtime reads version 9: compile the spec again with a dsv4c of this release"},
    {"version 7 (32 argument kinds an entry)", NULL, 0, HDR(DSV4_BUNDLE_AT_VERSION, 4), SET, 7, NULL, 1, VER, ANY,
     "bundle version 7; this runtime reads version 9: compile the spec again with a dsv4c of this release"},
    {"version 8 (topk without split rows)", NULL, 0, HDR(DSV4_BUNDLE_AT_VERSION, 4), SET, 8, NULL, 1, VER, ANY,
     "bundle version 8; this runtime reads version 9: compile the spec again with a dsv4c of this release"},
    {"version 10", NULL, 0, HDR(DSV4_BUNDLE_AT_VERSION, 4), SET, 10, NULL, 1, VER, ANY,
     "bundle version 10; this runtime reads version 9: it was written by a newer dsv4c"},
    {"truncated by 16 bytes", NULL, 0, NOFIELD, SET, 0, truncate16, 0, FMT, ANY, "(truncated?)"},
    {"file size field +16", NULL, 0, HDR(DSV4_BUNDLE_AT_SIZE, 8), ADD, 16, NULL, 1, FMT, ANY, "but its header says"},
    {"a flipped byte in the entry count", NULL, 0, NOFIELD, SET, 0, flip_count, 0, FMT, ANY, "checksum mismatch"},
    {"a flipped checksum byte", NULL, 0, NOFIELD, SET, 0, flip_crc, 0, FMT, ANY, "checksum mismatch"},
    {"a flipped code byte", G, PTX, NOFIELD, SET, 0, flip_code, 0, FMT, ANY, "checksum mismatch"},
    {"bitcode: an array of literal elements", G, SPV, NOFIELD, SET, 0, literal_array_aux, 1, FMT, NAMED,
     "aux (SPIR 1.2): LLVM bitcode: an array whose elements are not fixed, VBR or char6 fields"},
    {"SPIR-V: an id bound of 2^32 - 1", G, SPV, NOFIELD, SET, 0, spirv_bound, 1, FMT, NAMED,
     "code: SPIR-V: id bound 4294967295 is outside"},
    {"entry count 0", NULL, 0, HDR(DSV4_BUNDLE_AT_NENTRIES, 4), SET, 0, NULL, 1, FMT, ANY, "lists 0 entries"},
    {"entry count 257", NULL, 0, HDR(DSV4_BUNDLE_AT_NENTRIES, 4), SET, 257, NULL, 1, FMT, ANY, "holds 1 to 256"},
    {"entry count past the file", NULL, 0, NOFIELD, SET, 0, count_past_file, 1, FMT, ANY, "cannot hold"},
    /* (the records then start inside the last entry: the first is no record) */
    {"entry count lowered, checksum made good", NULL, 0, HDR(DSV4_BUNDLE_AT_NENTRIES, 4), ADD, (uint64_t)-1, NULL, 1,
     FMT, ANY, "bundle choice record 0: "},
    {"entry count raised, checksum made good", NULL, 0, HDR(DSV4_BUNDLE_AT_NENTRIES, 4), ADD, 1, NULL, 1, FMT, ANY,
     "bundle entry 0 (" G "): code offset"},
    {"16 bytes past the last blob", NULL, 0, NOFIELD, SET, 0, trailing_bytes, 1, FMT, ANY, "belong to no entry"},
    /* the choice records (version 7) */
    {"choice record count 513", NULL, 0, HDR(DSV4_BUNDLE_AT_NCHOICES, 4), SET, 513, NULL, 1, FMT, ANY,
     "lists 513 choice records; a bundle holds 0 to 512"},
    {"choice record count past the file", NULL, 0, NOFIELD, SET, 0, records_past_file, 1, FMT, ANY,
     "choice records, which its"},
    {"choice record count lowered, checksum made good", NULL, 0, HDR(DSV4_BUNDLE_AT_NCHOICES, 4), ADD, (uint64_t)-1,
     NULL, 1, FMT, ANY, "belong to no entry"},
    {"choice record count raised, checksum made good", NULL, 0, HDR(DSV4_BUNDLE_AT_NCHOICES, 4), ADD, 1, NULL, 1, FMT,
     ANY, "code offset"},
    {"a record's device without a NUL", NULL, 0, NOFIELD, SET, 0, rec_fill_device, 1, FMT, ANY,
     "bundle choice record 0: device is not a NUL-terminated string"},
    {"a record's empty device", NULL, 0, NOFIELD, SET, 0, rec_empty_device, 1, FMT, ANY,
     "bundle choice record 0: device is empty"},
    {"a record's device with bytes after its NUL", NULL, 0, NOFIELD, SET, 0, rec_device_tail, 1, FMT, ANY,
     "bundle choice record 0: device has bytes after its NUL"},
    {"a record's entry = nentries", NULL, 0, NOFIELD, SET, 0, rec_entry_past, 1, FMT, ANY,
     "bundle choice record 0: entry"},
    {"a record's entry 2^32 - 1", NULL, 0, NOFIELD, SET, 0, rec_entry_huge, 1, FMT, ANY,
     "bundle choice record 0: entry 4294967295 is not one of the bundle's"},
    {"a record's entry of another op", NULL, 0, NOFIELD, SET, 0, rec_entry_other_op, 1, FMT, ANY,
     "bundle choice record 0: op 4 (sparse_decode) is not the op of entry"},
    {"a record's unknown op", NULL, 0, NOFIELD, SET, 0, rec_op_unknown, 1, FMT, ANY,
     "bundle choice record 0: op 99 (?) is not the op of entry"},
    {"a record's ndims 3 on a decode", NULL, 0, NOFIELD, SET, 0, rec_ndims, 1, FMT, ANY,
     "bundle choice record 0: ndims 3 is not op sparse_decode's 5 bucket dims"},
    {"a record's ndims 2^31", NULL, 0, NOFIELD, SET, 0, rec_ndims_huge, 1, FMT, ANY,
     "bundle choice record 0: ndims 2147483648"},
    {"a record's negative dim", NULL, 0, NOFIELD, SET, 0, rec_dim_negative, 1, FMT, ANY,
     "bundle choice record 0: bucket dim T -8 is negative"},
    {"a record's dim that is no bucket", NULL, 0, NOFIELD, SET, 0, rec_dim_not_bucket, 1, FMT, ANY,
     "bundle choice record 0: bucket dims are not a bucket"},
    {"a record's dim past its ndims", NULL, 0, NOFIELD, SET, 0, rec_dim_past_ndims, 1, FMT, ANY,
     "bundle choice record 1: bucket dim 4 is set past its 3 dims"},
    {"a record's reserved word", NULL, 0, NOFIELD, SET, 0, rec_reserved, 1, FMT, ANY,
     "bundle choice record 1: reserved word is 1, not 0"},
    /* an entry's strings, kind and signature */
    {"name without a NUL", G, PTX, NOFIELD, SET, 0, fill_name, 1, FMT, UNNAMED, "name is not a NUL-terminated string"},
    {"empty name", G, PTX, F(name[0]), SET, 0, NULL, 1, FMT, UNNAMED, "name is empty"},
    {"arch without a NUL", G, PTX, NOFIELD, SET, 0, fill_arch, 1, FMT, NAMED, "arch is not a NUL-terminated string"},
    {"empty arch", G, PTX, F(arch[0]), SET, 0, NULL, 1, FMT, NAMED, "arch is empty"},
    {"op 0", G, PTX, F(op), SET, 0, NULL, 1, FMT, NAMED, "unknown op 0"},
    {"op 99", G, PTX, F(op), SET, 99, NULL, 1, FMT, NAMED, "unknown op 99"},
    {"op 0x80000000", G, PTX, F(op), SET, 0x80000000u, NULL, 1, FMT, NAMED, "unknown op 2147483648"},
    {"target 3", G, PTX, F(target), SET, 3, NULL, 1, FMT, NAMED, "unknown target 3"},
    {"one argument fewer", G, PTX, F(nargs), ADD, (uint64_t)-1, NULL, 1, FMT, NAMED, "argument signature"},
    {"an argument's kind", G, PTX, F(args[3]), SET, DSV4_ARG_I64, NULL, 1, FMT, NAMED, "argument signature"},
    {"a kind past nargs", G, PTX, NOFIELD, SET, 0, arg_past_nargs, 1, FMT, NAMED, "argument signature"},
    /* the launch record: a form of the op, with its grid rule, cluster and second kernel */
    {"form 9", D, PTX, F(launch.form), SET, 9, NULL, 1, FMT, NAMED, "launch form 9 is not a form of op sparse_decode"},
    {"a matrix form on a gather", G, PTX, F(launch.form), SET, 1, NULL, 1, FMT, NAMED,
     "launch form 1 is not a form of op dequant_gather"},
    {"CTA pairs on logits", LG, PTX, F(launch.form), SET, 3, NULL, 1, FMT, NAMED,
     "launch form 3 is not a form of op paged_mqa_logits"},
    {"another op's grid rule", G, PTX, F(launch.grid), SET, DSV4_GRID_ROWS, NULL, 1, FMT, NAMED,
     "launch grid rule 7 is not the one of op dequant_gather's form 0 (1)"},
    {"the logits' row grid on a matrix form", "mqa_logits_v4_mma", PTX, F(launch.grid), SET, DSV4_GRID_POSITIONS_ROWS,
     NULL, 1, FMT, NAMED, "launch grid rule 5 is not the one"},
    {"cluster 2 without CTA pairs", D, PTX, F(launch.cluster), SET, 2, NULL, 1, FMT, NAMED,
     "launch cluster 2 does not go with form"},
    {"cluster 0", G, PTX, F(launch.cluster), SET, 0, NULL, 1, FMT, NAMED, "launch cluster 0 does not go with form 0"},
    {"a matrix decode without its combine", D, PTX, F(launch.second), SET, 0, NULL, 1, FMT, NAMED,
     "launch second kernel 0 does not go with op sparse_decode's form"},
    {"a combine on a gather", G, PTX, F(launch.second), SET, 1, NULL, 1, FMT, NAMED,
     "launch second kernel 1 does not go with op dequant_gather's form 0"},
    {"second_threads 33", D, PTX, F(launch.second_threads), SET, 33, NULL, 1, FMT, NAMED,
     "launch second_threads 33 is not a multiple of 32 in [32, 1024]"},
    {"second_threads without a second kernel", G, PTX, F(launch.second_threads), SET, 64, NULL, 1, FMT, NAMED,
     "launch second_threads 64 is not 0 without a second kernel"},
    {"launch reserved word", G, PTX, F(launch.reserved), SET, 1, NULL, 1, FMT, NAMED, "launch reserved word is 1"},
    {"an unknown flag", D, PTX, F(flags), SET, 0x80, NULL, 1, FMT, NAMED, "flags 0x80 do not apply"},
    {"flags on a gather", G, PTX, F(flags), SET, 1, NULL, 1, FMT, NAMED, "flags 0x1 do not apply"},
    {"flags on a portable decode", "sparse_decode_v4", SPV, F(flags), SET, 2, NULL, 1, FMT, NAMED, "flags 0x2"},
    {"emulated sub-groups on PTX", G, PTX, F(flags), SET, DSV4_ENTRY_SUBGROUPS_EMULATED, NULL, 1, FMT, NAMED,
     "flags 0x4 do not apply"},
    /* the tile, bounded before any arithmetic */
    {"threads 0", G, PTX, F(launch.threads), SET, 0, NULL, 1, FMT, NAMED, "launch threads 0 is outside [1, 1024]"},
    {"threads 2048", G, PTX, F(launch.threads), SET, 2048, NULL, 1, FMT, NAMED,
     "launch threads 2048 is outside [1, 1024]"},
    {"tokens_per_cta 2^31 - 1", D, PTX, F(tokens_per_cta), SET, 0x7fffffff, NULL, 1, FMT, NAMED,
     "tokens_per_cta 2147483647 is outside [1, 1024]"},
    {"tokens_per_cta 0", G, PTX, F(tokens_per_cta), SET, 0, NULL, 1, FMT, NAMED, "tokens_per_cta 0 is outside"},
    {"tokens_per_cta 2048 on a gather", G, PTX, F(tokens_per_cta), SET, 2048, NULL, 1, FMT, NAMED,
     "tokens_per_cta 2048"},
    {"tokens_per_cta 2^17 on the logits' matrix form", "mqa_logits_v4_mma", PTX, F(tokens_per_cta), SET, 1 << 17, NULL,
     1, FMT, NAMED, "tokens_per_cta 131072 is outside [1, 65536]"},
    {"values_per_thread 0", G, PTX, F(values_per_thread), SET, 0, NULL, 1, FMT, NAMED,
     "values_per_thread 0 is outside"},
    {"values_per_thread 2^32 - 1", LG, PTX, F(values_per_thread), SET, 0xffffffffu, NULL, 1, FMT, NAMED,
     "values_per_thread 4294967295 is outside [1, 64]"},
    {"tokens_per_thread 0", G, PTX, F(tokens_per_thread), SET, 0, NULL, 1, FMT, NAMED,
     "tokens_per_thread 0 is outside"},
    {"tokens_per_thread 9", G, PTX, F(tokens_per_thread), SET, 9, NULL, 1, FMT, NAMED,
     "tokens_per_thread 9 is outside"},
    {"tokens_per_thread not dividing", G, PTX, F(tokens_per_thread), SET, 3, NULL, 1, FMT, NAMED,
     "tokens_per_thread 3 does not divide tokens_per_cta 4"},
    {"shared_bytes 2^32 - 1", D, PTX, F(launch.shared_bytes), SET, 0xffffffffu, NULL, 1, FMT, NAMED,
     "launch shared_bytes 4294967295 is outside"},
    /* the fields of one op */
    {"heads 2^31 on logits", LG, PTX, F(heads), SET, 0x80000000u, NULL, 1, FMT, NAMED,
     "heads 2147483648 is outside [1, 1024]"},
    {"heads 0 on logits", LG, PTX, F(heads), SET, 0, NULL, 1, FMT, NAMED, "heads 0 is outside"},
    {"heads on a gather", G, PTX, F(heads), SET, 64, NULL, 1, FMT, NAMED,
     "heads 64 is set, but only op paged_mqa_logits"},
    {"topk 0", TK, PTX, F(topk), SET, 0, NULL, 1, FMT, NAMED, "topk 0 is outside [1, 65536]"},
    {"topk 2^20", TK, PTX, F(topk), SET, 1 << 20, NULL, 1, FMT, NAMED, "topk 1048576 is outside"},
    {"topk on a decode", D, PTX, F(topk), SET, 5, NULL, 1, FMT, NAMED, "topk 5 is set, but only op topk"},
    {"v_dim 0 on a decode", D, PTX, F(v_dim), SET, 0, NULL, 1, FMT, NAMED, "v_dim 0 is outside [1, 4096]"},
    {"v_dim past the layout", D, PTX, F(v_dim), SET, 576, NULL, 1, FMT, NAMED, "v_dim 576 is not a multiple"},
    {"v_dim on the writer", IN, PTX, F(v_dim), SET, 512, NULL, 1, FMT, NAMED,
     "v_dim 512 is set, but only op sparse_decode"},
    {"q_dim 5000", IN, PTX, F(q_dim), SET, 5000, NULL, 1, FMT, NAMED, "q_dim 5000 is outside [0, 4096]"},
    {"q_dim not a multiple of values_per_thread", IN, PTX, F(q_dim), SET, 520, NULL, 1, FMT, NAMED,
     "q_dim 520: its lanes"},
    {"q_dim whose lanes pass the CTA", IN, PTX, F(q_dim), SET, 4096, NULL, 1, FMT, NAMED, "q_dim 4096: its lanes"},
    {"rope_first 2^32 - 16 (first + dims wraps)", IN, PTX, F(rope_first), SET, 0xfffffff0u, NULL, 1, FMT, NAMED,
     "rope_first 4294967280 is outside"},
    {"rope dims odd", IN, PTX, F(rope_dims), SET, 63, NULL, 1, FMT, NAMED, "rope dims [448, 511)"},
    {"rope past the layout", IN, PTX, F(rope_first), SET, 480, NULL, 1, FMT, NAMED, "rope dims [480, 544)"},
    {"rope_first without rope_dims", IN, PTX, F(rope_dims), SET, 0, NULL, 1, FMT, NAMED, "rope dims [448, 448)"},
    {"quant_floor 2", IN, PTX, F(quant_floor), SET, 2, NULL, 1, FMT, NAMED, "quant_floor 2 is outside [0, 1]"},
    {"rope on a gather", G, PTX, F(rope_dims), SET, 64, NULL, 1, FMT, NAMED,
     "rope_dims 64 is set, but only op kv_insert"},
    /* the layout */
    {"segment 2 at offset -100000", D32, PTX, F(layout.seg[1].offset), SET, (uint32_t)-100000, NULL, 1, FMT, NAMED,
     "(" D32 "): layout segment 2: offset -100000 is outside the row (656 bytes)"},
    {"block stride -1", D32, PTX, F(layout.block_stride), SET, (uint32_t)-1, NULL, 1, FMT, NAMED,
     "layout block_stride -1 is outside"},
    {"layout name without a NUL", D32, PTX, NOFIELD, SET, 0, fill_layout_name, 1, FMT, NAMED,
     "layout name is not NUL-terminated"},
    {"dim 0", G, PTX, F(layout.dim), SET, 0, NULL, 1, FMT, NAMED, "layout dim 0 is outside [1, 4096]"},
    {"dim 2^31 - 1", G, PTX, F(layout.dim), SET, 0x7fffffff, NULL, 1, FMT, NAMED, "layout dim 2147483647 is outside"},
    {"row_bytes 0", G, PTX, F(layout.row_bytes), SET, 0, NULL, 1, FMT, NAMED, "layout row_bytes 0 is outside"},
    {"row_bytes 2^30", G, PTX, F(layout.row_bytes), SET, 1 << 30, NULL, 1, FMT, NAMED, "layout row_bytes 1073741824"},
    {"nseg 0", G, PTX, F(layout.nseg), SET, 0, NULL, 1, FMT, NAMED, "layout nseg 0 is outside [1, 8]"},
    {"nseg 9", G, PTX, F(layout.nseg), SET, 9, NULL, 1, FMT, NAMED, "layout nseg 9 is outside"},
    {"align 3", G, PTX, F(layout.align), SET, 3, NULL, 1, FMT, NAMED, "layout align 3 is not a power of two"},
    {"align 0", G, PTX, F(layout.align), SET, 0, NULL, 1, FMT, NAMED, "layout align 0"},
    {"align 512", G, PTX, F(layout.align), SET, 512, NULL, 1, FMT, NAMED, "layout align 512"},
    {"scale placement 3", G, PTX, F(layout.scale_place), SET, 3, NULL, 1, FMT, NAMED,
     "layout scale placement 3 is unknown"},
    {"scale_row_bytes -1 (block tail)", G, PTX, F(layout.scale_row_bytes), SET, (uint32_t)-1, NULL, 1, FMT, NAMED,
     "layout scale_row_bytes -1 is outside [1, 65536]"},
    {"scale_row_bytes on an inline layout", D32, PTX, F(layout.scale_row_bytes), SET, 8, NULL, 1, FMT, NAMED,
     "layout scale_row_bytes 8 is not 0"},
    {"block_tokens -1", D32, PTX, F(layout.block_tokens), SET, (uint32_t)-1, NULL, 1, FMT, NAMED,
     "layout block_tokens -1 is outside"},
    {"block_tokens 0 with a stride", D32, PTX, F(layout.block_tokens), SET, 0, NULL, 1, FMT, NAMED, "give both"},
    {"block stride below its tokens' bytes", D32, PTX, F(layout.block_stride), SET, 1024, NULL, 1, FMT, NAMED,
     "layout block_stride 1024 is below the 41984 bytes"},
    {"block stride off the alignment", D32, PTX, F(layout.block_stride), ADD, 8, NULL, 1, FMT, NAMED,
     "is not a multiple of align 16"},
    {"segment dims reversed", D32, PTX, F(layout.seg[0].d0), SET, 600, NULL, 1, FMT, NAMED,
     "layout segment 1: dims [600, 512) are not"},
    {"segment dims past dim", D32, PTX, F(layout.seg[1].d1), SET, 600, NULL, 1, FMT, NAMED,
     "layout segment 2: dims [512, 600) are not"},
    {"segment dims from -64", D32, PTX, F(layout.seg[0].d0), SET, (uint32_t)-64, NULL, 1, FMT, NAMED,
     "layout segment 1: dims [-64, 512)"},
    {"segment type ue8m0", D32, PTX, F(layout.seg[0].type), SET, DSV4_DT_UE8M0, NULL, 1, FMT, NAMED,
     "layout segment 1: value type 4 is unknown"},
    {"segment type 99", D32, PTX, F(layout.seg[1].type), SET, 99, NULL, 1, FMT, NAMED,
     "layout segment 2: value type 99 is unknown"},
    {"segment bytes past the row", D32, PTX, F(layout.seg[1].offset), SET, 600, NULL, 1, FMT, NAMED,
     "layout segment 2: bytes [600, 728) pass the end of the row (656 bytes)"},
    {"segment offset at the row's end", D32, PTX, F(layout.seg[1].offset), SET, 656, NULL, 1, FMT, NAMED,
     "layout segment 2: offset 656 is outside the row"},
    {"segments sharing dims", D, PTX, F(layout.seg[0].d1), SET, 460, NULL, 1, FMT, NAMED,
     "layout segment 2: dims [448, 512) overlap segment 1's [0, 460)"},
    {"segments sharing row bytes", D, PTX, F(layout.seg[1].offset), SET, 440, NULL, 1, FMT, NAMED,
     "layout segment 2: bytes [440, 568) overlap segment 1's [0, 448)"},
    {"scale type bf16", D, PTX, F(layout.seg[0].scale_type), SET, DSV4_DT_BF16, NULL, 1, FMT, NAMED,
     "layout segment 1: scale type 2 is unknown"},
    {"scale group 0", D, PTX, F(layout.seg[0].scale_group), SET, 0, NULL, 1, FMT, NAMED,
     "layout segment 1: scale group 0 does not divide"},
    {"scale group not dividing", D, PTX, F(layout.seg[0].scale_group), SET, 100, NULL, 1, FMT, NAMED,
     "scale group 100 does not divide the segment's 448 values"},
    {"scale offset past the scale row", D, PTX, F(layout.seg[0].scale_offset), SET, 8, NULL, 1, FMT, NAMED,
     "layout segment 1: scale offset 8 is outside the scale row (8 bytes)"},
    {"scale offset -1", D, PTX, F(layout.seg[0].scale_offset), SET, (uint32_t)-1, NULL, 1, FMT, NAMED,
     "scale offset -1 is outside"},
    {"scale bytes past the scale row", D, PTX, F(layout.seg[0].scale_offset), SET, 2, NULL, 1, FMT, NAMED,
     "layout segment 1: scale bytes [2, 9) pass the end of the scale row (8 bytes)"},
    {"inline scales over values", D32, PTX, F(layout.seg[0].scale_offset), SET, 520, NULL, 1, FMT, NAMED,
     "layout segment 1: inline scale bytes [520, 536) overlap segment 2's values"},
    {"scale_tensor 2", D, PTX, F(layout.seg[0].scale_tensor), SET, 2, NULL, 1, FMT, NAMED,
     "layout segment 1: scale_tensor 2 is not 0 or 1"},
    {"a per-tensor scale of ue8m0", DPT, PTX, F(layout.seg[0].scale_type), SET, DSV4_DT_UE8M0, NULL, 1, FMT, NAMED,
     "per-tensor scale has type 4"},
    {"a scale group on an unscaled segment", D, PTX, F(layout.seg[1].scale_group), SET, 64, NULL, 1, FMT, NAMED,
     "layout segment 2: scale group 64 / offset 0 set on a segment without stored scales"},
    {"stored scales without a placement", DPT, PTX, F(layout.seg[0].scale_tensor), SET, 0, NULL, 1, FMT, NAMED,
     "layout segment 1: scales need a scale placement"},
    {"segments short of dim", D, PTX, F(layout.seg[1].d1), SET, 496, NULL, 1, FMT, NAMED,
     "layout segments cover 496 of the 512 dims"},
    {"a layout on topk", TK, PTX, F(layout.dim), SET, 512, NULL, 1, FMT, NAMED, "op topk reads no cache"},
    /* the code */
    {"code offset 0", G, PTX, F(code_off), SET, 0, NULL, 1, FMT, NAMED,
     "code offset 0 lies in the header or entry table"},
    {"code offset inside the choice records", G, PTX, NOFIELD, SET, 0, code_in_records, 1, FMT, NAMED,
     "lies in the header or entry table or the choice records"},
    {"code offset inside the entry table", G, AMD, F(code_off), SET, 32 + 576, NULL, 1, FMT, NAMED,
     "code offset 608 lies in the header or entry table"},
    {"code offset off 16", G, PTX, F(code_off), ADD, 8, NULL, 1, FMT, NAMED, "is not 16-byte aligned"},
    {"code_len 0", G, PTX, F(code_len), SET, 0, NULL, 1, FMT, NAMED, "is empty or passes the end of the file"},
    {"code_len 2^64 - 1", G, PTX, F(code_len), SET, UINT64_MAX, NULL, 1, FMT, NAMED, "passes the end of the file"},
    {"code offset 2^64 - 16", G, PTX, F(code_off), SET, UINT64_MAX - 15, NULL, 1, FMT, NAMED,
     "passes the end of the file"},
    {"code running into the next blob", G, PTX, F(code_len), ADD, 32, NULL, 1, FMT, ANY, "overlaps entry"},
    {"a nonzero padding byte", G, PTX, NOFIELD, SET, 0, dirty_padding, 1, FMT, ANY, "belong to no entry"},
    {"aux on a ptx entry", G, PTX, F(aux_len), SET, 4, NULL, 1, FMT, NAMED, "aux code (a SPIR fallback) on a target"},
    {"aux offset without aux", G, PTX, F(aux_off), SET, 4096, NULL, 1, FMT, NAMED, "aux offset 4096 with no aux bytes"},
    {"aux_len 2^64 - 1", G, SPV, F(aux_len), SET, UINT64_MAX, NULL, 1, FMT, NAMED, "aux [", },
    {"aux offset 0", G, SPV, F(aux_off), SET, 0, NULL, 1, FMT, NAMED, "aux offset 0 lies in the header"},
};

/* Apply case c to a copy of the base bundle; the copy's new size in *n. */
static uint8_t *mutate(const mutation *c, const uint8_t *base, size_t size, size_t *n, int e)
{
  uint8_t *b = calloc(1, size + 64);
  memcpy(b, base, size);
  *n = size;
  if (c->edit)
    c->edit(b, n, e);
  if (c->width) {
    uint8_t *p = (c->kernel ? entry_at(b, e) : b) + c->at;
    uint64_t v = c->how == ADD ? get(p, c->width) + c->value : c->value;
    memcpy(p, &v, (size_t)c->width);
  }
  if (c->seal)
    reseal(b, *n);
  return b;
}

/* Run case c: refused with its status, and a message saying what it should. */
static void run_case(const mutation *c, const uint8_t *base, size_t size)
{
  int e = c->kernel ? item_of(c->kernel, c->target) : -1;
  char what[256], detail[1536];
  snprintf(what, sizeof what, "%s%s%s", c->what, c->kernel ? " of " : "", c->kernel ? c->kernel : "");
  if (c->kernel && e < 0) {
    check(0, what, "no such entry in the base bundle");
    return;
  }
  size_t n;
  uint8_t *b = mutate(c, base, size, &n, e);
  dsv4rt_bundle *x = (dsv4rt_bundle *)1;
  dsv4rt_status s = dsv4rt_bundle_open_memory(&stub, b, n, &x);
  const char *m = dsv4rt_last_error(&stub);
  char prefix[128] = "";
  if (c->prefix == NAMED)
    snprintf(prefix, sizeof prefix, "bundle entry %d (%s): ", e, c->kernel);
  else if (c->prefix == UNNAMED)
    snprintf(prefix, sizeof prefix, "bundle entry %d: ", e);
  snprintf(detail, sizeof detail, "status %d (want %d), message \"%s\" (want \"%s%s\")", s, c->want, s ? m : "",
           prefix, c->msg);
  check(s == c->want && x == NULL && strstr(m, c->msg) && strstr(m, prefix) == m, what, detail);
  if (s == DSV4RT_OK)
    dsv4rt_bundle_destroy(x);
  free(b);
}

/* The base bundle opens, every entry as written. */
static void check_base(const uint8_t *base, size_t size)
{
  dsv4rt_bundle *x = NULL;
  dsv4rt_status s = dsv4rt_bundle_open_memory(&stub, base, size, &x);
  check(s == DSV4RT_OK, "the unmodified bundle opens", s ? dsv4rt_last_error(&stub) : "");
  if (s)
    return;
  int same = dsv4rt_bundle_count(x) == nitems;
  for (int i = 0; same && i < nitems; i++) {
    const char *name, *op, *target, *arch;
    same = !dsv4rt_bundle_entry(x, i, &name, &op, &target, &arch) && !strcmp(name, items[i].kernel->name) &&
           !strcmp(op, dsv4_op_name(items[i].kernel->op)) && !strcmp(target, dsv4_target_name(items[i].target)) &&
           !strcmp(arch, items[i].kernel->target[items[i].target].arch);
  }
  check(same, "the unmodified bundle lists every item, in order", "");
  dsv4rt_bundle_destroy(x);
}

/* The writer refuses what no reader takes. */
static void check_writer(const dsv4_bundle_choice *recs)
{
  unsigned char *out = NULL;
  size_t len = 0;
  dsv4_diags d;
  memset(&d, 0, sizeof d);
  check(dsv4_bundle_build(items, 0, &out, &len, &d) != 0 && !out, "the writer refuses an empty bundle", "");
  dsv4_artifact empty = arts[0];
  dsv4_bundle_item it = items[0];
  empty.code_len = 0, it.art = &empty;
  memset(&d, 0, sizeof d);
  check(dsv4_bundle_build(&it, 1, &out, &len, &d) != 0 && !out && d.n && strstr(d.items[0].msg, "empty"),
        "the writer refuses an empty artifact", d.n ? d.items[0].msg : "");
  dsv4_bundle_choice r = recs[0];
  r.entry = (uint32_t)item_of(G, PTX);
  memset(&d, 0, sizeof d);
  check(dsv4_bundle_build_tuned(items, nitems, &r, 1, &out, &len, &d) != 0 && !out && d.n &&
            strstr(d.items[0].msg, "choice record 0"),
        "the writer refuses a choice record of another op's entry", d.n ? d.items[0].msg : "");
  r = recs[0], r.device[0] = 0;
  memset(&d, 0, sizeof d);
  check(dsv4_bundle_build_tuned(items, nitems, &r, 1, &out, &len, &d) != 0 && !out,
        "the writer refuses a choice record without a device", "");
}

/* The choice records on open: none installed on the stub (no device), nor
 * for another GPU model; the record of the context's model installed (a
 * stand-in backend that runs PTX sm_90a, the context named as CUDA names an
 * H100), and it chooses its entry for its bucket. */
static int runs_sm90a(dsv4rt_context *ctx, const dsv4_bundle_entry *e, const uint8_t *code, char *why, size_t n);
static void check_installed(const uint8_t *base, size_t size)
{
  dsv4rt_bundle *x = NULL;
  if (dsv4rt_bundle_open_memory(&stub, base, size, &x)) {
    check(0, "the base bundle opens", dsv4rt_last_error(&stub));
    return;
  }
  check(dsv4rt_bundle_tuning_count(x) == 0, "no device: no choice record installed", "");
  dsv4rt_bundle_destroy(x);
  static rt_backend fake;
  fake.name = "stand-in", fake.accepts = runs_sm90a;
  dsv4rt_context c = stub;
  c.be = &fake;
  snprintf(c.device, sizeof c.device, "Other GPU (sm_90, CUDA 12.4)");
  x = NULL;
  check(dsv4rt_bundle_open_memory(&c, base, size, &x) == DSV4RT_OK && dsv4rt_bundle_tuning_count(x) == 0,
        "another GPU model: no choice record installed", "");
  dsv4rt_bundle_destroy(x);
  snprintf(c.device, sizeof c.device, "NVIDIA H100 80GB HBM3 (sm_90, CUDA 12.4)");
  x = NULL;
  check(dsv4rt_bundle_open_memory(&c, base, size, &x) == DSV4RT_OK && dsv4rt_bundle_tuning_count(x) == 1,
        "the context's GPU model: its record installed", "");
  if (x) {
    int got = x->nchoices == 1 && !strcmp(x->entries[x->choices[0].entry].name, D) && x->choices[0].n == 5 &&
              x->choices[0].dim[0] == 8 && x->choices[0].dim[2] == 512;
    check(got, "the installed choice is the record's entry and bucket", "");
    /* a call of the bucket asks for the record's entry among kernels of its kind */
    dsv4rt_sparse_decode_args a;
    memset(&a, 0, sizeof a);
    a.n_tokens = 7, a.heads = 64, a.topk = 500;
    dsv4_shape as;
    rt_call_shape(DSV4_OP_SPARSE_DECODE, &a, &as);
    const char *k = rt_tuned_kernel(x, DSV4_OP_SPARSE_DECODE, &as);
    int ref = -1;
    for (int i = 0; i < x->n && ref < 0; i++)
      if (x->entries[i].op == DSV4_OP_SPARSE_DECODE && runs_sm90a(&c, &x->entries[i], NULL, NULL, 0))
        ref = i;
    int kind = ref >= 0 && !strcmp(x->entries[ref].layout.name, x->entries[item_of(D, PTX)].layout.name) &&
               x->entries[ref].v_dim == x->entries[item_of(D, PTX)].v_dim;
    check(kind ? k && !strcmp(k, D) : !k, "a call of the record's bucket runs its entry (where of the default's kind)",
          k ? k : "none");
  }
  dsv4rt_bundle_destroy(x);
}

/* A bundle the build wrote opens. */
/* Entry e of the bundle at b alone, in a bundle of its own (its code and
 * aux copied after it, no choice records) into out; returns its size. */
static size_t entry_alone(const uint8_t *b, int e, uint8_t *out)
{
  dsv4_bundle_entry en;
  memcpy(&en, entry_at((uint8_t *)b, e), sizeof en);
  size_t at = DSV4_BUNDLE_HEADER_BYTES + sizeof en;
  memset(out, 0, DSV4_BUNDLE_HEADER_BYTES);
  memcpy(out, b, 12); /* magic, version */
  put32(out + DSV4_BUNDLE_AT_NENTRIES, 1);
  at = (at + 15) / 16 * 16;
  memcpy(out + at, b + en.code_off, en.code_len);
  en.code_off = at, at += en.code_len;
  if (en.aux_len) {
    size_t to = (at + 15) / 16 * 16;
    memset(out + at, 0, to - at);
    memcpy(out + to, b + en.aux_off, en.aux_len);
    en.aux_off = to, at = to + en.aux_len;
  }
  size_t end = (at + 15) / 16 * 16;
  memset(out + at, 0, end - at);
  memcpy(out + DSV4_BUNDLE_HEADER_BYTES, &en, sizeof en);
  memset(out + DSV4_BUNDLE_HEADER_BYTES + sizeof en, 0, en.code_off - DSV4_BUNDLE_HEADER_BYTES - sizeof en);
  put64(out + DSV4_BUNDLE_AT_SIZE, end);
  reseal(out, end);
  return end;
}

/* Issue 37.2: launch records in range but not the kernel's.  Each entry of
 * a bundle the build wrote, alone, with its record's threads set to each
 * of 1..64 or its tokens_per_cta to each power of two from 8 to 1024 (the
 * other values than its own, the checksum made good): refused, the
 * message naming the field (the rule, form_rules.h's dsv4_form_launch,
 * gives other threads than the record's, or does not take the tile).  The
 * logits' batch forms (warp-matrix and warpgroup: 128 threads whatever
 * the step) tie tokens_per_cta only to whole steps of 128: the other
 * multiples of 128 open (the step the code was built with is not in the
 * entry), and are counted, not asserted; so are the fused logits_topk's
 * (its chunk is in no launch field: the runtime passes its tokens_per_cta
 * and the kernel writes nothing where it is not its own). */
static void check_record_mutants(const char *path, const uint8_t *b, size_t size)
{
  int n = (int)get(b + DSV4_BUNDLE_AT_NENTRIES, 4), mutants = 0, refused = 0, unpinned = 0;
  uint8_t *img = malloc(size + 64);
  for (int e = 0; img && e < n; e++) {
    size_t len = entry_alone(b, e, img);
    dsv4_bundle_entry en;
    memcpy(&en, img + DSV4_BUNDLE_HEADER_BYTES, sizeof en);
    dsv4rt_bundle *x = NULL;
    char what[1200];
    snprintf(what, sizeof what, "%s: entry %d (%s) alone opens", path, e, en.name);
    int opens = dsv4rt_bundle_open_memory(&stub, img, len, &x) == DSV4RT_OK;
    check(opens, what, dsv4rt_last_error(&stub));
    if (!opens)
      continue;
    dsv4rt_bundle_destroy(x);
    for (int k = 0; k < 64 + 8; k++) {
      int threads = k < 64;
      uint32_t v = threads ? (uint32_t)k + 1 : 8u << (k - 64);
      size_t at = threads ? offsetof(dsv4_bundle_entry, launch.threads) : offsetof(dsv4_bundle_entry, tokens_per_cta);
      if (v == (threads ? en.launch.threads : en.tokens_per_cta))
        continue;
      put32(img + DSV4_BUNDLE_HEADER_BYTES + at, v);
      reseal(img, len);
      dsv4rt_status s = dsv4rt_bundle_open_memory(&stub, img, len, &x);
      const char *m = dsv4rt_last_error(&stub);
      mutants++;
      refused += s != DSV4RT_OK;
      if (!threads && ((en.launch.grid == DSV4_GRID_POSITIONS_BATCH && v % 128 == 0) ||
                       en.op == DSV4_OP_PAGED_MQA_LOGITS_TOPK))
        unpinned += s == DSV4RT_OK;
      else {
        snprintf(what, sizeof what, "%s: entry %d (%s), %s %u -> %u: refused naming it", path, e, en.name,
                 threads ? "threads" : "tokens_per_cta", threads ? en.launch.threads : en.tokens_per_cta, v);
        check(s == DSV4RT_ERR_BUNDLE_FORMAT && strstr(m, threads ? "threads" : "tokens_per_cta"), what,
              s ? m : "opened");
      }
      if (!s)
        dsv4rt_bundle_destroy(x);
      put32(img + DSV4_BUNDLE_HEADER_BYTES + at, threads ? en.launch.threads : en.tokens_per_cta);
    }
  }
  printf("%s: %d launch-record mutants of %d entries, %d refused (%d tokens_per_cta mutants of the logits' batch "
         "forms, whole steps of 128, and of the fused logits_topk, open: not tied to the entry; the fused kernels "
         "take the runtime's as `chunk` and write nothing where it is not theirs)\n",
         path, mutants, n, refused, unpinned);
  free(img);
}

static void check_file(const char *path)
{
  dsv4rt_bundle *x = NULL;
  dsv4rt_status s = dsv4rt_bundle_open(&stub, path, &x);
  char what[1100];
  snprintf(what, sizeof what, "%s opens", path);
  check(s == DSV4RT_OK && dsv4rt_bundle_count(x) > 0, what, s ? dsv4rt_last_error(&stub) : "");
  dsv4rt_bundle_destroy(x);
  FILE *f = fopen(path, "rb");
  uint8_t *b = malloc(1u << 26);
  size_t n = f && b ? fread(b, 1, 1u << 26, f) : 0;
  if (f)
    fclose(f);
  if (s == DSV4RT_OK && n > DSV4_BUNDLE_HEADER_BYTES)
    check_record_mutants(path, b, n);
  free(b);
}

/* The runtime's default rule (rt_find without a kernel name, rt.c) on the
 * base bundle's real launch records, on a stand-in backend that runs every
 * PTX sm_90a entry: a 128-head decode gets the CTA-pair form, a 64-head one
 * the warpgroup form alone, 8 or 16 heads at three tokens a processor or
 * more the direct warp form (fewer tokens, or 32 heads: the warpgroup
 * form), and a named kernel is always that kernel. */
static int runs_sm90a(dsv4rt_context *ctx, const dsv4_bundle_entry *e, const uint8_t *code, char *why, size_t n)
{
  (void)ctx, (void)code, (void)why, (void)n;
  return e->target == DSV4_TARGET_PTX && !strcmp(e->arch, "sm_90a");
}

static void check_default_rule(const unsigned char *base, size_t size)
{
  static rt_backend fake;
  fake.name = "stand-in", fake.accepts = runs_sm90a;
  dsv4rt_bundle *x = NULL;
  if (dsv4rt_bundle_open_memory(&stub, base, size, &x)) {
    check(0, "the base bundle opens for the default rule", dsv4rt_last_error(&stub));
    return;
  }
  const rt_backend *keep = stub.be;
  stub.be = &fake;
  static const struct {
    long long heads, tokens;
    unsigned form;
  } want[] = {{128, 128, DSV4_FORM_WARPGROUP_PAIR}, {128, 8, DSV4_FORM_WARPGROUP_PAIR}, {64, 128, DSV4_FORM_WARPGROUP},
              {64, 8, DSV4_FORM_WARPGROUP},       {16, 512, DSV4_FORM_WARP_DIRECT},    {8, 400, DSV4_FORM_WARP_DIRECT},
              {16, 128, DSV4_FORM_WARPGROUP},     {8, 8, DSV4_FORM_WARPGROUP},         {32, 512, DSV4_FORM_WARPGROUP}};
  int units = stub.units;
  stub.units = 132; /* (the direct form's rule: three tokens a processor) */
  for (size_t i = 0; i < sizeof want / sizeof *want; i++) {
    dsv4_shape sh = {DSV4_OP_SPARSE_DECODE, 5, {want[i].tokens, want[i].heads, 1024, 0, 0}};
    int e = -1;
    char what[128];
    snprintf(what, sizeof what, "default rule: H %lld, T %lld runs the form %u", want[i].heads, want[i].tokens,
             want[i].form);
    dsv4rt_status s = rt_find(x, DSV4_OP_SPARSE_DECODE, NULL, &sh, &e);
    check(s == DSV4RT_OK && e >= 0 && x->entries[e].launch.form == want[i].form, what,
          s == DSV4RT_OK && e >= 0 ? x->entries[e].name : dsv4rt_last_error(&stub));
  }
  stub.units = units;
  dsv4_shape sh = {DSV4_OP_SPARSE_DECODE, 5, {128, 128, 1024, 0, 0}};
  int e = -1;
  check(rt_find(x, DSV4_OP_SPARSE_DECODE, D, &sh, &e) == DSV4RT_OK && e >= 0 && !strcmp(x->entries[e].name, D),
        "default rule: a named kernel is that kernel", "");
  /* the logits: the warpgroup form up to DSV4_LOGITS_MAX_NEXT_N rows a
   * batch entry, a row form (here the row warp-matrix one) past it */
  for (int nn = 1; nn <= 4; nn += 3) {
    dsv4_shape lsh = {DSV4_OP_PAGED_MQA_LOGITS, 3, {64, nn, 4096}};
    unsigned want_form = nn <= DSV4_LOGITS_MAX_NEXT_N ? DSV4_FORM_WARPGROUP : DSV4_FORM_ROW_WARP;
    char what[128];
    snprintf(what, sizeof what, "default rule: logits at next_n %d run the form %u", nn, want_form);
    e = -1;
    dsv4rt_status s = rt_find(x, DSV4_OP_PAGED_MQA_LOGITS, NULL, &lsh, &e);
    check(s == DSV4RT_OK && e >= 0 && x->entries[e].launch.form == want_form, what,
          s == DSV4RT_OK && e >= 0 ? x->entries[e].name : dsv4rt_last_error(&stub));
  }
  /* the logits' step on a device of 132 processors: the largest whose grid
   * (B x ceil(L / step)) reaches twice the processors, else the smallest */
  static const struct {
    long long batch, len;
    unsigned step;
  } steps[] = {{1, 8192, 256}, {1, 131072, 256}, {8, 8192, 256}, {8, 32768, 512}, {32, 8192, 512},
               {128, 32768, 1024}, {1, 1 << 20, 1024}};
  stub.units = 132;
  for (size_t i = 0; i < sizeof steps / sizeof *steps; i++) {
    dsv4_shape lsh = {DSV4_OP_PAGED_MQA_LOGITS, 3, {steps[i].batch, 1, steps[i].len}};
    char what[128];
    snprintf(what, sizeof what, "default rule: logits at B %lld, L %lld take %u positions a CTA", steps[i].batch,
             steps[i].len, steps[i].step);
    e = -1;
    dsv4rt_status s = rt_find(x, DSV4_OP_PAGED_MQA_LOGITS, NULL, &lsh, &e);
    check(s == DSV4RT_OK && e >= 0 && x->entries[e].launch.form == DSV4_FORM_WARPGROUP &&
              x->entries[e].tokens_per_cta == steps[i].step,
          what, s == DSV4RT_OK && e >= 0 ? x->entries[e].name : dsv4rt_last_error(&stub));
  }
  stub.units = units;
  stub.be = keep;
  dsv4rt_bundle_destroy(x);
}

/* dsv4rt_bundle_open(path) in a child with a 10 s alarm: the status want
 * and a message holding path and needle. */
static void open_path_row(const char *what, const char *path, dsv4rt_status want, const char *needle)
{
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    alarm(10);
    dsv4rt_bundle *x = (dsv4rt_bundle *)1;
    dsv4rt_status s = dsv4rt_bundle_open(&stub, path, &x);
    const char *m = dsv4rt_last_error(&stub);
    int ok = s == want && x == NULL && strstr(m, path) && strstr(m, needle);
    printf("%s: %s: %s\n", what, dsv4rt_status_name(s), m);
    if (!ok)
      printf("FAIL %s: status %d, wanted %d and a message with '%s'\n", what, s, want, needle);
    fflush(stdout);
    _exit(ok ? 0 : 1);
  }
  int st = 0;
  int ok = pid > 0 && waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
  char m[160];
  snprintf(m, sizeof m, "%s", WIFSIGNALED(st) ? (WTERMSIG(st) == SIGALRM ? "still reading after 10 s" : "killed") : "");
  check(ok, what, m);
}

/* Issue 37.4: what is not a bundle file is refused before it is read. */
static void check_paths(const char *bundle)
{
  char dir[] = "/tmp/dsv4_bundle_paths_XXXXXX", fifo[64], shorter[64], head[64];
  if (!mkdtemp(dir)) {
    check(0, "a temporary folder", "mkdtemp failed");
    return;
  }
  snprintf(fifo, sizeof fifo, "%s/fifo", dir);
  snprintf(shorter, sizeof shorter, "%s/short.dsv4b", dir);
  snprintf(head, sizeof head, "%s/head.dsv4b", dir);
  check(mkfifo(fifo, 0600) == 0, "a FIFO", "mkfifo failed");
  open_path_row("a FIFO with no writer", fifo, DSV4RT_ERR_IO, "not a regular file (a FIFO)");
  if (access("/dev/zero", R_OK) == 0)
    open_path_row("/dev/zero", "/dev/zero", DSV4RT_ERR_IO, "not a regular file (a character device)");
  open_path_row("a directory", dir, DSV4RT_ERR_IO, "not a regular file (a directory)");
  open_path_row("a missing file", "/nonexistent/none.dsv4b", DSV4RT_ERR_IO, "No such file");
  /* a real bundle's first 4096 bytes, and its header alone */
  FILE *in = fopen(bundle, "rb"), *a = fopen(shorter, "wb"), *h = fopen(head, "wb");
  uint8_t buf[4096];
  size_t n = in ? fread(buf, 1, sizeof buf, in) : 0;
  if (a && n == sizeof buf)
    fwrite(buf, 1, n, a);
  if (h && n == sizeof buf)
    fwrite(buf, 1, 20, h);
  if (in)
    fclose(in);
  if (a)
    fclose(a);
  if (h)
    fclose(h);
  if (n == sizeof buf) {
    open_path_row("a bundle's first 4096 bytes", shorter, DSV4RT_ERR_BUNDLE_FORMAT,
                  "bundle is 4096 bytes but its header says");
    open_path_row("20 bytes of a header", head, DSV4RT_ERR_BUNDLE_FORMAT, "shorter than its 32-byte header");
  } else
    check(0, "a real bundle of at least 4096 bytes to cut", bundle);
  unlink(fifo), unlink(shorter), unlink(head), rmdir(dir);
}

int main(int argc, char **argv)
{
  if (argc < 2) {
    fprintf(stderr, "usage: test_bundle SPECS_DIR [BUNDLE...]\n");
    return 2;
  }
  if (load_items(argv[1]))
    return 1;
  unsigned char *base = NULL;
  size_t size = 0;
  dsv4_diags d;
  memset(&d, 0, sizeof d);
  /* two choice records: a decode's winner on an H100, a logits' on another GPU */
  dsv4_bundle_choice recs[2];
  memset(recs, 0, sizeof recs);
  snprintf(recs[0].device, sizeof recs[0].device, "NVIDIA H100 80GB HBM3");
  recs[0].op = DSV4_OP_SPARSE_DECODE, recs[0].entry = (uint32_t)item_of(D, PTX), recs[0].ndims = 5;
  recs[0].bucket[0] = 8, recs[0].bucket[1] = 64, recs[0].bucket[2] = 512, recs[0].median_ps = 12345678;
  snprintf(recs[1].device, sizeof recs[1].device, "Test GPU");
  recs[1].op = DSV4_OP_PAGED_MQA_LOGITS, recs[1].entry = (uint32_t)item_of(LG, PTX), recs[1].ndims = 3;
  recs[1].bucket[0] = 64, recs[1].bucket[1] = 1, recs[1].bucket[2] = 4096, recs[1].median_ps = 1000;
  check_writer(recs);
  if (dsv4_bundle_build_tuned(items, nitems, recs, 2, &base, &size, &d)) {
    check(0, "the writer builds the base bundle", d.n ? d.items[0].msg : "");
    return 1;
  }
  check_base(base, size);
  check_default_rule(base, size);
  check_installed(base, size);
  for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
    run_case(&cases[c], base, size);
  for (int i = 2; i < argc; i++)
    check_file(argv[i]);
  if (argc > 2)
    check_paths(argv[2]);
  printf("%d passed, %d failed (%zu mutations of a %zu-byte bundle of %d entries)\n", passed, failed,
         sizeof cases / sizeof *cases, size, nitems);
  free(base);
  for (int i = 0; i < nitems; i++)
    free(arts[i].code), free(arts[i].aux);
  return failed != 0;
}
