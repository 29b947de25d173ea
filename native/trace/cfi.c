/* The x86-64 frame rule of a return address (cfi.h), read from the DWARF call frame information of its module as
 * libgcc's unwinder reads it for backtrace(): the FDE that libgcc_s's own _Unwind_Find_FDE finds for ra - 1, its
 * CIE's initial instructions, then the FDE's up to ra (those with a location below ra, as execute_cfa_program
 * runs them), with libgcc's meanings (DW_CFA_restore and same_value leave a register as found, remember_state
 * keeps the CFA with the registers). Only what decides the caller's stack pointer, rbp and return address is
 * followed: the CFA (rsp or rbp plus a constant), rbp, rsp and the return address column (16). Anything else that
 * touches them (an expression, a register saved in a register, a signal frame, an encoding or instruction not
 * read here) makes the rule RULE_SLOW: that stack is left to backtrace(), never guessed, and so does malformed CFI
 * (an offset whose factored value does not fit in 64 signed bits). No allocation, no lock; every read stays inside
 * the CIE or FDE, whose length its header gives. */
#ifdef __x86_64__
#include <assert.h>
#include <link.h>
#include <stddef.h>
#include <string.h>

#include "cfi.h"

enum {
    REG_RBP = 6,
    REG_RSP = 7,
    REG_RA = 16, /* x86-64's return address column */
    STATES = 8,  /* remember_state depth; deeper is RULE_SLOW */
};
enum how { UNSAVED, UNDEFINED, OFFSET, OTHER }; /* a register's rule, as far as the walk needs it */

struct reg_rule {
    uint8_t how;
    int64_t offset; /* OFFSET: saved at CFA + offset */
};
/* The row being built: what remember_state keeps. cfa_reg -1: the CFA by an expression; -2: not set yet. */
struct row {
    int64_t cfa_reg, cfa_offset;
    struct reg_rule rbp, rsp, ra;
};
/* A CFA program being run: the row, the states remembered (saved[0, nsaved)), the CIE's factors. */
struct cfa_program {
    struct row row, saved[STATES];
    int nsaved, failed;
    uint64_t code_align;
    int64_t data_align;
    uintptr_t loc, ra;
};
/* Bytes [p, end) being read; failed once a read would pass end. */
struct bytes {
    const uint8_t *p, *end;
    int failed;
};

/* ---- reading ---- */

static uint64_t read_fixed(struct bytes *b, int size) {
    uint64_t value = 0;
    if (b->end - b->p < size) {
        b->failed = 1;
        return 0;
    }
    memcpy(&value, b->p, (size_t)size); /* little-endian */
    b->p += size;
    return value;
}

static uint64_t read_uleb(struct bytes *b) {
    uint64_t value = 0;
    for (int shift = 0; b->p < b->end && shift < 64; shift += 7) {
        uint8_t byte = *b->p++;
        value |= (uint64_t)(byte & 0x7f) << shift;
        if (!(byte & 0x80)) return value;
    }
    b->failed = 1;
    return 0;
}

static int64_t read_sleb(struct bytes *b) {
    uint64_t value = 0;
    for (int shift = 0; b->p < b->end && shift < 64;) {
        uint8_t byte = *b->p++;
        value |= (uint64_t)(byte & 0x7f) << shift;
        shift += 7;
        if (!(byte & 0x80)) return shift < 64 && (byte & 0x40) ? (int64_t)(value | ~0ull << shift) : (int64_t)value;
    }
    b->failed = 1;
    return 0;
}

static void skip(struct bytes *b, uint64_t n) {
    if ((uint64_t)(b->end - b->p) < n) {
        b->failed = 1;
        n = (uint64_t)(b->end - b->p);
    }
    b->p += n;
}

/* The size of a value in pointer encoding `enc` (libgcc's size_of_encoded_value); 0: one it does not size. */
static int encoded_size(uint8_t enc) {
    static const int sizes[8] = {8, 0, 2, 4, 8, 0, 0, 0}; /* absptr, uleb, udata2, udata4, udata8 (and signed) */
    return enc == 0xff ? 0 : sizes[enc & 0x07];
}

