"""ovrnn/semantics: the normaliser of every op family (attributes, inputs, readings, errors)."""
