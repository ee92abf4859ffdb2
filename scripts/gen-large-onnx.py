#!/usr/bin/python3
"""Writes large ONNX models for measurements (not committed models): DIR/big_<i>.onnx, i = 1..COUNT,
each x FLOAT [-1,3] -> y = (i+1)*x + 1, carrying a float initializer of about SIZE_MB MiB that the
graph reads (Gather of one element times 0), so that loading the model costs what loading a model of
that size costs.

Usage: /usr/bin/python3 scripts/gen-large-onnx.py DIR [COUNT=3] [SIZE_MB=134]
(Debian's python3-onnx and numpy; used by BenchmarkReplayAfterKillONNX.)
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def big_model(i, size_mb):
    n = size_mb * (1 << 20) // 4
    big = numpy_helper.from_array(np.full(n, 0.5, dtype=np.float32), "big")
    consts = [
        numpy_helper.from_array(np.array([0], dtype=np.int64), "idx"),
        numpy_helper.from_array(np.array([float(i + 1)], dtype=np.float32), "a"),
        numpy_helper.from_array(np.array([1.0], dtype=np.float32), "b"),
        numpy_helper.from_array(np.array([0.0], dtype=np.float32), "zero"),
    ]
    nodes = [
        helper.make_node("Gather", ["big", "idx"], ["g"]),
        helper.make_node("Mul", ["g", "zero"], ["z"]),
        helper.make_node("Mul", ["x", "a"], ["ax"]),
        helper.make_node("Add", ["ax", "b"], ["axb"]),
        helper.make_node("Add", ["axb", "z"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "big_%d" % i,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        initializer=[big] + consts)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    m.ir_version = 7
    return m


def main():
    out = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    size_mb = int(sys.argv[3]) if len(sys.argv) > 3 else 134
    os.makedirs(out, exist_ok=True)
    for i in range(1, count + 1):
        path = os.path.join(out, "big_%d.onnx" % i)
        with open(path, "wb") as f:
            f.write(big_model(i, size_mb).SerializeToString())
        print("wrote %s (%d bytes)" % (path, os.path.getsize(path)))


if __name__ == "__main__":
    main()
