"""ovrnn/lower: the per-node driver, the step form, the cell-chain layout, compressed weights."""
