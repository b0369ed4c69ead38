"""Stage 1, the claim as data: strict YAML, the claim model, shape expressions, safe text. No heavy imports."""
