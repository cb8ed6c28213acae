"""Reading and drawing IRs, whoever wrote them: ``inspect_ir`` (what an IR holds, its cell chains
and ovrnn's rt_info) and ``write_graph`` (the IR drawn as a picture). Writing IRs is ``ovrnn/ir/``."""
