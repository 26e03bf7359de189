/* Test hooks of the checkpoint writer (not part of the public API): fault injection in
 * the style of SQLite's test VFS. Every file-system call that commit makes (create,
 * write, fsync, close, rename, directory open, directory fsync) is counted; with
 * dd_ckpt_fault_inject(nth, err) the nth counted call of each following commit fails
 * with errno = err, as if the system call had failed. The settings are per thread. */
#ifndef DD_CKPT_INTERNAL_H
#define DD_CKPT_INTERNAL_H

/* nth >= 1 arms the fault (each commit counts from 1 again); nth = 0 disarms it. */
void dd_ckpt_fault_inject(int nth, int err);
/* Number of counted file-system calls made by the most recent commit. */
int dd_ckpt_fault_ops(void);
/* Name of the operation that was failed by the most recent injected fault ("" if none). */
const char *dd_ckpt_fault_last_op(void);

#endif
