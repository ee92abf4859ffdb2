#!/usr/bin/python3
"""Generates the TorchScript test models of runtimes/pytorch/testdata.

Run with Debian's python3-torch, which works only under /usr/bin/python3:
    scripts/install-libtorch.sh --python && /usr/bin/python3 scripts/gen-pytorch-models.py
The .pt files are committed; tests never run this script. Weights are
formulas (no random numbers), so the Go tests can compute expected answers
on their own.
"""

import math
import os
import sys
from typing import Dict, List, Tuple

import torch
from torch import Tensor, nn

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "runtimes", "pytorch", "testdata")


class AllDTypes(nn.Module):
    """Conformance fixture: six inputs (double, float, int8, int16, int32, int64) returned unchanged."""

    def forward(self, a: Tensor, b: Tensor, c: Tensor, d: Tensor, e: Tensor, f: Tensor) -> Tuple[Tensor, Tensor, Tensor, Tensor, Tensor, Tensor]:
        return a, b, c, d, e, f


class Affine(nn.Module):
    """Conformance fixture: y = scale*x + shift for a float32 [N,3] x, with
    scale and shift as parameters (freezing inlines them). TorchScript has no
    way to declare input dtypes and shapes, so the model checks them itself
    (prim::RaiseException, allowed by the runtime): the conformance suite
    wants wrong dtypes and shapes refused, not computed."""

    def __init__(self, scale: float, shift: float):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(scale, dtype=torch.float32))
        self.shift = nn.Parameter(torch.tensor(shift, dtype=torch.float32))

    def forward(self, x: Tensor) -> Tensor:
        if x.dtype != torch.float32 or x.dim() != 2 or x.size(1) != 3:
            raise ValueError("affine: the input must be float32 of shape [N,3]")
        return self.scale * x + self.shift


class MLP(nn.Module):
    """The benchmark MLP of CONTRACTS.md: x[-1,8] -> relu(x W1 + b1) (16) -> sigmoid(h W2 + b2) [-1,1]."""

    def __init__(self):
        super().__init__()
        w1 = [[0.5 * math.sin(i * 16 + j) for j in range(16)] for i in range(8)]
        b1 = [0.1 * math.cos(j) for j in range(16)]
        w2 = [[0.5 * math.sin(100 + j)] for j in range(16)]
        self.w1 = nn.Parameter(torch.tensor(w1, dtype=torch.float32))
        self.b1 = nn.Parameter(torch.tensor(b1, dtype=torch.float32))
        self.w2 = nn.Parameter(torch.tensor(w2, dtype=torch.float32))
        self.b2 = nn.Parameter(torch.tensor([0.05], dtype=torch.float32))

    def forward(self, x: Tensor) -> Tensor:
        h = torch.relu(torch.matmul(x, self.w1) + self.b1)
        return torch.sigmoid(torch.matmul(h, self.w2) + self.b2)


class E2EStyle(nn.Module):
    """The shape of B&A's e2e model: five int64 [N] indices (0..19) into five
    20x8 embeddings, two float [N,10]; concat (60) -> Linear(60,10) -> ReLU ->
    Linear(10,1) -> Sigmoid. Weights are formulas."""

    def __init__(self):
        super().__init__()
        self.embs = nn.ModuleList()
        for k in range(5):
            e = nn.Embedding(20, 8)
            with torch.no_grad():
                e.weight.copy_(torch.tensor([[0.3 * math.sin(k * 1000 + r * 10 + c) for c in range(8)] for r in range(20)]))
            self.embs.append(e)
        self.fc1 = nn.Linear(60, 10)
        self.fc2 = nn.Linear(10, 1)
        with torch.no_grad():
            self.fc1.weight.copy_(torch.tensor([[0.2 * math.cos(o * 60 + i) for i in range(60)] for o in range(10)]))
            self.fc1.bias.copy_(torch.tensor([0.01 * o for o in range(10)]))
            self.fc2.weight.copy_(torch.tensor([[0.3 * math.sin(7 + i) for i in range(10)]]))
            self.fc2.bias.fill_(-0.1)

    def forward(self, i0: Tensor, i1: Tensor, i2: Tensor, i3: Tensor, i4: Tensor, f0: Tensor, f1: Tensor) -> Tensor:
        idx = [i0, i1, i2, i3, i4]
        parts: List[Tensor] = []
        for k, emb in enumerate(self.embs):
            parts.append(emb(idx[k]))
        parts.append(f0)
        parts.append(f1)
        x = torch.cat(parts, dim=1)
        return torch.sigmoid(self.fc2(torch.relu(self.fc1(x))))


