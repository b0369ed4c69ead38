"""4-bit KV-cache decode task: KIVI's asymmetric quantization of the cache, the float64
reference, and bf16 decode over the dequantized cache as the baseline.

The decode inputs are the decode task's (``kernels/gqa_decode/task.py``): q (batch, q_heads,
head_dim), K and V (batch, kv_heads, seqlen, head_dim). ``quantize_kv`` stores the cache the way
KIVI finds it should be stored:
- keys per channel: within each group of 64 consecutive tokens, every channel gets its own
  scale and zero (min and (max - min) / 15 over the group), because a few key channels carry
  large outliers;
- values per token: every token gets one scale and zero over its channels;
- codes are 4-bit, 0..15, with scales and zeros in fp16.
(KIVI's 2-bit variant and its full-precision window of recent tokens are left out: this claim
is about reading a 4-bit cache in decode.) The function both sides compute is attention over the
dequantized cache, code * scale + zero; the reference computes it in float64, so quantization
error is not the claim. The baseline's untimed ``dequantize_kv`` stores that cache in bf16 and
runs the shared grouped-query decode kernel on it (``kernels/gqa_decode/decode.py``). The 4-bit
kernel is in ``kernel.py``.
"""

from __future__ import annotations

import torch

from kernels.gqa_decode.task import grouped_decode_fp64

GROUP = 64  # tokens per key-quantization group


def quantize_kv(k: torch.Tensor, v: torch.Tensor):
    """Codes (uint8, 0..15) for K and V, fp16 key scales/zeros (batch, kv_heads, groups, D) and
    value scales/zeros (batch, kv_heads, seqlen)."""
    batch, heads, seqlen, dim = k.shape
    groups = -(-seqlen // GROUP)
    k32 = k.to(torch.float32)
    pad = groups * GROUP - seqlen
    kp = torch.cat([k32, k32[:, :, -1:].expand(batch, heads, pad, dim)], dim=2) if pad else k32
    kg = kp.view(batch, heads, groups, GROUP, dim)
    kmin, kmax = kg.amin(dim=3), kg.amax(dim=3)
    ks = ((kmax - kmin) / 15).clamp_min(1e-6).to(torch.float16)
    kz = kmin.to(torch.float16)
    kcode = torch.round((kg - kz.float()[:, :, :, None]) / ks.float()[:, :, :, None]).clamp(0, 15)
    kcode = kcode.view(batch, heads, groups * GROUP, dim)[:, :, :seqlen].to(torch.uint8)
    v32 = v.to(torch.float32)
    vmin, vmax = v32.amin(dim=3), v32.amax(dim=3)
    vs = ((vmax - vmin) / 15).clamp_min(1e-6).to(torch.float16)
    vz = vmin.to(torch.float16)
    vcode = torch.round((v32 - vz.float()[..., None]) / vs.float()[..., None]).clamp(0, 15).to(torch.uint8)
    return kcode, ks, kz, vcode, vs, vz


def dequantized(kcode, ks, kz, vcode, vs, vz, dtype=torch.float64):
    """K and V as the 4-bit cache represents them, in ``dtype``."""
    groups = ks.shape[2]
    idx = torch.arange(kcode.shape[2], device=kcode.device) // GROUP
    k = kcode.to(dtype) * ks.to(dtype)[:, :, idx] + kz.to(dtype)[:, :, idx]
    v = vcode.to(dtype) * vs.to(dtype)[..., None] + vz.to(dtype)[..., None]
    assert groups * GROUP >= kcode.shape[2]
    return k, v


def dequantize_kv(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor):
    """Baseline prepare (untimed): the dequantized cache stored in the input dtype."""
    kd, vd = dequantized(*quantize_kv(k, v), dtype=torch.float32)
    return q.contiguous(), kd.to(k.dtype).contiguous(), vd.to(v.dtype).contiguous()


def bf16_decode(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Baseline: the shared Triton grouped-query decode kernel on the 16-bit cache."""
    from kernels.gqa_decode.decode import decode
    return decode(q, k, v)


def reference_fp64(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Grouped decode attention in float64 over the dequantized 4-bit cache, on the inputs'
    device, a few batch rows at a time: every scale and zero is per batch row, so quantizing a
    slice gives that slice of the whole cache's codes."""
    return grouped_decode_fp64(q, k, v, cache64=lambda kb, vb: dequantized(*quantize_kv(kb, vb)))
