"""tools/: the bench and tool scripts, checked without timing."""
