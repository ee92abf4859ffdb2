#!/usr/bin/python3
"""Generates the ONNX test models of runtimes/onnx/testdata/ and bench/testdata/ (committed; rerun to
regenerate).

Uses Debian's python3-onnx and numpy (run with /usr/bin/python3, not a python3 earlier on PATH).
The output is deterministic: same bytes on every run.

Models (opset 13, IR version 7: both well inside what ONNX Runtime 1.30 accepts):
  alldtypes.onnx     six inputs in_<dtype> [-1,2] (DOUBLE, FLOAT, INT8, INT16, INT32, INT64), six
                     outputs out_<dtype>, each the Identity of the input of the same dtype.
  v2dtypes.onnx      seven inputs in_<dtype> [-1,2] (BOOL, UINT8, UINT16, UINT32, UINT64, FLOAT16,
                     STRING: the v2 protocol's BOOL, UINT8-64, FP16, BYTES), seven outputs out_<dtype>,
                     each the Identity of the input of the same dtype.
  fp16_unplanned.onnx  x FLOAT16 [batch,2] -> y = Concat(x, x) along axis 0, declared [rows,2]: an FP16
                     output whose shape does not follow from the inputs' (not preallocatable)
  v2dtypes_typed.onnx  v2dtypes.onnx without FLOAT16 (the v2 protocol's gRPC typed contents have no FP16
                     field).
  affine_v1.onnx     x FLOAT [-1,3] -> y = 2*x + 1
  affine_v2.onnx     x FLOAT [-1,3] -> y = 3*x - 1
  mlp.onnx           the benchmark MLP of the team contract: x FLOAT [-1,8] ->
                     relu(x.W1 + b1) (16 units) -> sigmoid(h.W2 + b2), y FLOAT [-1,1]
  odd_outputs.onnx   x FLOAT [-1,2] -> y (FLOAT, Identity), positive (BOOL, x > 0), bytes (UINT8, Cast):
                     outputs the batch contract cannot carry
  bool_input.onnx    flag BOOL [-1,1] -> y FLOAT: an input the batch contract cannot carry
  overridable.onnx   IR 4 model whose initializer "bias" is also listed as a graph input (an
                     overridable initializer, which ONNX Runtime does not count as an input):
                     x FLOAT [2,3] (fixed batch), unknown-shape input "scale_in" FLOAT -> y = x * scale_in + bias
  lying_shape.onnx   x FLOAT [batch,3] -> y = Concat(x, x) along axis 0, declared [batch,3] although it is
                     [2*batch,3]: output shapes promised by dim_params are not to be trusted blindly
  passthrough.onnx   x INT64 [batch,3] -> outputs x (the input itself, no node), y = Identity(x),
                     z = Identity(x), r = Reshape(x, [-1,3]), d = Flatten(x) (all no-ops on the data):
                     outputs ONNX Runtime may alias, optimize away or never compute
  no_inputs.onnx     no inputs, y = a constant FLOAT [2]
  running_sum.onnx   a stateful model by the state convention (runtimes/onnx/doc.go): x FLOAT [1] and
                     state "sum_in" FLOAT [1] -> sum = x + sum_in, and "sum_out" = sum, the state fed
                     back as sum_in on the sequence's next call
  dynamic_state.onnx running_sum.onnx with every shape [n] (a dynamic dimension): a state the
                     runtime cannot start from zeros

And, in bench/testdata/ (the model of the peer comparison, bench/doc.go):
  pctr.onnx          a small pCTR-style MLP with one input of each dtype the comparison covers:
                     dense FLOAT [batch,8]; ad_id INT64 [batch,1], hashed into 64 buckets (Mod) and
                     embedded (Gather from a [64,4] table, Flatten); bid_floor DOUBLE [batch,1] (Cast to
                     float); Concat to [batch,13] -> relu(.W1 + b1) (16 units) -> sigmoid(.W2 + b2),
                     pctr FLOAT [batch,1]
"""
import math
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 13
IR_VERSION = 7

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "runtimes", "onnx", "testdata")
OUT_BENCH = os.path.join(HERE, "..", "bench", "testdata")

