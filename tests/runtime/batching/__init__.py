"""ovrnn/runtime/batching: StreamBatcher, the batched step, validate --streams."""
