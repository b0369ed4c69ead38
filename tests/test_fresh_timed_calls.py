"""Issue 22's families of stale or distinguishable timed calls, through the real runner.

Each fixture (tests/fixtures/kernels/cheat/) reached `verified` on the runner before this change
(the figures are in each fixture's docstring); each runs here with the static rules on and, as for
the `_hidden` fixtures, off, so what is tested is the process design (with the rules on, a kernel
they let through runs exactly the rules-off item's path, so that item is the run and this one
checks the gate's decision):
- result reuse: a matmul recomputing only the rows and columns whose inputs changed;
- a `prepare` that turned the per-sample perturbation off, with a four-element fingerprint cache;
- a kernel telling timed calls from checked ones by address and returning a cheaper dtype there;
- an integer matmul replaying the product of the round's first call (no floating-point input to change);
- a kernel side holding its null calls, so that the subtraction makes it look faster;
- a kernel moving its rival into a cgroup with a 10% CPU quota.
The claimed values are ones only the trick reaches: the honest work runs at about 1x its baseline.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import shutil
import tempfile

import pytest
from cheat_project import INT_MATMUL, MASK, MATMUL, SCALED_INT_MATMUL, SOFTMAX, SORT, TRANSPOSED_MATMUL, write_claim

from claimbench.gate.policy import gate_file
from claimbench.machine.detect import detect
from claimbench.options import RunOptions, TimingLimits
from claimbench.runner import run_one
from claimbench.stats.status import Status as S

pytestmark = pytest.mark.usefixtures("one_process")  # every rule these cheats meet acts within a process (conftest.py)
# One process (`one_process`): 1.5 s held two rounds of a matmul slowed by a ghost helper, and a CI needs
# three; the claim's own interval rule stops the rounds as soon as it is narrow enough.
TIMING = {"max_time_s": 3.0, "warmup_s": 0.05}
CASES = {
    # (template, extra fields, statuses it may end in)
    "incremental_matmul": (MATMUL, {}, {S.REFUTED, S.INCONCLUSIVE, S.REJECTED}),
    "prepare_fingerprint": (SOFTMAX, {"params": "{rows: 256, cols: 2000}",
                                      "kernel_extra": ', prepare: "kernels/cheat/prepare_fingerprint.py:prepare"'},
                            # its fingerprint changes with the signs flipped every sample: it does the work
                            {S.REJECTED, S.INCORRECT, S.REFUTED, S.INCONCLUSIVE}),
    "timed_dtype": (MASK, {}, {S.REJECTED, S.INCORRECT}),
    # result reuse where no input is floating-point: the integer inputs change too (perturb.perturbable)
    # its 16-value probe sees about half the values move every sample (signs.py), so it multiplies
    # each time; when a probe survives, its replay answers for inputs that changed
    "int_replay": (INT_MATMUL, {}, {S.REJECTED, S.REFUTED, S.INCONCLUSIVE}),
    # bending the clock: the kernel side holds its null calls (rules off only: it patches the side)
    "inflated_null": (MATMUL, {}, {S.REFUTED, S.INCONCLUSIVE}),
    # slowing the baseline: its first call moves its siblings into a 10%-quota cgroup (root only)
    "throttle_rival": (MATMUL, {}, {S.REJECTED}),
}
RULES_OFF_ONLY = {"inflated_null", "throttle_rival"}
CGROUP_V1_CPU = "/sys/fs/cgroup/cpu"
THROTTLE_GROUP = f"{CGROUP_V1_CPU}/claimbench-fixture-slow"  # the fixture's (throttle_rival.SLOW)


@contextlib.contextmanager
def _one_throttle_at_a_time():
    """The throttle's cgroup is one path for the whole machine: two tests in two xdist workers saw
    each other's `landed` (the Landlock test failed for the unconfined one's landing)."""
    with open(os.path.join(tempfile.gettempdir(), "claimbench-throttle-test.lock"), "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _remove_throttle_group() -> None:
    for d in (f"{THROTTLE_GROUP}/landed", THROTTLE_GROUP):
        try:
            os.rmdir(d)
        except OSError:
            pass


@pytest.mark.parametrize("rules", ["rules-on", "rules-off"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_stale_or_distinguishable_timed_calls_never_verify(cheat_root, cheat_servers, name, rules, monkeypatch):
    template, extra, allowed = CASES[name]
    if name == "throttle_rival" and not (os.geteuid() == 0 and os.access(f"{CGROUP_V1_CPU}/cgroup.procs", os.W_OK)):
        pytest.skip("needs root and a writable cgroup v1 cpu controller to throttle a process")
    if rules == "rules-on" and name in RULES_OFF_ONLY:
        allowed = {S.REJECTED}  # `check` refuses the patch itself
    if rules == "rules-off":
        from claimbench.gate import policy
        monkeypatch.setattr(policy, "check_kernel_source", lambda *a, **kw: [])
    path = write_claim(cheat_root, f"{name.replace('_', '-')}-{rules}", name, template=template,
                       **{"value": "1.5", **extra})
    if rules == "rules-on" and name not in RULES_OFF_ONLY:
        # The gate is all the rules change (`policy.check_kernel_source` is read nowhere else): a kernel
        # it accepts goes down the rules-off item's path, step for step, so running it again here cost
        # 2-7 CPU-s a case for nothing (issue 26). Accepted is the point: the runtime is what stops it.
        checked = gate_file(path, cheat_root)
        assert checked.ok, f"the static rules now refuse {name}: {checked.problems[:2]}; make its item assert that"
        return
    # the cgroup move is the census's to catch: without a sandbox, where the kernel can make it (under
    # Landlock the kernel refuses the write to /sys: test_landlock_refuses_the_throttle below)
    unconfined = name == "throttle_rival"
    opts = RunOptions(results=cheat_root / "results", timeout_s=180.0, threads=1, timing=TimingLimits(**TIMING),
                      sandbox="none" if unconfined else "auto")
    with _one_throttle_at_a_time():
        _remove_throttle_group()
        out = run_one(path, cheat_root, detect(cheat_root), opts=opts, servers=None if unconfined else cheat_servers)
        landed = os.path.isdir(f"{THROTTLE_GROUP}/landed")
        _remove_throttle_group()  # its processes are gone with the claim
    assert out.status != S.VERIFIED, f"{name}: {out.reason}"
    if name == "throttle_rival" and rules == "rules-off" and not landed:
        # The attack needs the sides unsandboxed and a cgroup move the kernel may make; where it
        # could not make one (it failed quietly, as a real cheat would), nothing was there to catch.
        pytest.skip(f"the throttle never took on this machine, so there was nothing to catch ({out.status}: {out.reason})")
    assert out.status in allowed, (out.status, out.reason)
    assert out.reason.startswith("policy") == (rules == "rules-on" and name in RULES_OFF_ONLY), out.reason
    if name == "throttle_rival" and rules == "rules-off":
        assert "cgroup" in out.reason, out.reason
    if out.value is not None and _quiet(out):
        assert out.value < 1.5 * 0.95, out.reason  # what the run measured is the honest work's number


def test_landlock_refuses_the_throttle(cheat_root, cheat_servers, monkeypatch):
    """The same cheat under Landlock (the sandbox a machine without bubblewrap gets): its write to
    /sys is refused, so nothing is throttled, and no number comes from it."""
    from claimbench.gate import policy
    from claimbench.machine import landlock

    if landlock.abi() < 1 or not (os.geteuid() == 0 and os.access(f"{CGROUP_V1_CPU}/cgroup.procs", os.W_OK)):
        pytest.skip("needs Landlock, root and a writable cgroup v1 cpu controller (where the attack could land)")
    monkeypatch.setattr(policy, "check_kernel_source", lambda *a, **kw: [])
    path = write_claim(cheat_root, "throttle-rival-landlock", "throttle_rival", template=MATMUL, value="1.5")
    opts = RunOptions(results=cheat_root / "results", timeout_s=180.0, threads=1, timing=TimingLimits(**TIMING),
                      sandbox="landlock")
    with _one_throttle_at_a_time():
        _remove_throttle_group()
        out = run_one(path, cheat_root, detect(cheat_root), opts=opts)
        landed = os.path.isdir(f"{THROTTLE_GROUP}/landed")
        _remove_throttle_group()
    assert not landed and out.status != S.VERIFIED, (out.status, out.reason)


PREPARED = {"params": "{rows: 256, cols: 2000}", "value": "0.01"}  # 0.01: any correct kernel would verify


def _run_prepared(root, servers, name: str):
    """The softmax claim around fixture ``name`` with its own `prepare`, run through the runner."""
    path = write_claim(root, name.replace("_", "-"), name, template=SOFTMAX,
                       kernel_extra=f', prepare: "kernels/cheat/{name}.py:prepare"', **PREPARED)
    return _run_short(root, servers, path)


def _run_short(root, servers, path):
    opts = RunOptions(results=root / "results", timeout_s=180.0, threads=1, timing=TimingLimits(**TIMING))
    return run_one(path, root, detect(root), opts=opts, servers=servers)


def _quiet(out) -> bool:
    """Whether the run's number says anything: on a busy machine the product itself says it does not
    (`machine busy`, inconclusive), and under the test command's load an honest 1x read 3.58x [2.13,
    5.97] with 83% of the cores busy elsewhere (a fresh clone's CI, 2026-12-06; 1.02x, 0.93x and 0.88x
    alone). So a number is held to a bound only on a quiet run; the status and the checks always are."""
    return not (out.reason or "").startswith("machine busy")


def _timed_checks(out) -> dict:
    import json

    assert out.record_path is not None, out.reason
    checks = json.loads(out.record_path.read_text())["protocol"]["timed_checks"]
    assert checks is not None, ("the run ended before its timed rounds", out.status, out.reason)
    return checks


@pytest.mark.parametrize("name", ["prepare_scaled_answer", "prepare_stash", "prepare_honest"])
def test_a_kernels_prepare_never_sees_a_timed_calls_inputs(cheat_root, cheat_servers, name):
    """A kernel's `prepare` ran again, untimed, on every timed call's changed inputs, so it could
    compute the answer there (verified 1.70x). Now the changes go into the operands it passes
    through unchanged, and a kernel whose `prepare` passes none through cannot verify."""
    out = _run_prepared(cheat_root, cheat_servers, name)
    assert out.status != S.VERIFIED or name == "prepare_honest", out.reason
    if name == "prepare_stash":  # its kept answer is stale as soon as the passed-through x changes
        assert out.status == S.REJECTED and "timed" in out.reason, (out.status, out.reason)
        return
    checks = _timed_checks(out)
    if name == "prepare_scaled_answer":  # no input passes through: nothing can change, so verified is blocked
        assert checks["perturbed"] == 0 and "passes none of its inputs through" in checks["unperturbed"], checks
        assert out.status in (S.INCONCLUSIVE, S.REFUTED), (out.status, out.reason)
        assert out.status != S.INCONCLUSIVE or "passes none" in out.reason or out.reason.startswith("machine busy"), out.reason
    else:  # the honest kernel's answers stay right with its operand changed between timed calls
        assert out.status in (S.VERIFIED, S.INCONCLUSIVE), (out.status, out.reason)
        assert checks["perturbed"] > 0 and checks["checked"] > 0 and checks["failed"] == 0, checks
        assert "unperturbed" not in checks, checks


def test_a_float_input_the_work_never_reads_does_not_keep_the_integer_inputs_still(cheat_root, cheat_servers, monkeypatch):
    """Integer inputs beside floating-point ones were never changed, so a float input the product
    never reads kept an int64 matmul's inputs still within a round, and a kernel keyed on their
    addresses replayed its product: 22.6x [15.3, 43.9], stopped only by the busy-machine rule
    (static rules off, as here). Every tensor input changes now."""
    from claimbench.gate import policy
    monkeypatch.setattr(policy, "check_kernel_source", lambda *a, **kw: [])
    template = INT_MATMUL.replace("params: {{n: 384}}", "params: {{n: 384, dummy: 1}}")
    out = _run_short(cheat_root, cheat_servers,
                     write_claim(cheat_root, "int-replay-dummy", "int_replay_dummy", template=template, value="1.2"))
    assert out.status != S.VERIFIED, out.reason
    assert out.value is None or out.value < 1.1 or not _quiet(out), (out.status, out.reason)


def test_an_integer_input_of_one_value_keeps_the_run_from_verified(cheat_root, cheat_servers, monkeypatch):
    """No change keeps an input of one value in its range and moves it, so a claim on constant int64
    matrices would keep its inputs still for the replay cheat: the run says why it cannot verify."""
    from claimbench.gate import policy
    monkeypatch.setattr(policy, "check_kernel_source", lambda *a, **kw: [])
    template = INT_MATMUL.replace("params: {{n: 384}}", "params: {{n: 384, constant: 1}}")
    out = _run_short(cheat_root, cheat_servers,
                     write_claim(cheat_root, "int-replay-constant", "int_replay", template=template, value="1.2"))
    assert out.status != S.VERIFIED, out.reason
    assert "holds one value only" in _timed_checks(out)["unperturbed"], out.reason


def test_a_kernel_whose_prepare_fixes_the_weight_cannot_update_its_answer_for_the_activations(cheat_root, cheat_servers):
    """`prepare` lays out B and passes A through; the kernel adds dA B to its kept C when few
    elements of A changed (4.9x for an honest 1x under sparse changes, an adversarial review).
    About half of A changes before every sample now, so it multiplies in full."""
    template = MATMUL.replace('impl: "kernels/cheat/{file}.py:kernel"}}',
                              'impl: "kernels/cheat/{file}.py:kernel", prepare: "kernels/cheat/{file}.py:prepare"}}')
    out = _run_short(cheat_root, cheat_servers,
                     write_claim(cheat_root, "prepare-weight-delta", "prepare_weight_delta", template=template, value="1.2"))
    assert out.status != S.VERIFIED, out.reason
    assert out.value is None or out.value < 1.1 or not _quiet(out), (out.status, out.reason)
    checks = _timed_checks(out)
    assert checks["flipped"] == checks["perturbed"] > 0 and checks["failed"] == 0, checks


@pytest.mark.parametrize("name, why", [("prepare_setitem_hook", "not a plain torch.Tensor"),
                                       ("prepare_mode_hook", "mode active")])
def test_a_kernels_code_never_runs_while_the_orchestrators_edits_go_in(cheat_root, cheat_servers, name, why):
    """The edits go into the passed-through operands inside the kernel's process, untimed: an operand
    of a torch.Tensor subclass (its `__setitem__`) or a torch function mode `prepare` left active saw
    them there and computed the answer (23.7x, CI 13.8 to 3.3e5, every recheck passed, static rules
    on: an adversarial review). `prepare` must return plain tensors and leave no mode active."""
    out = _run_prepared(cheat_root, cheat_servers, name)
    assert out.status == S.REJECTED and why in out.reason, (out.status, out.reason)


@pytest.mark.parametrize("inputs", ["normal", "non-negative", "integer"])
def test_a_matmul_applying_the_changes_instead_of_multiplying_is_not_measured_faster(cheat_root, cheat_servers, inputs):
    """A kernel that keeps its last A, B and C and applies each sample's changes (O(n^2) for an
    O(n^3) product) answered right every time and was verified at 1.81x [1.72, 1.90] while the
    changes were sparse. Every sample now also changes about half of every element of every input
    (orchestrator/signs.py): the sign where a floating-point input holds a negative value, else the
    mantissa's top bit, and an integer input's lowest bit within its range, so there is nothing to
    reuse: it multiplies in full. With the sign flip alone, inputs from torch.rand kept the sparse
    changes only (verified 2.04x [1.95, 2.11]), and so did int64 inputs (1.35x [1.24, 1.66], for
    an honest 1x)."""
    template = {"normal": MATMUL, "integer": INT_MATMUL,
                "non-negative": MATMUL.replace("params: {{n: 1024}}", "params: {{n: 1024, nonneg: 1}}")}[inputs]
    out = _run_short(cheat_root, cheat_servers,
                     write_claim(cheat_root, f"delta-matmul-{inputs}", "delta_matmul", template=template, value="1.2"))
    assert out.status != S.VERIFIED, out.reason
    assert out.value is None or out.value < 1.1 or not _quiet(out), (out.status, out.reason)
    checks = _timed_checks(out)  # every perturbed input was flipped, and each CPU sample started swept
    assert checks["flipped"] == checks["perturbed"] > 0 and checks["swept_bytes"] >= 1 << 20, (out.status, out.reason, checks)


@pytest.mark.parametrize("values", ["signed", "unsigned"])
def test_integer_operands_beside_a_floating_point_scale_change_too(cheat_root, cheat_servers, values):
    """C = (A @ B) * s with int8 values in int32 A and B and a float32 scale s (a scaled_mm whose
    quantization the task did): only s changed between timed calls, so a kernel keeping A, B and
    their product, comparing A and B with its copies in full (never wrong), rescaled the kept
    product: 12.75x [10.76, 13.9] (default timing, 6 processes, 108 rechecks passed, inconclusive
    only on the interval's width) and 7.1-7.7x in this test's short run, for an honest 1.01x (an
    adversarial review). Every integer input beside floating-point ones now changes too (half its
    values rotated among themselves), signed or not (uint8 with a zero point). The kernel uses
    nothing the static rules refuse, so they are on: rules on or off it ran the same."""
    out = _run_short(cheat_root, cheat_servers,
                     write_claim(cheat_root, f"int-beside-float-{values}", "int_beside_float",
                                 template=SCALED_INT_MATMUL, value="1.5", unsigned=str(int(values == "unsigned"))))
    assert out.status != S.VERIFIED, out.reason
    # a number says something on a quiet run only (`_quiet`): under load an honest 1x read 3.58x [2.13, 5.97]
    assert out.ci_low is None or out.ci_low < 1.3 or not _quiet(out), (out.status, out.reason)
    checks = _timed_checks(out)  # a kept product answers for integers that changed: rejected, or it redoes the work
    assert out.status == S.REJECTED or (checks["failed"] == 0 and checks["flipped"] == checks["perturbed"] > 0), \
        (out.status, out.reason, checks)


def test_a_sort_cannot_replay_its_answer_keyed_on_the_values_multiset(cheat_root, cheat_servers):
    """Every change to an integer input kept its multiset (a rotation, then a shuffle), so a sort
    keyed its kept answer on order-free sums (O(n) reads) and replayed it: 8.37x [5.91, 9.10], every
    recheck passed, stopped only by the busy-machine rule (an adversarial review). Half of the
    elements now move one step within the input's range, so the multiset changes every sample."""
    out = _run_short(cheat_root, cheat_servers, write_claim(cheat_root, "multiset-replay", "multiset_replay",
                                                            template=SORT, value="1.2"))
    assert out.status != S.VERIFIED, out.reason
    assert out.status == S.REJECTED or out.ci_low is None or out.ci_low < 1.3 or not _quiet(out), (out.status, out.reason)


def test_a_transposed_input_from_make_inputs_gets_the_same_changes_in_the_reference(cheat_root, cheat_servers):
    """The task side cloned a transposed B with its strides, and the changes went into a reshaped copy:
    the reference saw none of them and an honest matmul was rejected ("relative L2 error 1.41", an
    adversarial review). The task side's copies are C-order now, as the sides' are."""
    out = _run_short(cheat_root, cheat_servers, write_claim(cheat_root, "transposed-honest", "transposed_honest",
                                                            template=TRANSPOSED_MATMUL, value="0.5"))
    assert out.status != S.REJECTED, out.reason
    checks = _timed_checks(out)
    assert checks["checked"] > 0 and checks["failed"] == 0, (out.status, out.reason, checks)


SQMM = (MATMUL.replace("kernels/cheat/matmul_task.py:make_inputs", "kernels/cheat/sqmm_task.py:make_inputs")
        .replace("kernels/cheat/matmul_task.py:torch_matmul", "kernels/cheat/sqmm_task.py:torch_sqmm")
        .replace("kernels/cheat/matmul_task.py:reference_fp64", "kernels/cheat/sqmm_task.py:reference_fp64"))
ABSORT_FLAT = (SOFTMAX.replace("kernels/softmax_cpu.py:make_inputs", "kernels/cheat/absort_task.py:make_inputs")
               .replace("name: torch.softmax, impl: kernels/softmax_cpu.py:torch_softmax",
                        "name: torch.sort, impl: kernels/cheat/absort_task.py:torch_sort_abs_flat")
               .replace("reference: {reference}", "reference: kernels/cheat/absort_task.py:reference_fp64_flat")
               .replace("  forbidden: [torch.softmax, torch.nn.functional.softmax]\n", "")
               .replace('bytes: "{bytes}"', 'bytes: "8 * rows * cols"'))


@pytest.mark.parametrize("case", ["sqmm_delta", "absort_flat_check", "submm_delta"])
def test_an_answer_blind_to_signs_still_sees_every_sample_change(cheat_root, cheat_servers, case):
    """Protocol 6 changed a signed input's signs only, so an answer that reads it through |x| or x*x
    saw the sparse changes alone: (A*A)(B*B) kept and updated in O(n^2) was verified at 2.06x
    [2.01, 2.10], and every magnitude in order, replayed when the moved magnitudes were the same,
    at 20.65x [19.47, 21.25], static rules on (an adversarial review; honest controls 1.00x).
    A signed input's mantissas now change too (`signs.float_passes`), so both redo the work; and a
    subnormal one's (an input of subnormals got signs only: the squares' update verified 1.89x)."""
    template, fields = {"sqmm_delta": (SQMM, {}), "submm_delta": (SQMM.replace("sqmm_task.py:", "submm_task.py:")
                                                              .replace("submm_task.py:torch_sqmm", "submm_task.py:torch_submm"), {}),
                        "absort_flat_check": (ABSORT_FLAT, {"params": "{rows: 256, cols: 2048}"})}[case]
    out = _run_short(cheat_root, cheat_servers, write_claim(cheat_root, f"blind-{case}", case, template=template,
                                                            value="1.2", **fields))
    assert out.status != S.VERIFIED, out.reason
    assert out.ci_low is None or out.ci_low < 1.3 or not _quiet(out), (out.status, out.reason)
    checks = _timed_checks(out)
    assert checks.get("flipped", 0) > 0, (out.status, out.reason)
    assert "unperturbed" not in checks, checks  # the dense part moves these answers: no blocker for them


def test_a_handler_in_place_only_between_the_census_rounds_is_rejected(cheat_root, cheat_servers):
    """Installed on a round's first call and taken down on its fifth, a SIGCONT handler was there at
    the thaws before calls 2-5 and gone at every look of the census (before each round and after the
    last): verified 1.94x [1.89, 2.00] over torch.matmul, static rules on (an adversarial review).
    The handled signals are now read at every freeze, when the side cannot change them."""
    out = _run_short(cheat_root, cheat_servers, write_claim(cheat_root, "gap-handler", "gap_half_mm",
                                                            template=MATMUL, value="1.3"))
    assert out.status == S.REJECTED and "handles SIGCONT" in out.reason, (out.status, out.reason)


def test_a_handler_for_a_signal_the_fork_server_handles_is_rejected_too(cheat_root, cheat_servers, monkeypatch):
    """The fork server handles SIGINT (Python's handler): a side re-pointing it showed the server's mask,
    so its handler, fired by a timer while the side was stopped, would run at the thaw unseen. Sides
    drop Python's handlers before claim code loads (side/server.py), and one in a side is refused."""
    from claimbench.gate import policy

    monkeypatch.setattr(policy, "check_kernel_source", lambda *a, **kw: [])  # `import signal` is refused by the rules
    out = _run_short(cheat_root, cheat_servers, write_claim(cheat_root, "sigint-rehandled", "sigint_rehandled",
                                                            template=MATMUL, value="1.0"))
    assert out.status == S.REJECTED and "handles SIGINT" in out.reason, (out.status, out.reason)


def test_a_handler_run_when_the_side_is_thawed_is_rejected(cheat_root, cheat_servers):
    """A SIGCONT handler (signal reached as asyncio.unix_events.signal, past the static rules) ran
    each time the orchestrator thawed the kernel's side for the null call before a timed sample,
    after the inputs had changed, and multiplied half of A's rows there: verified 1.89x [1.84, 1.95]
    over torch.matmul (an adversarial review; honest 1.02x). A side that handles a signal its fork
    server does not is rejected before its first timed round (`census.unlike`); the static rules are on
    and do not see it, so the process design is what stops it."""
    out = _run_short(cheat_root, cheat_servers, write_claim(cheat_root, "thaw-handler", "null_half_mm",
                                                            template=MATMUL, value="1.5"))
    assert out.status in (S.REJECTED, S.ERROR), (out.status, out.reason)
    assert out.status == S.ERROR or "handles SIGCONT" in out.reason, out.reason


def test_an_answer_the_changes_barely_move_cannot_verify(cheat_root, cheat_servers):
    """C = E(A) E(B) with E the binary exponent: the dense change (signs, the mantissa's top bit)
    never moves it, only the sparse part does, so a kernel keeping E(A), E(B) and C updated them
    there: verified 2.67x [2.55, 2.73], static rules on (an adversarial review; honest 1.03x). The
    first recheck asks for the reference with the dense part of the changes alone: an answer it does
    not move is a blocker (`Rechecks.unmoved`)."""
    template = (MATMUL.replace("kernels/cheat/matmul_task.py:make_inputs", "kernels/cheat/exmm_task.py:make_inputs")
                .replace("kernels/cheat/matmul_task.py:torch_matmul", "kernels/cheat/exmm_task.py:torch_exmm")
                .replace("kernels/cheat/matmul_task.py:reference_fp64", "kernels/cheat/exmm_task.py:reference_fp64"))
    out = _run_short(cheat_root, cheat_servers, write_claim(cheat_root, "exponent-mm", "exmm_delta", template=template,
                                                            value="1.5"))
    assert out.status != S.VERIFIED, out.reason
    assert "left the reference's answer exactly as it was" in _timed_checks(out).get("unperturbed", ""), out.reason


def test_a_task_whose_answer_the_changes_never_move_cannot_verify(cheat_root, cheat_servers):
    """Every element's binary exponent, in order, does not see a sign flip, a flip of the mantissa's
    top bit or a rotation of values among elements: every change the harness makes, so a kernel could
    replay a kept answer and pass every recheck. The first recheck also asks for the reference without
    the sample's changes, and an equal answer is a blocker (`Rechecks.unmoved`)."""
    template = (ABSORT_FLAT.replace("absort_task.py:make_inputs", "exponent_sort_task.py:make_inputs")
                .replace("absort_task.py:torch_sort_abs_flat", "exponent_sort_task.py:torch_sorted_exponents")
                .replace("absort_task.py:reference_fp64_flat", "exponent_sort_task.py:reference_fp64"))
    out = _run_short(cheat_root, cheat_servers, write_claim(cheat_root, "blind-task", "exponent_sort_honest",
                                                            template=template, value="0.5",
                                                            params="{rows: 256, cols: 2048}"))
    assert out.status != S.VERIFIED, out.reason
    why = _timed_checks(out).get("unperturbed", "")  # the blocker, whatever else the verdict's reason says first
    assert "left the reference's answer exactly as it was" in why, (out.status, out.reason, why)



def _record(out) -> dict:
    import json

    assert out.record_path is not None, out.reason
    return json.loads(out.record_path.read_text())


_NEEDS_CXX = pytest.mark.skipif(shutil.which("g++") is None and shutil.which("c++") is None,
                                reason="the fixture builds a C++ module with torch's extension loader")


def _neither_verified_nor_faster(out) -> None:
    """Not verified; and where the run measured a number on a quiet machine without refusing the kernel, the
    honest product's: under the claimed 1.5x's threshold (a trick that took would read above it)."""
    assert out.status != S.VERIFIED, (out.status, out.reason)
    if out.value is not None and _quiet(out) and out.status != S.REJECTED:
        assert out.value < 1.5 * 0.95, out.reason


@pytest.fixture(scope="module")
def alone_servers(cheat_root):
    """As `claimbench run --threads 1` runs its claims: fork servers started with one thread, shared by
    the module's claims (`cheat_servers` start with every core's, which MKL called from a fixture's own
    thread takes). Each claim's sides are forked afresh; a server of its own per test cost about 2
    CPU-s of imports each."""
    from claimbench.orchestrator.servers import Servers

    with Servers(cheat_root, RunOptions(results=cheat_root / "results", threads=1), pooled=True) as s:
        yield s


def _run_alone(root, path, servers):
    opts = RunOptions(results=root / "results", timeout_s=180.0, threads=1, timing=TimingLimits(**TIMING))
    return run_one(path, root, detect(root), opts=opts, servers=servers)


@_NEEDS_CXX
def test_work_a_helper_thread_does_in_the_refresh_null_call_keeps_the_run_from_verified(cheat_root, alone_servers):
    """`gil_half_mm` (an adversarial review, protocol 7): a thread started at import multiplies half of A's rows
    while holding the GIL, in the null call the orchestrator makes after the inputs changed, so the timed call
    does the other half: 1.64x verified for an honest 1.0x, static rules on (its C module is built by torch's own
    extension loader). A kernel side that answers that null call late cannot verify now."""
    out = _run_alone(cheat_root, write_claim(cheat_root, "gil-half-mm", "gil_half_mm", template=MATMUL, value="1.5"), alone_servers)
    assert out.status in {S.REJECTED, S.INCONCLUSIVE}, (out.status, out.reason)
    rec = _record(out)
    refresh = rec["protocol"]["bracket"]["refresh"]
    assert refresh["kernel"]["median_us"] > refresh["baseline"]["median_us"] + 2000, refresh  # the half product
    assert any("answered the null call made after its inputs changed" in x for x in rec["blockers"]), rec["blockers"]


@_NEEDS_CXX
def test_timers_a_stopped_kernel_left_armed_keep_the_run_from_verified(cheat_root, alone_servers, monkeypatch):
    """`timer_storm` (an adversarial review, protocol 7): 16,000 timerfds armed in the kernel's last untimed
    exchange of a round fire every 30 us on the core both sides are pinned to while the baseline is timed; on a
    kernel without IRQ time accounting their handling is the baseline's time: 1.76x verified for an honest
    1.0x, static rules on. The interrupts on the timed cores are counted around every timed call now. Since
    protocol 9 a side holding timers is rejected first (`wakers.py`, tested with `epoll_storm`); that rule is
    off here, so the interrupt count is what is tested."""
    from claimbench.orchestrator import wakers

    monkeypatch.setattr(wakers, "problems", lambda members, roles=("task", "kernel"): [])
    out = _run_alone(cheat_root, write_claim(cheat_root, "timer-storm", "timer_storm", template=MATMUL, value="1.5"), alone_servers)
    assert out.status in {S.REFUTED, S.INCONCLUSIVE}, (out.status, out.reason)
    rec = _record(out)
    b = rec["protocol"]["bracket"]
    rate = {side: b["irq"][side] / (b["irq_wall_us"][side] / 1e6) for side in ("kernel", "baseline")}
    if rate["baseline"] > 3 * rate["kernel"] + 1000:  # the storm landed (this run's last process): it is a blocker
        assert any("interrupts a second on the timed cores" in x for x in rec["blockers"]), (rec["blockers"], rate)
    else:  # it never took (too few descriptors allowed, say): the honest product is what was measured
        assert out.value is None or not _quiet(out) or out.value < 1.5 * 0.95, (out.reason, rate)


@_NEEDS_CXX
def test_no_code_of_the_kernels_side_runs_between_the_change_and_the_timed_call(cheat_root, alone_servers):
    """`refill_full_mm` (an adversarial review, protocol 8's first version): `prepare` passes A and B through,
    and a profile hook set from C at import ran when the side wrote each sample's changes into them (the
    Refill), computing the whole product there, untimed: 13.3x verified for an honest 1.0x, static rules on.
    On a CPU the orchestrator now writes the changed inputs into those operands itself, with the side stopped."""
    template = MATMUL.replace(':kernel"}}', ':kernel", prepare: "kernels/cheat/refill_full_mm.py:prepare"}}')
    out = _run_alone(cheat_root, write_claim(cheat_root, "refill-full-mm", "refill_full_mm", template=template,
                                             value="1.5"), alone_servers)
    assert out.status in {S.REFUTED, S.INCONCLUSIVE}, (out.status, out.reason)
    assert _timed_checks(out)["checked"] > 0, out.reason  # its answers, from operands we wrote, were right
    if out.value is not None and _quiet(out):
        assert out.value < 1.5 * 0.95, out.reason


@_NEEDS_CXX
@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs a core the sides are not pinned to")
def test_a_helper_thread_cannot_move_to_a_core_the_side_was_not_given(cheat_root, alone_servers):
    """`sidecore_mm` (an adversarial review, protocol 8's second version): a helper thread moved itself to
    the core the side was not pinned to at the start of every call, multiplied half of A there and moved
    back before the call returned, so every census saw it pinned: 1.85x verified with 1.76 cores used. Every
    side now runs under a seccomp filter that refuses `sched_setaffinity`."""
    out = _run_alone(cheat_root, write_claim(cheat_root, "sidecore-mm", "sidecore_mm", template=MATMUL, value="1.5"), alone_servers)
    assert out.status in {S.REFUTED, S.INCONCLUSIVE}, (out.status, out.reason)
    if out.value is not None and _quiet(out):
        assert out.value < 1.5 * 0.95, out.reason


@_NEEDS_CXX
def test_a_stopped_kernel_holding_timers_is_rejected_whatever_each_interrupt_costs(cheat_root, alone_servers):
    """`epoll_storm` (an adversarial review, protocol 9): 120 timerfds, each watched by 4,500 epoll
    instances, so one expiry runs 4,500 callbacks in one timer interrupt (about 1 ms, charged to the task it
    interrupts on a kernel without IRQ time accounting); armed in the kernel's last untimed exchange, they
    fired into the baseline's timed calls: 1.67x and 2.05x verified for an honest 1.0x, the interrupt count
    at 580/s against 268/s, under its bound. A kernel or task side holding anything that fires while it is
    stopped (timer, signal, io_uring or file-watch descriptors, POSIX timers) was rejected (protocol 9,
    `orchestrator/wakers.py`, `tests/orchestrator/test_wakers.py`); since protocol 10 a CPU side cannot make
    the timers at all (machine/pinning.py), so the storm never starts and the honest product is measured."""
    out = _run_alone(cheat_root, write_claim(cheat_root, "epoll-storm", "epoll_storm", template=MATMUL, value="1.5"), alone_servers)
    _neither_verified_nor_faster(out)


@_NEEDS_CXX
def test_work_in_the_refresh_null_hides_at_most_a_tenth_of_a_call_however_wide_the_baseline_spread(cheat_root, alone_servers, monkeypatch):
    """`hook_null_mm` (an adversarial review, protocol 9): the same storm, in bursts, widened the baseline's
    refresh null spread, and with it the allowance for the kernel's refresh null (0.55 -> 9 ms), where a
    profile hook set from C multiplied 22-30% of A untimed: 2.2-2.5x verified in 5 runs of 9. With the
    timers' rule off (as if another way to disturb the baseline's null calls were found) the spread's
    share of the allowance is capped at a tenth of the kernel's call, so most of that work is late."""
    from claimbench.orchestrator import wakers

    monkeypatch.setattr(wakers, "problems", lambda members, roles=("task", "kernel"): [])
    out = _run_alone(cheat_root, write_claim(cheat_root, "hook-null-mm", "hook_null_mm", template=MATMUL, value="1.5"), alone_servers)
    assert out.status != S.VERIFIED, (out.status, out.value, out.reason)
    if out.value is not None and _quiet(out) and out.status != S.REJECTED:
        refresh = _record(out)["protocol"]["bracket"]["refresh"]
        assert refresh["kernel"]["median_us"] > refresh["baseline"]["median_us"], refresh


@_NEEDS_CXX
@pytest.mark.parametrize("name", ["scm_storm", "uring_storm"])
def test_a_cpu_side_cannot_make_timers_to_hide_from_the_descriptor_scan(cheat_root, alone_servers, name):
    """`scm_storm` and `uring_storm` (an adversarial review of protocol 9): `epoll_storm`'s timerfds, hidden
    from the descriptor scan in a socket's in-flight SCM_RIGHTS message or an io_uring's registered file
    table (the ring's own descriptor closed too): 1.66x and 1.60x verified for an honest 1.0x. A CPU side's
    seccomp filter now refuses timerfd_create, signalfd, io_uring_setup, io_setup and the file watches."""
    out = _run_alone(cheat_root, write_claim(cheat_root, name.replace("_", "-"), name, template=MATMUL, value="1.5"), alone_servers)
    _neither_verified_nor_faster(out)


@_NEEDS_CXX
@pytest.mark.parametrize("name", ["ghost_hog", "ghost_fork"])
def test_a_helper_outside_the_sides_tree_cannot_leave_its_session(cheat_root, alone_servers, name):
    """`ghost_hog` and `ghost_fork` (an adversarial review of protocol 9): a helper cloned with CLONE_PARENT
    (or double-forked, so the fork server adopted it) called setsid once the side was loaded, and from then
    on was in no side's group or tree: not frozen, not in any census, its CPU counted as the run's own. It
    spun beside the baseline while the kernel side was stopped: 1.89x and 1.92x verified for an honest
    1.0x. No side can leave its session now, and every process of the session is the side's."""
    out = _run_alone(cheat_root, write_claim(cheat_root, name.replace("_", "-"), name, template=MATMUL, value="1.5"), alone_servers)
    _neither_verified_nor_faster(out)


@_NEEDS_CXX
def test_a_helper_that_leaves_the_sides_group_but_not_its_session_is_still_the_sides(cheat_root, alone_servers):
    """`ghost_pgid`: `ghost_hog` with setpgid, which the seccomp filter allows (ninja needs it), instead of
    setsid: outside the side's tree and group, inside its session, spinning beside the baseline while the
    kernel side is stopped. On the code before protocol 10 (29a41fd) it was verified at 1.916x [1.784,
    1.929] for an honest 1.0x (one process, this test's caps); every process of a side's session is the
    side's now, so it is frozen and counted with it."""
    out = _run_alone(cheat_root, write_claim(cheat_root, "ghost-pgid", "ghost_pgid", template=MATMUL, value="1.5"),
                     alone_servers)
    _neither_verified_nor_faster(out)


@_NEEDS_CXX
def test_a_side_cannot_leave_work_to_the_kernel_in_the_baselines_time(cheat_root, alone_servers):
    """`bpf_storm` (an adversarial review of protocol 10): a BPF program on a CPU-wide perf event spun 0.4 ms
    of every millisecond's interrupt whenever the interrupted thread was not the kernel's: 1.59-1.62x verified
    for an honest 1.0x, four runs of four (two with three processes), no blocker. Every side's filter refuses
    bpf and perf_event_open now, and a side holds no capability: the module cannot load its program."""
    out = _run_alone(cheat_root, write_claim(cheat_root, "bpf-storm", "bpf_storm", template=MATMUL, value="1.5"),
                     alone_servers)
    _neither_verified_nor_faster(out)


@_NEEDS_CXX
@pytest.mark.skipif(not (shutil.which("ip") and shutil.which("tc")), reason="the fixture sets up its storm with iproute2 (ip, tc)")
def test_a_side_cannot_make_a_namespace_to_pace_work_into_the_baselines_time(cheat_root, alone_servers):
    """`tbf_trickle` (an adversarial review of protocol 11): a child of the kernel's side made a user and
    network namespace (every capability there), put a rate limiter and 40,000 never-matching filters on its
    loopback, and paced datagrams sent before each baseline run through them in softirq on the timed core,
    while 12 waiter threads widened the baseline's run-queue allowance: 1.52-1.66x verified for an honest
    1.0x (three of seven runs, two with three processes). On the code before, this test's run measured
    1.533x and 1.564x (inconclusive on the interval alone). No side may make a namespace now."""
    out = _run_alone(cheat_root, write_claim(cheat_root, "tbf-trickle", "tbf_trickle", template=MATMUL, value="1.5"),
                     alone_servers)
    _neither_verified_nor_faster(out)


@_NEEDS_CXX
def test_a_socket_watched_by_thousands_of_epolls_cannot_storm_the_baseline(cheat_root, alone_servers):
    """`pace_storm` (an adversarial review of protocol 10): no timer descriptor at all. A loopback TCP socket
    paced with SO_MAX_PACING_RATE (TCP's own timer, in the socket, firing while the side is stopped), its
    receiving end watched by 19,000 epoll instances: each paced segment ran 1.3 ms of callbacks in the
    baseline's time: 1.558x verified once in about 20 runs, the others 1.34-1.57x held back by their
    intervals. A CPU side may hold 1,024 files now, which bounds what one wake-up costs."""
    out = _run_alone(cheat_root, write_claim(cheat_root, "pace-storm", "pace_storm", template=MATMUL, value="1.5"), alone_servers)
    assert out.status != S.VERIFIED, (out.status, out.reason)
    if out.value is not None and _quiet(out) and out.status != S.REJECTED:
        assert out.value < 1.3, out.reason  # the storm took the baseline's 23 ms to 33-37 ms before
