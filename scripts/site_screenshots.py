"""Screenshots of the site's pages, for a review or a note: `python scripts/site_screenshots.py OUT`.

The pages are the product's own (`build_site` after `publish`), over the tests' fixture trees
(tests/recordkit.py), so the numbers on them are fixture numbers, not measurements: the first
screen, a GPU claim's page, a sweep (three points) and a history with a step between two commits.
Needs Debian's chromium (`apt-get install chromium`); headless, no network.
"""
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import recordkit as rk  # noqa: E402

from claimbench.report.publish import publish  # noqa: E402
from claimbench.report.site import build_site  # noqa: E402
from claimbench.store.record import SweepPoint  # noqa: E402

if len(sys.argv) != 2 or shutil.which("chromium") is None:
    sys.exit("usage: site_screenshots.py OUT (needs chromium on PATH: apt-get install chromium)")

out = Path(sys.argv[1])
out.mkdir(parents=True, exist_ok=True)
work = Path(tempfile.mkdtemp())
# 1. the standard tree, published: the first screen and a GPU claim page
root, _ = rk.standard_tree(work / "std")
publish(root, root / "LIST.md", root / "results")
index = build_site(root, work / "site-std")
# 2. a sweep
sw = rk.copy_tree(work / "sw", committed=False)
CID = "softmax-online-sweep"
t = (sw / "claims" / "softmax-online.yaml").read_text()
t = t.replace("id: softmax-online\n", f"id: {CID}\n").replace("  params: {n: 8192}\n", "  params: {n: 8192}\n  sweep: {n: [2048, 4096, 8192]}\n")
(sw / "claims" / f"{CID}.yaml").write_text(t)
rk.git(sw, "init", "-q")
rk.commit_all(sw, "a swept claim")
bw = rk.HARDWARE["nvidia-h200"][1]
rk.write(sw, rk.build(sw, CID, kernel_us=150, baseline_us=243, seed=1, created="2026-11-01T09:00:00.000000Z"))
for i, (n, k, b) in enumerate([(2048, 12, 40), (4096, 40, 90)]):
    rk.write(sw, rk.build(sw, CID, sweep_point=SweepPoint(axis="n", value=n), flops=5.0 * n * n, bytes=8.0 * n * n,
                          floor_us=8.0 * n * n / bw / 1e3, kernel_us=k, baseline_us=b, seed=2 + i,
                          created=f"2026-11-0{2 + i}T09:00:00.000000Z"))
build_site(sw, work / "site-sw")
# 3. history with a step
hi = rk.copy_tree(work / "hi")
rk.write(hi, rk.build(hi, "softmax-online", kernel_us=150, baseline_us=243, seed=1, created="2026-11-01T09:00:00.000000Z"))
(hi / "kernels" / "stubs_kernel.py").write_text((hi / "kernels" / "stubs_kernel.py").read_text() + "\n# faster\n")
rk.commit_all(hi, "a faster kernel")
rk.write(hi, rk.build(hi, "softmax-online", kernel_us=130, baseline_us=243, seed=2, created="2026-11-03T09:00:00.000000Z"))
build_site(hi, work / "site-hi")

CH = shutil.which("chromium")


def shot(page: Path, name: str, h: int = 1400):
    with tempfile.TemporaryDirectory() as prof:
        subprocess.run([CH, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                        "--disable-background-networking", "--disable-component-update", "--disable-sync",
                        "--no-first-run", f"--user-data-dir={prof}", f"--screenshot={out / name}",
                        f"--window-size=1280,{h}", page.as_uri()], capture_output=True, timeout=120, check=True)
    print(out / name, (out / name).stat().st_size)


shot(index, "first-screen.png", 1000)
shot(index.parent / "claims" / "softmax-online.html", "gpu-claim-page.png", 1800)
shot(work / "site-sw" / "claims" / f"{CID}.html", "sweep-page.png", 2200)
shot(work / "site-hi" / "claims" / "softmax-online.html", "history-page.png", 2200)
print("fixture trees and sites kept in", work)
