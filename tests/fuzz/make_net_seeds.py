#!/usr/bin/env python3
"""Seed messages for fuzz_net and fuzz_ps_server (called by make_corpus.sh CORPUS_DIR).

Layouts from docs/ps.md ("Payloads") and src/ps/server.c: 32-byte header (magic "DDPS",
version 1, type, flags 0, u64 seq, u64 sender, u32 payload length, u32 CRC32C of the
payload), little-endian; strings are a u16 length and bytes. fuzz_ps_server's inputs
are one selector byte (index into its type table) and the bare payload."""
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
from crc32c import crc32c  # noqa: E402  (tests/crc32c.py)


def msg(t, payload, seq=1, sender=7):
    return struct.pack('<IBBHQQII', 0x53504444, 1, t, 0, seq, sender, len(payload), crc32c(payload)) + payload


def s(x):
    return struct.pack('<H', len(x)) + x


def floats(n, v=0.5):
    return struct.pack('<%df' % n, *([v] * n))


def adam_state(n, step=3):  # optim.c: "DDOPTST1", version 1, kind 1 (adam), n, step, nstate = 2n
    return b'DDOPTST1' + struct.pack('<IIQQQ', 1, 1, n, step, 2 * n) + bytes(24) + floats(2 * n, 0.1)


PUSH, PULL, INIT, PING, REPL, STATE, RESTORE, ACK = 1, 2, 3, 4, 5, 6, 7, 16
# fuzz_ps_server.c: types[] = INIT, PUSH, RESTORE, PULL, STATE, PING, REPL, ACK
SEL = {INIT: 0, PUSH: 1, RESTORE: 2, PULL: 3, STATE: 4, PING: 5, REPL: 6, ACK: 7}

payloads = {
    'init_w': (INIT, struct.pack('<I', 2) + s(b'w') + struct.pack('<I', 4) + floats(4) + s(b'b#0') + struct.pack('<I', 2) + floats(2)),
    'push_w': (PUSH, struct.pack('<dI', 0.01, 1) + s(b'w') + struct.pack('<I', 4) + floats(4, 1.0)),
    'push_bad_lr': (PUSH, struct.pack('<dI', -1.0, 1) + s(b'w') + struct.pack('<I', 4) + floats(4, 1.0)),
    'restore_w': (RESTORE, struct.pack('<I', 1) + s(b'w') + struct.pack('<I', 4) + floats(4) + struct.pack('<QI', 3, 64 + 32) + adam_state(4)),
    'pull_w': (PULL, struct.pack('<I', 1) + s(b'w') + struct.pack('<Q', 0xFFFFFFFFFFFFFFFF)),
    'state_w': (STATE, struct.pack('<I', 2) + s(b'w') + struct.pack('<Q', 0) + s(b'b#0') + struct.pack('<Q', 0)),
    'ping': (PING, b''),
    'repl_r': (REPL, struct.pack('<I', 1) + s(b'r') + struct.pack('<QI', 5, 4) + floats(4) + struct.pack('<I', 64 + 32) + adam_state(4)
               + struct.pack('<I', 1) + struct.pack('<QQ', 7, 9)),
    'repl_empty': (REPL, struct.pack('<I', 0)),
    'ack_as_request': (ACK, struct.pack('<I', 0)),
    'pull_trailing': (PULL, struct.pack('<I', 1) + s(b'w') + struct.pack('<Q', 0) + b'xx'),
    'init_count_zero': (INIT, struct.pack('<I', 0)),
}

out = sys.argv[1]
os.makedirs(os.path.join(out, 'net'), exist_ok=True)
os.makedirs(os.path.join(out, 'ps_server'), exist_ok=True)
for name, (t, p) in payloads.items():
    with open(os.path.join(out, 'ps_server', name), 'wb') as f:
        f.write(bytes([SEL[t]]) + p)
    with open(os.path.join(out, 'net', name), 'wb') as f:
        f.write(msg(t, p))
good = msg(PUSH, b'hello', 42, 7)
# the refusals of tests/test_net.c test_header: truncated, trailing, bad magic/version/type/flags/CRC
bad = {
    'truncated_header': good[:7], 'truncated_payload': good[:35], 'trailing': good + b'xy',
    'bad_magic': bytes([good[0] ^ 1]) + good[1:], 'bad_version': good[:4] + b'\x09' + good[5:],
    'bad_type': good[:5] + b'\x4d' + good[6:], 'bad_flags': good[:6] + b'\x01' + good[7:],
    'bad_crc': good[:32] + b'j' + good[33:], 'hello': good,
}
for name, m in bad.items():
    with open(os.path.join(out, 'net', name), 'wb') as f:
        f.write(m)
    with open(os.path.join(out, 'ps_server', 'raw_' + name), 'wb') as f:
        f.write(b'\x80' + m)

