"""Every shipped GPU claim's task at the claim's own dtype, on CPU.

A CPU check runs a GPU claim at its `check_dtype` (float32, mostly), so the dtype the GPU run
passes to `make_inputs` was never exercised before a GPU window: `gemv-int4-vs-bf16` asked torch
for an int4 tensor, which it cannot make, and would have ended `error` on the H200 at once. Here
each task makes its inputs and reference at the claim's dtype, and the claim's `workload.memory`
must give their exact sizes at that dtype too (the trials check them at the CPU check's dtype).
"""

from __future__ import annotations

import pytest
import torch
from kernel_claims import ROOT, resolve

from claimbench.spec import memory
from claimbench.spec.claim import Claim
from claimbench.spec.yamlsafe import load_document

CUDA_CLAIMS = sorted(p.stem for p in (ROOT / "claims").glob("*.yaml") if "device: cuda" in p.read_text(encoding="utf-8"))


def _claim(claim_id: str) -> Claim:
    return Claim.model_validate(load_document(ROOT / "claims" / f"{claim_id}.yaml").data)


def _tensors(obj) -> list[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        return [obj]
    if isinstance(obj, (tuple, list)):
        return [t for o in obj for t in _tensors(o)]
    return []


@pytest.mark.parametrize("claim_id", CUDA_CLAIMS)
def test_the_task_makes_inputs_and_a_reference_at_the_claims_own_dtype(claim_id):
    claim = _claim(claim_id)
    if claim.hardware.count > 1:
        pytest.skip("a multi-rank task makes its shard inside a process group (its claim item checks it on 2 ranks)")
    w, dtype = claim.workload, claim.precision.dtype
    params = {**w.params, **w.check_params[0]}
    args = resolve(w.inputs)(seed=3, device="cpu", dtype=dtype, **params)
    ref = resolve(claim.correctness.reference)(*args)
    held = sum(t.numel() * t.element_size() for t in _tensors(args))
    out = sum(t.numel() for t in _tensors(ref))
    why = memory.declared_mismatch(claim, params, dtype=dtype, operand_bytes=held, output_elements=out)
    assert why is None, why
