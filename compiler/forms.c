/* forms.c -- how a kernel's form is decided: once per (kernel, target),
 * by the spec checker, through its op's choose_form (compiler/ops/).
 *
 * A form is decided from three things only: what the spec asked
 * (tile.matrix, tile.pair, ...), the kernel's shape, and the target's row
 * in its capability table (targets/caps.c).  The result is the launch
 * record (dsv4_abi.h): form, threads, dynamic shared memory, cluster,
 * grid rule and the companion kernel, by form_rules.h's dsv4_form_launch.
 * The checker stores it in the plan (dsv4_kernel.launch[t]); the
 * generators build the form it names (and check that their target hooks
 * can: an internal error otherwise); the bundle carries it; the runtime
 * holds it to the same dsv4_form_launch when it opens a bundle, checks it
 * against the device and sizes grids by its rule.  No LLVM and no Lua
 * here.  Each op's choose_form is in its rules file (compiler/ops/); this
 * file holds what they share: refusing, recording, and the arch's limits
 * every record is held to.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "caps.h"
#include "ops/ops.h"

/* Refuse: the spec field to blame and why. */
int dsv4_choice_refuse(dsv4_choice *c, const char *field, const char *fmt, ...)
{
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(c->why, (size_t)c->why_len, fmt, ap);
  va_end(ap);
  *c->field = field;
  return 1;
}

/* The launch record of the form chosen: form_rules.h's dsv4_form_launch,
 * the rule the runtime's bundle reader holds the record to. */
int dsv4_choice_record(dsv4_choice *c, int form)
{
  const dsv4_kernel *k = c->k;
  if (dsv4_form_launch(k->op, form, &k->layout, k->tile.values_per_thread, k->tile.tokens_per_cta,
                       k->tile.tokens_per_thread, k->heads, k->v_dim, c->out))
    return dsv4_choice_refuse(c, "tile", "does not map onto the %s form (internal error)", dsv4_form_name(form));
  return 0;
}

int dsv4_choose_form(const dsv4_kernel *k, dsv4_target_kind t, dsv4_launch *out, const char **field, char *why,
                     int why_len)
{
  const char *arch = k->target[t].arch;
  dsv4_form_caps caps = {dsv4_target_max_threads(t),       dsv4_kernel_warp(k, t),
                         dsv4_target_max_shared(t, arch),   dsv4_target_has_bf16_mma(t, arch),
                         dsv4_target_has_e4m3_mma(t, arch), dsv4_target_has_wgmma(t, arch)};
  dsv4_choice c = {k, t, &caps, out, field, why, why_len};
  memset(out, 0, sizeof *out);
  const dsv4_op_rules *rules = dsv4_op_rules_of(k->op);
  if (!rules || !rules->choose_form)
    return dsv4_choice_refuse(&c, "op", "has no form rule (internal error)");
  if (!dsv4_target_arch_ok(t, arch))
    return dsv4_choice_refuse(&c, "targets", "names arch '%s', which target '%s' does not emit", arch,
                              dsv4_target_name(t));
  if (rules->choose_form(&c))
    return 1;
  /* every form against the arch's limits: the record must launch there */
  if ((int)out->threads < 1 || (int)out->threads > c.caps->max_threads || out->threads % (uint32_t)c.caps->warp)
    return dsv4_choice_refuse(&c, "tile",
                              "gives %u threads a CTA in the %s form, which target '%s' %s cannot launch (at most %d, "
                              "a multiple of %d)", out->threads, dsv4_form_name((int)out->form), dsv4_target_name(t),
                              k->target[t].arch, c.caps->max_threads, c.caps->warp);
  if ((int)out->shared_bytes > c.caps->max_shared)
    return dsv4_choice_refuse(&c, "tile",
                              "needs %u bytes of dynamic shared memory in the %s form, more than target '%s' %s "
                              "gives (%d)", out->shared_bytes, dsv4_form_name((int)out->form), dsv4_target_name(t),
                              k->target[t].arch, c.caps->max_shared);
  return 0;
}
