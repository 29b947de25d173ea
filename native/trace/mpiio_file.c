/* MPI-IO calls on a file that move no data: open (and the hints in effect after it), close, delete, sync,
 * set_size, preallocate, get_size, seek, seek_shared, set_view, set_info, set_atomicity. Field use per call
 * is in docs/trace-format.md ("MPI-IO events"). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mpiio.h"

/* The file's absolute, normalised path (malloc'd), as the file table names it (name without its file-system
 * prefix); NULL if memory is short. */
static char *absolute_path(const char *name) {
    char *path = NULL, cwd[4096];
    if (name[0] == '/')
        path = strdup(name);
    else if (!getcwd(cwd, sizeof cwd) || asprintf(&path, "%s/%s", cwd, name) < 0)
        return NULL;
    if (path) ioloom_normalise_path(path);
    return path;
}

/* "key=value" lines of the hints the MPI library applied to the file, as the note "mpiio.hints:<path>". */
static void note_hints(const struct mpiio_file *file) {
    MPI_Info info;
    int nkeys = 0;
    if (PMPI_File_get_info(file->fh, &info) != MPI_SUCCESS) return;
    PMPI_Info_get_nkeys(info, &nkeys);
    size_t size = 1, used = 0;
    char *text = calloc(1, size);
    for (int i = 0; i < nkeys && text; i++) {
        char key[MPI_MAX_INFO_KEY + 1];
        int length = 0, found = 0;
        PMPI_Info_get_nthkey(info, i, key);
        PMPI_Info_get_valuelen(info, key, &length, &found);
        if (!found) continue;
        size_t need = used + strlen(key) + (size_t)length + 3;
        char *grown = need > size ? realloc(text, size = need * 2) : text;
        if (!grown) break;
        text = grown;
        used += (size_t)sprintf(text + used, "%s=", key);
        PMPI_Info_get(info, key, length, text + used, &found);
        used += strlen(text + used);
        text[used++] = '\n';
        text[used] = '\0';
    }
    PMPI_Info_free(&info);
    char *name = NULL;
    if (text && file->path && asprintf(&name, "mpiio.hints:%s", file->path) >= 0) ioloom_note(name, text);
    free(name);
    free(text);
}

static int traced_MPI_File_open(__typeof__(&PMPI_File_open) next, MPI_Comm comm, const char *filename, int amode,
                                MPI_Info info, MPI_File *fh) {
    if (!mpiio_enter()) return next(comm, filename, amode, info, fh);
    /* Counted on every rank whatever happens next: the count must stay equal across the communicator. */
    int64_t open_number = mpiio_comm_next_open(comm);
    struct mpiio_call call;
    mpiio_call_start(&call, IOLOOM_OP_MPI_File_open, NULL);
    int rc = next(comm, filename, amode, info, fh);
    int saved_errno = errno; /* ROMIO leaves open(2)'s errno, and programs print it: keep it across our work */
    int32_t file_id = ioloom_file_id(filename, -1);
    struct mpiio_file *file = NULL;
    if (file_id >= 0 && rc == MPI_SUCCESS && (file = mpiio_file_add(*fh))) {
        file->file_id = file_id;
        file->handle = PMPI_File_c2f(*fh);
        file->coll_base = open_number << 32;
        file->sequential = (amode & MPI_MODE_SEQUENTIAL) != 0;
        file->path = absolute_path(ioloom_romio_path(filename));
        call.row.handle = file->handle;
        call.row.coll_seq = mpiio_file_next_coll(file);
        note_hints(file);
    }
    if (file_id >= 0) {
        call.row.file_id = file_id;
        call.row.aux = amode;
        call.row.ret_bytes = 0;
        mpiio_call_finish(&call, rc);
    } else {
        mpiio_call_drop(&call); /* an excluded path: nothing recorded */
    }
    mpiio_leave();
    errno = saved_errno;
    return rc;
}
MPIIO_BOTH_NAMES(MPI_File_open, (MPI_Comm comm, const char *filename, int amode, MPI_Info info, MPI_File *fh),
                 (comm, filename, amode, info, fh))

static int traced_MPI_File_delete(__typeof__(&PMPI_File_delete) next, const char *filename, MPI_Info info) {
    if (!mpiio_enter()) return next(filename, info);
    int32_t file_id = ioloom_file_id(filename, -1);
    int rc;
    if (file_id >= 0) {
        struct mpiio_call call;
        mpiio_call_start(&call, IOLOOM_OP_MPI_File_delete, NULL);
        call.row.file_id = file_id;
        rc = next(filename, info);
        call.row.ret_bytes = 0;
        mpiio_call_finish(&call, rc);
    } else {
        rc = next(filename, info);
    }
    mpiio_leave();
    return rc;
}
MPIIO_BOTH_NAMES(MPI_File_delete, (const char *filename, MPI_Info info), (filename, info))

/* A call on an open file: BEFORE and AFTER are statements that may use `call`, `file` and (AFTER) `rc`;
 * ret_bytes is 0 on success unless AFTER sets it; the errno the call left is kept across AFTER. COLL: the call is
 * collective over the file's group. One passed through inside another MPI call may move the individual pointer
 * (a seek, a view) unseen: it is asked again, and after a view set so, the view too (mpiio_pointer_unseen). */