DTYPES = [
    ("double", TensorProto.DOUBLE),
    ("float", TensorProto.FLOAT),
    ("int8", TensorProto.INT8),
    ("int16", TensorProto.INT16),
    ("int32", TensorProto.INT32),
    ("int64", TensorProto.INT64),
]


def model(graph, full_check=True):
    m = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="inferbid-gen-onnx-models",
        producer_version="1",
    )
    m.ir_version = IR_VERSION
    onnx.checker.check_model(m, full_check=full_check)
    return m


def save(m, name, out=OUT):
    path = os.path.join(out, name)
    data = m.SerializeToString(deterministic=True)
    with open(path + ".tmp", "wb") as f:
        f.write(data)
    os.replace(path + ".tmp", path)
    print("wrote %s (%d bytes)" % (os.path.relpath(path), len(data)))


def alldtypes():
    inputs, outputs, nodes = [], [], []
    for name, dt in DTYPES:
        inputs.append(helper.make_tensor_value_info("in_" + name, dt, ["batch", 2]))
        outputs.append(helper.make_tensor_value_info("out_" + name, dt, ["batch", 2]))
        nodes.append(helper.make_node("Identity", ["in_" + name], ["out_" + name], name="identity_" + name))
    return model(helper.make_graph(nodes, "alldtypes", inputs, outputs))


V2_DTYPES = [
    ("bool", TensorProto.BOOL),
    ("uint8", TensorProto.UINT8),
    ("uint16", TensorProto.UINT16),
    ("uint32", TensorProto.UINT32),
    ("uint64", TensorProto.UINT64),
    ("fp16", TensorProto.FLOAT16),
    ("bytes", TensorProto.STRING),
]


def v2dtypes(without=()):
    inputs, outputs, nodes = [], [], []
    for name, dt in V2_DTYPES:
        if name in without:
            continue
        inputs.append(helper.make_tensor_value_info("in_" + name, dt, ["batch", 2]))
        outputs.append(helper.make_tensor_value_info("out_" + name, dt, ["batch", 2]))
        nodes.append(helper.make_node("Identity", ["in_" + name], ["out_" + name], name="identity_" + name))
    return model(helper.make_graph(nodes, "v2dtypes", inputs, outputs))


def fp16_unplanned():
    nodes = [helper.make_node("Concat", ["x", "x"], ["y"], name="concat", axis=0)]
    g = helper.make_graph(
        nodes,
        "fp16_unplanned",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT16, ["batch", 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, ["rows", 2])],
    )
    return model(g)


def affine(scale, offset, graph_name):
    a = numpy_helper.from_array(np.array(scale, dtype=np.float32), "scale")
    b = numpy_helper.from_array(np.array(offset, dtype=np.float32), "offset")
    nodes = [
        helper.make_node("Mul", ["x", "scale"], ["scaled"], name="mul"),
        helper.make_node("Add", ["scaled", "offset"], ["y"], name="add"),
    ]
    g = helper.make_graph(
        nodes,
        graph_name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
        initializer=[a, b],
    )
    return model(g)


def mlp():
    # The weight formula of CONTRACTS.md, computed in float64 and rounded once to float32.
    w1 = np.array([[0.5 * math.sin(i * 16 + j) for j in range(16)] for i in range(8)], dtype=np.float32)
    b1 = np.array([0.1 * math.cos(j) for j in range(16)], dtype=np.float32)
    w2 = np.array([[0.5 * math.sin(100 + j)] for j in range(16)], dtype=np.float32)
    b2 = np.array([0.05], dtype=np.float32)
    inits = [numpy_helper.from_array(v, n) for v, n in ((w1, "W1"), (b1, "b1"), (w2, "W2"), (b2, "b2"))]
    nodes = [
        helper.make_node("MatMul", ["x", "W1"], ["xw1"], name="matmul1"),
        helper.make_node("Add", ["xw1", "b1"], ["pre1"], name="add1"),
        helper.make_node("Relu", ["pre1"], ["h"], name="relu"),
        helper.make_node("MatMul", ["h", "W2"], ["hw2"], name="matmul2"),
        helper.make_node("Add", ["hw2", "b2"], ["pre2"], name="add2"),
        helper.make_node("Sigmoid", ["pre2"], ["y"], name="sigmoid"),
    ]
    g = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1])],
        initializer=inits,
    )
    return model(g)