/* A CIE or FDE at `entry`: its bytes after the length word; 0 for a 64-bit DWARF entry (not read here). */
static int entry_bytes(const uint8_t *entry, struct bytes *b) {
    uint32_t length;
    memcpy(&length, entry, sizeof length);
    if (length == 0 || length >= 0xfffffff0u) return 0;
    *b = (struct bytes){entry + 4, entry + 4 + length, 0};
    return 1;
}

/* ---- the CIE ---- */

/* What the FDE needs from its CIE: the encoding of its addresses, whether it has augmentation data ('z'), and
 * where the CIE's initial instructions are. */
struct cie {
    uint8_t fde_encoding;
    int saw_z;
    struct bytes insns;
};

/* The augmentation data of a "z..." CIE (libgcc's extract_cie_info): 0 for a letter it would refuse, a signal
 * frame ('S': its caller's address is not a return address), or a personality it cannot size. */
static int read_augmentation(const char *aug, struct bytes data, struct cie *cie) {
    for (const char *c = aug + 1; *c && !data.failed; c++) {
        if (*c == 'R') {
            cie->fde_encoding = (uint8_t)read_fixed(&data, 1);
        } else if (*c == 'P') {
            uint8_t enc = (uint8_t)read_fixed(&data, 1);
            int size = (enc & 0x70) == 0x50 ? 0 : encoded_size(enc); /* DW_EH_PE_aligned: not sized here */
            if (!size) return 0;
            skip(&data, (uint64_t)size);
        } else if (*c == 'L') {
            skip(&data, 1);
        } else if (*c != 'B') { /* 'S', or a letter libgcc does not know */
            return 0;
        }
    }
    return !data.failed;
}

/* Reads the CIE at `entry` into *cie and the program's factors; 0 if it is not one read here. */
static int read_cie(const uint8_t *entry, struct cie *cie, struct cfa_program *prog) {
    struct bytes b;
    if (!entry_bytes(entry, &b) || read_fixed(&b, 4) != 0) return 0; /* a CIE's id is 0 in .eh_frame */
    uint8_t version = (uint8_t)read_fixed(&b, 1);
    const char *aug = (const char *)b.p;
    size_t aug_len = strnlen(aug, (size_t)(b.end - b.p));
    skip(&b, aug_len + 1);
    if (version == 4 && read_fixed(&b, 2) != sizeof(uintptr_t)) return 0; /* address size 8, segment size 0 */
    prog->code_align = read_uleb(&b);
    prog->data_align = read_sleb(&b);
    uint64_t ra_column = version == 1 ? read_fixed(&b, 1) : read_uleb(&b);
    if (b.failed || (version != 1 && version != 3 && version != 4) || ra_column != REG_RA) return 0;
    *cie = (struct cie){.fde_encoding = 0, .saw_z = aug[0] == 'z'};
    if (aug[0] && !cie->saw_z) return 0; /* "eh" and other old augmentations */
    if (cie->saw_z) {
        uint64_t data_len = read_uleb(&b);
        if (b.failed || data_len > (uint64_t)(b.end - b.p)) return 0;
        if (!read_augmentation(aug, (struct bytes){b.p, b.p + data_len, 0}, cie)) return 0;
        skip(&b, data_len);
    }
    cie->insns = b;
    return !b.failed && encoded_size(cie->fde_encoding);
}

/* ---- the CFA program ---- */

/* DWARF 5, 6.4.2 (and GNU's): the instructions with an operand in their low 6 bits, then the others. */
enum cfa_op {
    CFA_ADVANCE_LOC = 0x40,
    CFA_OFFSET = 0x80,
    CFA_RESTORE = 0xc0, /* high 2 bits */
    CFA_NOP = 0x00,
    CFA_ADVANCE_LOC1 = 0x02,
    CFA_ADVANCE_LOC2 = 0x03,
    CFA_ADVANCE_LOC4 = 0x04,
    CFA_OFFSET_EXTENDED = 0x05,
    CFA_RESTORE_EXTENDED = 0x06,
    CFA_UNDEFINED = 0x07,
    CFA_SAME_VALUE = 0x08,
    CFA_REGISTER = 0x09,
    CFA_REMEMBER_STATE = 0x0a,
    CFA_RESTORE_STATE = 0x0b,
    CFA_DEF_CFA = 0x0c,
    CFA_DEF_CFA_REGISTER = 0x0d,
    CFA_DEF_CFA_OFFSET = 0x0e,
    CFA_DEF_CFA_EXPRESSION = 0x0f,
    CFA_EXPRESSION = 0x10,
    CFA_OFFSET_EXTENDED_SF = 0x11,
    CFA_DEF_CFA_SF = 0x12,
    CFA_DEF_CFA_OFFSET_SF = 0x13,
    CFA_VAL_OFFSET = 0x14,
    CFA_VAL_OFFSET_SF = 0x15,
    CFA_VAL_EXPRESSION = 0x16,
    CFA_GNU_ARGS_SIZE = 0x2e,
    CFA_GNU_NEGATIVE_OFFSET_EXTENDED = 0x2f,
};

