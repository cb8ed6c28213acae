"""ovrnn/cli: the command line's contract, its errors and its safety."""
