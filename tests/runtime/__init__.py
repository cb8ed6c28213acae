"""ovrnn/runtime: the runner and its API, threads, serving; streaming/ and batching/ below."""
