"""The op groups a forbidden name stands for: one table for the rule, the trace and the tripwire."""

import pytest

from claimbench.spec import ops


@pytest.mark.parametrize("name,forbidden", [
    ("torch.special.softmax", "torch.softmax"),
    ("torch.nn.functional.softmax", "torch.softmax"),
    ("torch.Tensor.softmax", "torch.nn.functional.softmax"),
    ("torch.ops.aten._softmax.default", "torch.softmax"),
    ("torch._C._special.special_log_softmax", "torch.log_softmax"),
    ("torch.ops.aten.bmm.out", "torch.matmul"),
    ("torch.einsum", "torch.matmul"),
    ("x.mm", "torch.mm"),
])
def test_aliases_reach_the_forbidden_op(name, forbidden):
    assert ops.same_op(name, forbidden)


@pytest.mark.parametrize("name,forbidden", [
    ("torch.exp", "torch.softmax"),
    ("torch.amax", "torch.softmax"),
    ("torch.log_softmax", "torch.softmax"),
    ("torch.softmax", "torch.log_softmax"),
    ("torch.sum", "torch.cumsum"),
    ("triton.language.dot", "torch.softmax"),
])
def test_other_ops_do_not(name, forbidden):
    assert not ops.same_op(name, forbidden)


def test_an_unlisted_name_stands_for_its_underscore_and_special_forms():
    assert ops.group("torch.erf") >= {"erf", "_erf", "special_erf"}
