"""onnxruntime's com.microsoft DynamicQuantizeLSTM (``quantize_dynamic``): an LSTM whose W/R are
int8/uint8 with scales and zero points, lowered as the LSTM it computes (schema: onnxruntime's
docs/ContribOperators.md, version 1; W/R are stored transposed against ONNX LSTM's)."""

from __future__ import annotations

from . import InputSlot, OpFamily, register
from .lstm import LSTM


class DynamicQuantizeLstmInputs(InputSlot):
    X = (0, "[seq_length, batch, input_size]")
    W = (1, "[num_directions, input_size, 4*hidden_size]")
    R = (2, "[num_directions, hidden_size, 4*hidden_size]")
    B = (3, "[num_directions, 8*hidden_size]")
    sequence_lens = (4, "[batch]")
    initial_h = (5, "[num_directions, batch, hidden_size]")
    initial_c = (6, "[num_directions, batch, hidden_size]")
    P = (7, "[num_directions, 3*hidden_size]")
    W_scale = (8, "[num_directions] | [num_directions, 4*hidden_size]")
    W_zero_point = (9, "like W_scale")
    R_scale = (10, "[num_directions] | [num_directions, 4*hidden_size]")
    R_zero_point = (11, "like R_scale")


DYNAMIC_QUANTIZE_LSTM = register(
    OpFamily(
        name="DynamicQuantizeLSTM",
        domain="com.microsoft",
        cell=LSTM.cell,
        gates=LSTM.gates,
        gate_order=LSTM.gate_order,
        slots=LSTM.slots,
        default_activations=LSTM.default_activations,
        input_slots=DynamicQuantizeLstmInputs,
        outputs=LSTM.outputs,
        no_cell=LSTM.no_cell,
        lowered_as=LSTM,
    )
)
