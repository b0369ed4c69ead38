"""Static kernel rules: what they must catch, and what they must leave alone."""

import textwrap
from pathlib import Path

import pytest

from claimbench.gate.rules import check_kernel_source
from claimbench.spec.claim import Claim

CLAIM = dict(
    id="x", title="t", entry="e",
    source=dict(kind="paper", title="t", url="https://example.org/a", locator="s"),
    hardware=dict(device="cpu", model=["*"]),
    workload=dict(inputs="kernels/k.py:make_inputs", params={"n": 4}),
    precision=dict(dtype="float32"),
    kernel=dict(name="k", impl="kernels/k.py:kernel"),
    baseline=dict(name="b", impl="kernels/k.py:baseline"),
    correctness=dict(method="exact", reference="baseline-float64", forbidden=["torch.softmax"]),
    claimed=dict(metric="speedup", value=1.0, tolerance=0.1),
)


def problems(tmp_path: Path, body: str) -> list[str]:
    (tmp_path / "kernels").mkdir(exist_ok=True)
    src = "import torch\n\ndef make_inputs(*, seed, device, dtype, n):\n    return (torch.ones(n),)\n\n" \
          "def baseline(x):\n    return torch.softmax(x, -1)\n\n" + textwrap.dedent(body)
    (tmp_path / "kernels" / "k.py").write_text(src)
    claim = Claim.model_validate(CLAIM)
    return [p.message for p in check_kernel_source(tmp_path, claim, "claims/x.yaml")]


