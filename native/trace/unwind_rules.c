/* The x86-64 stack walk of the tracer's call-stack symbols (unwind.h). From the wrapper's frame record (its caller's
 * stack pointer is 16 bytes above it, its caller's rbp in it), each frame is stepped to its caller's by the rule of
 * its return address: CFA = rsp or rbp + a constant, the return address and (when the frame saved it) rbp read
 * at constant offsets from the CFA, the caller's stack pointer the CFA. That is what libgcc's unwinder computes
 * for backtrace() from the same DWARF rows (cfi.c reads them as it does), so the walk gives backtrace()'s return
 * addresses, on code with or without frame pointers, alloca and VLA frames (rbp-based CFA) included; where a row is
 * not of that form (a realigned stack's CFA expression, a signal frame) the walk gives up and the caller asks
 * backtrace(). Rules are kept in one table for all threads, keyed by return address: learnt once (an FDE lookup and
 * a CFA program), then read without a lock. The table is bounded (RULE_SLOTS); a rule that finds no room is used
 * and counted, and learnt again at its next use; rules are not forgotten at dlclose (docs/predict.md). Every stack word
 * read lies in the thread's stack mapping (ioloom_stack_span_of), so even a wrong rule could give wrong addresses,
 * never a fault. */
#ifdef __x86_64__
#include <assert.h>
#include <dlfcn.h>
#include <stdlib.h>

#include "cfi.h"
#include "unwind.h"

enum {
    RULE_SLOTS = 4096, /* return addresses whose rule is kept (a power of two) */
    RULE_PROBES = 16,  /* slots looked at for one address */
    CLAIMED = 1,       /* a slot's key while its rule is written: code never lies at address 1 */
};

/* A kept rule. Invariant: ra goes 0 -> CLAIMED -> the return address, once, and `rule` is written before ra
 * takes the address (release), so a reader that sees its address (acquire) reads the whole rule. */
struct slot {
    uintptr_t ra;
    struct ioloom_rule rule;
};

static struct slot *slots;               /* NULL: no table (every rule learnt at its use) */
static ioloom_find_fde_fn *find_fde;     /* libgcc_s's _Unwind_Find_FDE, which backtrace()'s unwinder uses */
static uint64_t kept, kept_slow, unkept; /* ioloom_unwind_counts */

void ioloom_unwind_start(void) {
    void *libgcc = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_NOLOAD); /* loaded by backtrace() already */
    find_fde = libgcc ? (ioloom_find_fde_fn *)dlsym(libgcc, "_Unwind_Find_FDE") : NULL;
    slots = calloc(RULE_SLOTS, sizeof *slots);
}

struct ioloom_unwind_counts ioloom_unwind_counts(void) {
    return (struct ioloom_unwind_counts){__atomic_load_n(&kept, __ATOMIC_RELAXED),
                                         __atomic_load_n(&kept_slow, __ATOMIC_RELAXED),
                                         __atomic_load_n(&unkept, __ATOMIC_RELAXED)};
}

void ioloom_unwind_after_fork(void) { kept = kept_slow = unkept = 0; }

/* ---- the table ---- */

static uint32_t first_slot(uintptr_t ra) { return (uint32_t)((ra * 0x9E3779B97F4A7C15ull) >> 52); }
_Static_assert(RULE_SLOTS == 1 << (64 - 52), "first_slot gives a slot of the table");

/* The kept rule of ra: 1 and *rule set, or 0. */
static int kept_rule(uintptr_t ra, struct ioloom_rule *rule) {
    for (uint32_t probe = 0, at = first_slot(ra); probe < RULE_PROBES; probe++) {
        struct slot *s = &slots[(at + probe) & (RULE_SLOTS - 1)];
        uintptr_t key = __atomic_load_n(&s->ra, __ATOMIC_ACQUIRE);
        if (key == ra) {
            *rule = s->rule;
            return 1;
        }
        if (!key) return 0;
    }
    return 0;
}

