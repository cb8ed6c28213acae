"""The ONNX LSTM op: gates i, o, f, c (ONNX order); OpenVINO's LSTMCell reads f, i, c, o."""

from __future__ import annotations

from . import InputSlot, OpFamily, register


class LstmInputs(InputSlot):
    X = (0, "[seq_length, batch, input_size]")
    W = (1, "[num_directions, 4*hidden_size, input_size]")
    R = (2, "[num_directions, 4*hidden_size, hidden_size]")
    B = (3, "[num_directions, 8*hidden_size]")
    sequence_lens = (4, "[batch]")
    initial_h = (5, "[num_directions, batch, hidden_size]")
    initial_c = (6, "[num_directions, batch, hidden_size]")
    P = (7, "[num_directions, 3*hidden_size]")


LSTM = register(
    OpFamily(
        name="LSTM",
        domain="",
        cell="LSTMCell",
        gates=4,
        gate_order=(2, 0, 3, 1),
        slots=("f", "g", "h"),
        default_activations=("Sigmoid", "Tanh", "Tanh"),
        input_slots=LstmInputs,
        outputs=("Y", "Y_h", "Y_c"),
        own_attributes=("input_forget",),
    )
)
