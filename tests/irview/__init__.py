"""ovrnn/irview: reading and drawing IRs (inspect, --graph pictures)."""
