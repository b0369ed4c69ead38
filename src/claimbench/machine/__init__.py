"""Stage 3, the machine: what hardware this is, which backends it can run, and its measured ceilings."""
