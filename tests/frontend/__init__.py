"""ovrnn/frontend: whole models through OpenVINO's ONNX frontend with ovrnn's lowering plugged in."""
