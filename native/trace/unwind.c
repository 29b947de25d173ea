/* The thread's stack bounds, and the frame-pointer unwinder of architectures other than x86-64 (unwind.h).
 * Bounds: the mapping of /proc/self/maps that holds the wrapper's frame, read with raw system calls, no
 * allocation (pthread_getattr_np reads the same file through stdio and malloc for the main thread: neither safe
 * in a signal handler nor untraced), so a handler on an alternate stack gets that stack's bounds.
 * The walk (not on x86-64, where unwind_rules.c steps frames by their DWARF rules): a function built with frame
 * pointers keeps a frame record at its frame pointer: the caller's frame pointer, then its own return address.
 * Following the records from a wrapper's frame gives the call stack in a few loads per frame. Code built without
 * frame pointers leaves anything in that register, so each record is checked before it is read: inside the
 * thread's stack, strictly above the record before it (the chain ends), aligned. Reads never leave that mapping,
 * so a wrong frame pointer gives wrong addresses, never a fault. */
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "trace_internal.h"
#include "unwind.h"

enum {
    RECORD = 2 * sizeof(uintptr_t), /* a frame record: the caller's frame pointer, the return address */
    RECORD_ALIGN = 16,              /* x86-64 and AArch64 keep frame records 16-byte aligned */
    MAX_SCANS = 16,                 /* mappings looked up per thread (a stack that grew, a signal stack) */
    MAPS_BYTES = 1024,              /* /proc/self/maps is read this much at a time */
};

/* The mapping that holds this thread's stack as last looked up; scans: lookups so far. */
static IOLOOM_TLS struct {
    uintptr_t lo, hi;
    uint32_t scans;
} stack;

/* ---- the mapping that holds an address, from /proc/self/maps ---- */

/* A line "lo-hi perms ..." read one character at a time: field 0 lo, 1 hi, 2 the rest. */
struct maps_line {
    uintptr_t bound[2];
    int field;
};

static int hex_digit(char ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    return -1;
}

/* Takes one character; 1 when it ends the bounds of a mapping that holds addr. */
static int maps_step(struct maps_line *line, char ch, uintptr_t addr) {
    if (ch == '\n') {
        *line = (struct maps_line){{0, 0}, 0};
        return 0;
    }
    if (line->field == 2) return 0;
    int digit = hex_digit(ch);
    if (digit >= 0) {
        line->bound[line->field] = line->bound[line->field] << 4 | (uintptr_t)digit;
        return 0;
    }
    line->field = line->field == 0 && ch == '-' ? 1 : 2;
    return line->field == 2 && addr >= line->bound[0] && addr < line->bound[1];
}

/* Reads the maps until a mapping holds addr: 1 and line->bound set, else 0. */
static int maps_find(int fd, struct maps_line *line, uintptr_t addr) {
    char text[MAPS_BYTES];
    long n;
    while ((n = syscall(SYS_read, fd, text, sizeof text)) > 0 || (n < 0 && errno == EINTR))
        for (long i = 0; i < n; i++)
            if (maps_step(line, text[i], addr)) return 1;
    return 0;
}

/* Looks up the mapping that holds addr as this thread's stack; 0 if none or the lookups are spent. */
static int scan_stack(uintptr_t addr) {
    if (stack.scans >= MAX_SCANS) return 0;
    stack.scans++;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    struct maps_line line = {{0, 0}, 0};
    int found = maps_find(fd, &line, addr);
    syscall(SYS_close, fd);
    if (found) stack.lo = line.bound[0], stack.hi = line.bound[1];
    return found;
}

int ioloom_stack_span_of(uintptr_t addr, struct ioloom_stack_span *span) {
    if (!(addr >= stack.lo && addr < stack.hi) && !scan_stack(addr)) return 0;
    *span = (struct ioloom_stack_span){stack.lo, stack.hi};
    return 1;
}

/* ---- the frame-pointer walk ---- */
#ifndef __x86_64__

/* A frame record at fp can be read whole: in the stack and aligned. */
static int readable(uintptr_t fp) {
    return fp >= stack.lo && fp < stack.hi && stack.hi - fp >= RECORD && fp % RECORD_ALIGN == 0;
}

int ioloom_unwind_stack(const void *frame, const struct ioloom_code_range *last, uintptr_t *pc, int max) {
    uintptr_t fp = (uintptr_t)frame;
    struct ioloom_stack_span span;
    if (!ioloom_stack_span_of(fp, &span) || !readable(fp)) return 0;
    int n = 0;
    for (;;) {
        const uintptr_t *record = (const uintptr_t *)fp;
        uintptr_t caller = record[0], ret = record[1];
        if (!ret) break;
        pc[n++] = ret;
        if (n == max || (ret >= last->lo && ret < last->hi)) break;
        if (caller <= fp || !readable(caller)) break; /* the chain only goes up the stack: no loop */
        fp = caller;
    }
    return n;
}

void ioloom_unwind_start(void) {}

struct ioloom_unwind_counts ioloom_unwind_counts(void) { return (struct ioloom_unwind_counts){0, 0, 0}; }

void ioloom_unwind_after_fork(void) {}
#endif
