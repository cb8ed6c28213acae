"""Control flow the input shapes and frozen values decide, folded before anything is lowered: the
passes and their rounds (passes.py), If branches and Loop iterations inlined (inline.py), a Scan
written as its Loop (scan_loop.py), sequences turned into Concat (sequences.py), Loop/Scan body
inputs typed and declared (body_types.py, body_inputs.py), and the hint for what stays (hints.py).
A recurrence written as a Loop is recovered by the Loop recovery, ovrnn/onnx/loops/."""
