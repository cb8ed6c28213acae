"""What ovrnn knows of the devices: the plugins' names, what each imports and how each treats a stream's states (``plugins.py``), the
step forms measured on this CPU (``cpu_forms.py``, its table ``ovrnn/data/cpu_forms.json``) and the
deferred ``import openvino`` behind every device call (``ov.py``), and the signal stack that
OpenVINO's CPU plugin can leave unmapped, mended where ovrnn compiles (``signal_stack.py``)."""