/* Keeps ra's rule in the first free slot of its probes; counted when there is none. Two threads that learn the
 * same address at once may keep it twice: both copies are the same rule. */
static void keep(uintptr_t ra, const struct ioloom_rule *rule) {
    for (uint32_t probe = 0, at = first_slot(ra); probe < RULE_PROBES; probe++) {
        struct slot *s = &slots[(at + probe) & (RULE_SLOTS - 1)];
        uintptr_t empty = 0;
        if (__atomic_load_n(&s->ra, __ATOMIC_ACQUIRE) == ra) return;
        if (!__atomic_compare_exchange_n(&s->ra, &empty, CLAIMED, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) continue;
        s->rule = *rule;
        __atomic_store_n(&s->ra, ra, __ATOMIC_RELEASE);
        __atomic_add_fetch(&kept, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&kept_slow, rule->kind == RULE_SLOW, __ATOMIC_RELAXED);
        return;
    }
    __atomic_add_fetch(&unkept, 1, __ATOMIC_RELAXED);
}

/* The rule of return address ra: kept, or learnt now (and kept). */
static struct ioloom_rule rule_for(uintptr_t ra) {
    struct ioloom_rule rule;
    if (slots && kept_rule(ra, &rule)) return rule;
    rule = ioloom_cfi_rule(ra, find_fde);
    if (slots) keep(ra, &rule);
    return rule;
}

/* ---- the walk ---- */

/* A frame's registers that its caller's depend on: its return address (pc), stack pointer and rbp. */
struct regs {
    uintptr_t pc, rsp, rbp;
};

/* Steps r to the caller's frame by `rule` (RULE_RSP or RULE_RBP); 0, r unchanged, when the CFA does not lie above
 * the stack pointer (a frame's CFA always does: the return address was pushed below it) or a word to read lies
 * outside the stack. */
static int step(struct regs *r, const struct ioloom_rule *rule, const struct ioloom_stack_span *span) {
    assert(rule->kind == RULE_RSP || rule->kind == RULE_RBP); /* the walk stops at the others */
    uintptr_t cfa = (rule->kind == RULE_RBP ? r->rbp : r->rsp) + (uintptr_t)(intptr_t)rule->cfa_offset;
    uintptr_t ra_at = cfa + (uintptr_t)(intptr_t)rule->ra_offset, rbp_at = cfa + (uintptr_t)(intptr_t)rule->rbp_offset;
    if (cfa <= r->rsp || !ioloom_span_holds(span, ra_at)) return 0;
    if (rule->rbp_offset && !ioloom_span_holds(span, rbp_at)) return 0;
    r->pc = *(const uintptr_t *)ra_at;
    if (rule->rbp_offset) r->rbp = *(const uintptr_t *)rbp_at;
    r->rsp = cfa;
    return 1;
}

int ioloom_unwind_stack(const void *frame, const struct ioloom_code_range *last, uintptr_t *pc, int max) {
    uintptr_t fp = (uintptr_t)frame;
    struct ioloom_stack_span span;
    if (!ioloom_stack_span_of(fp, &span) || !ioloom_span_holds(&span, fp + sizeof(uintptr_t))) return 0;
    /* The wrapper's frame record: its caller's rbp, then its return address; its CFA (the caller's stack pointer
     * after the call) lies just above. */
    const uintptr_t *record = frame;
    struct regs r = {record[1], fp + 2 * sizeof(uintptr_t), record[0]};
    for (int n = 0;;) {
        if (!r.pc) return n; /* backtrace() drops a null return address at the end */
        pc[n++] = r.pc;
        if (n == max || (r.pc >= last->lo && r.pc < last->hi)) return n;
        struct ioloom_rule rule = rule_for(r.pc);
        if (rule.kind == RULE_END) return n;
        if (rule.kind == RULE_SLOW || !step(&r, &rule, &span)) return 0;
    }
}
#endif
