"""Output verification, in the orchestrator: raw bytes decoded with numpy, compared in float64.

No torch here. The outputs the orchestrator checks were read out of the side's memory by the
orchestrator itself, so neither a tensor subclass, nor a torch mode, nor a patched comparison in
the kernel's process can reach these functions.
"""
