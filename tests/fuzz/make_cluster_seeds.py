#!/usr/bin/env python3
"""Seeds for fuzz_cluster (called by make_corpus.sh CORPUS_DIR): one selector byte (the
parser, see tests/fuzz/fuzz_cluster.c) and the file. Valid files of the docs (docs/ps.md,
docs/comm.md, docs/elastic.md) and the refusals of test_ps_ring.c, test_launch.c,
test_net.c, test_plan_mp.c and test_fed_agg.c."""
import os
import sys

K1 = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7"
K2 = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID"

seeds = {
    # 0 / 1: parameter-server cluster file (secure / insecure)
    0: {
        "two_servers": '{"servers": [{"name": "s0", "address": "tcp://127.0.0.1:7000", "public_key": "%s"},\n'
                       ' {"address": "tcp://127.0.0.1:7001", "public_key": "%s"}], "replicas": 1, "vnodes": 16,\n'
                       ' "optimizer": {"kind": "adamw", "beta1": 0.8, "weight_decay": 0.1},\n'
                       ' "coordinator": {"address": "tcp://127.0.0.1:7100", "public_key": "%s"}}' % (K1, K2, K1),
        "short_key": '{"servers": [{"address": "tcp://127.0.0.1:1", "public_key": "short"}]}',
        "no_key": '{"servers": [{"address": "tcp://h:1"}]}',
        "not_object": '[1]',
        "empty_servers": '{"servers": []}',
        "truncated": '{"servers": [',
    },
    1: {
        "one": '{"version": 1, "replicas": 0, "optimizer": {"kind": "adam"}, "servers": [{"name": "s0", "address": "tcp://127.0.0.1:5555"}]}',
        "three_sgd": '{"servers": [{"address": "tcp://a:1"}, {"address": "tcp://b:1"}, {"address": "tcp://c:1"}], "replicas": 2,'
                     ' "optimizer": {"kind": "sgd", "momentum": 0.9, "nesterov": true, "dampening": 0}}',
        "dup_address": '{"servers": [{"address": "tcp://h:1"}, {"address": "tcp://h:1"}]}',
        "replicas_too_many": '{"servers": [{"address": "tcp://h:1"}], "replicas": 1}',
        "vnodes_zero": '{"servers": [{"address": "tcp://h:1"}], "vnodes": 0}',
        "bad_kind": '{"servers": [{"address": "tcp://h:1"}], "optimizer": {"kind": "lamb"}}',
        "nesterov_no_momentum": '{"servers": [{"address": "tcp://h:1"}], "optimizer": {"kind": "sgd", "nesterov": true}}',
        "unknown_server_field": '{"servers": [{"address": "tcp://h:1", "port": 3}]}',
        "coordinator_insecure": '{"servers": [{"address": "tcp://h:1"}], "coordinator": {"address": "tcp://h:2"}}',
    },
    # 2: Open MPI hostfile
    2: {
        "valid": "# two nodes\nnode-a slots=4 max_slots=8\n\n  node-b   slots=2 # comment\nnode-c\nnode-a slots=1\n",
        "slots_zero": "a slots=0\n",
        "slots_x": "a\nb slots=x\n",
        "unknown_key": "a slot=2\n",
        "no_equals": "a 2\n",
        "none": "# nothing\n\n",
        "bad_char": "a/b slots=1\n",
        "too_many": "a slots=70000\n",
        "max_dash": "h max-slots=3 slots=65536\r\nh.x_y slots=1",
    },
    # 3: discovery output
    3: {
        "valid": "w-0:2\n  w-1:1  \n\nw-2\nw-0:1",
        "empty": "",
        "bad_slots": "a:1\nb:two\n",
        "no_name": ":3\n",
        "no_slots": "a:\n",
    },
    # 4: allow file
    4: {
        "valid": "# enrolled workers\n%s worker-0\n\n%s good-worker # the enrolled one\n%s\t\r\n" % (K1, K2, K1),
        "short_key": "# enrolled workers\n%s worker-0\n\n%s\n" % (K1, K2[:39]),
        "comment_only": "# nothing here\n   \n",
    },
    # 5: plan cluster file
    5: {
        "docs": '{"format": "distdpd-cluster", "nodes": 4, "ranks_per_node": 8,\n "intra_link": "shm",\n'
                ' "inter_link": {"latency_us": 1.5, "bandwidth_gbps": 24},\n "memory_mib": 16384, "gflops": 120,\n "comment": "any text"}',
        "oneway": '{"nodes": 1, "ranks_per_node": 2, "intra_link": {"latency_us": 2, "bandwidth_gbps": 5, "oneway_latency_us": 1,'
                  ' "oneway_bandwidth_gbps": 9, "gamma_ns_per_byte": 0.1}, "memory_mib": 64}',
        "presets": '{"nodes": 2, "ranks_per_node": 1, "intra_link": "nvlink", "inter_link": "infiniband-hdr", "memory_mib": 1}',
        "array": '[1, 2]',
        "unknown": '{"nodez": 1}',
        "nodes_zero": '{"nodes": 0, "ranks_per_node": 2}',
        "too_many_ranks": '{"nodes": 1048576, "ranks_per_node": 2}',
        "bad_preset": '{"nodes": 1, "ranks_per_node": 2, "intra_link": "token-ring"}',
        "calib_and_latency": '{"nodes": 1, "ranks_per_node": 2, "intra_link": {"calibration": "x.json", "latency_us": 1}}',
        "calib_absent": '{"nodes": 1, "ranks_per_node": 2, "intra_link": {"calibration": "absent.json"}, "memory_mib": 1}',
        "bw_zero": '{"nodes": 1, "ranks_per_node": 2, "intra_link": {"latency_us": 1, "bandwidth_gbps": 0}}',
        "no_inter": '{"nodes": 2, "ranks_per_node": 2, "intra_link": "shm", "memory_mib": 1}',
        "gflops_neg": '{"nodes": 1, "ranks_per_node": 2, "intra_link": "shm", "memory_mib": 1, "gflops": -2}',
    },
    # 6: --agg
    6: {n: n for n in ["mean", "median", "trimmed", "krum", "multikrum", "Krum", "mean ", ""]},
}

out = os.path.join(sys.argv[1], "cluster")
os.makedirs(out, exist_ok=True)
for sel, files in seeds.items():
    for name, text in files.items():
        with open(os.path.join(out, "%d_%s" % (sel, name.replace(" ", "_") or "empty")), "wb") as f:
            f.write(bytes([sel]) + text.encode())
