"""One module per subcommand; see ``claimbench.cli``."""
