"""The kinds of event in a served schedule (serve_play.schedule makes them; every side in serve_play.py and
serve_batcher.py plays them)."""

OPEN, CHUNK, CLOSE = 0, 1, 2
