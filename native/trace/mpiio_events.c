/* Filling and recording MPI-IO events: the cross-layer window, offsets through the view, byte counts from
 * datatypes and statuses. The field conventions are in mpiio.h and docs/trace-format.md. */
#include "mpiio.h"

__thread int mpiio_depth;

int32_t mpiio_error_class(int rc) {
    int class = rc;
    PMPI_Error_class(rc, &class);
    return class;
}

MPI_Offset mpiio_individual_position(const struct mpiio_file *file) {
    MPI_Offset position = -1;
    if (file->sequential || PMPI_File_get_position(file->fh, &position) != MPI_SUCCESS)
        return -1; /* a file opened MPI_MODE_SEQUENTIAL has no individual pointer to ask for */
    return position;
}

void mpiio_pointer_unseen(MPI_File fh, enum ioloom_op op) {
    struct mpiio_file *file = mpiio_depth ? mpiio_file_find(fh) : NULL;
    if (!file) return;
    if (op == IOLOOM_OP_MPI_File_set_view) /* plain stores: why no other thread reads them now, mpiio.h */
        file->etype_size = file->contiguous_view = 0;
    mpiio_pointer_set(file, -1);
}

int64_t mpiio_view_byte_offset(const struct mpiio_file *file, MPI_Offset offset) {
    MPI_Offset bytes = -1;
    if (PMPI_File_get_byte_offset(file->fh, offset, &bytes) != MPI_SUCCESS) return -1;
    return bytes;
}

void mpiio_data_initiated(struct mpiio_call *call, int rc, struct mpiio_pending *pending) {
    mpiio_data_sized(call, rc);
    *pending = (struct mpiio_pending){.call_id = rc == MPI_SUCCESS ? call->row.call_id : 0,
                                      .file_id = call->row.file_id,
                                      .handle = call->row.handle,
                                      .offset = call->row.offset,
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
