"""ovrnn/onnx: reading, freezing and folding ONNX, control flow, Loop recovery, the frontend fixes, bodies."""
