"""The `xihe` command line: `main` parses the command and runs it (see `xihe --help`)."""
