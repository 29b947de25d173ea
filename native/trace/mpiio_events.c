/* Filling and recording MPI-IO events: the cross-layer window, offsets through the view, byte counts from
 * datatypes and statuses. The field conventions are in mpiio.h and docs/trace-format.md. */
#include "mpiio.h"

__thread int mpiio_depth;

void mpiio_call_start(struct mpiio_call *call, enum ioloom_op op, const struct mpiio_file *file) {
    call->row = (struct ioloom_raw_event){.offset = -1, .req_bytes = -1, .ret_bytes = -1, .handle = -1, .aux = -1,
                                          .coll_seq = -1, .file_id = -1, .op = (uint16_t)op, .layer = IOLOOM_MPIIO,
                                          .ticks = (uint8_t)ioloom_tsc};
    if (file) {
        call->row.file_id = file->file_id;
        call->row.handle = file->handle;
    }
    /* The window opens before the clock is read, so every POSIX event of this call lies inside it. */
    call->row.parent = ioloom_link.current;
    call->row.call_id = ioloom_link_open();
    call->row.t_start = ioloom_ticks();
}

static int32_t error_class(int rc) {
    int class = rc;
    PMPI_Error_class(rc, &class);
    return class;
}

void mpiio_call_finish(struct mpiio_call *call, int rc) {
    call->row.t_end = ioloom_ticks();
    if (IOLOOM_UNLIKELY(rc != MPI_SUCCESS)) {
        call->row.err = error_class(rc);
        call->row.ret_bytes = -1;
    }
    ioloom_append_row(&call->row);
    ioloom_link_close(call->row.parent);
}

/* The byte offset of etype number `offset` through the file's view. For views with holes the MPI library
 * knows the filetype's layout; asking it is a local call. */
static int64_t byte_offset(const struct mpiio_file *file, MPI_Offset offset) {
    if (file->contiguous_view)
        return file->disp + offset * file->etype_size;
    MPI_Offset bytes = -1;
    if (PMPI_File_get_byte_offset(file->fh, offset, &bytes) != MPI_SUCCESS)
        return -1;
    return bytes;
}

int mpiio_data_start(struct mpiio_call *call, enum ioloom_op op, MPI_File fh, enum mpiio_position position,
                     MPI_Offset offset, MPI_Count count, MPI_Datatype datatype, int collective) {
    struct mpiio_file *file = mpiio_file_find(fh);
    if (!file || file->file_id < 0)
        return 0;
    MPI_Offset etype_offset = -1;
    if (position == MPIIO_EXPLICIT)
        etype_offset = offset;
    else if (position == MPIIO_INDIVIDUAL && !file->sequential &&
             PMPI_File_get_position(fh, &etype_offset) != MPI_SUCCESS)
        etype_offset = -1;
    MPI_Count type_size = 0;
    PMPI_Type_size_x(datatype, &type_size);
    mpiio_call_start(call, op, file);
    call->row.aux = etype_offset;
    call->row.offset = etype_offset >= 0 ? byte_offset(file, etype_offset) : -1;
    call->row.req_bytes = (int64_t)count * (int64_t)type_size;
    if (collective)
        call->row.coll_seq = mpiio_file_next_coll(file);
    return 1;
}

void mpiio_data_finish(struct mpiio_call *call, int rc, const MPI_Status *status) {
    call->row.ret_bytes = rc == MPI_SUCCESS ? mpiio_status_bytes(status) : -1;
    mpiio_call_finish(call, rc);
}

void mpiio_data_initiated(struct mpiio_call *call, int rc, struct mpiio_pending *pending) {
    *pending = (struct mpiio_pending){.call_id = rc == MPI_SUCCESS ? call->row.call_id : 0, .file_id = call->row.file_id,
                                      .handle = call->row.handle, .offset = call->row.offset,
                                      .coll_seq = call->row.coll_seq};
    mpiio_call_finish(call, rc);
}

void mpiio_complete(struct mpiio_call *call, const struct mpiio_pending *pending, const MPI_Status *status) {
    call->row.file_id = pending->file_id;
    call->row.handle = pending->handle;
    call->row.offset = pending->offset;
    call->row.coll_seq = pending->coll_seq;
    call->row.aux = (int64_t)pending->call_id;
    call->row.ret_bytes = mpiio_status_bytes(status);
    mpiio_call_finish(call, MPI_SUCCESS);
}
