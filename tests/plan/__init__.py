"""ovrnn/plan: the conversion options declared once and read back everywhere."""
