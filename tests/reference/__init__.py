"""ovrnn/reference: the float64 references and their evaluator."""
