#!/usr/bin/env python3
"""Seed inputs of fuzz_fed_client (called by make_corpus.sh CORPUS_DIR): the coordinator's
scripts the harness plays against a real bench (tests/fuzz/fuzz_fed_client.c, "Input"). Offsets: a round's nparams at 31, its weights at 39 (80 of
them: a secure round's ring at 367), a welcome's nparams at 4 and its configuration
{"task":"pa","model":"gmp",... at 16.

Byte 0: 0xFF = no fed-end at the end (the bench times out), anything else = the harness's
honest fed-end after the messages. Then messages [ctl u8][len u16 LE][len bytes]: ctl & 7
0 welcome, 1 round, 2 secure round, 3 evaluation, 4 pong, 5 fed-end with the bytes as its
reason, 6 type byte + payload, 7 raw frame; 0x10 truncate / two frames, 0x20 overwrite
instead of XOR, 0x40 twice, 0x80 the previous round / evaluation number."""
import os
import struct
import sys

WELCOME, ROUND, SECURE, EVAL, PONG, END, TYPED, RAW = range(8)
FED_SECAGG, FED_ROUND, PING, ERR = 47, 42, 4, 31  # include/distdpd/net.h (DD_MSG_*)


def m(ctl, body=b''):
    return struct.pack('<BH', ctl, len(body)) + body


def patch(off, data):  # kinds 0-3: at offset off, XOR (or with 0x20 overwrite) data
    return struct.pack('<H', off) + data


SEEDS = {
    # honest coordinators: the bench must end with DD_OK
    'honest_round': b'\0' + m(WELCOME) + m(ROUND),
    'honest_rounds_eval': b'\0' + m(WELCOME) + m(ROUND) + m(EVAL) + m(ROUND) + m(EVAL),
    'honest_secure': b'\0' + m(WELCOME) + m(SECURE) + m(PONG) + m(ROUND),
    'honest_welcome_twice': b'\0' + m(WELCOME) + m(PONG) + m(WELCOME) + m(ROUND) + m(EVAL),
    'honest_only_welcome': b'\0' + m(WELCOME),
    # the end with a reason, before the welcome, none (the bench times out)
    'end_reason': b'\0' + m(WELCOME) + m(ROUND) + m(END, b'the coordinator stopped on an error'),
    'end_first': b'\0' + m(END) + m(WELCOME) + m(ROUND),
    'end_first_empty': b'\0',
    'silent_after_round': b'\xff' + m(WELCOME) + m(ROUND),
    # out of order, stale, duplicated, changed
    'round_before_welcome': b'\0' + m(ROUND) + m(WELCOME),
    'eval_before_welcome': b'\0' + m(EVAL) + m(WELCOME),
    'round_stale_dup': b'\0' + m(WELCOME) + m(ROUND) + m(ROUND | 0x80) + m(ROUND | 0x40),
    'round_truncated': b'\0' + m(WELCOME) + m(ROUND | 0x10, patch(40, b'')),
    'round_nparams': b'\0' + m(WELCOME) + m(ROUND, patch(31, b'\x01')),
    'round_local_epochs': b'\0' + m(WELCOME) + m(ROUND | 0x20, patch(9, b'\x01\x02\x00\x00\x00')),
    'round_nan_weight': b'\0' + m(WELCOME) + m(ROUND | 0x20, patch(39, b'\x00\x00\xc0\x7f')),
    'round_huge_weight': b'\0' + m(WELCOME) + m(ROUND | 0x20, patch(39, b'\xff\xff\x7f\x7f' * 4)),
    'secure_bad_ring': b'\0' + m(WELCOME) + m(SECURE | 0x20, patch(367, b'\x30')),
    'welcome_nparams': b'\0' + m(WELCOME, patch(4, b'\x01')),
    'welcome_index': b'\0' + m(WELCOME | 0x20, patch(0, b'\xff\x00\x00\x00')) + m(SECURE),
    'welcome_cfg_model': b'\0' + m(WELCOME | 0x20, patch(38, b'gru')) + m(ROUND),
    'welcome_truncated': b'\0' + m(WELCOME | 0x10, patch(60, b'')) + m(ROUND),
    'eval_stale_dup': b'\0' + m(WELCOME) + m(EVAL | 0x40) + m(EVAL | 0x80),
    'eval_truncated': b'\0' + m(WELCOME) + m(EVAL | 0x10, patch(12, b'')),
    # other types, garbage
    'secagg_outside': b'\0' + m(WELCOME) + m(TYPED, bytes([FED_SECAGG]) + b'\x01\x02\x03'),
    'secagg_after_secure': b'\0' + m(WELCOME) + m(SECURE) + m(TYPED, bytes([FED_SECAGG]) + bytes(40)),
    'typed_ping_err': b'\0' + m(WELCOME) + m(TYPED, bytes([PING])) + m(TYPED, bytes([ERR]) + b'no such block') + m(ROUND),
    'typed_round_garbage': b'\0' + m(WELCOME) + m(TYPED, bytes([FED_ROUND]) + b'\x01' * 20),
    'raw_garbage': b'\0' + m(RAW, b'DDPS\x01\x0d' + bytes(30)) + m(RAW | 0x10, b'two frames') + m(RAW) + m(WELCOME) + m(ROUND),
}


def main():
    out = os.path.join(sys.argv[1] if len(sys.argv) > 1 else 'tests/fuzz/corpus', 'fed_client')
    os.makedirs(out, exist_ok=True)
    for name, data in SEEDS.items():
        with open(os.path.join(out, name), 'wb') as f:
            f.write(data)


if __name__ == '__main__':
    main()
