"""A record against the commit it names: the commit exists, and every file it hashed is there.

A record names the commit it ran from and the sha256 of its claim file and of every project file
the run imported or read. A number is only worth showing when the code that produced it can be
checked out, so `ingest`, `publish` and `audit` all ask this one question, of the record's own
fields, with the same words: a record naming a commit the repository does not have, or a source
that commit does not hold (a git-ignored module under `kernels/build/`), or holds with other
bytes, is refused by all three (issue 25).

Every (commit, path) the records name is found through its folder's tree and read by its blob id
(`file_hashes`: two `git cat-file --batch` processes in all) and kept as its sha256, so 100,000
records made at a handful of commits cost a handful of reads, and a file unchanged across commits
is read once. A file at a commit named by its full hash never changes, so `publish` and `audit`
also keep those sha256s in a memo under `results/.cache` (local state, refused when git tracks it,
like every cache there) and read from git only what the memo lacks; whether each commit exists is
asked of git every time, since a commit can leave a clone (a rebase, then gc), and a file is looked
up only once its commit is there. Paths are the project's own (relative to its root), read at that
commit under the project's place in the repository: a project in a subfolder of a larger
repository is checked at its own files.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
from pathlib import Path
from typing import Iterable, Mapping, Optional

from claimbench.store.cachefile import load_json_cache, save_cache

Problem = tuple  # (key, message)
MEMO_NAME = "atcommit-v1.json"  # under results/.cache: (full commit hash:path) -> sha256 of its bytes, or None
FULL_HASH = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64}):")  # a short hash could name another commit later
_PRESENT = "present"  # what a commit spec is kept as: it exists
COMMIT = re.compile(r"^[0-9a-f]{7,64}$")  # a hash: never a name that moves (HEAD, main, HEAD~1)


class CommitFiles:
    """The repository at ``root``, asked through one memo of what each commit holds."""

    def __init__(self, root: Path, memo: Optional[Path] = None) -> None:
        self.root = Path(root)
        self._known: dict[str, Optional[str]] = {}  # spec -> sha256 of its bytes, _PRESENT, or None
        self._blobs: dict[str, Optional[str]] = {}  # blob id -> sha256 of its bytes
        self.repository, self.why = _prefix(self.root)
        self._shallow: Optional[bool] = None
        self._memo_path = memo
        self._memo = _read_memo(memo)

    def problem(self, commit: Optional[str], claim: tuple[str, str], sources: Mapping[str, str], *,
                files: bool = True) -> Optional[Problem]:
        """What is wrong with a record naming ``commit``, its claim file ``(path, sha256)`` and
        ``sources`` (path -> sha256); None when all are there. ``files=False``: only the commit
        (a record from a dirty tree never said its files were the commit's)."""
        if not commit:
            return None  # no commit named: provenance calls it an unknown tree, not a forgery
        if not COMMIT.match(commit):
            return ("git_commit", f"{commit[:80]!r} is not a commit hash: a record names the commit it ran "
                                  "from by its hash, never by a name that moves; rerun from a clean checkout")
        if self.repository is None:
            return ("git_commit", f"commit {commit} cannot be checked: {self.why}")
        wanted = [("claim_sha256", *claim), *(("source_sha256", r, h) for r, h in sorted(sources.items()))]
        self.load(self.specs(commit, [rel for _, rel, _ in wanted], files=files))
        if self._known.get(commit_spec(commit)) is None:
            if self.shallow():
                return ("git_commit", f"commit {commit} cannot be checked: this clone is shallow (made with "
                                      "--depth) and does not hold it; fetch the history (git fetch --unshallow)")
            return ("git_commit", f"commit {commit} is not in this repository; fetch it "
                                  f"(git fetch origin {commit}) or use a clone that has it")
        for key, rel, want in (wanted if files else []):
            have = self._known.get(self.path_spec(commit, rel))
            if have is None:
                return (key, f"{rel} does not exist at commit {commit[:12]}: the run read a file that "
                             "commit does not hold (untracked or git-ignored); commit it and rerun")
            if have != want:
                return (key, f"{rel} at commit {commit[:12]} does not have the sha256 the record names: "
                             "the record was not made from that commit's files")
        return None

    def shallow(self) -> bool:
        """Whether the clone lacks history by construction: a missing commit may exist upstream."""
        if self._shallow is None:
            proc = subprocess.run(["git", "-C", str(self.root), "rev-parse", "--is-shallow-repository"],
                                  capture_output=True, text=True, timeout=60)
            self._shallow = proc.returncode == 0 and proc.stdout.strip() == "true"
        return self._shallow

    def specs(self, commit: str, rels: Iterable[str], *, files: bool = True) -> list[str]:
        """What `problem` reads for a record: its commit and, with ``files``, each file at it."""
        return [commit_spec(commit), *(self.path_spec(commit, rel) for rel in rels)] if files else [commit_spec(commit)]

    def load(self, specs: Iterable[str]) -> None:
        """Read every spec not yet known, all in one `git cat-file --batch`."""
        if self.repository is None:
            return
        todo, remembered = [], []
        for s in dict.fromkeys(specs):
            if s in self._known:
                continue
            if "\n" in s or "\r" in s:  # a record's path cannot name an object
                self._known[s] = None
            elif s in self._memo:
                remembered.append(s)
            else:
                todo.append(s)
        # a remembered file stands only while its commit is still here, which git is always asked
        commits = {commit_spec(s.split(":", 1)[0]) for s in remembered} - self._known.keys()
        todo += sorted(commits - set(todo))
        self._known.update(file_hashes(self.root, todo, self._blobs))
        for s in remembered:
            self._known[s] = self._memo[s] if self._here(s) else None
        if self._memo_path is None:
            return
        # remembered only under a commit that is here: a missing commit's files read as missing, and
        # would stay so in the memo after the commit is fetched
        learned = {s: self._known[s] for s in todo if FULL_HASH.match(s) and self._here(s)}
        if learned:
            self._memo.update(learned)
            save_cache(self._memo_path, self._memo, stale="atcommit-*.json")

    def _here(self, path_spec: str) -> bool:
        """Whether the commit of ``path_spec`` (`commit:path`) is one this clone holds, as git said."""
        return self._known.get(commit_spec(path_spec.split(":", 1)[0])) is not None

    def path_spec(self, commit: str, rel: str) -> str:
        """The git object name of the project file ``rel`` at ``commit``."""
        return f"{commit}:{self.repository}{rel}"


def commit_spec(commit: str) -> str:
    """The git object name that exists only when ``commit`` is a commit this clone holds."""
    return f"{commit}^{{commit}}"


def _read_memo(path: Optional[Path]) -> dict[str, Optional[str]]:
    """The memo's entries that have the shape it writes; anything else in the file is ignored."""
    if path is None:
        return {}
    return {k: v for k, v in load_json_cache(path).items()
            if isinstance(k, str) and FULL_HASH.match(k) and (v is None or (isinstance(v, str) and len(v) == 64))}


def _prefix(root: Path) -> tuple[Optional[str], str]:
    """(the project's folder inside its repository: '' at the top, 'sub/dir/' below, or None, why not)."""
    try:
        proc = subprocess.run(["git", "-C", str(root), "rev-parse", "--show-prefix"], capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return None, f"git could not be run ({e}); install git, or use the clone the records belong to"
    if proc.returncode == 0:
        return proc.stdout.strip(), ""
    if "dubious ownership" in proc.stderr or "safe.directory" in proc.stderr:  # git's own guard, not ours to lift
        return None, (f"git refuses to read {root}, which another user owns; run as its owner, or trust it with "
                      f"`git config --global --add safe.directory {root}`")
    return None, (f"{root} is not inside a git repository; run from the clone the records belong to")


def file_hashes(root: Path, specs: list[str], blob_sha: Optional[dict[str, Optional[str]]] = None) -> dict[str, Optional[str]]:
    """Each spec's answer: ``commit^{commit}`` -> _PRESENT, ``commit:path`` -> the sha256 of that
    file's bytes; None when missing (or not a file).

    A file is found through its folder's tree, then read by its blob id, in two `git cat-file
    --batch` calls in all: asking ``commit:path`` for each file instead makes git scan the folder's
    tree once per file (0.63 s for 2,000 claims in one folder, against 0.15 s), and reads a file
    unchanged across many commits once per commit instead of once (``blob_sha``, blob id -> sha256,
    remembers them across calls)."""
    out: dict[str, Optional[str]] = {}
    folders: dict[str, Optional[dict[str, str]]] = {}  # "commit:folder" -> name -> blob id
    wanted: list[tuple[str, str, str]] = []  # (spec, folder spec, name)
    for spec in specs:
        if spec.endswith("^{commit}"):
            folders.setdefault(spec, None)
            continue
        commit, _, path = spec.partition(":")
        folder, _, name = path.rpartition("/")
        if not commit or any(part in ("", ".", "..") for part in path.split("/")):
            out[spec] = None  # not a path git stores: never the project file it seems to name
            continue
        wanted.append((spec, f"{commit}:{folder}", name))
        folders.setdefault(f"{commit}:{folder}", None)
    asked = list(folders)
    for fspec, got in zip(asked, git_typed_objects(root, asked)):
        if fspec.endswith("^{commit}"):
            out[fspec] = _PRESENT if got is not None and got[0] == "commit" else None
        elif got is not None and got[0] == "tree":
            folders[fspec] = _tree_blobs(got[1], width=len(got[2]) // 2)  # sha1 or sha256 ids
    blob_of = {spec: (folders[fspec] or {}).get(name) for spec, fspec, name in wanted}
    sha = {} if blob_sha is None else blob_sha
    blobs = list(dict.fromkeys(b for b in blob_of.values() if b is not None and b not in sha))
    sha.update((b, None if got is None else hashlib.sha256(got[1]).hexdigest())
               for b, got in zip(blobs, git_typed_objects(root, blobs)))
    out.update((spec, None if b is None else sha[b]) for spec, b in blob_of.items())
    return out


def _tree_blobs(tree: bytes, width: int) -> Optional[dict[str, str]]:
    """name -> blob id of each file (a regular file or a symlink, as `commit:path` would give it) in
    a git tree object, whose entries are ``<mode> <name>\\0<id of width bytes>``; folders and
    submodules are not files. A tree that does not parse (a crafted object) holds no file: None,
    so every record naming a file in it is refused, never passed and never a traceback."""
    out: dict[str, str] = {}
    at, n = 0, len(tree)
    while at < n:
        sp = tree.find(b" ", at)
        nul = tree.find(b"\0", sp + 1) if sp > at else -1
        if nul < 0 or nul + 1 + width > n:
            return None
        mode = tree[at:sp]
        if mode.startswith(b"100") or mode == b"120000":
            out[tree[sp + 1:nul].decode("utf-8", "surrogateescape")] = tree[nul + 1:nul + 1 + width].hex()
        at = nul + 1 + width
    return out


def git_objects(root: Path, specs: list[str]) -> list[Optional[bytes]]:
    """Each spec's bytes (None when missing or ambiguous), in order, from one `git cat-file --batch`."""
    return [None if got is None else got[1] for got in git_typed_objects(root, specs)]


def git_typed_objects(root: Path, specs: list[str]) -> list[Optional[tuple[str, bytes, str]]]:
    """Each spec's (type, bytes, object id), None when missing or ambiguous, in order, from one
    `git cat-file --batch`."""
    if not specs:
        return []
    if any("\n" in s for s in specs):
        raise ValueError("a git object name holds a newline")  # CommitFiles never asks for one
    proc = subprocess.run(["git", "-C", str(root), "cat-file", "--batch"], input="".join(s + "\n" for s in specs).encode(),
                          capture_output=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"git cat-file failed: {proc.stderr.decode(errors='replace').strip()}")
    out: list[Optional[tuple[str, bytes, str]]] = []
    at, data = 0, proc.stdout
    for _ in specs:
        end = data.index(b"\n", at)
        header = data[at:end].split()
        at = end + 1
        if len(header) == 3 and header[2].isdigit():
            size = int(header[2])
            out.append((header[1].decode("ascii", "replace"), data[at:at + size], header[0].decode("ascii", "replace")))
            at += size + 1
        else:  # "<spec> missing" or "ambiguous"
            out.append(None)
    return out
