"""ovrnn/device: per-device lowering, the CPU's step-form table, bf16 CPUs."""