def odd_outputs():
    zero = numpy_helper.from_array(np.array(0, dtype=np.float32), "zero")
    nodes = [
        helper.make_node("Identity", ["x"], ["y"], name="identity"),
        helper.make_node("Greater", ["x", "zero"], ["positive"], name="greater"),
        helper.make_node("Cast", ["x"], ["bytes"], name="cast", to=TensorProto.UINT8),
    ]
    g = helper.make_graph(
        nodes,
        "odd_outputs",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 2])],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 2]),
            helper.make_tensor_value_info("positive", TensorProto.BOOL, ["batch", 2]),
            helper.make_tensor_value_info("bytes", TensorProto.UINT8, ["batch", 2]),
        ],
        initializer=[zero],
    )
    return model(g)


def bool_input():
    nodes = [helper.make_node("Cast", ["flag"], ["y"], name="cast", to=TensorProto.FLOAT)]
    g = helper.make_graph(
        nodes,
        "bool_input",
        [helper.make_tensor_value_info("flag", TensorProto.BOOL, ["batch", 1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 1])],
    )
    return model(g)


def overridable():
    bias = numpy_helper.from_array(np.array([0.5, -0.5, 1.5], dtype=np.float32), "bias")
    nodes = [
        helper.make_node("Mul", ["x", "scale_in"], ["scaled"], name="mul"),
        helper.make_node("Add", ["scaled", "bias"], ["y"], name="add"),
    ]
    scale = helper.make_tensor_value_info("scale_in", TensorProto.FLOAT, None)
    g = helper.make_graph(
        nodes,
        "overridable",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3]),
            helper.make_tensor_value_info("bias", TensorProto.FLOAT, [3]),
            scale,
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
        initializer=[bias],
    )
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="inferbid-gen-onnx-models")
    m.ir_version = 4
    # No checker here: it insists on a shape for every graph input, and the unknown rank of
    # "scale_in" is the point (ONNX Runtime accepts it).
    return m


def lying_shape():
    nodes = [helper.make_node("Concat", ["x", "x"], ["y"], name="concat", axis=0)]
    g = helper.make_graph(
        nodes,
        "lying_shape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 3])],
    )
    # check_model without full_check: shape inference would (rightly) object to the declared shape.
    return model(g, full_check=False)


def passthrough():
    shape = numpy_helper.from_array(np.array([-1, 3], dtype=np.int64), "shape")
    nodes = [
        helper.make_node("Identity", ["x"], ["y"], name="identity_y"),
        helper.make_node("Identity", ["x"], ["z"], name="identity_z"),
        helper.make_node("Reshape", ["x", "shape"], ["r"], name="reshape"),
        helper.make_node("Flatten", ["x"], ["d"], name="flatten", axis=1),
    ]
    g = helper.make_graph(
        nodes,
        "passthrough",
        [helper.make_tensor_value_info("x", TensorProto.INT64, ["batch", 3])],
        [helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", 3]) for n in ("x", "y", "z", "r", "d")],
        initializer=[shape],
    )
    return model(g)


def no_inputs():
    c = numpy_helper.from_array(np.array([1.5, -2.5], dtype=np.float32), "c")
    nodes = [helper.make_node("Identity", ["c"], ["y"], name="identity")]
    g = helper.make_graph(nodes, "no_inputs", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])], initializer=[c])
    return model(g)


def running_sum(state_dims=(1,), name="running_sum"):
    nodes = [
        helper.make_node("Add", ["x", "sum_in"], ["sum"], name="add"),
        helper.make_node("Identity", ["sum"], ["sum_out"], name="state"),
    ]
    g = helper.make_graph(
        nodes,
        name,
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, list(state_dims)),
            helper.make_tensor_value_info("sum_in", TensorProto.FLOAT, list(state_dims)),
        ],
        [
            helper.make_tensor_value_info("sum", TensorProto.FLOAT, list(state_dims)),
            helper.make_tensor_value_info("sum_out", TensorProto.FLOAT, list(state_dims)),
        ],
    )
    return model(g)


