"""Seeds drawn per run from the OS, and recorded: a fixed public seed lets a kernel replay inputs."""

from __future__ import annotations

import random


def draw_seeds(trials: int) -> dict:
    r = random.SystemRandom()
    seed = lambda: r.randrange(1, 2**31 - 1)  # noqa: E731
    return {"trials": [seed() for _ in range(trials)], "sensitivity": [seed(), seed()], "timing": seed()}