# fuzz_ps_client: byte 0 the client's operation (0 init, 1 push, 2 pull, 3 pull_state,
# 4 stage, 5 apply, 6 restore, 7 ping), then replies [ctl][u16 len][bytes]; ctl & 7:
# 0 ACK, 1 PULL_REP, 2 STATE_REP, 3 ERR, 4 PONG, 5 REPL_ACK, 6 PULL, 7 LEASE_REP; 0x08 the
# previous sequence number, 0x10 raw, 0x20 two frames (tests/fuzz/fuzz_ps_client.c).
CBLOCKS = [(b'w#0', 4), (b'w#1', 4), (b'b', 1)]


def rep(ctl, p):
    return bytes([ctl]) + struct.pack('<H', len(p)) + p


def ack(blocks=CBLOCKS, ver=42):
    return struct.pack('<I', len(blocks)) + b''.join(s(n) + struct.pack('<Q', ver) for n, _ in blocks)


def pull_rep(blocks=CBLOCKS, ver=43, state=False, lens=None):
    p = struct.pack('<I', len(blocks))
    for k, (n, ln) in enumerate(blocks):
        m = lens[k] if lens else ln
        p += s(n) + struct.pack('<QI', ver, m) + floats(m, 0.75)
        if state:
            p += struct.pack('<I', 16) + b'S' * 16
    return p


os.makedirs(os.path.join(out, 'ps_client'), exist_ok=True)
client = {
    'init_ack': (0, rep(0, ack())),
    'push_ack_partial': (1, rep(0, ack(CBLOCKS[:1])) + rep(0, ack(CBLOCKS[1:]))),
    'push_err': (1, rep(3, b'block w#0: gradient length 3, block has 4')),
    'pull_full': (2, rep(1, pull_rep())),
    'pull_unchanged': (2, rep(1, struct.pack('<I', 1) + s(b'w#0') + struct.pack('<QI', 42, 0))),
    'pull_unchanged_wrong_version': (2, rep(1, struct.pack('<I', 1) + s(b'w#1') + struct.pack('<QI', 5, 0))),
    'pull_wrong_length': (2, rep(1, pull_rep(lens=[3, 4, 1]))),
    'pull_unknown_block': (2, rep(1, pull_rep([(b'nope', 4)]))),
    'pull_truncated': (2, rep(1, pull_rep()[:20])),
    'pull_huge_count': (2, rep(1, struct.pack('<I', 0xFFFFFFFF) + s(b'w#0'))),
    'pull_control_name': (2, rep(1, pull_rep([(b'w\x01', 4)]))),
    'state_full': (3, rep(2, pull_rep(state=True))),
    'state_no_values': (3, rep(2, struct.pack('<I', 1) + s(b'b') + struct.pack('<QII', 1, 0, 4) + b'abcd')),
    'state_blob_short': (3, rep(2, struct.pack('<I', 1) + s(b'b') + struct.pack('<QI', 1, 1) + floats(1) + struct.pack('<I', 99) + b'x')),
    'stage_stale_ack': (4, rep(0x08, ack())),
    'apply_err': (5, rep(3, b'apply: no staged update 5 of owner 99')),
    'restore_ack': (6, rep(0, ack(ver=3))),
    'ping_pong': (7, rep(4, b'')),
    'raw_garbage': (2, rep(0x10, b'DDPS\x01\x11garbage')),
    'two_frames': (1, rep(0x20, ack())),
    'wrong_types': (0, rep(5, ack()) + rep(6, ack()) + rep(7, b'\x00') + rep(1, pull_rep())),
}
for name, (op, p) in client.items():
    with open(os.path.join(out, 'ps_client', name), 'wb') as f:
        f.write(bytes([op]) + p)

# fuzz_ps_train: byte 0 the decoder (0 hello, 1 welcome, 2 lease-reply, 3 commit,
# 4 commit-reply, 5 done, 6 empty lease/bye), then the bare payload (layouts:
# src/parallel/ps_msg.h; the refusals of tests/test_ps_msg.c).
def text(x):
    return struct.pack('<I', len(x)) + x