@pytest.mark.parametrize("body,word", [
    ("def kernel(x):\n    return baseline(x)\n", "baseline"),
    ("def kernel(x):\n    return helper(x)\n\ndef helper(x):\n    return baseline(x)\n", "baseline"),
    ("def kernel(x):\n    return torch.softmax(x, -1)\n", "forbids"),
    ("def kernel(x):\n    return x.softmax(-1)\n", "forbids"),
    # issue 22: a forbidden op is matched by what it resolves to, not by its spelling
    ("def kernel(x):\n    return torch.special.softmax(x, -1)\n", "forbids"),
    ("def kernel(x):\n    return torch.nn.functional.softmax(x, -1)\n", "forbids"),
    ("def kernel(x):\n    return torch.ops.aten._softmax.default(x, -1, False)\n", "forbids"),
    ("def kernel(x):\n    return torch._softmax(x, -1, False)\n", "forbids"),
    ("from torch.special import softmax as s\ndef kernel(x):\n    return s(x, -1)\n", "forbids"),
    ("def kernel(x):\n    return getattr(torch, 'softmax')(x, -1)\n", "string"),
    ("import time\ndef kernel(x):\n    time.perf_counter = lambda: 0\n    return x\n", "time.perf_counter"),
    ("def kernel(x):\n    torch.softmax = None\n    return x\n", "torch.softmax"),
    ("import gc\ndef kernel(x):\n    return x\n", "gc"),
    ("import ctypes\ndef kernel(x):\n    return x\n", "ctypes"),
    ("def kernel(x):\n    return __import__('gc')\n", "__import__"),
    ("import sys\ndef kernel(x):\n    return sys.modules\n", "sys.modules"),
    ("def kernel(x):\n    return torch.__dict__\n", "__dict__"),
    # issue 11: the harness is protected, aliases resolve, tracers and frames are off limits
    ("import claimbench.verify\ndef kernel(x):\n    return x\n", "claimbench"),
    ("from claimbench.orchestrator import timed\ndef kernel(x):\n    return x\n", "claimbench"),
    ("_T = torch\n_T.softmax = lambda x, d: x\ndef kernel(x):\n    return x\n", "torch.softmax"),
    ("F = torch.nn.functional\nG = F\ndef kernel(x):\n    G.softmax = None\n    return x\n", "torch.nn.functional.softmax"),
    ("import sys\ndef kernel(x):\n    return x if sys.getprofile() else x * 0\n", "sys.getprofile"),
    ("import sys\ndef kernel(x):\n    return x if sys.gettrace() is None else x\n", "sys.gettrace"),
    ("def kernel(x):\n    try:\n        raise ValueError\n    except ValueError as e:\n        f = e.__traceback__.tb_frame\n    return x\n", "tb_frame"),
    ("import traceback\ndef kernel(x):\n    return x\n", "traceback"),
    ("import os\ndef kernel(x):\n    os.kill(os.getppid(), 9)\n    return x\n", "os.kill"),
    ("from os import setsid\ndef kernel(x):\n    return x\n", "os.setsid"),
    ("import os\ndef kernel(x):\n    os.sched_setaffinity(0, {0})\n    return x\n", "os.sched_setaffinity"),
    ("import os\ndef kernel(x):\n    os.utime('results', None)\n    return x\n", "os.utime"),
    ("import subprocess\ndef kernel(x):\n    return x\n", "subprocess"),
    ("import multiprocessing\ndef kernel(x):\n    return x\n", "multiprocessing"),
    # watching the watcher: clocks, the dispatch/function-mode state, the profiler, computed names
    ("import time\ndef kernel(x):\n    return x\n", "a clock"),
    ("from time import perf_counter_ns\ndef kernel(x):\n    return x\n", "a clock"),
    ("import os\ndef kernel(x):\n    return os.times()\n", "a clock"),
    ("def kernel(x):\n    return torch._C._len_torch_dispatch_stack()\n", "watching"),
    ("from torch.utils._python_dispatch import _get_current_dispatch_mode\ndef kernel(x):\n    return x\n", "watching"),
    ("def kernel(x):\n    return torch.autograd._profiler_enabled()\n", "watching"),
    ("def kernel(x):\n    with torch.inference_mode():\n        return x\n", "watching"),
    ("def kernel(x):\n    with torch._C._AutoDispatchBelowAutograd():\n        return x\n", "watching"),
    ("import torch.library\ndef kernel(x):\n    return x\n", "watching"),
    ("import sys\n_w = getattr(sys, 'getprofile')\ndef kernel(x):\n    return x\n", "looks up `getprofile`"),
    ("_f = getattr(torch, 'soft' + 'max')\ndef kernel(x):\n    return _f(x, -1)\n", "computed name"),
    ("def kernel(x):\n    return getattr(torch, 'soft' + 'max')(x, -1)\n", "computed name"),
    ("def kernel(x):\n    g = getattr\n    return g(torch, 'exp')(x)\n", "computed name"),
    ("import functools\n_f = functools.reduce(getattr, ['exp'], torch)\ndef kernel(x):\n    return _f(x)\n",
     "computed name"),
    ("import operator\n_f = operator.attrgetter('exp')(torch)\ndef kernel(x):\n    return _f(x)\n", "attrgetter"),
    ("def kernel(x):\n    return torch.__getattribute__('exp')(x)\n", "__getattribute__"),
])
def test_rules_catch(tmp_path, body, word):
    found = problems(tmp_path, body)
    assert any(word in m for m in found), found


@pytest.mark.parametrize("body", [
    "def kernel(x):\n    e = torch.exp(x - x.amax(-1, keepdim=True))\n    return e / e.sum(-1, keepdim=True)\n",
    "import triton.language as tl\ndef kernel(x):\n    return tl.softmax\n",   # a Triton op is not torch.softmax
    "def softmax_rows(x):\n    return x\n\ndef kernel(x):\n    return softmax_rows(x)\n",
    # a task's helper may look a dtype up by name: the kernel never reaches it
    "def dtype_of(name):\n    return getattr(torch, name)\n\ndef kernel(x):\n    return x * 2\n",
    "def kernel(x):\n    return getattr(x, 'shape')[0] * x\n",   # a written-out, harmless name
])
def test_rules_leave_honest_code_alone(tmp_path, body):
    assert problems(tmp_path, body) == []
