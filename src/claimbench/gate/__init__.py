"""Stage 2, the policy gate: what a claim and its code may do before anything runs (static rules, the
source graph, the claim-check cache). No heavy imports."""
