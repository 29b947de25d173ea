/* mmap of a container. A container's bytes are scattered over logs, so no kernel mapping can show them; a
 * mapping that never writes back is served by materialising it: private anonymous memory filled with the
 * logical bytes of the mapped range, then given the protection asked for. That covers every read-only mapping
 * (MAP_SHARED or MAP_PRIVATE: git, numpy's mmap_mode='r', the dynamic loader) and private writable ones, whose
 * changes never reach the file anyway. A shared writable mapping would have to carry stores back into the logs
 * and stay coherent with other processes: it is refused (ENODEV, counted) rather than served wrongly.
 *
 * What differs from a mapping of a plain file (docs/logfs-format.md, "mmap"): the mapping is a snapshot taken
 * at mmap time (later writes to the file do not show in it), and pages past the end of the file read as zeros
 * where a plain file's mapping raises SIGBUS. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

#include "lf_fdtable.h"

/* The mapping could write back into the file: only then is materialising wrong. */
static int writes_back(int prot, int flags) { return (prot & PROT_WRITE) && (flags & MAP_TYPE) != MAP_PRIVATE; }

/* mmap's own argument and access checks, in the kernel's order, made before any memory is touched; then the
 * refusal of what cannot be served. 0, or -1 with errno set. */
static int refused(struct lf_ofd *o, size_t len, int prot, int flags, off_t off) {
    int access = lf_flags(o->file) & O_ACCMODE;
    if (len == 0 || off < 0 || (uint64_t)off % (uint64_t)sysconf(_SC_PAGESIZE)) return errno = EINVAL, -1;
    if (access == O_WRONLY || (writes_back(prot, flags) && access != O_RDWR)) return errno = EACCES, -1;
    return writes_back(prot, flags) ? lf_unsupported(LF_UNS_MMAP, ENODEV) : 0;
}

/* Reads the logical range [off, off + len) into the fresh mapping; bytes past the end stay zero. */
static int fill(struct lf_ofd *o, char *map, size_t len, uint64_t off) {
    for (size_t done = 0; done < len;) {
        ssize_t got = lf_pread(o->file, map + done, len - done, off + done);
        if (got < 0) return -1;
        if (got == 0) break;
        done += (size_t)got;
    }
    return 0;
}

static void *materialise(struct lf_ofd *o, void *addr, size_t len, int prot, int flags, off_t off) {
    int anon = (flags & ~MAP_TYPE) | MAP_PRIVATE | MAP_ANONYMOUS;
    char *map = IOLOOM_NEXT(mmap)(addr, len, PROT_READ | PROT_WRITE, anon, -1, 0);
    if (map == MAP_FAILED) return MAP_FAILED;
    if (LF_INSIDE(fill(o, map, len, (uint64_t)off)) == 0 && IOLOOM_NEXT(mprotect)(map, len, prot) == 0) return map;
    int saved = errno;
    IOLOOM_NEXT(munmap)(map, len);
    errno = saved;
    return MAP_FAILED;
}

EXPORT void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off) {
    struct lf_ofd *o = flags & MAP_ANONYMOUS ? NULL : lf_fd(fd);
    if (!o) return IOLOOM_NEXT(mmap)(addr, len, prot, flags, fd, off);
    return refused(o, len, prot, flags, off) ? MAP_FAILED : materialise(o, addr, len, prot, flags, off);
}
void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off) ALIAS(mmap);