#define MPIIO_FILE_CALL(NAME, COLL, PARAMS, ARGS, FH, BEFORE, AFTER)         \
    static int traced_##NAME(__typeof__(&P##NAME) next, MPIIO_ARGS PARAMS) { \
        if (!mpiio_enter()) {                                                \
            mpiio_pointer_unseen(FH, IOLOOM_OP_##NAME);                      \
            return next(MPIIO_ARGS ARGS);                                    \
        }                                                                    \
        struct mpiio_file *file = mpiio_file_find(FH);                       \
        int rc;                                                              \
        if (file && file->file_id >= 0) {                                    \
            struct mpiio_call call;                                          \
            mpiio_call_start(&call, IOLOOM_OP_##NAME, file);                 \
            if (COLL) call.row.coll_seq = mpiio_file_next_coll(file);        \
            BEFORE;                                                          \
            rc = next(MPIIO_ARGS ARGS);                                      \
            int saved_errno = errno;                                         \
            call.row.ret_bytes = 0;                                          \
            AFTER;                                                           \
            mpiio_call_finish(&call, rc);                                    \
            errno = saved_errno;                                             \
        } else {                                                             \
            rc = next(MPIIO_ARGS ARGS);                                      \
        }                                                                    \
        mpiio_leave();                                                       \
        return rc;                                                           \
    }                                                                        \
    MPIIO_BOTH_NAMES(NAME, PARAMS, ARGS)

/* The handle is invalid after close: forget it (the MPI library reuses the address for the next open). */
MPIIO_FILE_CALL(MPI_File_close, 1, (MPI_File * fh), (fh), *fh, , if (rc == MPI_SUCCESS) mpiio_file_remove(file))
MPIIO_FILE_CALL(MPI_File_sync, 1, (MPI_File fh), (fh), fh, , )
/* offset = the new size. */
MPIIO_FILE_CALL(MPI_File_set_size, 1, (MPI_File fh, MPI_Offset size), (fh, size), fh, call.row.offset = size, )
MPIIO_FILE_CALL(MPI_File_preallocate, 1, (MPI_File fh, MPI_Offset size), (fh, size), fh, call.row.offset = size, )
/* ret_bytes = the size found. */
MPIIO_FILE_CALL(MPI_File_get_size, 0, (MPI_File fh, MPI_Offset *size), (fh, size), fh, ,
                if (rc == MPI_SUCCESS) call.row.ret_bytes = *size)
/* The individual pointer after a seek, if known (mpiio.h, mpiio_pointer). */
static void pointer_sought(struct mpiio_file *file, int rc, MPI_Offset offset, int whence) {
    int64_t before = __atomic_load_n(&file->pointer, __ATOMIC_RELAXED);
    mpiio_pointer_set(file, rc != MPI_SUCCESS                       ? -1
                            : whence == MPI_SEEK_SET                ? offset
                            : whence == MPI_SEEK_CUR && before >= 0 ? before + offset
                                                                    : -1);
}

/* offset = the offset given (etype units, relative to whence); aux = whence. */
MPIIO_FILE_CALL(MPI_File_seek, 0, (MPI_File fh, MPI_Offset offset, int whence), (fh, offset, whence), fh,
                (call.row.offset = offset, call.row.aux = whence), pointer_sought(file, rc, offset, whence))
MPIIO_FILE_CALL(MPI_File_seek_shared, 1, (MPI_File fh, MPI_Offset offset, int whence), (fh, offset, whence), fh,
                (call.row.offset = offset, call.row.aux = whence), )
MPIIO_FILE_CALL(MPI_File_set_info, 1, (MPI_File fh, MPI_Info info), (fh, info), fh, ,
                if (rc == MPI_SUCCESS) note_hints(file))
/* aux = the flag. */
MPIIO_FILE_CALL(MPI_File_set_atomicity, 1, (MPI_File fh, int flag), (fh, flag), fh, call.row.aux = flag, )

/* offset = disp; once the call has accepted the view: aux = etype extent, req_bytes = filetype extent (bytes). The
 * library is asked only about datatypes a call has accepted (mpiio.h, datatype sizes). */
static void describe_view(struct mpiio_call *call, MPI_Datatype etype, MPI_Datatype filetype) {
    MPI_Count lb = 0, etype_extent = -1, filetype_extent = -1;
    PMPI_Type_get_extent_x(etype, &lb, &etype_extent);
    PMPI_Type_get_extent_x(filetype, &lb, &filetype_extent);
    call->row.aux = etype_extent;
    call->row.req_bytes = filetype_extent;
}

/* A new view also sets the individual pointer to 0. */
static void view_set(struct mpiio_call *call, struct mpiio_file *file, int rc, MPI_Offset disp, MPI_Datatype etype,
                     MPI_Datatype filetype) {
    mpiio_pointer_set(file, rc == MPI_SUCCESS && !file->sequential ? 0 : -1); /* sequential: no pointer to follow */
    if (rc != MPI_SUCCESS) return;
    describe_view(call, etype, filetype);
    mpiio_file_set_view(file, disp, etype, filetype);
}

MPIIO_FILE_CALL(MPI_File_set_view, 1,
                (MPI_File fh, MPI_Offset disp, MPI_Datatype etype, MPI_Datatype filetype, const char *datarep,
                 MPI_Info info),
                (fh, disp, etype, filetype, datarep, info), fh, call.row.offset = disp,
                view_set(&call, file, rc, disp, etype, filetype))
