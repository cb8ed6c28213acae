"""The ONNX GRU op: gates z, r, h (ONNX order); OpenVINO's GRUCell reads them in the same order."""

from __future__ import annotations

from . import InputSlot, OpFamily, register


class GruInputs(InputSlot):
    X = (0, "[seq_length, batch, input_size]")
    W = (1, "[num_directions, 3*hidden_size, input_size]")
    R = (2, "[num_directions, 3*hidden_size, hidden_size]")
    B = (3, "[num_directions, 6*hidden_size]")
    sequence_lens = (4, "[batch]")
    initial_h = (5, "[num_directions, batch, hidden_size]")


GRU = register(
    OpFamily(
        name="GRU",
        domain="",
        cell="GRUCell",
        gates=3,
        gate_order=(0, 1, 2),
        slots=("f", "g"),
        default_activations=("Sigmoid", "Tanh"),
        input_slots=GruInputs,
        outputs=("Y", "Y_h"),
        own_attributes=("linear_before_reset",),
    )
)
