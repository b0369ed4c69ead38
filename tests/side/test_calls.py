"""What a side accepts from claim code: exactly plain tensors, no modes left behind, located errors."""

import pytest
import torch
from torch.overrides import TorchFunctionMode

from claimbench.orchestrator import messages as m
from claimbench.side import tensors
from claimbench.side.calls import ClaimCodeError, call_claim_code, mode_depths, normalize_outputs


def test_plain_tensors_and_exact_containers_pass():
    a, b = torch.zeros(2), torch.ones(3)
    assert normalize_outputs(a, "kernel.impl") == (a,)
    assert normalize_outputs([a, b], "kernel.impl") == (a, b)


def test_a_subclass_an_instance_attribute_and_a_lazy_container_are_refused():
    class Liar(torch.Tensor):
        pass

    class LazyTuple(tuple):
        def __iter__(self):
            raise AssertionError("the harness must not iterate a tuple subclass")

    t = torch.zeros(3)
    t.detach = lambda: torch.ones(3)  # an overridden method on the instance
    for value, word in ((torch.zeros(3).as_subclass(Liar), "not a plain"), (t, "instance attributes"),
                        (LazyTuple([torch.zeros(1)]), "LazyTuple"), (3.0, "float")):
        with pytest.raises(ClaimCodeError) as e:
            normalize_outputs(value, "kernel.impl")
        assert word in e.value.message and e.value.verdict == "rejected"


def test_mode_depths_see_a_torch_function_mode_left_active():
    before = mode_depths()
    mode = TorchFunctionMode()
    mode.__enter__()
    try:
        assert mode_depths() != before
    finally:
        mode.__exit__(None, None, None)
    assert mode_depths() == before


def test_a_call_with_the_wrong_arguments_names_the_key_the_file_and_the_call():
    def one_arg(x):
        return x

    with pytest.raises(ClaimCodeError) as e:
        call_claim_code("kernel.impl", one_arg, (torch.zeros(2, 3), torch.ones(4), 7), kwargs={})
    msg = e.value.message
    assert msg.startswith("kernel.impl (") and "test_calls.py:" in msg
    assert "one_arg(Tensor(float32, 2x3, cpu), Tensor(float32, 4, cpu), 7)" in msg


def test_an_exception_inside_claim_code_keeps_its_traceback():
    def boom(x):
        raise ValueError("exploded")

    with pytest.raises(ClaimCodeError) as e:
        call_claim_code("baseline.impl", boom, (1,), kwargs={})
    assert "raised ValueError: exploded" in e.value.message and "Traceback" in e.value.tb


def test_poison_fills_floats_with_nan_and_ints_with_a_sentinel():
    f, i = torch.ones(4), torch.ones(4, dtype=torch.int32)
    tensors.poison((f, i))
    assert torch.isnan(f).all() and (i == torch.iinfo(torch.int32).min).all()


def test_memfd_round_trip_and_element_edit():
    import os

    t = torch.arange(12, dtype=torch.bfloat16).reshape(3, 4)
    fd, item = tensors.to_memfd(t, 0)
    try:
        mapped = tensors.Mapped(fd, item)
        assert torch.equal(mapped.tensor, t)
        tensors.set_elements(mapped.tensor, m.Edit(operand=0, indices=(5).to_bytes(8, "little").hex(), raw="0000"))
        assert mapped.tensor.view(-1)[5].item() == 0.0
    finally:
        os.close(fd)