static struct reg_rule *tracked(struct row *row, uint64_t reg) {
    return reg == REG_RBP ? &row->rbp : reg == REG_RSP ? &row->rsp : reg == REG_RA ? &row->ra : NULL;
}

static void set_reg(struct cfa_program *prog, uint64_t reg, enum how how, int64_t offset) {
    struct reg_rule *rule = tracked(&prog->row, reg);
    if (rule) *rule = (struct reg_rule){(uint8_t)how, offset};
}

/* remember_state (push the row) or restore_state (pop it); past STATES, or with none to pop, the program fails. */
static void remember(struct cfa_program *prog, int restore) {
    assert(prog->nsaved >= 0 && prog->nsaved <= STATES); /* saved[0, nsaved) are the states remembered */
    if (restore ? prog->nsaved == 0 : prog->nsaved == STATES) {
        prog->failed = 1;
        return;
    }
    if (restore)
        prog->row = prog->saved[--prog->nsaved];
    else
        prog->saved[prog->nsaved++] = prog->row;
}

/* An unsigned operand as a signed offset; one past INT64_MAX (malformed CFI) fails the program. */
static int64_t signed_of(struct cfa_program *prog, uint64_t value) {
    if (value > INT64_MAX) {
        prog->failed = 1;
        return 0;
    }
    return (int64_t)value;
}

/* value times the CIE's data alignment factor; a product that overflows (malformed CFI) fails the program. */
static int64_t factored(struct cfa_program *prog, int64_t value) {
    int64_t product;
    if (__builtin_mul_overflow(value, prog->data_align, &product)) {
        prog->failed = 1;
        return 0;
    }
    return product;
}

/* An instruction whose first operand is a register (b->p at it); 0 if `op` is not one. */
static int register_insn(struct cfa_program *prog, uint8_t op, struct bytes *b) {
    uint64_t reg;
    switch (op) {
        case CFA_OFFSET_EXTENDED:
            reg = read_uleb(b);
            set_reg(prog, reg, OFFSET, factored(prog, signed_of(prog, read_uleb(b))));
            return 1;
        case CFA_OFFSET_EXTENDED_SF:
            reg = read_uleb(b);
            set_reg(prog, reg, OFFSET, factored(prog, read_sleb(b)));
            return 1;
        case CFA_GNU_NEGATIVE_OFFSET_EXTENDED: /* -INT64_MAX at most: the negation cannot overflow */
            reg = read_uleb(b);
            set_reg(prog, reg, OFFSET, factored(prog, -signed_of(prog, read_uleb(b))));
            return 1;
        case CFA_RESTORE_EXTENDED:
        case CFA_SAME_VALUE: /* libgcc: as found */
            set_reg(prog, read_uleb(b), UNSAVED, 0);
            return 1;
        case CFA_UNDEFINED:
            set_reg(prog, read_uleb(b), UNDEFINED, 0);
            return 1;
        case CFA_REGISTER:
        case CFA_VAL_OFFSET:
            set_reg(prog, read_uleb(b), OTHER, 0);
            read_uleb(b);
            return 1;
        case CFA_VAL_OFFSET_SF:
            set_reg(prog, read_uleb(b), OTHER, 0);
            read_sleb(b);
            return 1;
        case CFA_EXPRESSION:
        case CFA_VAL_EXPRESSION:
            set_reg(prog, read_uleb(b), OTHER, 0);
            skip(b, read_uleb(b));
            return 1;
        default:
            return 0;
    }
}

