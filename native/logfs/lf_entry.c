/* The validity of an index entry (docs/logfs-format.md, "Valid entries"): what a reader checks of every entry
 * of every index it loads before it computes anything from one. Compiled into the library and the tool. */
#include "lf_format.h"

/* Does the last of `count` records of `length` bytes, `stride` apart from `start`, end at or before
 * LF_MAX_SIZE, with no step of the computation overflowing? */
static int ends_in_range(uint64_t start, uint64_t count, uint64_t stride, uint64_t length) {
    uint64_t span, end;
    return !__builtin_mul_overflow(count - 1, stride, &span) && !__builtin_add_overflow(start, span, &end) &&
           !__builtin_add_overflow(end, length, &end) && end <= LF_MAX_SIZE;
}

const char *lf_entry_problem(const struct lf_entry *e) {
    if (e->kind < LF_WRITE || e->kind > LF_UNLINK) return "kind";
    if (e->count == 0 || (e->kind != LF_WRITE && e->count != 1)) return "count";
    if ((e->kind == LF_WRITE) != (e->length > 0)) return "length";
    /* Records of a pattern never overlap, in the file or in the log: a window of W bytes holds at most W of them. */
    if (e->count > 1 && e->stride < e->length) return "stride";
    if (e->count > 1 && e->pstride < e->length) return "pstride";
    if (!ends_in_range(e->offset, e->count, e->stride, e->length)) return "offset";
    if (!ends_in_range(e->physical, e->count, e->pstride, e->length)) return "physical";
    return 0;
}
