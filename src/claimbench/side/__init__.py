"""What runs inside a claim's side processes: the fork server, the task side, the kernel and
baseline sides. Nothing here decides anything: a side does what it is told and reports, and the
orchestrator treats every report as evidence to check.
"""