/* An instruction that defines the CFA (b->p at its operands); 0 if `op` is not one. */
static int cfa_insn(struct cfa_program *prog, uint8_t op, struct bytes *b) {
    struct row *row = &prog->row;
    switch (op) {
        case CFA_DEF_CFA:
            row->cfa_reg = signed_of(prog, read_uleb(b));
            row->cfa_offset = signed_of(prog, read_uleb(b));
            return 1;
        case CFA_DEF_CFA_SF:
            row->cfa_reg = signed_of(prog, read_uleb(b));
            row->cfa_offset = factored(prog, read_sleb(b));
            return 1;
        case CFA_DEF_CFA_REGISTER:
            row->cfa_reg = signed_of(prog, read_uleb(b));
            return 1;
        case CFA_DEF_CFA_OFFSET:
            row->cfa_offset = signed_of(prog, read_uleb(b));
            return 1;
        case CFA_DEF_CFA_OFFSET_SF:
            row->cfa_offset = factored(prog, read_sleb(b));
            return 1;
        case CFA_DEF_CFA_EXPRESSION:
            skip(b, read_uleb(b));
            row->cfa_reg = -1;
            return 1;
        default:
            return 0;
    }
}

/* An instruction that moves the location or the state (b->p at its operands); 0 if `op` is not one. */
static int flow_insn(struct cfa_program *prog, uint8_t op, struct bytes *b) {
    switch (op) {
        case CFA_ADVANCE_LOC1:
        case CFA_ADVANCE_LOC2:
        case CFA_ADVANCE_LOC4:
            prog->loc += read_fixed(b, 1 << (op - CFA_ADVANCE_LOC1)) * prog->code_align;
            return 1;
        case CFA_REMEMBER_STATE:
        case CFA_RESTORE_STATE:
            remember(prog, op == CFA_RESTORE_STATE);
            return 1;
        case CFA_GNU_ARGS_SIZE: /* for landing pads, not the CFA */
            read_uleb(b);
            return 1;
        case CFA_NOP:
            return 1;
        default:
            return 0; /* set_loc, GNU_window_save, or unknown */
    }
}

/* One instruction at b->p. */
static void step_insn(struct cfa_program *prog, struct bytes *b) {
    uint8_t op = (uint8_t)read_fixed(b, 1), low = op & 0x3f;
    switch (op & 0xc0) {
        case CFA_ADVANCE_LOC:
            prog->loc += low * prog->code_align;
            return;
        case CFA_OFFSET:
            set_reg(prog, low, OFFSET, factored(prog, signed_of(prog, read_uleb(b))));
            return;
        case CFA_RESTORE: /* libgcc leaves the register as found, not as the CIE had it */
            set_reg(prog, low, UNSAVED, 0);
            return;
        default:
            if (!register_insn(prog, op, b) && !cfa_insn(prog, op, b) && !flow_insn(prog, op, b)) prog->failed = 1;
    }
}

/* Runs instructions [b.p, b.end) while their location is below the return address (libgcc's condition). */
static void run(struct cfa_program *prog, struct bytes b) {
    prog->nsaved = 0; /* no remember/restore across the CIE's and the FDE's programs */
    while (b.p < b.end && prog->loc < prog->ra && !prog->failed && !b.failed) step_insn(prog, &b);
    assert(prog->nsaved >= 0 && prog->nsaved <= STATES); /* remember() never passes its bounds */
    prog->failed |= b.failed;
}

/* ---- the rule ---- */

static int fits16(int64_t v) { return v >= INT16_MIN && v <= INT16_MAX; }

/* The form of every rule made here, which step() in unwind_rules.c relies on: RULE_SLOW and RULE_END carry no
 * offsets; a RULE_RSP rule's CFA lies at least a word above the stack pointer (the return address was pushed
 * below it). */
static inline int well_formed(struct ioloom_rule rule) { /* inline: only asserted, gone with NDEBUG */
    if (rule.kind == RULE_SLOW || rule.kind == RULE_END) return !rule.cfa_offset && !rule.ra_offset && !rule.rbp_offset;
    return rule.kind == RULE_RBP || (rule.kind == RULE_RSP && rule.cfa_offset >= (int32_t)sizeof(uintptr_t));
}

