"""ovrnn/validation: validate's judgement and its report."""
