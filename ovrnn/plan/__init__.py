"""Plan stage: the conversion's options checked (``request.py``), then what the conversion will do,
decided before anything is lowered and handed back as values (``decide.py``)."""