class InputCheck(nn.Module):
    """Raises on a wrong shape (prim::RaiseException is allowed: it only fails the call)."""

    def forward(self, x: Tensor) -> Tensor:
        if x.dim() != 2:
            raise ValueError("want a 2-D input")
        return x * 2


class OptionalArg(nn.Module):
    """forward() with a default value: the input count is not fixed."""

    def forward(self, x: Tensor, y: Tensor = torch.ones(1)) -> Tensor:
        return x + y


class IntArg(nn.Module):
    """forward() takes an int: tensors cannot be passed to it."""

    def forward(self, x: Tensor, n: int) -> Tensor:
        return x * n


class ReturnsBool(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x > 0


class ReturnsUint8(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.to(torch.uint8)


class ReturnsHalf(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        return x.to(torch.float16)


class ReturnsList(nn.Module):
    def forward(self, x: Tensor) -> List[Tensor]:
        return [x, x]


class ReturnsDict(nn.Module):
    def forward(self, x: Tensor) -> Dict[str, Tensor]:
        return {"y": x}


class ReturnsNested(nn.Module):
    def forward(self, x: Tensor) -> Tuple[Tensor, Tuple[Tensor, Tensor]]:
        return x, (x, x)


class ReturnsInt(nn.Module):
    def forward(self, x: Tensor) -> int:
        return x.numel()


class ReturnsTupleWithInt(nn.Module):
    def forward(self, x: Tensor) -> Tuple[Tensor, int]:
        return x, 3


class ReturnsTransposed(nn.Module):
    """A non-contiguous output: x.t() of a [N,3] input."""

    def forward(self, x: Tensor) -> Tensor:
        return x.t()


@torch.jit.script
def _half(x: Tensor) -> Tensor:
    return x * 0.5


class Forks(nn.Module):
    """Inter-op parallelism: torch.jit.fork/wait (aten::wait is synchronisation, not a side effect)."""

    def forward(self, x: Tensor) -> Tensor:
        fut = torch.jit.fork(_half, x)
        y = x + 1
        return torch.jit.wait(fut) + y


@torch.jit.script
def _noisy(x: Tensor) -> Tensor:
    print("forked", x)
    return x


class ForkPrints(nn.Module):
    """The side effect hides in a forked subgraph."""

    def forward(self, x: Tensor) -> Tensor:
        return torch.jit.wait(torch.jit.fork(_noisy, x))


class Prints(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        print(x)
        return x


class Saver(nn.Module):
    def forward(self, x: Tensor) -> Tensor:
        torch.save(x, "/tmp/inferbid-pytorch-side-effect.pt")
        return x


class SaverSubmodule(nn.Module):
    """The side effect hides in a submodule; freezing inlines it into forward()."""

    def __init__(self):
        super().__init__()
        self.inner = Saver()

    def forward(self, x: Tensor) -> Tensor:
        return self.inner(x) + 1


class Counter(nn.Module):
    """Stateful: forward() mutates an attribute."""

    def __init__(self):
        super().__init__()
        self.count = 0

    def forward(self, x: Tensor) -> Tensor:
        self.count += 1
        return x + self.count


class RunningSum(nn.Module):
    """Stateful by the state convention (runtimes/pytorch/doc.go): the argument
    sum_in is the state, initial_state() its start value, and forward()
    returns the new state last."""

    def forward(self, x: Tensor, sum_in: Tensor) -> Tuple[Tensor, Tensor]:
        s = x + sum_in
        return s, s.clone()

    @torch.jit.export
    def initial_state(self) -> Tensor:
        return torch.zeros(1, dtype=torch.float32)


class BadInitialState(nn.Module):
    """Breaks the state convention: two state arguments, initial_state() gives one."""

    def forward(self, x: Tensor, a_in: Tensor, b_in: Tensor) -> Tuple[Tensor, Tensor, Tensor]:
        return x + a_in + b_in, a_in + x, b_in - x

    @torch.jit.export
    def initial_state(self) -> Tensor:
        return torch.zeros(1, dtype=torch.float32)


class BufferCounter(nn.Module):
    """Stateful: forward() adds x to a buffer in place (freezing keeps the
    buffer, an attribute: refused)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(1))

    def forward(self, x: Tensor) -> Tensor:
        self.total.add_(x)
        return self.total.clone()


class ListCounter(nn.Module):
    """Stateful through a list attribute: freezing folds the list into a
    constant (it sees no write to the attribute), and add_ on its element
    would change that constant for every later call (refused)."""

    def __init__(self):
        super().__init__()
        self.states: List[Tensor] = [torch.zeros(1)]

    def forward(self, x: Tensor) -> Tensor:
        self.states[0].add_(x)
        return self.states[0].clone()


class DictCounter(nn.Module):
    """ListCounter with a dict attribute, the write inside a loop and an if."""

    def __init__(self):
        super().__init__()
        self.states: Dict[str, Tensor] = {"sum": torch.zeros(1)}

    def forward(self, x: Tensor) -> Tensor:
        for _ in range(2):
            if bool(x.sum() > 0):
                self.states["sum"].add_(x)
        return self.states["sum"].clone()


class ListInitialState(nn.Module):
    """The state convention, but initial_state() adds to a list attribute's
    tensor in place: each sequence would start where the last one did
    (refused)."""

    def __init__(self):
        super().__init__()
        self.init: List[Tensor] = [torch.zeros(1)]

    def forward(self, x: Tensor, sum_in: Tensor) -> Tuple[Tensor, Tensor]:
        s = x + sum_in
        return s, s.clone()

    @torch.jit.export
    def initial_state(self) -> Tensor:
        self.init[0].add_(1)
        return self.init[0].clone()


class ListWeights(nn.Module):
    """Not stateful: reads weights from a list attribute and writes in place
    into its own input (a copy per call) and a fresh tensor: loads, and
    answers (x + 1) * 2 + 1 on every call."""

    def __init__(self):
        super().__init__()
        self.w: List[Tensor] = [torch.ones(1), torch.full((1,), 2.0)]

    def forward(self, x: Tensor) -> Tensor:
        x.add_(1)
        y = x.clone()
        y.mul_(self.w[1])
        return y + self.w[0]


class InPlace(nn.Module):
    """Writes into its input in place (the runtime must not let that reach the caller's data)."""

    def forward(self, x: Tensor) -> Tensor:
        x.add_(1)
        return x * 1


def save(name: str, module: nn.Module) -> None:
    scripted = torch.jit.script(module.eval())
    path = os.path.join(OUT, name)
    scripted.save(path)
    print(f"{path}: {os.path.getsize(path)} bytes")


def main() -> int:
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    save("alldtypes.pt", AllDTypes())
    save("affine_v1.pt", Affine(2.0, 1.0))
    save("affine_v2.pt", Affine(3.0, -1.0))
    save("mlp.pt", MLP())
    save("e2e_style.pt", E2EStyle())
    save("input_check.pt", InputCheck())
    save("optional_arg.pt", OptionalArg())
    save("int_arg.pt", IntArg())
    save("inplace.pt", InPlace())
    # bool, uint8 and half outputs were refused before the v2 datatypes; the
    # names stay, the tests now want their values (TestV2DTypeOutputs).
    save("bad_output_bool.pt", ReturnsBool())
    save("bad_output_uint8.pt", ReturnsUint8())
    save("bad_output_half.pt", ReturnsHalf())
    save("bad_output_list.pt", ReturnsList())
    save("bad_output_dict.pt", ReturnsDict())
    save("bad_output_nested_tuple.pt", ReturnsNested())
    save("bad_output_int.pt", ReturnsInt())
    save("bad_output_tuple_int.pt", ReturnsTupleWithInt())
    save("transposed.pt", ReturnsTransposed())
    save("fork_wait.pt", Forks())
    save("side_effect_fork_print.pt", ForkPrints())
    save("side_effect_print.pt", Prints())
    save("side_effect_save.pt", SaverSubmodule())
    save("stateful.pt", Counter())
    save("stateful_buffer.pt", BufferCounter())
    save("stateful_list.pt", ListCounter())
    save("stateful_dict.pt", DictCounter())
    save("stateful_initial_state.pt", ListInitialState())
    save("list_weights.pt", ListWeights())
    save("running_sum.pt", RunningSum())
    save("bad_initial_state.pt", BadInitialState())
    return 0


if __name__ == "__main__":
    sys.exit(main())