/* The rule of the row reached, or RULE_SLOW when the walk cannot apply it exactly. */
static struct ioloom_rule rule_of(const struct row *row) {
    struct ioloom_rule slow = {0, 0, 0, RULE_SLOW};
    if (row->ra.how == UNDEFINED) return (struct ioloom_rule){0, 0, 0, RULE_END}; /* the outermost frame */
    if (row->cfa_reg != REG_RSP && row->cfa_reg != REG_RBP) return slow;
    if (row->ra.how != OFFSET || row->rsp.how != UNSAVED || row->rbp.how == OTHER) return slow;
    int64_t rbp = row->rbp.how == OFFSET ? row->rbp.offset : 0;
    if (row->cfa_offset < INT32_MIN || row->cfa_offset > INT32_MAX || !fits16(row->ra.offset) || !fits16(rbp))
        return slow;
    if (row->rbp.how == OFFSET && rbp == 0) return slow; /* 0 means "unchanged" in a rule */
    /* The stack pointer's CFA must lie above it, as the return address was pushed below the CFA. */
    if (row->cfa_reg == REG_RSP && row->cfa_offset < (int64_t)sizeof(uintptr_t)) return slow;
    return (struct ioloom_rule){(int32_t)row->cfa_offset, (int16_t)row->ra.offset, (int16_t)rbp,
                                row->cfa_reg == REG_RSP ? RULE_RSP : RULE_RBP};
}

/* libgcc's bases for an FDE (struct dwarf_eh_bases): func is the start of the function. */
struct eh_bases {
    void *tbase, *dbase, *func;
};

/* The FDE's rule at prog->ra. */
static struct ioloom_rule fde_rule(const uint8_t *fde, struct cfa_program *prog) {
    struct ioloom_rule slow = {0, 0, 0, RULE_SLOW};
    struct bytes b;
    struct cie cie;
    if (!entry_bytes(fde, &b)) return slow;
    uint32_t cie_delta = (uint32_t)read_fixed(&b, 4); /* unsigned, as libgcc's get_cie: the CIE lies before */
    if (b.failed || cie_delta == 0 || !read_cie(fde + 4 - cie_delta, &cie, prog)) return slow;
    skip(&b, 2 * (uint64_t)encoded_size(cie.fde_encoding)); /* pc_begin, pc_range: bases.func gives the start */
    if (cie.saw_z) skip(&b, read_uleb(&b));
    if (b.failed) return slow;
    prog->row = (struct row){.cfa_reg = -2};
    run(prog, cie.insns);
    run(prog, b);
    if (prog->failed) return slow;
    struct ioloom_rule rule = rule_of(&prog->row);
    assert(well_formed(rule)); /* rule_of gives only the forms the walk applies, or SLOW/END */
    return rule;
}

/* x86-64 Linux's rt_sigreturn trampoline, `mov $15, %rax; syscall`, which libgcc unwinds as a signal frame when
 * it has no FDE (x86_64_fallback_frame_state). */
static const uint8_t sigreturn_code[9] = {0x48, 0xc7, 0xc0, 0x0f, 0x00, 0x00, 0x00, 0x0f, 0x05};

struct code_search {
    uintptr_t pc;
    int found; /* [pc, pc + 9) lies in an executable segment of a loaded module */
};

static int holds_code(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    struct code_search *search = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && search->pc >= lo &&
            search->pc + sizeof sigreturn_code <= lo + ph->p_filesz)
            search->found = 1;
    }
    return search->found;
}

/* A return address without an FDE: libgcc ends the stack there, unless the code at it is the sigreturn
 * trampoline (then a signal frame, not followed here). Code outside every module's file is not read: slow. */
static struct ioloom_rule no_fde_rule(uintptr_t ra) {
    struct code_search search = {ra, 0};
    dl_iterate_phdr(holds_code, &search);
    if (!search.found || memcmp((const void *)ra, sigreturn_code, sizeof sigreturn_code) == 0)
        return (struct ioloom_rule){0, 0, 0, RULE_SLOW};
    return (struct ioloom_rule){0, 0, 0, RULE_END};
}

struct ioloom_rule ioloom_cfi_rule(uintptr_t ra, ioloom_find_fde_fn *find_fde) {
    if (!find_fde || !ra) return (struct ioloom_rule){0, 0, 0, RULE_SLOW};
    struct eh_bases bases = {0};
    const uint8_t *fde = find_fde((void *)(ra - 1), &bases);
    if (!fde) return no_fde_rule(ra);
    struct cfa_program prog = {.loc = (uintptr_t)bases.func, .ra = ra};
    return fde_rule(fde, &prog);
}
#endif
