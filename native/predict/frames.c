/* ioloom-predict-frames FILE ROUNDS: calls pwrite with a frame pointer that lies, for the tracer's frame-pointer
 * unwinder (native/trace/unwind.c; tests/test_predict_tracer.py). On x86-64, each round makes one pwrite of 64
 * bytes per lie below, from an assembly helper that sets the frame pointer register to the lie around the call:
 * null, an unmapped address, a misaligned stack address, a record pointing down the stack (a loop), a record
 * pointing past the stack's end, a record pointing into unmapped memory, and a well-formed chain of two records
 * with made-up return addresses. The traced program must run as it does untraced: FILE ends up holding every
 * write, at its offset. Elsewhere the helper is plain C (the lies are not told). */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { BLOCK = 64, LIES = 7 };

/* pwrite(fd, buf, BLOCK, offset) with the frame pointer register set to `fp` during the call. */
long pwrite_with_frame(int fd, const void *buf, long offset, uintptr_t fp);
#ifdef __x86_64__
__asm__(".text\n"
        ".globl pwrite_with_frame\n"
        ".type pwrite_with_frame, @function\n"
        "pwrite_with_frame:\n"
        "  pushq %rbp\n"      /* rsp 16-aligned again, as the call below needs */
        "  movq %rcx, %rbp\n" /* the lie */
        "  movq %rdx, %rcx\n" /* pwrite(fd, buf, BLOCK, offset) */
        "  movl $64, %edx\n"
        "  call pwrite@PLT\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size pwrite_with_frame, .-pwrite_with_frame\n");
#else
long pwrite_with_frame(int fd, const void *buf, long offset, uintptr_t fp) {
    (void)fp;
    return pwrite(fd, buf, BLOCK, offset);
}
#endif

/* The lie number `which`, built in `records` (on this function's caller's stack, 16-byte aligned). */
static uintptr_t lie(int which, uintptr_t *records) {
    uintptr_t here = (uintptr_t)records;
    records[0] = here + 16, records[1] = 0x1234; /* a chain: record -> record 2 */
    records[2] = 0, records[3] = 0x5678;
    uintptr_t chains[LIES] = {0, 0x10, here + 8, here, here, here, here};
    if (which == 3) records[0] = here - 64;        /* down the stack */
    if (which == 4) records[0] = UINTPTR_MAX - 15; /* past the stack's end */
    if (which == 5) records[0] = 0x100000;         /* unmapped */
    return chains[which];
}

int main(int argc, char **argv) {
    if (argc != 3 || atoi(argv[2]) < 1) {
        fputs("usage: ioloom-predict-frames FILE ROUNDS\n", stderr);
        return 2;
    }
    int fd = open(argv[1], O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) return perror(argv[1]), 1;
    char block[BLOCK];
    _Alignas(16) uintptr_t records[4];
    for (long i = 0, rounds = atoi(argv[2]); i < rounds * LIES; i++) {
        memset(block, 'a' + (int)(i % 26), sizeof block);
        if (pwrite_with_frame(fd, block, i * BLOCK, lie((int)(i % LIES), records)) != BLOCK) return perror("pwrite"), 1;
    }
    return close(fd) ? perror("close"), 1 : 0;
}
