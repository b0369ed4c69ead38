"""The GitHub workflows: strict YAML, a schema subset of GitHub's workflow syntax, and fail-closed rules.

No GPU runner and no network here, so this is what can be checked: structure, triggers, the
pinned commit, the upload that always runs, and that no step swallows an exit code.
"""

import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml

from claimbench.ci.plan import main as plan_main
from claimbench.ci.plan import plan

ROOT = Path(__file__).resolve().parents[1]
WF = ROOT / ".github" / "workflows"
FIX = Path(__file__).resolve().parent / "fixtures"

STRINGS = {"type": "string"}
STR_OR_LIST = {"anyOf": [STRINGS, {"type": "array", "items": STRINGS, "minItems": 1}]}
STEP = {
    "type": "object",
    "additionalProperties": False,
    "properties": {
        "name": STRINGS, "id": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_-]*$"}, "if": STRINGS,
        "uses": {"type": "string", "pattern": r"^[\w.-]+/[\w./-]+@[\w.-]+$"}, "run": STRINGS, "shell": STRINGS,
        "with": {"type": "object"}, "env": {"type": "object"}, "working-directory": STRINGS,
        "timeout-minutes": {"type": "number"}, "continue-on-error": {"type": "boolean"},
    },
    "oneOf": [{"required": ["uses"]}, {"required": ["run"]}],
}
JOB = {
    "type": "object",
    "additionalProperties": False,
    "required": ["runs-on", "steps"],
    "properties": {
        "name": STRINGS, "needs": STR_OR_LIST, "if": STRINGS, "runs-on": STR_OR_LIST,
        "permissions": {"type": "object"}, "environment": {}, "outputs": {"type": "object"},
        "env": {"type": "object"}, "defaults": {"type": "object"}, "timeout-minutes": {"type": "number"},
        "continue-on-error": {"type": "boolean"}, "services": {"type": "object"}, "container": {},
        "concurrency": {"anyOf": [STRINGS, {"type": "object", "required": ["group"],
                                            "properties": {"group": STRINGS, "cancel-in-progress": {"type": "boolean"}},
                                            "additionalProperties": False}]},
        "strategy": {"type": "object", "additionalProperties": False,
                     "properties": {"matrix": {"type": ["object", "string"]}, "fail-fast": {"type": "boolean"},
                                    "max-parallel": {"type": "number"}}},
        "steps": {"type": "array", "minItems": 1, "items": STEP},
    },
}
EVENTS = ["pull_request", "pull_request_target", "push", "workflow_dispatch", "schedule", "workflow_run"]
WORKFLOW = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "type": "object",
    "additionalProperties": False,
    "required": ["name", "on", "jobs"],
    "properties": {
        "name": STRINGS,
        "on": {"type": "object", "minProperties": 1, "additionalProperties": False,
               "properties": {e: {"type": ["object", "null", "array"]} for e in EVENTS}},
        "permissions": {"type": "object", "additionalProperties": {"enum": ["read", "write", "none"]}},
        "env": {"type": "object", "additionalProperties": STRINGS},
        "concurrency": JOB["properties"]["concurrency"],
        "defaults": {"type": "object"},
        "jobs": {"type": "object", "minProperties": 1,
                 "patternProperties": {"^[A-Za-z_][A-Za-z0-9_-]*$": JOB}, "additionalProperties": False},
    },
}
SWALLOWS = [r"\|\|\s*true", r"\|\|\s*echo", r"\|\|\s*:", r"set \+e", r"\|\|\s*exit 0"]


def _load(name: str) -> dict:
    data = yaml.safe_load((WF / name).read_text())
    if True in data:  # YAML 1.1 reads the key `on` as a boolean
        data["on"] = data.pop(True)
    return data


def _steps(wf: dict):
    for job_id, job in wf["jobs"].items():
        for step in job["steps"]:
            yield job_id, step


WORKFLOWS = ["policy.yml", "gpu.yml"]


@pytest.mark.parametrize("name", WORKFLOWS)
def test_workflow_is_strict_yaml_and_matches_the_schema(name):
    from claimbench.spec.yamlsafe import parse_document

    raw = (WF / name).read_bytes()
    assert b"\t" not in raw
    parse_document(raw, name)  # no duplicate keys, no anchors or aliases
    jsonschema.validate(_load(name), WORKFLOW)


def test_the_schema_subset_can_fail():
    wf = _load("gpu.yml")
    wf["jobs"]["gpu"]["runs_on"] = wf["jobs"]["gpu"].pop("runs-on")
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wf, WORKFLOW)
    wf = _load("policy.yml")
    wf["jobs"]["policy"]["steps"].append({"name": "neither uses nor run"})
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(wf, WORKFLOW)


