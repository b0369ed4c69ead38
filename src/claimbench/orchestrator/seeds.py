"""Seeds drawn per run from the OS, and recorded: a fixed public seed lets a kernel replay inputs."""

from __future__ import annotations

import random


def draw_seeds(trials: int) -> dict:
    """One run's seeds from the OS: one per correctness trial, two for seed_check ("sensitivity"), one for
    the timed rounds. Never fixed, so a kernel cannot know its inputs in advance."""
    r = random.SystemRandom()
    seed = lambda: r.randrange(1, 2**31 - 1)  # noqa: E731
    return {"trials": [seed() for _ in range(trials)], "sensitivity": [seed(), seed()], "timing": seed()}
