"""What OpenVINO's ONNX frontend reads for a whole model, finished here: the model with its shapes
written in and constants folded (input.py), and the ops the frontend misreads rewritten (fixes.py)."""
