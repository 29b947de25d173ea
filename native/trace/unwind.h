/* The unwinder of the tracer's call-stack symbols (docs/predict.md, "Stack symbols"): the return addresses above
 * a wrapper's frame. On x86-64 (unwind_rules.c) each frame is stepped by its return address's rule, read once
 * from the DWARF call frame information backtrace() itself reads (cfi.c) and kept in a bounded lock-free table,
 * so code without frame pointers is walked as code with them; elsewhere (unwind.c) the chain of frame records
 * that code built with frame pointers keeps is followed. Never faults: every stack word read lies in the
 * calling thread's stack. */
#ifndef IOLOOM_TRACE_UNWIND_H
#define IOLOOM_TRACE_UNWIND_H

#include <stdint.h>

/* Code addresses [lo, hi): a walk stops after its first return address in them. */
struct ioloom_code_range {
    uintptr_t lo, hi;
};

/* Up to max return addresses, innermost first, from the frame record at `frame` (a wrapper's
 * __builtin_frame_address(0): its first address is the wrapper's own return address). Stops after an address in
 * `last`, where the stack ends, and at a null return address. Returns how many were written; 0 when the walk
 * cannot vouch for the stack (the caller then asks backtrace(): predict.c): `frame` in no stack of known bounds,
 * on x86-64 a frame whose rule is not one of a constant offset from the stack or frame pointer, or a word to read
 * outside the stack. Elsewhere what comes out of code built without frame pointers may be wrong: the caller
 * checks each new stack once. */
int ioloom_unwind_stack(const void *frame, const struct ioloom_code_range *last, uintptr_t *pc, int max);

/* Once, before the first walk, after backtrace() has loaded libgcc_s: the rule table (x86-64). */
void ioloom_unwind_start(void);

/* The rule table's counts (0 elsewhere than x86-64): return addresses whose rule was learnt and kept, those of
 * them whose frame cannot be stepped by a constant rule (their stacks go to backtrace()), and rules learnt but
 * not kept because the table was full (learnt again at each use). */
struct ioloom_unwind_counts {
    uint64_t rules, rules_slow, rules_past_cap;
};
struct ioloom_unwind_counts ioloom_unwind_counts(void);

/* In a forked child: its counts start again at 0 (the rules stay: the child's code is at the parent's addresses). */
void ioloom_unwind_after_fork(void);

/* ---- shared by the walks (unwind.c) ---- */

/* Stack addresses [lo, hi) this thread may read. */
struct ioloom_stack_span {
    uintptr_t lo, hi;
};

/* The mapping that holds addr, when it is this thread's stack as last looked up or (looked up again, at most 16
 * times per thread) now; 0 if none. */
int ioloom_stack_span_of(uintptr_t addr, struct ioloom_stack_span *span);

/* [addr, addr + 8) lies in span: a word there can be read. */
static inline int ioloom_span_holds(const struct ioloom_stack_span *span, uintptr_t addr) {
    return addr >= span->lo && addr < span->hi && span->hi - addr >= sizeof(uintptr_t);
}

#endif