def pctr():
    buckets, dim = 64, 4
    # Weights from fixed formulas, computed in float64 and rounded once to float32.
    emb = np.array([[0.3 * math.sin(k * dim + j + 7) for j in range(dim)] for k in range(buckets)], dtype=np.float32)
    width = 8 + dim + 1
    w1 = np.array([[0.4 * math.sin(i * 16 + j + 1) for j in range(16)] for i in range(width)], dtype=np.float32)
    b1 = np.array([0.1 * math.cos(j) for j in range(16)], dtype=np.float32)
    w2 = np.array([[0.5 * math.sin(200 + j)] for j in range(16)], dtype=np.float32)
    b2 = np.array([-0.1], dtype=np.float32)
    inits = [
        numpy_helper.from_array(np.array(buckets, dtype=np.int64), "buckets"),
        numpy_helper.from_array(emb, "ad_embedding"),
    ] + [numpy_helper.from_array(v, n) for v, n in ((w1, "W1"), (b1, "b1"), (w2, "W2"), (b2, "b2"))]
    nodes = [
        helper.make_node("Mod", ["ad_id", "buckets"], ["ad_bucket"], name="hash", fmod=0),
        helper.make_node("Gather", ["ad_embedding", "ad_bucket"], ["ad_emb3"], name="embed", axis=0),
        helper.make_node("Flatten", ["ad_emb3"], ["ad_emb"], name="flatten", axis=1),
        helper.make_node("Cast", ["bid_floor"], ["floor"], name="cast", to=TensorProto.FLOAT),
        helper.make_node("Concat", ["dense", "ad_emb", "floor"], ["features"], name="concat", axis=1),
        helper.make_node("MatMul", ["features", "W1"], ["xw1"], name="matmul1"),
        helper.make_node("Add", ["xw1", "b1"], ["pre1"], name="add1"),
        helper.make_node("Relu", ["pre1"], ["h"], name="relu"),
        helper.make_node("MatMul", ["h", "W2"], ["hw2"], name="matmul2"),
        helper.make_node("Add", ["hw2", "b2"], ["pre2"], name="add2"),
        helper.make_node("Sigmoid", ["pre2"], ["pctr"], name="sigmoid"),
    ]
    g = helper.make_graph(
        nodes,
        "pctr",
        [
            helper.make_tensor_value_info("dense", TensorProto.FLOAT, ["batch", 8]),
            helper.make_tensor_value_info("ad_id", TensorProto.INT64, ["batch", 1]),
            helper.make_tensor_value_info("bid_floor", TensorProto.DOUBLE, ["batch", 1]),
        ],
        [helper.make_tensor_value_info("pctr", TensorProto.FLOAT, ["batch", 1])],
        initializer=inits,
    )
    return model(g)


def main():
    os.makedirs(OUT, exist_ok=True)
    os.makedirs(OUT_BENCH, exist_ok=True)
    save(alldtypes(), "alldtypes.onnx")
    save(v2dtypes(), "v2dtypes.onnx")
    save(v2dtypes(without=("fp16",)), "v2dtypes_typed.onnx")
    save(fp16_unplanned(), "fp16_unplanned.onnx")
    save(affine(2.0, 1.0, "affine_v1"), "affine_v1.onnx")
    save(affine(3.0, -1.0, "affine_v2"), "affine_v2.onnx")
    save(mlp(), "mlp.onnx")
    save(odd_outputs(), "odd_outputs.onnx")
    save(bool_input(), "bool_input.onnx")
    save(overridable(), "overridable.onnx")
    save(lying_shape(), "lying_shape.onnx")
    save(passthrough(), "passthrough.onnx")
    save(no_inputs(), "no_inputs.onnx")
    save(running_sum(), "running_sum.onnx")
    save(running_sum(("n",), "dynamic_state"), "dynamic_state.onnx")
    save(pctr(), "pctr.onnx", OUT_BENCH)
    return 0


if __name__ == "__main__":
    sys.exit(main())