@pytest.mark.parametrize("name", WORKFLOWS)
def test_fails_closed(name):
    text = (WF / name).read_text()
    for pattern in SWALLOWS:
        assert not re.search(pattern, text), f"{name} swallows an exit code: {pattern}"
    wf = _load(name)
    for job_id, job in wf["jobs"].items():
        assert job.get("continue-on-error") in (None, False), job_id
        assert job.get("timeout-minutes"), f"{job_id} has no time limit"
    for job_id, step in _steps(wf):
        assert step.get("continue-on-error") in (None, False), (job_id, step.get("name"))
        run = step.get("run", "")
        assert not re.search(r"echo [^\n]*\$\(", run), "a command substitution inside echo loses its exit code"
    assert wf["permissions"] == {"contents": "read"}


@pytest.mark.parametrize("name", WORKFLOWS)
def test_uploads_always(name):
    uploads = [s for _, s in _steps(_load(name)) if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
    assert uploads
    for s in uploads:
        assert s.get("if") == "always()"


def test_policy_runs_on_every_pull_request_on_a_hosted_cpu():
    wf = _load("policy.yml")
    assert "pull_request" in wf["on"]
    job = wf["jobs"]["policy"]
    assert job["runs-on"] == "ubuntu-latest"
    runs = "\n".join(s.get("run", "") for s in job["steps"])
    assert "download.pytorch.org/whl/cpu" in job["env"]["TORCH_SPEC"]
    for needed in ("claimbench check", "claimbench audit", "claimbench run --timing report", "./scripts/test.sh"):
        assert needed in runs + "\n", needed


def test_gpu_runs_only_when_a_maintainer_asks_and_pins_the_commit():
    wf = _load("gpu.yml")
    assert set(wf["on"]) == {"pull_request_target", "workflow_dispatch"}
    assert wf["on"]["pull_request_target"] == {"types": ["labeled"]}
    assert "run-gpu" in wf["jobs"]["plan"]["if"]
    for job_id in ("plan", "gpu"):
        checkout = next(s for s in wf["jobs"][job_id]["steps"] if s.get("uses", "").startswith("actions/checkout@"))
        assert checkout["with"]["ref"].startswith("${{ github.event.pull_request.head.sha")
        assert checkout["with"]["persist-credentials"] is False
    text = (WF / "gpu.yml").read_text()
    assert "ephemeral" in text.lower()


def test_gpu_matrix_runner_labels_concurrency_and_the_run_line():
    wf = _load("gpu.yml")
    job = wf["jobs"]["gpu"]
    assert job["runs-on"][:2] == ["self-hosted", "gpu"] and "matrix.runner" in job["runs-on"][2]
    assert "fromJSON(needs.plan.outputs.runners)" in job["strategy"]["matrix"]["runner"]
    assert "matrix.runner" in job["concurrency"]["group"]
    assert job["concurrency"]["cancel-in-progress"] is False
    run = next(s["run"] for s in job["steps"] if "claimbench run" in s.get("run", ""))
    for flag in ("--changed-since", "--hardware-only", "--require-gpu", '--summary "$GITHUB_STEP_SUMMARY"'):
        assert flag in run
    runners = json.loads(wf["env"]["GPU_RUNNERS"])
    assert {"h100", "h200"} <= set(runners)


def test_ci_plan_picks_the_runners_whose_gpus_the_claims_need(root):
    runners = json.loads(_load("gpu.yml")["env"]["GPU_RUNNERS"])
    nccl = [root / "claims" / "nccl-allreduce-vs-reduce-broadcast.yaml"]
    assert plan(nccl, root, runners) == ["h100", "h200"]  # the claim names H100* and H200*
    assert plan(nccl, root, {"a100": {"gpu": "NVIDIA A100-SXM4-80GB", "count": 8}}) == []
    assert plan(nccl, root, {"one-gpu": {"gpu": "NVIDIA H200", "count": 1}}) == []  # count 2 needs 2
    assert plan([FIX / "distributed" / "claims" / "allreduce-gloo.yaml"], FIX / "distributed", runners) == []  # CPU claims need none


def test_ci_plan_exits_1_with_nothing_to_verify(capsys):
    rc = plan_main([str(FIX / "distributed" / "claims"), "--root", str(FIX / "distributed"), "--runners", '{"h200": {"gpu": "NVIDIA H200"}}'])
    assert rc == 1
    assert "nothing to verify" in capsys.readouterr().err
    assert plan_main([str(FIX / "distributed" / "claims"), "--root", str(FIX / "distributed"), "--runners", "[]"]) == 2
