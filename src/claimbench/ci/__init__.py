"""CI: the pytest plugin, its options, the plan of which claims to run, changed-claim detection."""