CFG = b'{"task": "pa", "model": "gmp", "epochs": 2, "batch": 16, "lr": 0.005}'
train = {
    'hello': (0, text(b'w0.key:4242@host')),
    'hello_huge_length': (0, struct.pack('<I', 0xFFFFFFFF) + b'ab'),
    'welcome': (1, struct.pack('<I', 3) + text(CFG) + struct.pack('<QBI', 0, 1, 10000)),
    'welcome_inf': (1, struct.pack('<I', 0) + text(CFG) + struct.pack('<QBI', 2**64 - 1, 0, 100)),
    'welcome_nul': (1, struct.pack('<I', 0) + text(b'{"a"\x00}') + struct.pack('<QBI', 1, 0, 1000)),
    'lease_batch': (2, struct.pack('<BQQQQQdQ', 0, 1, 4, 64, 80, 16, 0.005, 2)),
    'lease_wait': (2, b'\x01'),
    'lease_end': (2, b'\x02'),
    'commit': (3, struct.pack('<QQQQ', 1, 4, 0x1234, 7)),
    'commit_short': (3, struct.pack('<QQQ', 1, 4, 0x1234)),
    'commit_rep_go': (4, b'\x01'),
    'commit_rep_no': (4, b'\x00'),
    'done': (5, struct.pack('<QQdQQdd', 1, 4, 0.25, 0, 3, 0.01, 1.5)),
    'done_nan_loss': (5, struct.pack('<QQdQQdd', 1, 4, float('nan'), 0, 3, 0.01, 1.5)),
    'lease_req': (6, b''),
    'lease_req_payload': (6, b'x'),
}
# the defects fixed when the decoders moved into ps_msg.c (docs/testing.md, "Defects
# found and fixed"): written to tests/fuzz/regress/ps_train/, next to the corpus
train_regress = {
    'hello_empty': (0, text(b'')),
    'hello_control': (0, text(b'w0\nforged log line')),
    'hello_long': (0, text(b'a' * 64)),
    'welcome_bad_lease': (1, struct.pack('<I', 0) + text(CFG) + struct.pack('<QBI', 1, 0, 0)),
    'lease_kind3': (2, b'\x03'),
    'lease_nan_lr': (2, struct.pack('<BQQQQQdQ', 0, 0, 0, 0, 16, 16, float('nan'), 0)),
    'lease_empty_frames': (2, struct.pack('<BQQQQQdQ', 0, 0, 0, 16, 16, 16, 0.1, 0)),
    'commit_rep_2': (4, b'\x02'),
    'done_nan_compute': (5, struct.pack('<QQdQQdd', 1, 4, 0.25, 0, 3, float('nan'), 1.5)),
}
for d, items in ((os.path.join(out, 'ps_train'), train), (os.path.join(out, '..', 'regress', 'ps_train'), train_regress)):
    os.makedirs(d, exist_ok=True)
    for name, (sel, p) in items.items():
        with open(os.path.join(d, name), 'wb') as f:
            f.write(bytes([sel]) + p)

# fuzz_ps_peer: the bare payload of a replica's REPL_ACK (u32 count; name, u64 version).
peer = {
    'ack_two': struct.pack('<I', 2) + s(b'w#0') + struct.pack('<Q', 42) + s(b'b') + struct.pack('<Q', 7),
    'ack_none': struct.pack('<I', 0),
    'ack_max_version': struct.pack('<I', 1) + s(b'w#1') + struct.pack('<Q', 2**64 - 1),
    'ack_trailing': struct.pack('<I', 1) + s(b'w#0') + struct.pack('<Q', 42) + b'\x00',
    'ack_control_name': struct.pack('<I', 1) + s(b'w\x01') + struct.pack('<Q', 1),
    'ack_huge_count': struct.pack('<I', 0xFFFFFFFF) + s(b'w#0') + struct.pack('<Q', 1),
}
# the defect: on_peer applied a malformed REPL_ACK's first items, silently
peer_regress = {
    'ack_truncated': struct.pack('<I', 2) + s(b'w#0') + struct.pack('<Q', 42) + s(b'b') + b'\x07',
}
for d, items in ((os.path.join(out, 'ps_peer'), peer), (os.path.join(out, '..', 'regress', 'ps_peer'), peer_regress)):
    os.makedirs(d, exist_ok=True)
    for name, p in items.items():
        with open(os.path.join(d, name), 'wb') as f:
            f.write(p)
