"""How the orchestrators of a multi-rank claim keep in step: one per rank, one protocol.

A claim on N ranks runs N orchestrators (torch's launcher starts them), each with its own fork
server and sides. They agree through a gloo group of their own, which no claim code joins: rank
0's seeds and random draws are broadcast, each timing sample starts after a barrier and counts as
the slowest rank's time, and stopping follows rank 0's clock, so every rank takes the same next
step. A single-rank claim uses `Solo`, for which every one of these is the identity.
"""

from __future__ import annotations

import time
from typing import Any


class Solo:
    """The single-rank stand-in for `Ranks`: rank 0 of 1, every agreement the identity."""

    rank, world = 0, 1

    def barrier(self) -> None:
        """Nothing to wait for on one rank."""
        pass

    def max(self, values: list[float]) -> list[float]:
        """The values as they are: the slowest of one rank is itself."""
        return values

    def gather(self, obj: Any) -> list:
        """A one-element list, as `Ranks.gather` gives on one rank."""
        return [obj]

    def broadcast(self, obj: Any) -> Any:
        """``obj`` itself: this rank is rank 0."""
        return obj

    def clock(self) -> float:
        """This process's monotonic clock, in seconds."""
        return time.monotonic()


class Ranks:
    """The orchestrators' own gloo group, set up from the launcher's environment (env://)."""

    def __init__(self, timeout_s: float) -> None:
        from datetime import timedelta

        import torch.distributed as dist

        self.dist = dist
        dist.init_process_group("gloo", timeout=timedelta(seconds=timeout_s))
        self.rank, self.world = dist.get_rank(), dist.get_world_size()

    def barrier(self) -> None:
        """Wait until every rank's orchestrator is here: each timing sample starts together."""
        self.dist.barrier()

    def max(self, values: list[float]) -> list[float]:
        """The element-wise maximum over the ranks: a sample counts as its slowest rank's time."""
        import torch

        t = torch.tensor(values, dtype=torch.float64)
        self.dist.all_reduce(t, op=self.dist.ReduceOp.MAX)
        return [float(x) for x in t.tolist()]

    def gather(self, obj: Any) -> list:
        """Every rank's ``obj``, in rank order: a trial passes only where every rank says it passed."""
        got: list = [None] * self.world
        self.dist.all_gather_object(got, obj)
        return got

    def broadcast(self, obj: Any) -> Any:
        """Rank 0's ``obj`` on every rank (its seeds, settings, random draws), so all take the same step."""
        box = [obj]
        self.dist.broadcast_object_list(box, src=0)
        return box[0]

    def clock(self) -> float:
        """Rank 0's monotonic clock in seconds, so every rank's stopping rule reads the same time."""
        import torch

        t = torch.tensor([time.monotonic()], dtype=torch.float64)
        self.dist.broadcast(t, src=0)
        return float(t.item())

    def close(self) -> None:
        """Leave the group; an error from one a failed peer already broke is ignored."""
        try:
            self.dist.destroy_process_group()
        except Exception:  # the group may already be broken by a failed peer; nothing to release then
            pass
