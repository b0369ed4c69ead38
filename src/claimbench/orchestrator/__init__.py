"""Stage 4, the orchestrator: the judge and the clock, in a process of their own. It starts the claim's
side processes, sends them messages, checks outputs and times calls from outside them."""
