"""The streaming tests, in one place: a stateful IR (``convert --stateful``) and its stream.

* test_stateful.py: the stateful IR of lone recurrent nodes: ReadValue/Assign per node state, its
  variable ids, initial values and rt_info, the CPU's fold kept;
* test_stateful_models.py: whole models, node states and IN=OUT state pairs, and what is refused;
* test_stateful_silero.py: the shipped silero VAD files streamed against onnxruntime;
* test_stream.py: ``ovrnn.Stream`` (the runtime): calls, reset, states, batches, device traits;
* test_stream_run.py: ``ovrnn run`` on a stateful IR;
* test_stream_validate.py: ``validate --stateful``, the streaming contract checked call by call.
"""
