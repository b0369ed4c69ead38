"""The one bounded reader: what a user or a fleet hands over is refused in one line, never read
for ever, never followed through a link, never a traceback (issue 25)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from claimbench.spec.bounded import UnreadableFile, read_bytes, read_text

FIX = Path(__file__).resolve().parents[1] / "fixtures"


def test_a_symlink_to_dev_zero_is_refused(tmp_path):
    (tmp_path / "x.json").symlink_to("/dev/zero")
    with pytest.raises(UnreadableFile, match="a symlink"):
        read_bytes(tmp_path / "x.json", what="record")


def test_a_fifo_is_refused_without_blocking(tmp_path):
    os.mkfifo(tmp_path / "x.json")
    with pytest.raises(UnreadableFile, match="not a regular file"):
        read_bytes(tmp_path / "x.json", what="record")


def test_a_sparse_file_over_the_limit_is_refused_unread(tmp_path):
    big = tmp_path / "big.json"
    with open(big, "wb") as f:
        f.truncate(2 << 30)  # 2 GiB of holes: reading it would take the memory
    with pytest.raises(UnreadableFile, match="over the 64 MiB limit"):
        read_bytes(big, what="record")


def test_bad_utf8_names_the_line_and_column(tmp_path):
    p = tmp_path / "LIST.md"
    p.write_bytes(b"# List\n\nok line\nbad \xff here\n")
    with pytest.raises(UnreadableFile, match=r"LIST.md:4: column 5: byte 0xff is not UTF-8; save the list as UTF-8"):
        read_text(p, what="list")
    p.write_bytes("ünïcode\n".encode())
    assert read_text(p) == "ünïcode\n"


@pytest.mark.parametrize("command", [["check"], ["list"], ["publish", "--dry-run"]])
def test_a_list_that_is_not_utf8_is_one_line_from_each_command(tmp_path, command):
    root = tmp_path / "proj"
    shutil.copytree(FIX / "kernels", root / "kernels")
    shutil.copytree(FIX / "claims" / "valid", root / "claims")
    (root / "LIST.md").write_bytes((FIX / "LIST.md").read_bytes() + b"\n- caf\xe9\n")
    r = subprocess.run([sys.executable, "-m", "claimbench", "--root", str(root), *command],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 1, (r.returncode, r.stdout, r.stderr)
    assert "Traceback" not in r.stderr and "is not UTF-8" in r.stderr + r.stdout, r.stderr
