/* The kernel's rules on a regular file's mode that its owner's and writers' calls change, applied to a container's
 * logical mode (the metadata's), which the kernel never sees as a file's (docs/logfs-format.md, "Times and stat
 * fields"): who may chmod, and when the set-user-ID and set-group-ID bits go at a create, chmod, chown, write and
 * truncate (Linux's inode_owner_or_capable, mode_strip_sgid, setattr_copy, chown_common and file_remove_privs).
 * Privilege is the capability the kernel asks for (CAP_FOWNER, CAP_FSETID), not the user id: root without it is
 * treated as the kernel treats it. */
#include <assert.h>
#include <errno.h>
#include <linux/capability.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "lf_internal.h"

/* Has the calling thread the capability `cap` in its effective set? Asked of the kernel (capget): libc has no
 * wrapper, and only the calls that may drop a bit ask. */
static int capable(int cap) {
    struct __user_cap_header_struct head = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {{0}};
    int saved = errno;
    long rc = syscall(SYS_capget, &head, data);
    errno = saved;
    return rc == 0 && (data[cap / 32].effective >> (cap % 32)) & 1;
}

int lf_in_group(gid_t gid, int effective) {
    if (gid == (effective ? getegid() : getgid())) return 1;
    gid_t groups[256];
    int n = getgroups(256, groups);
    for (int i = 0; i < n; i++)
        if (groups[i] == gid) return 1;
    return 0;
}

/* The kernel's in_group_or_capable: the file's group is one of the caller's, or it may keep set-ID bits anyway. */
static int in_group_or_fsetid(gid_t gid) { return lf_in_group(gid, 1) || capable(CAP_FSETID); }

mode_t lf_mode_at_create(mode_t mode, const struct stat *made) {
    assert(!(mode & ~(mode_t)07777)); /* a logical mode is permission bits alone (the metadata's) */
    /* mode_strip_sgid: a group-executable set-group-ID file made in a set-group-ID directory (whose group a new
     * directory, the container's, takes with that bit) of a group the caller is not in */
    if ((mode & (S_ISGID | S_IXGRP)) != (S_ISGID | S_IXGRP) || !(made->st_mode & S_ISGID)) return mode;
    return in_group_or_fsetid(made->st_gid) ? mode : mode & ~(mode_t)S_ISGID;
}

int lf_may_chmod(const struct stat *dir) { return dir->st_uid == geteuid() || capable(CAP_FOWNER); }

mode_t lf_mode_after_chmod(mode_t mode, gid_t gid) {
    assert(!(mode & ~(mode_t)07777)); /* a logical mode is permission bits alone (the metadata's) */
    return !(mode & S_ISGID) || in_group_or_fsetid(gid) ? mode : mode & ~(mode_t)S_ISGID;
}

/* setattr_should_drop_sgid: a group-executable file's set-group-ID bit, or any when outside the caller's groups. */
static int sgid_goes(mode_t mode, gid_t gid) {
    return (mode & S_ISGID) && ((mode & S_IXGRP) || !in_group_or_fsetid(gid));
}

mode_t lf_mode_after_chown(mode_t mode, gid_t gid) {
    assert(!(mode & ~(mode_t)07777)); /* a logical mode is permission bits alone (the metadata's) */
    return mode & ~(mode_t)(S_ISUID | (sgid_goes(mode, gid) ? S_ISGID : 0));
}

mode_t lf_mode_after_write(mode_t mode, gid_t gid) {
    assert(!(mode & ~(mode_t)07777)); /* a logical mode is permission bits alone (the metadata's) */
    mode_t kill = (mode & S_ISUID) | (sgid_goes(mode, gid) ? S_ISGID : 0);
    return kill && !capable(CAP_FSETID) ? mode & ~kill : mode;
}
