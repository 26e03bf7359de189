#!/usr/bin/env python3
"""Seeds for fuzz_ps_coord (called by make_corpus.sh CORPUS_DIR): the training
coordinator's state machine played by up to four workers (input format in
tests/fuzz/fuzz_ps_coord.c: 4 set-up bytes, then [op][worker][dt] messages).
The runs of the honest workers (one, two interleaved, --ps-min-workers 2, several
epochs) and of the faulty ones cli_ps_train and test_ps_load_cli play with processes: a
lease that expires and goes to another worker, a late commit, a worker silent after its
commit (its update applied on its behalf, or lost), duplicate and out-of-order commits
and dones, resends, old requests, bye and restart, malformed and stray messages."""
import os
import sys

HELLO, LEASE, COMMIT, COMMIT_AT, DONE, DONE_AT, BYE, RESEND, OLD, RAW, TICK, RESTART = range(12)
M_PING, M_HELLO, M_LEASE, M_COMMIT, M_DONE, M_BYE = 4, 8, 9, 10, 11, 12


def setup(staleness=0, stale_lr=0, min_workers=1, apply_fails=0, batches=3, frames=4, short=0, epochs=1):
    b0 = staleness | stale_lr << 2 | (min_workers - 1) << 3 | apply_fails << 5
    return bytes([b0, batches - 1, (frames - 1) | short << 3, epochs - 1])


def m(op, w=0, dt=0, extra=b''):
    return bytes([op, w, dt]) + extra


def batch(w=0):
    return m(LEASE, w) + m(COMMIT, w) + m(DONE, w)


out = os.path.join(sys.argv[1], 'ps_coord')
os.makedirs(out, exist_ok=True)
seeds = {
    'honest_one': setup(batches=3, epochs=2) + m(HELLO) + batch() * 6 + m(LEASE) + m(BYE),
    'honest_two_ssp1': setup(staleness=1, stale_lr=1, batches=5, frames=3, short=1) + m(HELLO, 0) + m(HELLO, 1)
    + m(LEASE, 0) + m(LEASE, 1) + m(COMMIT, 1) + m(COMMIT, 0) + m(DONE, 0) + m(DONE, 1) + batch(0) + batch(1) + batch(0)
    + m(LEASE, 1) + m(BYE, 0) + m(BYE, 1),
    'min_workers_2': setup(min_workers=2, batches=2) + m(HELLO, 0) + m(LEASE, 0) + m(HELLO, 1) + batch(0) + batch(1),
    'async_inf': setup(staleness=3, batches=8, frames=2, epochs=3) + m(HELLO, 0) + m(HELLO, 1) + m(HELLO, 2)
    + batch(0) * 3 + batch(1) + batch(2) * 2,
    'lease_expires_late_commit': setup(batches=2) + m(HELLO, 0) + m(LEASE, 0) + m(TICK, 0, 255) * 5 + m(HELLO, 1)
    + batch(1) + m(COMMIT, 0) + m(LEASE, 0) + m(COMMIT, 0) + m(DONE, 0),
    'silent_after_commit': setup(batches=2) + m(HELLO, 0) + m(LEASE, 0) + m(COMMIT, 0) + m(TICK, 0, 255) * 9
    + m(HELLO, 1) + batch(1) + m(DONE, 0),
    'silent_after_commit_lost': setup(apply_fails=1, batches=2) + m(HELLO, 0) + m(LEASE, 0) + m(COMMIT, 0)
    + m(TICK, 0, 255) * 9 + m(HELLO, 1) + batch(1),
    'duplicates_resends': setup(batches=2) + m(HELLO, 0) + m(LEASE, 0) + m(RESEND, 0) + m(COMMIT, 0) + m(RESEND, 0)
    + m(COMMIT, 0) + m(DONE, 0) + m(RESEND, 0) + m(DONE, 0) + m(OLD, 0, 0) + m(OLD, 0, 0, b'') + batch(0),
    'out_of_order': setup(batches=3, epochs=2) + m(HELLO, 0) + m(DONE_AT, 0, 0, bytes([0, 0])) + m(COMMIT_AT, 0, 0, bytes([0, 0]))
    + m(LEASE, 0) + m(DONE, 0) + m(COMMIT_AT, 0, 0, bytes([1, 0])) + m(COMMIT_AT, 0, 0, bytes([0, 19])) + m(COMMIT, 0)
    + m(DONE_AT, 0, 0, bytes([0, 2])) + m(DONE, 0) + batch(0) * 2 + m(COMMIT_AT, 0, 0, bytes([0, 0])),
    'bye_restart': setup(batches=3) + m(HELLO, 0) + m(LEASE, 0) + m(BYE, 0) + m(LEASE, 0) + m(RESTART, 0) + batch(0)
    + m(HELLO, 0) + m(HELLO, 1) + batch(1) + m(BYE, 1) + m(BYE, 1),
    'unknown_and_malformed': setup(batches=2) + m(LEASE, 2) + m(RAW, 0, 0, bytes([M_HELLO, 3]) + b'\x01\x00\x00')
    + m(HELLO, 0) + m(RAW, 0, 0, bytes([M_COMMIT, 3]) + b'abc') + m(RAW, 0, 0, bytes([M_LEASE, 1]) + b'x')
    + m(RAW, 0, 0, bytes([M_PING, 0])) + m(RAW, 0, 0, bytes([M_BYE, 2]) + b'zz') + m(RAW, 0, 0, bytes([M_DONE, 4]) + b'\0' * 4)
    + batch(0),
}
for name, data in seeds.items():
    with open(os.path.join(out, name), 'wb') as f:
        f.write(data)
