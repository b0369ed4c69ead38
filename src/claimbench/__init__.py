"""claimbench: executable performance claims.

The pipeline reads in module order: claim -> policy -> detect -> execute -> verify -> timing
-> verdict -> record -> publish/audit.
"""

__version__ = "0.1.0"
