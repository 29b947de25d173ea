/* The rule that steps an x86-64 frame to its caller, read from the DWARF call frame information (cfi.c) as
 * libgcc's unwinder, which backtrace() runs, reads it; the walk of unwind_rules.c applies it. */
#ifndef IOLOOM_TRACE_CFI_H
#define IOLOOM_TRACE_CFI_H

#include <stdint.h>

/* How the frame holding a return address is stepped to its caller's. */
enum ioloom_rule_kind {
    RULE_SLOW, /* no constant rule (CFA by expression or by another register, a signal frame, registers saved
                  in registers, an instruction not read here): the stack goes to backtrace() */
    RULE_END,  /* the stack ends here (no caller: undefined return address, or code without unwind tables) */
    RULE_RSP,  /* CFA = the stack pointer + cfa_offset */
    RULE_RBP,  /* CFA = the frame pointer register + cfa_offset */
};

/* The caller's registers from this frame's CFA: its return address at CFA + ra_offset; its rbp at CFA +
 * rbp_offset (0: the frame leaves rbp as it found it); its stack pointer the CFA. */
struct ioloom_rule {
    int32_t cfa_offset;
    int16_t ra_offset, rbp_offset;
    uint8_t kind;
};

/* The rule in force at the call before return address `ra` (the row of ra - 1, as libgcc looks it up), from the
 * FDE that libgcc_s's _Unwind_Find_FDE (`find_fde`, NULL: none) gives for ra - 1. */
typedef const void *ioloom_find_fde_fn(void *pc, void *bases);
struct ioloom_rule ioloom_cfi_rule(uintptr_t ra, ioloom_find_fde_fn *find_fde);

#endif
