"""ovrnn/ir: the IR's bytes (golden IR) and its templates."""
