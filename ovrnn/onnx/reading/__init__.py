"""Reading a model and what stands on the read alone: the safe load and the read-only GraphView
(read.py), inputs frozen to constants (freeze.py), constants folded (fold.py), QDQ weights taken
(qdq.py), --static checked (static_check.py). The ground the other onnx/ folders stand on."""
